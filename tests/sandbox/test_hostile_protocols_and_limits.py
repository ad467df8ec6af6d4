"""Round three of the hostile suite: protocols of the judge's C code, names and classes the tests trust, swallowed
failures, the kernel's limits, and answers a lenient comparison would pass. Every attack is real (real numpy in the
judge, real shared memory, real forks, real system calls) and scores at most what the honest program scores."""

from __future__ import annotations

import os
import platform
import textwrap

import pytest
from memory_routes import MEMORY_ROUTES, held_and_peak, memory_job

from grpo_fast.sandbox import Sandbox, make_io_job, make_job

S = textwrap.dedent
X86 = platform.machine() == "x86_64"


@pytest.fixture(scope="module")
def box() -> Sandbox:
    sandbox = Sandbox(workers=2)
    yield sandbox
    sandbox.close()


def score(box: Sandbox, source: str, tests: list[str], setup: str = "", timeout: float = 5.0) -> float:
    (res,) = box.run_many([make_job(source, tests, setup, timeout, 1024)])
    return res.fraction


NUMPY_TEST = ["import numpy as np\nassert np.array_equal(f(), np.array([1, 2, 3]))",
              "import numpy as np\nassert np.allclose(f(), [1.0, 2.0, 3.0])",
              "import numpy as np\nnp.testing.assert_array_equal(f(), np.array([1, 2, 3]))"]
HONEST_NUMPY = "import numpy as np\ndef f():\n    return np.array([1, 2, 3])\n"

# -- numpy's and the buffer protocol's special names answered by a program object ------------------------------
PROTOCOLS = {
    # the judge's own buffer address, predictable (one image): numpy would read whatever lies there
    "array-interface-pointer": S("""
        import ctypes
        buf = (ctypes.c_int64 * 3)(1, 2, 3)
        class A:
            __array_interface__ = {"shape": (3,), "typestr": "<i8", "version": 3,
                                   "data": (ctypes.addressof(buf), False)}
        def f():
            return A()
        """),
    "array-interface-bytes": S("""
        class A:
            __array_interface__ = {"shape": (3,), "typestr": "<i8", "version": 3,
                                   "data": b"".join(i.to_bytes(8, "little") for i in (1, 2, 3))}
        def f():
            return A()
        """),
    "array-method": S("""
        import numpy as np
        class A:
            def __array__(self, dtype=None, copy=None):
                return np.array([1, 2, 3])
        def f():
            return A()
        """),
    "array-wrap-decides": S("""
        import numpy as np
        class A:
            __array_priority__ = 1e9
            def __array__(self, dtype=None, copy=None):
                return np.array([9, 9, 9])
            def __array_wrap__(self, arr, context=None, return_scalar=False):
                return np.ones_like(arr, dtype=bool)
        def f():
            return A()
        """),
    "array-ufunc-true": S("""
        class A:
            def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
                return True
        def f():
            return A()
        """),
    "array-function-true": S("""
        class A:
            def __array_function__(self, func, types, args, kwargs):
                return True
        def f():
            return A()
        """),
    "object-dtype-liar": S("""
        import numpy as np
        class Liar:
            def __eq__(self, o):
                return True
            __hash__ = object.__hash__
        def f():
            return np.array([Liar(), Liar(), Liar()], dtype=object)
        """),
    "array-struct-and-len": S("""
        class A:
            __array_struct__ = 0
            def __len__(self):
                return 3
            def __getitem__(self, i):
                if i >= 3:
                    raise IndexError
                return 7
        def f():
            return A()
        """),
}


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
def test_numpy_protocols_answered_by_a_program_object_never_pass(box: Sandbox, name: str) -> None:
    assert score(box, HONEST_NUMPY, NUMPY_TEST) == 1.0
    assert score(box, PROTOCOLS[name], NUMPY_TEST) == 0.0


