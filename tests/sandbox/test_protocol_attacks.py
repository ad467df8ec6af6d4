"""Attacks on the sandbox's own protocol: forged frames, references into the judge, decoder bombs, state that
would outlive a job, channels between jobs, and a judge that tries to reach the host.

The decoder cases call the judge's real decoder (``Connection.loads``) on crafted bytes; the end-to-end cases write
the same bytes onto the real channel from inside a real program, then check that the next job on the same pool
is scored right.
"""

from __future__ import annotations

import os
import shutil
import socket
import struct
import tempfile
import textwrap

import pytest

from grpo_fast import sandbox as sb
from grpo_fast.rewards.code import make_code_execution_reward
from grpo_fast.sandbox.verdict import encoder, wire
from grpo_fast.sandbox.verdict.connection import Connection
from grpo_fast.sandbox.verdict.wire import Ref, WireError

TIMEOUT = 5.0
ADD_ONE = ["assert f(1) == 2", "assert f(5) == 6", "assert f(41) == 42"]
HONEST = "def f(x):\n    return x + 1"
U32 = struct.Struct("<I")


def strongest() -> bool:
    return sb.isolation_level() in ("namespaces+uid-drop", "namespaces+userns", "landlock+uid-drop", "landlock+own-uid")


def refused_outright() -> bool:
    """No namespaces (a container): the seccomp filter and Landlock refuse the channel itself."""
    return sb.isolation_level() in ("landlock+uid-drop", "landlock+own-uid")


@pytest.fixture(scope="module")
def box():
    b = sb.Sandbox(workers=1)  # one slot: every job runs where the previous one ran
    yield b
    b.close()


def _judge_decode(data: bytes) -> object:
    a, b = socket.socketpair()
    try:
        return Connection(a, deadline=1e18).loads(data)
    finally:
        a.close()
        b.close()


def _encode(value: object) -> bytes:
    return encoder.Encoder(lambda o, by_handle: Ref("h", (0, "x", ""))).encode(value)


def _compound(tag: bytes, *children: bytes) -> bytes:
    return tag + U32.pack(len(children)) + b"".join(children)


# ----------------------------------------------------------------------------------------------------------
# the judge's decoder, on crafted bytes: each must be refused before anything is built or run

