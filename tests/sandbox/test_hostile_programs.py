"""Hostile programs against the sandbox: each must score 0, return soon after its timeout, and leave no trace."""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

from grpo_fast import sandbox as sb
from grpo_fast.rewards.code import make_code_execution_reward

TIMEOUT = 1.5
reward = make_code_execution_reward(timeout=TIMEOUT)
ADD_ONE = ["assert f(1) == 2", "assert f(5) == 6"]


def _score(program: str, tests: list[str] = ADD_ONE) -> float:
    t0 = time.monotonic()
    (score,) = reward(None, [f"```python\n{program}\n```"], tests=[tests])
    assert time.monotonic() - t0 < TIMEOUT + 2.5, "reward call overran its timeout by far"
    return score


def _pids_with_uid(low: int, high: int) -> list[int]:
    """Processes whose uid is in [low, high)."""
    found = []
    for p in os.listdir("/proc"):
        try:
            with open(f"/proc/{p}/status") as f:
                uid = next(int(line.split()[1]) for line in f if line.startswith("Uid:"))
        except (OSError, StopIteration, ValueError):
            continue
        if low <= uid < high:
            found.append(int(p))
    return found


def _sandbox_pids(box: sb.Sandbox | None = None) -> list[int]:
    """Processes running as one of the pool's program uids (where it drops to uids of its own: it hands out
    ``uid_ranges()``). Only its own: another pool on the host (a suite run beside this one) is not this pool's."""
    ranges = (box or sb.default_sandbox()).uid_ranges()
    return _pids_with_uid(*ranges[0]) if ranges else []