@pytest.mark.parametrize("value", ["np.array([1, 2, 3])", "np.arange(1, 4, dtype='>i8')", "[1, 2, 3]",
                                   "np.arange(1.0, 7.0)[::2] - [0, 1, 2]", "np.array([1, 2, 3], dtype=object)"])
def test_honest_numpy_values_cross_as_data(box: Sandbox, value: str) -> None:
    """Non-native byte order, strided views, lists and object arrays (as Python data) all reach the test."""
    assert score(box, f"import numpy as np\ndef f():\n    return {value}\n", NUMPY_TEST) == 1.0


def test_index_and_conversions_are_not_the_programs_choice(box: Sandbox) -> None:
    """``__index__`` is never asked; ``__int__``/``__float__`` must return exactly an int/float."""
    liar = S("""
        class N:
            def __index__(self):
                return 1
            def __int__(self):
                return True
            def __float__(self):
                return 1
        def f():
            return N()
        """)
    tests = ["import operator\nassert operator.index(f()) == 1", "assert [5, 6][f()] == 6",
             "assert float(f()) == 1.0", "assert range(5)[f()] == 1"]
    assert score(box, "def f():\n    return 1\n", tests) == 1.0
    assert score(box, liar, tests) == 0.0


# -- names the tests take from the program -----------------------------------------------------------------------
ALIAS_TESTS = ["assert np.allclose(f(), [1.0, 2.0])", "np.testing.assert_allclose(f(), [1.0, 2.0])"]
ALIASES = {
    "fake-object-as-np": S("""
        class FakeNumpy:
            def allclose(self, *a, **k):
                return True
            class testing:
                @staticmethod
                def assert_allclose(*a, **k):
                    return None
        np = FakeNumpy()
        def f():
            return [0.0]
        """),
    "patched-real-numpy": S("""
        import numpy as np
        np.allclose = lambda *a, **k: True
        np.testing.assert_allclose = lambda *a, **k: None
        def f():
            return [0.0]
        """),
    "fake-module-named-numpy": S("""
        import types
        np = types.ModuleType("numpy")
        np.allclose = lambda *a, **k: True
        np.testing = types.SimpleNamespace(assert_allclose=lambda *a, **k: None)
        def f():
            return [0.0]
        """),
    "fake-module-unknown-name": S("""
        import types
        np = types.ModuleType("my_numpy")
        np.allclose = lambda *a, **k: True
        np.testing = types.SimpleNamespace(assert_allclose=lambda *a, **k: None)
        def f():
            return [0.0]
        """),
}


@pytest.mark.parametrize("name", sorted(ALIASES))
def test_a_modules_alias_bound_by_the_program_is_the_judges_numpy(box: Sandbox, name: str) -> None:
    assert score(box, "import numpy as np\ndef f():\n    return [1.0, 2.0]\n", ALIAS_TESTS) == 1.0
    assert score(box, ALIASES[name], ALIAS_TESTS) == 0.0


def test_pandas_alias_bound_to_a_fake_is_not_handed_to_the_test(box: Sandbox) -> None:
    fake = S("""
        class pd:
            class testing:
                @staticmethod
                def assert_frame_equal(*a, **k):
                    return None
        def f():
            return None
        """)
    assert score(box, fake, ["pd.testing.assert_frame_equal(f(), [[1, 2]])"]) == 0.0


def test_a_patched_stdlib_module_under_its_own_name_is_the_judges(box: Sandbox) -> None:
    fake = ("import types\nmath = types.ModuleType('math')\nmath.isclose = lambda *a, **k: True\n"
            "def f():\n    return 0\n")
    assert score(box, "def f():\n    return 2.0\n", ["assert math.isclose(f(), 2.0)"]) == 1.0
    assert score(box, fake, ["assert math.isclose(f(), 2.0)"]) == 0.0


# -- trusted classes extended by the program ---------------------------------------------------------------------
SETUP = S("""
    class Base:
        def valid(self):
            return self.value == 42
    class Answer(Base):
        label = "answer"
        def correct(self):
            return self.value == 42
        @staticmethod
        def check(x):
            return x == 42
    """)