NESTED = b"l" + U32.pack(1)
DECODER_ATTACKS = {
    "unknown-tag": b"\x80",
    "pickle-opcode": b"cposix\nsystem\n(S'touch /tmp/x'\ntR.",
    "truncated-string": b"s" + U32.pack(100) + b"abc",
    "count-beyond-frame": b"l" + U32.pack(0xFFFFFFFF) + b"N",
    "depth-bomb": NESTED * 5000 + b"N",
    "int-too-large": b"I" + U32.pack(wire.MAX_INT_BYTES + 1) + b"\x01" * (wire.MAX_INT_BYTES + 1),
    "trailing-bytes": b"NN",
    "forward-memo-reference": _compound(b"l", b"@" + U32.pack(0)),
    "name-reference": _encode(Ref("n", ("posix", "system"))),
    "name-reference-eval": _encode(Ref("n", ("builtins", "eval"))),
    "builtin-that-is-not-an-exception": _encode(Ref("e", ("eval",))),
    "builtin-import": _encode(Ref("e", ("__import__",))),
    "unknown-reference-kind": _encode(Ref("z", ())),
    "judge-handle-out-of-range": _encode(Ref("j", (7,))),
    "negative-judge-handle": _encode(Ref("j", (-1,))),
    "exception-class-with-object-base": _compound(b"R", _encode("x"), _compound(
        b"t", _encode(1), _encode("Evil"), _compound(b"t", _encode(Ref("h", (0, "type", "")))), _encode("x"))),
    "setup-instance-of-unknown-class": _encode(Ref("g", ("os", {}))),
    "setup-instance-dunder-attr": _encode(Ref("g", ("Box", {"__class__": 1}))),
    "set-of-handles": _compound(b"S", _encode(Ref("h", (0, "X", "")))),
    "dict-keyed-by-handle": _compound(b"d", _encode(Ref("h", (0, "X", ""))), _encode(1)),
    "text-type-unknown": _compound(b"V", _encode("posix.system"), _encode("id")),
    "zoneinfo-path": _compound(b"V", _encode("datetime"), _encode("2020-01-01T00:00:00|../../../etc/passwd")),
    "text-value-huge-int": _compound(b"V", _encode("Fraction"), _encode("9" * 9000 + "/1")),
    "defaultdict-factory-eval": _compound(b"U", _encode("eval")),
    "numpy-object-dtype": _compound(b"n", _encode("object"), _encode((1,)), _encode(b"\0" * 8)),
    "numpy-size-mismatch": _compound(b"n", _encode("int64"), _encode((10 ** 9,)), _encode(b"")),
    "numpy-too-many-dims": _compound(b"n", _encode("int8"), _encode((1,) * 40), _encode(b"\0")),
    "range-with-floats": _compound(b"r", _encode(0.5), _encode(1), _encode(1)),
    "exception-not-an-exception-class": _compound(b"X", _encode(Ref("h", (0, "X", ""))), _encode(""),
                                                  _encode(()), _encode({})),
    "program-class-name-not-text": _encode(Ref("c", (0, 5, "A", "", ()))),
    "program-class-name-too-long": _encode(Ref("c", (0, "A" * 300, "A", "", ()))),
    "program-class-abcs-not-a-tuple": _encode(Ref("c", (0, "A", "A", "", "Mapping"))),
    "instance-of-a-class-that-is-not-a-program-class": _encode(Ref("h", (1, "A", "", "posix.system"))),
    "instance-of-a-handle": _compound(b"R", _encode("h"), _compound(
        b"t", _encode(1), _encode("A"), _encode(""), _encode(Ref("h", (0, "type", ""))))),
}


@pytest.mark.parametrize("data", list(DECODER_ATTACKS.values()), ids=list(DECODER_ATTACKS))
def test_the_judge_decoder_refuses(data: bytes) -> None:
    with pytest.raises(WireError):
        _judge_decode(data)