HOSTILE = {
    "sys_exit_module": "import sys\nsys.exit(0)",
    "os_exit_module": "import os\nos._exit(0)",
    "raise_systemexit": "raise SystemExit(0)",
    "exit_in_function": "import os\ndef f(x):\n    os._exit(0)",
    "sys_exit_in_function": "def f(x):\n    import sys; sys.exit(0)",
    "keyboard_interrupt": "def f(x):\n    raise KeyboardInterrupt",
    "atexit_exit": "import atexit, os\natexit.register(os._exit, 0)\ndef f(x):\n    raise SystemExit(0)",
    "thread_exit": "import threading, os, time\n"
                   "def f(x):\n    threading.Thread(target=os._exit, args=(0,)).start()\n    time.sleep(1)\n"
                   "    return 0",
    "signal_exit": "import signal, os\nsignal.signal(signal.SIGALRM, lambda *a: os._exit(0))\n"
                   "def f(x):\n    signal.setitimer(signal.ITIMER_REAL, 0.01)\n    while True: pass",
    "del_systemexit": "class D:\n    def __del__(self):\n        raise SystemExit(0)\n"
                      "def f(x):\n    D()\n    return 0",
    "fake_success_print": "print('ALL TESTS PASSED')\nprint('passed: 2/2')\ndef f(x):\n    return 0",
    "fake_report_fd": "import os\nfor fd in range(3, 20):\n    try: os.write(fd, b'x\\n{\"passed\": [true, true], "
                      "\"n\": 2, \"error\": \"\"}')\n    except OSError: pass\ndef f(x):\n    return 0",
    "always_equal": "class X:\n    __eq__ = lambda *a: True\n    __ne__ = lambda *a: False\n"
                    "    __hash__ = lambda s: 0\ndef f(x):\n    return X()",
    "always_equal_str": "class S(str):\n    __eq__ = lambda *a: True\ndef f(x):\n    return S('no')",
    "always_equal_in_list": "class X:\n    __eq__ = lambda *a: True\ndef f(x):\n    return [X()]",
    "patch_assertion_error": "import builtins\nbuiltins.AssertionError = type('E', (Exception,), {})\n"
                             "def f(x):\n    return 0",
    "fork_bomb": "import os\nwhile True:\n    try: os.fork()\n    except OSError: pass",
    "memory_bomb": "x = []\nwhile True:\n    x.append(bytearray(10**7))",
    "big_alloc": "x = bytearray(10**11)\ndef f(x): return x + 1",
    "recursion_bomb": "import sys\nsys.setrecursionlimit(10**8)\ndef r(n): return r(n + 1)\nr(0)",
    "infinite_loop": "def f(x):\n    while True: pass",
    "sleep": "import time\ntime.sleep(100)",
    "huge_output": "while True:\n    print('x' * 10000)",
    "huge_stderr": "import sys\nwhile True:\n    sys.stderr.write('y' * 10000)",
    "read_shadow": "def f(x):\n    return x + 1 if open('/etc/shadow').read() else 0",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_scores_zero(name: str) -> None:
    assert _score(HOSTILE[name]) == 0.0


def test_a_rigged_bool_earns_no_more_than_returning_a_bool() -> None:
    """``assert f(x)`` asks the program for a truth value by construction, so it gets the program's (a proxied
    ``re.Match`` is true, as in plain Python); a rigged ``__bool__`` can do what ``return True`` does, no more."""
    tests = ["assert f(1)", "assert f(1) == True", "assert f(1) is True", "assert not f(2)"]
    rigged = _score("class T:\n    __bool__ = lambda s: True\ndef f(x): return T()", tests)
    assert rigged == 0.25 and rigged <= _score("def f(x): return True", tests)


@pytest.mark.parametrize("program,tests", [
    ("class X:\n    __sub__ = __rsub__ = lambda *a: 0.0\n    __abs__ = lambda s: 0.0\ndef f(x): return X()",
     ["assert abs(f(1) - 2.0) < 1e-9"]),
    ("class C:\n    __contains__ = lambda *a: True\ndef f(x): return C()", ["assert 3 in f(1)"]),
    ("abs = lambda x: 0\ndef f(x): return 0.0", ["assert abs(f(1) - 2.0) < 1e-9"]),
    ("import math\nmath.isclose = lambda *a, **k: True\ndef f(x): return 0.0",
     ["import math\nassert math.isclose(f(1), 2.0)"]),
    ("import builtins\nbuiltins.isinstance = lambda *a: True\ndef f(x): return 'no'",
     ["assert isinstance(f(1), int)"]),
])
def test_lying_values_and_tampering_fail(program: str, tests: list[str]) -> None:
    assert _score(program, tests) == 0.0


def test_correct_solution_passes_common_assert_forms() -> None:
    prog = "import math\ndef f(x): return float(x) + 1"
    tests = ["assert abs(f(1) - 2.0) < 1e-9", "assert f(1)", "assert 2.0 in [f(1)]",
             "import math\nassert math.isclose(f(1), 2.0)", "assert isinstance(f(1), float)"]
    assert _score(prog, tests) == 1.0


def test_env_secret_is_not_visible(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
    box = sb.Sandbox(workers=1)  # started after the secret is set: must still not see it
    try:
        prog = ("import os\ndef f(x):\n    seen = repr(dict(os.environ))\n    for p in os.listdir('/proc'):\n"
                "        try: seen += open(f'/proc/{p}/environ').read()\n        except OSError: pass\n"
                "    return x + 1 if 'hf_secret' in seen else 0")
        res = sb.run_program(prog, tests=ADD_ONE, timeout=TIMEOUT, sandbox=box)
        assert res.status == "ok" and res.fraction == 0.0
    finally:
        box.close()


def test_no_network() -> None:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(5)
    srv.settimeout(0.2)
    port = srv.getsockname()[1]
    try:
        prog = f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=1)\ndef f(x): return x + 1"
        assert _score(prog) == 0.0
        with pytest.raises(socket.timeout):
            srv.accept()
    finally:
        srv.close()


def test_cannot_touch_user_files() -> None:
    here = os.path.dirname(os.path.abspath(__file__))  # as a normal user (tests/sandbox/host_kinds.py): their home
    d = tempfile.mkdtemp(dir=here if os.access(here, os.W_OK) else os.path.expanduser("~"))
    os.chmod(d, 0o755)
    victim = os.path.join(d, "victim.txt")
    with open(victim, "w") as f:
        f.write("precious")
    os.chmod(victim, 0o644)
    try:
        for prog in (f"open({victim!r}, 'w').write('pwned')\ndef f(x): return x + 1",
                     f"import os\nos.remove({victim!r})\ndef f(x): return x + 1",
                     f"import os\nos.chmod({victim!r}, 0o777)\ndef f(x): return x + 1",
                     f"import os\nos.chmod({victim!r}, 0)\ndef f(x): return x + 1",
                     f"import os\nfd = os.open({d!r}, os.O_RDONLY)\nos.fchmod(fd, 0)\ndef f(x): return x + 1"):
            assert _score(prog) == 0.0
            with open(victim) as f:
                assert f.read() == "precious"
            assert os.stat(victim).st_mode & 0o777 == 0o644 and os.stat(d).st_mode & 0o777 == 0o755
    finally:
        shutil.rmtree(d)


def test_setsid_double_fork_survivor_is_killed() -> None:
    prog = ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
            "        time.sleep(60)\n        os._exit(0)\n    os._exit(0)\ndef f(x):\n    return x + 1")
    assert _score(prog) == 1.0  # a correct answer that misbehaves keeps its honest score
    assert _sandbox_pids() == []  # the detached grandchild, meant to sleep a minute, is gone with the program