SHADOW_TESTS = ["a = f()\nassert a.correct()", "a = f()\nassert a.valid()", "a = f()\nassert a.check(a.value)"]
SHADOWS = {
    "method-by-function": "def f():\n    a = Answer()\n    a.value = 0\n    a.correct = lambda: True\n"
                          "    a.valid = lambda: True\n    a.check = lambda x: True\n    return a\n",
    "method-by-class": "class Yes:\n    def __new__(cls, *a):\n        return True\n"
                       "def f():\n    a = Answer()\n    a.value = 0\n    a.correct = Yes\n    a.valid = Yes\n"
                       "    a.check = Yes\n    return a\n",
    "method-by-data": "def f():\n    a = Answer()\n    a.value = 0\n    a.correct = a.valid = a.check = True\n"
                      "    return a\n",
}


@pytest.mark.parametrize("name", sorted(SHADOWS))
def test_a_setup_instance_cannot_hide_its_class_methods(box: Sandbox, name: str) -> None:
    honest = "def f():\n    a = Answer()\n    a.value = 42\n    a.label = 'mine'\n    return a\n"
    assert score(box, honest, SHADOW_TESTS + ["assert f().label == 'mine'"], SETUP) == 1.0
    assert score(box, SHADOWS[name], SHADOW_TESTS, SETUP) == 0.0


# -- failures swallowed by the program's hooks ---------------------------------------------------------------------
QUIET = ("class Quiet:\n    def __enter__(self):\n        return self\n"
         "    def __exit__(self, *a):\n        return True\n")
SWALLOW_TESTS = {
    "value-error": "with Quiet():\n    if g() != 1:\n        raise ValueError('expected 1')",
    "key-error": "with Quiet():\n    assert {1: 'a'}[g()] == 'a'",
    "type-error": "with Quiet():\n    assert g() + 1 == 2",
    "assertion": "with Quiet():\n    assert g() == 1",
    "generator-manager": "with quiet():\n    assert g() == 1",
}


@pytest.mark.parametrize("name", sorted(SWALLOW_TESTS))
def test_no_program_hook_swallows_a_test_failure(box: Sandbox, name: str) -> None:
    wrong = QUIET + S("""
        import contextlib
        @contextlib.contextmanager
        def quiet():
            try:
                yield
            except BaseException:
                pass
        def g():
            return "two"
        """)
    assert score(box, wrong.replace('"two"', "1"), [SWALLOW_TESTS[name]]) == 1.0
    assert score(box, wrong, [SWALLOW_TESTS[name]]) == 0.0


def test_a_failure_message_never_reaches_the_program(box: Sandbox) -> None:
    spy = S("""
        import sys
        class Spy:
            def __enter__(self):
                return self
            def __exit__(self, kind, exc, tb):
                print("SAW", kind, repr(exc), getattr(exc, "args", None), flush=True)
                return True
        """)
    (res,) = box.run_many([make_job(spy, ["with Spy():\n    raise KeyError('secret-expected-123')"], "", 5, 512)])
    assert res.fraction == 0.0 and "SAW" in res.stdout and "secret-expected-123" not in res.stdout


# -- the kernel's limits ---------------------------------------------------------------------------------------------
SYSCALLS = {  # x86_64 numbers; each must fail for a program
    "unshare-user-namespace": "libc.syscall(272, 0x10000000)",
    "unshare-mount-namespace": "libc.syscall(272, 0x00020000)",
    "clone-new-user-namespace": "libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0)",
    "mount-tmpfs": "libc.syscall(165, b'none', b'/tmp', b'tmpfs', 0, None)",
    "add-key": "libc.syscall(248, b'user', b'sbx-left-behind', b'secret', 6, -4)",
    "keyctl-join-session": "libc.syscall(250, 1, b'sbx-keyring', 0, 0, 0)",
    "ptrace-traceme": "libc.syscall(101, 0, 0, 0, 0)",
    "bpf-map-create": "libc.syscall(321, 0, ctypes.create_string_buffer(72), 72)",
    "perf-event-open": "libc.syscall(298, ctypes.create_string_buffer(128), 0, -1, -1, 0)",
    "userfaultfd": "libc.syscall(323, 0)",
    "io-uring-setup": "libc.syscall(425, 4, ctypes.create_string_buffer(120))",
    "widen-cpu-affinity": "libc.syscall(203, 0, 128, ctypes.create_string_buffer(b'\\xff' * 128, 128))",
}