def test_a_twenty_byte_frame_cannot_make_the_decoder_allocate() -> None:
    """Every count is checked against the bytes received before anything is allocated."""
    import tracemalloc

    frames = [b"l" + U32.pack(0xFFFFFFF0) + b"N" * 15, b"s" + U32.pack(0x7FFFFFFF) + b"x" * 15,
              b"I" + U32.pack(0x7FFFFFFF) + b"\x01" * 15, b"b" + U32.pack(1 << 31) + b"\0" * 15]
    tracemalloc.start()
    try:
        for data in frames:
            assert len(data) <= 20
            with pytest.raises(WireError):
                _judge_decode(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_a_program_class_is_a_fresh_class_of_the_judge_from_its_names_only() -> None:
    """A program's class arrives as a class the judge makes (name and qualified name as data, no attribute, method
    or base of the program's); the ABCs it declares are looked up in the fixed table only."""
    import collections.abc
    import sys

    before = set(sys.modules)
    cls = _judge_decode(_encode(Ref("c", (3, "Point", "Point", "", ("Mapping", "os.system", "__import__", 7)))))
    assert isinstance(cls, type) and cls.__name__ == "Point" and cls.__module__ == "solution"
    assert issubclass(cls, collections.abc.Mapping) and not issubclass(cls, dict)
    assert set(vars(cls)) <= {"__slots__", "__module__", "__doc__", "_sbx_class_hid", "_sbx_class_conn"}
    assert set(sys.modules) == before
    with pytest.raises(TypeError):  # a test subclassing it would make instances that are not the program's
        type(cls)("Sub", (cls,), {})


def test_exception_attributes_land_on_a_fresh_instance_only() -> None:
    """An exception's attributes are set on the new instance the decoder built, never on a class or module."""
    exc = _judge_decode(_compound(b"X", _encode("ValueError"), _encode("bad"), _encode(("bad",)),
                                  _encode({"code": 3, "__class__": 1, "_private": 2})))
    assert type(exc) is ValueError and exc.args == ("bad",) and exc.code == 3
    assert "_private" not in vars(exc) and ValueError.__dict__.get("code") is None


def test_a_module_named_by_the_program_is_imported_only_when_harmless() -> None:
    """``unittest.__main__`` runs the test runner when imported, ``antigravity`` opens a browser: a program naming
    them gets no module at all (not even a handle to the program's: it may be patched), and the judge imports
    nothing."""
    import sys

    from grpo_fast.sandbox.verdict.connection import ProgramModule

    for i, name in enumerate(("unittest.__main__", "antigravity", "this", "_io", "os.__dict__", "grpo_fast_sandbox")):
        value = _judge_decode(_encode(Ref("m", (name, i))))
        assert isinstance(value, ProgramModule), name
        with pytest.raises(AttributeError):
            value.anything  # noqa: B018
        assert name not in sys.modules or name == "_io", name
    assert _judge_decode(_encode(Ref("m", ("math", 0)))) is __import__("math")


def test_an_exception_class_named_after_a_function_is_only_a_class() -> None:
    """A program's exception class claiming to be ``builtins.eval`` or ``os.system`` becomes a fresh class of that
    name; only a real standard-library exception class is ever looked up."""
    for module, name in (("builtins", "eval"), ("os", "system"), ("json", "JSONDecodeError")):
        cls = _judge_decode(_encode(Ref("x", (1, name, (Ref("e", ("Exception",)),), module))))
        assert isinstance(cls, type) and issubclass(cls, BaseException)
        assert cls.__module__.startswith("json") == (name == "JSONDecodeError")


def test_values_the_wire_carries_round_trip() -> None:
    import collections
    import datetime
    import decimal
    import fractions

    import numpy as np

    shared = [1, 2]
    value = [None, True, 2 ** 200, -3, 1.5, 2j, "é\ud800", b"x", bytearray(b"y"), (1,), {1}, frozenset({2}),
             {"a": [1]}, collections.OrderedDict(a=1), collections.Counter("aab"), collections.deque([1], 3),
             collections.defaultdict(list, {1: [2]}), range(1, 9, 2), slice(1, None), fractions.Fraction(1, 3),
             decimal.Decimal("1.10"), datetime.date(2020, 1, 2), datetime.timedelta(1, 2, 3),
             datetime.datetime(2020, 1, 2, 3, 4, tzinfo=datetime.timezone.utc), np.arange(6).reshape(2, 3),
             np.float32(1.5), collections.namedtuple("P", "x y")(1, 2), {"k": 1}.items(), shared, shared,
             ValueError("boom", 7)]
    back = _judge_decode(_encode(value))
    for a, b in zip(value[:-1], back[:-1]):
        assert type(a) is type(b) or isinstance(a, (np.ndarray, tuple)), (a, b)
        if isinstance(a, np.ndarray):
            assert (a == b).all() and a.dtype == b.dtype
        else:
            assert a == b or a != a, (a, b)
    assert back[-3] is back[-2]  # the same list twice is one list on arrival
    assert type(back[-1]) is ValueError and back[-1].args == ("boom", 7)


# ----------------------------------------------------------------------------------------------------------
# the same attacks, written by a real program onto the real channel; the next job on the slot must score right


def _forged_program(frame_payload: bytes, body: str = "def f(x):\n    return 0") -> str:
    """A program that, while being loaded, writes a reply frame of its own to the judge (request 1 is the load)."""
    reply = b"t" + U32.pack(4) + _encode(1) + _encode(1) + _encode(True) + frame_payload
    frame = U32.pack(len(reply)) + reply
    return f"import os, time\nos.write(3, {frame!r})\ntime.sleep(0.3)\n{body}\n"


FORGED = ["pickle-opcode", "depth-bomb", "name-reference", "name-reference-eval", "builtin-import",
          "judge-handle-out-of-range", "set-of-handles", "zoneinfo-path", "defaultdict-factory-eval",
          "numpy-size-mismatch"]


@pytest.mark.parametrize("name", FORGED)
def test_forged_frames_on_the_channel(name: str, box: sb.Sandbox) -> None:
    d = tempfile.mkdtemp()
    os.chmod(d, 0o777)  # writable by any uid: only code execution somewhere could create the marker
    marker = os.path.join(d, "pwned")
    try:
        payload = DECODER_ATTACKS[name].replace(b"/tmp/x", marker.encode())
        (res,) = box.run_many([sb.make_job(_forged_program(payload), ADD_ONE, timeout=TIMEOUT)])
        assert res.fraction == 0.0 and not os.path.exists(marker)
        (after,) = box.run_many([sb.make_job(HONEST, ADD_ONE, timeout=TIMEOUT)])
        assert after.fraction == 1.0
    finally:
        shutil.rmtree(d)


def test_pre_answered_requests_gain_nothing(box: sb.Sandbox) -> None:
    """Replies written ahead for the judge's next requests are just answers: with nothing to call that the judge
    would trust, a wrong program stays wrong."""
    frames = b""
    for rid, value in ((2, Ref("e", ("ValueError",))), (3, 2), (4, True), (2, Ref("m", ("operator", 0)))):
        body = b"t" + U32.pack(4) + _encode(1) + _encode(rid) + _encode(True) + _encode(value)
        frames += U32.pack(len(body)) + body
    prog = f"import os\nos.write(3, {frames!r})\ndef f(x):\n    return 0\n"
    (res,) = box.run_many([sb.make_job(prog, ADD_ONE, timeout=TIMEOUT)])
    assert res.fraction == 0.0


def test_a_frame_over_the_limit_costs_only_the_program(box: sb.Sandbox) -> None:
    prog = f"import os\nos.write(3, {U32.pack(wire.MAX_FRAME + 1)!r} + b'x' * 64)\ndef f(x):\n    return x + 1\n"
    (res,) = box.run_many([sb.make_job(prog, ADD_ONE, timeout=TIMEOUT)])
    assert res.fraction == 0.0
    (after,) = box.run_many([sb.make_job(HONEST, ADD_ONE, timeout=TIMEOUT)])
    assert after.fraction == 1.0


# ----------------------------------------------------------------------------------------------------------
# state that would outlive a job: a fresh judge per job, so even the dataset's own tests cannot leave any


POISON = {
    "json": ("import json\njson.dumps = None\njson.loads = None",
             "import json\nassert json.loads(json.dumps(f(1))) == 2"),
    "builtins": ("import builtins\nbuiltins.abs = lambda x: 0\nbuiltins.len = lambda x: 0",
                 "assert abs(f(-3)) == 2 and len([f(1)]) == 1"),
    "recursion-limit": ("import sys\nsys.setrecursionlimit(40)",
                        "def d(n):\n    return 0 if n == 0 else 1 + d(n - 1)\nassert d(200) == 200 and f(1) == 2"),
    "value-class": ("import fractions\nfractions.Fraction.__eq__ = lambda *a: False",
                    "import fractions\nassert fractions.Fraction(f(1)) == 2"),
    "random-seed": ("import random\nrandom.seed(1)\nrandom.random = lambda: 0.5",
                    "import random\nassert random.random() != 0.5 and f(1) == 2"),
    "module-cache": ("import sys, types\nsys.modules['math'] = types.ModuleType('math')",
                     "import math\nassert math.isclose(f(1), 2.0)"),
}


@pytest.mark.parametrize("name", list(POISON))
def test_poison_left_by_a_job_does_not_reach_the_next(name: str, box: sb.Sandbox) -> None:
    poison, check = POISON[name]
    first, second = box.run_many([sb.make_job(HONEST, [poison], timeout=TIMEOUT),
                                  sb.make_job(HONEST, [check], timeout=TIMEOUT)])
    assert second.fraction == 1.0, (first.failures, second.failures)  # whatever the poison did to its own job


# ----------------------------------------------------------------------------------------------------------
# kernel channels between jobs


SHM = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
KEY = 0x6772706F
"""
CHANNELS = {
    "sysv-shm": (SHM + "print(libc.shmget(KEY, 4096, 0o1666))", SHM + "print(libc.shmget(KEY, 0, 0))"),
    "sysv-msg": (SHM + "print(libc.msgget(KEY, 0o1666))", SHM + "print(libc.msgget(KEY, 0))"),
    "sysv-sem": (SHM + "print(libc.semget(KEY, 1, 0o1666))", SHM + "print(libc.semget(KEY, 0, 0))"),
    "dev-shm": ("open('/dev/shm/grpo_fast_x', 'w').write('x')\nprint(1)",
                "import os\nprint(-1 if not os.path.exists('/dev/shm/grpo_fast_x') else 1)"),
    "tmp": ("open('/tmp/grpo_fast_x', 'w').write('x')\nprint(1)",
            "import os\nprint(-1 if not os.path.exists('/tmp/grpo_fast_x') else 1)"),
    "user-keyring": (SHM + "print(libc.syscall(248, b'user', b'grpo_fast_k', b'secret', 6, -4))",
                     SHM + "print(libc.syscall(249, b'user', b'grpo_fast_k', None, 0))"),
    "session-keyring": (SHM + "print(libc.syscall(248, b'user', b'grpo_fast_k', b'secret', 6, -3))",
                        SHM + "print(libc.syscall(249, b'user', b'grpo_fast_k', None, 0))"),
}


@pytest.mark.parametrize("name", list(CHANNELS))
def test_no_kernel_channel_between_sequential_jobs(name: str, box: sb.Sandbox) -> None:
    if not strongest():
        pytest.skip("needs namespaces")
    writer, reader = CHANNELS[name]
    first, second = box.run_many([sb.make_job(writer, timeout=TIMEOUT), sb.make_job(reader, timeout=TIMEOUT)])
    if name.endswith("keyring") and box.layers()["seccomp"].startswith("holds"):
        assert int(first.stdout.split()[0]) == -1, first  # the filter: no job can add a kernel key at all
    elif refused_outright():
        assert first.stdout.split()[:1] in (["-1"], []) or name == "dev-shm", first  # refused, or raised
    else:
        assert int(first.stdout.split()[0]) >= 0, first  # the writer did create the object in its own job
    assert int(second.stdout.split()[0]) == -1, second  # the next job cannot find it


def test_no_abstract_socket_between_concurrent_jobs() -> None:
    if not strongest():
        pytest.skip("needs namespaces")
    server = ("import socket, time\ns = socket.socket(socket.AF_UNIX)\ns.bind('\\0grpo_fast_abstract')\n"
              "s.listen(1)\nprint('listening', flush=True)\ns.settimeout(2.5)\n"
              "try:\n    s.accept()\n    print('accepted')\nexcept OSError:\n    print('alone')\n")
    client = ("import socket, time\ntime.sleep(0.5)\nc = socket.socket(socket.AF_UNIX)\n"
              "try:\n    c.connect('\\0grpo_fast_abstract')\n    print('connected')\n"
              "except OSError as e:\n    print('refused', e.errno)\n")
    two = sb.Sandbox(workers=2)
    try:
        a, b = two.run_many([sb.make_job(server, timeout=TIMEOUT), sb.make_job(client, timeout=TIMEOUT)])
    finally:
        two.close()
    if refused_outright():  # no bind or connect at all
        assert "accepted" not in a.stdout and "connected" not in b.stdout, (a, b)
        return
    assert a.stdout.split()[0] == "listening" and "alone" in a.stdout
    assert b.stdout.startswith("refused")


# ----------------------------------------------------------------------------------------------------------
# the judge itself is confined: even the dataset's tests cannot write on the host, read home, or use the network


def _denied(action: str) -> str:
    body = textwrap.indent(action, "    ")
    return f"try:\n{body}\nexcept OSError:\n    pass\nelse:\n    raise AssertionError('allowed')"


def test_the_judge_cannot_reach_the_host_even_when_the_tests_try(tmp_path) -> None:
    if not strongest():
        pytest.skip("needs namespaces")
    here = os.path.dirname(os.path.abspath(__file__))  # as a normal user (tests/sandbox/host_kinds.py): their home
    shared = tempfile.mkdtemp(dir=here if os.access(here, os.W_OK) else os.path.expanduser("~"))
    os.chmod(shared, 0o777)
    home_file = os.path.join(os.path.expanduser("~"), ".grpo_fast_judge_probe")
    with open(home_file, "w") as fh:
        fh.write("secret\n")
    os.chmod(home_file, 0o644)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    tests = [
        _denied(f"open({os.path.join(shared, 'judge_wrote')!r}, 'w').write('x')"),
        _denied(f"open({home_file!r}).read()"),
        _denied(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)"),
        _denied("open('/etc/grpo_fast_judge', 'w').write('x')"),
        _denied("open('/usr/grpo_fast_judge', 'w').write('x')"),
        f"import os\nassert os.getuid() != 0 and (os.getpid() == 1 or {refused_outright()})",  # else no PID ns
    ]
    try:
        res = sb.run_program(HONEST, tests=tests, timeout=TIMEOUT)
        assert res.passed == [True] * len(tests), res.failures
        assert os.listdir(shared) == []
    finally:
        listener.close()
        os.remove(home_file)
        shutil.rmtree(shared)


# ----------------------------------------------------------------------------------------------------------
# the test namespace is the test's


reward = make_code_execution_reward(timeout=TIMEOUT)


@pytest.mark.parametrize("program,tests", [
    ("class FakeMath:\n    isclose = staticmethod(lambda *a, **k: True)\nmath = FakeMath()\ndef f(x): return 0.0",
     ["assert math.isclose(f(1), 2.0)"]),
    ("class math:\n    isclose = staticmethod(lambda *a, **k: True)\ndef f(x): return 0.0",
     ["assert math.isclose(f(1), 2.0)"]),
    ("import numpy as np\nnp.allclose = lambda *a, **k: True\ndef f(x): return [0.0]",
     ["assert np.allclose(f(1), [2.0])"]),
    ("def is_prime(n):\n    raise StopIteration", ["assert all(map(is_prime, [2, 3, 5]))"]),
    ("def gen(n):\n    yield 1\n    raise StopIteration", ["assert list(gen(3)) == [1]"]),
    ("def ok(x):\n    raise StopIteration\ndef f(xs): return [x for x in xs if ok(x)]",
     ["assert sum(1 for x in [1, 2] if ok(x)) == 2"]),
], ids=["module-name-bound-to-object", "module-name-bound-to-class", "alias-module-patched",
        "stopiteration-ends-map", "stopiteration-in-generator", "stopiteration-in-genexp"])
def test_the_program_cannot_supply_the_tests_names(program: str, tests: list[str]) -> None:
    assert reward(None, [f"```python\n{program}\n```"], tests=[tests]) == [0.0]


def test_test_imports_are_honoured() -> None:
    """MBPP's ``test_imports`` run before the tests (and the program), as the original harness runs them."""
    prog = "```python\ndef area(r):\n    return math.pi * r * r\n```"
    assert reward(None, [prog], test_list=[["assert math.isclose(area(1), math.pi)"]],
                  test_imports=[["import math"]]) == [1.0]