def test_killing_the_parent_is_harmless() -> None:
    zygote = sb.default_sandbox().pid
    for prog in ("import os, signal\ntry: os.kill(os.getppid(), signal.SIGKILL)\nexcept OSError: pass\n"
                 "def f(x): return x + 1",
                 "import os, signal\ntry: os.kill(-1, signal.SIGKILL)\nexcept OSError: pass\ndef f(x): return x + 1",
                 (f"import os, signal\ntry: os.kill({os.getpid()}, signal.SIGKILL)\nexcept OSError: pass\n"
                  "def f(x): return x + 1")):
        assert _score(prog) == 1.0  # nothing outside is reachable, so the honest score stands
    assert sb.default_sandbox().pid == zygote


def test_a_dead_forker_ends_its_pool_and_the_next_call_starts_a_fresh_one() -> None:
    """One forker per slot: if any of them dies, its slot could never start a job again, so the zygote exits at
    once (instead of that slot's jobs waiting for their deadlines) and the next call brings up a whole new pool."""
    box = sb.Sandbox(workers=2)
    try:
        assert box.run_many([sb.make_job("def f(x): return x + 1", ADD_ONE)])[0].fraction == 1.0
        zygote = box.pid
        forkers = _children(zygote)
        if box.level() == "namespaces+userns":  # the pid we know waits outside; the zygote is its one child
            forkers = _children(forkers[0])
        assert len(forkers) == 2
        os.kill(forkers[1], 9)
        deadline = time.monotonic() + 10
        while _alive(zygote) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(zygote)
        results = box.run_many([sb.make_job("def f(x): return x + 1", ADD_ONE) for _ in range(4)])
        assert [r.fraction for r in results] == [1.0] * 4 and box.pid != zygote
    finally:
        box.close()


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]


def test_no_two_runs_share_a_uid_whatever_their_kind() -> None:
    """Stdin test runs and call-based jobs of one pool take their uids from one count: a uid is what a weaker
    level kills leftovers by, and what a process limit counts (ids alone collided: job 257 with the first stdin
    run)."""
    if sb.isolation_level() in ("rlimits-only", "landlock+own-uid"):
        pytest.skip("every process runs as your uid at this level")
    box = sb.Sandbox(workers=2)
    try:
        box.run_many([sb.make_job("x = 1", ["assert True"]) for _ in range(250)])
        userns = box.level() == "namespaces+userns"  # one outside uid: a user namespace of its own per run
        show = f"import os\nprint(os.readlink('/proc/self/ns/user') if {userns} else os.getuid(), os.getuid())\n"
        jobs = [sb.make_io_job(show, [""], ["not the uid"]) for _ in range(10)]
        jobs += [sb.make_job(show + "def f(x): return x + 1", ADD_ONE) for _ in range(20)]
        results = box.run_many(jobs)
        assert [r.fraction for r in results] == [0.0] * 10 + [1.0] * 20
        if userns:  # not ours, and no uid mapped: ns ids are reused once a namespace is gone, so no uniqueness here
            ours = os.readlink("/proc/self/ns/user")
            assert all(r.stdout.split()[0] != ours and r.stdout.split()[1] == "65534" for r in results)
            return
        uids = [r.stdout.split()[0] for r in results]
        assert len(set(uids)) == len(uids) and str(os.getuid()) not in uids
    finally:
        box.close()