@pytest.mark.skipif(not X86, reason="x86_64 system call numbers")
@pytest.mark.parametrize("name", sorted(SYSCALLS))
def test_the_seccomp_filter_denies(box: Sandbox, name: str) -> None:
    program = f"import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\ndef attempt():\n    return {SYSCALLS[name]}\n"
    assert score(box, "def attempt():\n    return -1\n", ["assert attempt() == -1"]) == 1.0
    assert score(box, program, ["assert attempt() >= 0"]) == 0.0


def test_threads_and_processes_still_work_under_the_filter(box: Sandbox) -> None:
    honest = S("""
        import concurrent.futures, multiprocessing, os
        def f():
            with concurrent.futures.ThreadPoolExecutor(2) as ex:
                a = sum(ex.map(abs, [-1, -2]))
            with multiprocessing.Pool(2) as p:
                b = sum(p.map(abs, [-3, -4]))
            pid = os.fork()
            if pid == 0:
                os._exit(8)
            return a + b + os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        """)
    if box.level() == "landlock+own-uid":  # /dev/shm is the user's own programs' there: no multiprocessing locks
        assert "multiprocessing: unavailable" in " ".join(box.threats())  # said at run start
        honest = honest.replace("with multiprocessing.Pool(2) as p:\n        b = sum(p.map(abs, [-3, -4]))",
                                "b = 7")
    assert score(box, honest, ["assert f() == 18"], timeout=20) == 1.0


def test_no_program_changes_another_processs_limits_or_scheduling(box: Sandbox) -> None:
    """As the user's own uid (``landlock+own-uid``) these reached the trainer and the pool: a CPU-time limit of 1 s
    killed the trainer, a process limit of 0 broke every forker. The program's own limits and priority still work."""
    if os.uname().machine != "x86_64":
        pytest.skip("ioprio_set's number is x86_64's here")
    program = S("""
        import ctypes, os, resource
        libc = ctypes.CDLL(None, use_errno=True)
        def attempts(pid):
            done = []
            for name, call in (("prlimit", lambda: resource.prlimit(pid, resource.RLIMIT_CPU, (1, 1))),
                               ("setpriority", lambda: os.setpriority(os.PRIO_PROCESS, pid, 19)),
                               ("sched_idle", lambda: os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))),
                               ("ioprio", lambda: libc.syscall(251, 1, pid, 3 << 13) == 0 or 1 / 0)):
                try:
                    call()
                    done.append(name)
                except (OSError, ZeroDivisionError):
                    pass
            return done
        def f():
            own = attempts(0)
            resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
            os.nice(1)
            others = [p for p in (os.getppid(), 1) if p not in (0, os.getpid())]  # none, in a PID namespace
            return [name for p in others for name in attempts(p)], own
        """)
    assert score(box, program, ["assert f() == ([], ['prlimit', 'setpriority', 'sched_idle', 'ioprio'])"]) == 1.0


def test_a_program_may_give_its_files_modes(box: Sandbox) -> None:
    """chmod 0755 and shutil.copy of a 0644 system file: everywhere but where namespaces are refused: in root's
    container jobs of other uids share /dev/shm and the filter keeps every file of a job's private; as the user's
    own uid no mode changes by path at all (Landlock does not cover chmod: the user's files would be the job's)."""
    honest = S("""
        import os, shutil
        def f():
            with open("run.sh", "w") as out:
                out.write("#!/bin/sh\\necho hi\\n")
            os.chmod("run.sh", 0o755)
            shutil.copy(os.path.join(os.path.dirname(os.__file__), "os.py"), "copied.py")
            return os.access("run.sh", os.X_OK) and os.path.getsize("copied.py") > 0
        """)
    assert score(box, honest, ["assert f()"]) == (0.0 if box.level().startswith("landlock") else 1.0)