def _judge_pids(box: sb.Sandbox | None = None) -> list[int]:
    """Processes running as one of the pool's judge uids (0x80000000 above its programs' range)."""
    ranges = (box or sb.default_sandbox()).uid_ranges()
    return _pids_with_uid(*ranges[1]) if ranges else []


def test_no_judge_outlives_its_job() -> None:
    """A fresh judge per job: when a result is back, that job's judge (and program) are gone."""
    if sb.isolation_level() == "rlimits-only":
        pytest.skip("judges run as your uid at this level")
    for _ in range(3):
        assert _score("def f(x): return x + 1") == 1.0
        assert _judge_pids() == []
    assert _score("import time\ndef f(x):\n    time.sleep(60)", ADD_ONE) == 0.0
    assert _judge_pids() == [] and _sandbox_pids() == []


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return not any(line.startswith("State:") and "Z" in line for line in f)
    except OSError:
        return False


def test_caller_stays_healthy_after_battery() -> None:
    assert _score("def f(x): return x + 1") == 1.0
    assert _sandbox_pids() == []


def test_run_program_statuses_and_output() -> None:
    ok = sb.run_program("print('hello')", timeout=TIMEOUT)
    assert ok.status == "ok" and ok.stdout == "hello\n" and ok.wall_s < TIMEOUT
    assert sb.run_program("1/0", timeout=TIMEOUT).status == "error"
    assert sb.run_program("import os; os._exit(3)", timeout=TIMEOUT).status == "exited"
    slow = sb.run_program("import time; time.sleep(10)", timeout=0.5)
    assert slow.status == "timeout" and slow.wall_s < 3.0
    big = sb.run_program("print('z' * 10**6)", timeout=TIMEOUT)
    assert len(big.stdout) <= 64 * 1024


def test_workdir_is_private_and_writable() -> None:
    res = sb.run_program("import os\nopen('f.txt', 'w').write('x')\nprint(os.getcwd(), os.getuid())",
                         timeout=TIMEOUT)
    assert res.status == "ok"
    cwd, uid = res.stdout.split()
    assert int(uid) >= 0x40000000 or sb.isolation_level() in ("rlimits-only", "landlock+own-uid") or \
        (sb.isolation_level() == "namespaces+userns" and int(uid) != os.getuid())  # unmapped in its own namespace
    assert not os.path.exists(cwd) or not os.path.exists(os.path.join(cwd, "f.txt"))