def test_a_program_may_run_its_own_interpreter(box: Sandbox) -> None:
    """``sys.executable`` names an interpreter the job can run, with the packages the job imports (it was the
    virtualenv's, which the minimal root and Landlock did not keep: FileNotFoundError)."""
    honest = S("""
        import subprocess, sys
        done = subprocess.run([sys.executable, "-c", "import numpy; print(numpy.add(40, 2))"], capture_output=True,
                              text=True, timeout=30)
        def f():
            return int(done.stdout)
        """)
    assert score(box, honest, ["assert f() == 42"], timeout=20) == 1.0


@pytest.fixture(scope="module")
def one_slot() -> Sandbox:
    sandbox = Sandbox(workers=1)
    yield sandbox
    sandbox.close()


@pytest.mark.parametrize("route", sorted(MEMORY_ROUTES))
def test_no_route_holds_more_memory_than_the_jobs_limit(one_slot: Sandbox, route: str) -> None:
    """Each route aims at 3x the limit; the slot's cgroup peak (shared memory and tmpfs included) stays at or
    below the limit, and what the program managed to hold with it."""
    limit = 96
    held, peak, why = held_and_peak(one_slot, memory_job(route, limit, 3 * limit))
    assert why or held == 0, "the program held three times its limit"  # 0: the route is closed (Landlock)
    if one_slot.layers()["cgroup memory"].startswith("holds"):
        assert peak is not None and peak <= limit, (route, peak)
    else:  # a normal user, a container: the per-process limit, the filter and the forker's watch (sandbox.memory)
        assert one_slot.layers()["memory watch"].startswith("holds")
    assert held <= limit, (route, held)


def test_an_honest_job_after_a_shared_memory_hog_in_the_same_slot_scores_full(one_slot: Sandbox) -> None:
    """The hog's segments outlive it until the kernel frees its IPC namespace; the slot's next job waits for
    that, and gets its whole limit."""
    honest = make_io_job("block = b'x' * (64 << 20)\nprint(len(block) >> 20)", [""], ["64"], 10, 96)
    for _ in range(2):
        hog, = one_slot.run_many([memory_job("sysv-shm", 96, 288)])
        (res,) = one_slot.run_many([honest])
        assert hog.fraction == 0.0 and res.fraction == 1.0, res.failures


@pytest.mark.parametrize("extra_workers", [0, 1])
def test_an_honest_job_beside_a_cpu_starving_one_scores_full(extra_workers: int) -> None:
    """A hostile program widens its affinity and forks busy children, each in a session of its own; the honest
    job run at the same time in the same batch keeps its share and scores 1.0 (before round three: 0.33-0.67):
    with a worker per CPU (its own CPU, which the filter keeps the hog from leaving) and with more workers than
    CPUs (slots share CPUs: the cpu cgroups' equal weights)."""
    box = Sandbox(workers=len(os.sched_getaffinity(0)) + extra_workers)
    hog = S("""
        import os
        try:
            os.sched_setaffinity(0, range(os.cpu_count() or 1))
        except OSError:
            pass
        for _ in range(14):
            try:
                if os.fork() == 0:
                    os.setsid()  # a session of its own: without a cgroup, a scheduler autogroup (share) of its own
                    break
            except OSError:
                break
        while True:
            pass
        """)
    honest = "def f(n):\n    s = 0\n    for i in range(n):\n        s += i\n    return s\n"
    tests = [f"assert f({n}) == {n * (n - 1) // 2}" for n in (3_000_000, 3_500_000, 4_000_000)]
    jobs = [make_job(hog, ["assert f(1) == 0"], "", 4.0, 512), make_job(honest, tests, "", 6.0, 512)] * 3
    try:
        if extra_workers and box.layers()["cgroup cpu"].startswith("refused"):  # a normal user, a container
            pytest.skip("slots sharing CPUs without a cpu cgroup: said as a threat at run start (remaining_threats)")
        if extra_workers:
            assert "cgroup v" in box.layers()["cgroup cpu"], "the cpu cgroup is the layer under test here"
        results = box.run_many(jobs)
    finally:
        box.close()
    assert [r.fraction for r in results[1::2]] == [1.0, 1.0, 1.0], [r.failures for r in results[1::2]]
    assert all(r.fraction == 0.0 for r in results[0::2])