def _namespaces_work() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    pid = os.fork()
    if pid == 0:
        os._exit(0 if libc.unshare(0x20000000 | 0x20000 | 0x40000000) == 0 else 1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def _user_namespaces_work() -> bool:
    return os.geteuid() != 0 and shutil.which("unshare") is not None and \
        subprocess.run(["unshare", "-Urnmpf", "--mount-proc", "true"], capture_output=True).returncode == 0


def _landlock() -> bool:
    from grpo_fast.sandbox.isolation import landlock

    return landlock.abi() >= 1


def test_isolation_level_matches_machine() -> None:
    container = "landlock+uid-drop" if _landlock() else "uid-drop"  # root without namespaces
    expected = "namespaces+uid-drop" if _namespaces_work() else (container if os.geteuid() == 0 else
                                                                "namespaces+userns" if _user_namespaces_work() else
                                                                "landlock+own-uid" if _landlock() else "rlimits-only")
    assert sb.isolation_level() == expected
    assert sb.describe_isolation().startswith(expected)


@pytest.mark.parametrize("level", ["uid-drop", "rlimits-only"])
def test_fallback_levels(level: str, caplog: pytest.LogCaptureFixture) -> None:
    if level == "uid-drop" and os.geteuid() != 0:
        pytest.skip("needs root")
    box = sb.Sandbox(workers=2, level=level)
    try:
        with caplog.at_level(logging.WARNING, logger="grpo_fast.sandbox"):
            assert box.level() == level
        assert "reduced isolation" in caplog.text
        progs = ["def f(x): return x + 1", "import sys; sys.exit(0)", "def f(x):\n    while True: pass",
                 "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(30)\ndef f(x): return x + 1"]
        res = sb.run_many(progs, tests=[ADD_ONE] * 4, timeout=1.0, sandbox=box)
        assert [r.fraction for r in res] == [1.0, 0.0, 0.0, 1.0]
        stdin = box.run_many([sb.make_io_job("print(int(input()) + 1)", ["1\n", "5\n"], ["2", "6"], timeout=2.0),
                              sb.make_io_job("while True: pass", ["1\n"], ["2"], timeout=0.5)])
        assert [r.failures for r in stdin] == [["", ""], ["timeout"]]
        if level == "uid-drop":
            assert box.uid_ranges() and _sandbox_pids(box) == []
    finally:
        box.close()


def test_private_tmp_keeps_an_interpreter_that_lives_in_tmp(tmp_path) -> None:
    """A virtualenv under /tmp (tmp_path is there) stays importable, read-only, under the program's fresh /tmp;
    everything else of the host's /tmp is gone."""
    from grpo_fast.sandbox.isolation import mounts, namespaces

    if not _namespaces_work():
        pytest.skip("needs mount namespaces")
    venv = tmp_path / "venv" / "lib"
    venv.mkdir(parents=True)
    (venv / "mod.py").write_text("X = 1\n")
    (tmp_path / "secret.txt").write_text("host file\n")
    pid = os.fork()
    if pid == 0:
        try:
            namespaces.libc.unshare(0x20000)  # CLONE_NEWNS
            mounts.enter_private_fs([str(tmp_path / "venv"), str(venv)])
            seen = (venv / "mod.py").read_text() == "X = 1\n"
            hidden = not (tmp_path / "secret.txt").exists()
            try:
                (venv / "new.py").write_text("")
                read_only = False
            except OSError:
                read_only = True
            os._exit(0 if seen and hidden and read_only else 3)
        finally:
            os._exit(1)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    assert (tmp_path / "secret.txt").exists() and not (venv / "new.py").exists()  # the host's /tmp untouched


def test_one_test_set_many_programs_each_judged_on_its_own() -> None:
    """A GRPO group: the zygote compiles a test set once and reuses it; every program still gets its own verdict."""
    tests = ["assert f(1) == 2", "assert f(-1) == 0"]
    programs = ["def f(x): return x + 1", "def f(x): return x", "def f(x): return abs(x) + 1"] * 3
    res = sb.run_many(programs, tests=[tests] * len(programs), timeout=TIMEOUT)
    assert [r.fraction for r in res] == [1.0, 0.0, 0.5] * 3
    broken = sb.run_many(["def f(x): return x"] * 2, tests=[["assert f(1) =="]] * 2, timeout=TIMEOUT)
    assert [(r.status, r.fraction) for r in broken] == [("error", 0.0)] * 2


def test_values_nested_deeper_than_the_encoder_goes_arrive_by_handle() -> None:
    src = "def f(n):\n    x = []\n    for _ in range(n):\n        x = [x]\n    return x\n"
    walk = "v = f({n})\nfor _ in range({n}):\n    v = v[0]\nassert v == []"
    res = sb.run_program(src, tests=[walk.format(n=150), walk.format(n=300)], timeout=TIMEOUT)
    assert res.passed == [True, True], res.failures