# -- answers a lenient comparison would pass -------------------------------------------------------------------------
@pytest.mark.parametrize("wrong", ["print(n * n / 2)", "print(float(n * (n + 1) // 2))", "print(round(n * n / 2))",
                                   "print(n * (n + 1) // 2 + 1)"])
def test_a_float_for_an_integer_answer_fails(box: Sandbox, wrong: str) -> None:
    head = "n = int(input())\n"
    inputs, outputs = ["1000000000\n", "999999999\n"], ["500000000500000000\n", "499999999500000000\n"]
    (honest,) = box.run_many([make_io_job(head + "print(n * (n + 1) // 2)", inputs, outputs)])
    (res,) = box.run_many([make_io_job(head + wrong, inputs, outputs)])
    assert honest.fraction == 1.0 and res.fraction == 0.0


def test_reals_keep_their_tolerance_and_stderr_its_own_limit(box: Sandbox) -> None:
    real = make_io_job("print(1 / 3)", [""], ["0.333333\n"])
    noisy = make_io_job("import sys\nsys.stderr.write('x' * 300_000)\nprint(42)", [""], ["42\n"])
    assert [r.fraction for r in box.run_many([real, noisy])] == [1.0, 1.0]


def test_the_layers_reported_are_the_layers_a_program_is_in(box: Sandbox) -> None:
    """``Sandbox.layers()`` (what ``grpo-fast doctor`` lists) matches what a program finds itself in."""
    layers = box.layers()
    landlock = {"landlock"} if box.level() in ("landlock+uid-drop", "landlock+own-uid", "uid-drop",
                                               "rlimits-only") else set()  # no namespaces
    watch = {"memory watch"} if layers["cgroup memory"].startswith("refused") else set()
    if watch and (box.level().startswith("namespaces") or layers["seccomp"].startswith("holds")):
        watch.add("sysv shm limit")  # a job's own shmall, or SysV denied by the filter
    assert set(layers) == {"namespaces", "rlimits", "cgroup memory", "cgroup pids", "cgroup cpu", "seccomp", *landlock,
                           *watch}
    probe = ("print(open('/proc/self/cgroup').read())\n"
             "print([l for l in open('/proc/self/status') if l.startswith('Seccomp:')])")
    (res,) = box.run_many([make_io_job(probe, [""], [""])])
    assert ("Seccomp:\\t2" in res.stdout) == layers["seccomp"].startswith("holds"), res.stdout
    for name in ("memory", "pids", "cpu"):
        joined = any(f"{name}:" in line and "grpo_fast_sbx." in line for line in res.stdout.splitlines())
        assert joined == ("cgroup v" in layers[f"cgroup {name}"]), (name, res.stdout)
        state = layers[f"cgroup {name}"]
        assert joined or state.startswith(("holds (not needed", "refused")), (name, state)


def test_a_python_tool_call_never_pays_for_an_unbounded_replay() -> None:
    """Each earlier cell is replayed by every later call: calls whose replay passes the bound (twice the per-call
    timeout) fail with a timeout, rather than each call being allowed one more timeout per earlier cell."""
    from grpo_fast.tools import PythonSession

    session = PythonSession(timeout=1.0)
    replies = [session.python("import time\ntime.sleep(0.45)") for _ in range(8)]
    assert replies[0] == "(no output)"
    assert any("timed out after 2 s" in r for r in replies), replies
