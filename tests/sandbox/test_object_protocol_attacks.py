"""Attacks on the widened object protocol (program classes as judge classes, generators as judge generators, async
across the boundary, exception causes) and on the working directory a judge whose asserts use files shares with
its program. Each hostile program must score 0; a control shows each path honestly gives full credit.

Run at the host's level and, where root and Landlock allow it, forced to ``landlock+uid-drop`` (no namespaces: the
judge works in the program's own directory, under the program's uid). Never at ``rlimits-only``: there a program
can signal the host's processes (docs/sandbox.md), so these programs stay away from it.
"""

from __future__ import annotations

import os

import pytest

from grpo_fast import sandbox as sb
from grpo_fast.rewards import code_tests
from grpo_fast.rewards.code import make_code_execution_reward

TIMEOUT = 5.0
reward = make_code_execution_reward(timeout=TIMEOUT)
SETUP = ("class Box:\n    def __init__(self, v):\n        self.v = v\n    def __eq__(self, o):\n"
         "        return type(o) is Box and self.v == o.v\n    __hash__ = None")
LIAR = "class X:\n    __eq__ = lambda *a: True\n    __bool__ = lambda s: True\n    __hash__ = lambda s: 0\n"

FORGED = {
    # the program's class named like the setup's: the test's Box stays the judge's copy
    "program-class-shadows-a-setup-class": (
        "class Box:\n    def __init__(self, v): pass\n    __eq__ = lambda *a: True\n    __hash__ = lambda s: 0\n"
        "def f(x): return Box(0)",
        ["assert f(1) == Box(2)", "assert Box(2) == f(1)", "assert type(f(1)) is Box and f(1).v == 2"]),
    # classes named like builtins: fresh judge classes, never the builtins
    "classes-named-bool-and-type": (
        "class bool:\n    pass\nclass type:\n    __call__ = lambda *a: 1\ndef f(x): return bool()",
        ["assert type(f(1)) is bool", "assert isinstance(f(1), bool)", "assert f(1) is True"]),
    # a class that declares itself a Mapping (registered under the judge's ABC) and answers with lies
    "declared-mapping-that-lies": (
        "from collections.abc import Mapping\nclass M(Mapping):\n    def __getitem__(s, k): return 2\n"
        "    def __iter__(s): return iter(['a'])\n    def __len__(s): return 1\n    __eq__ = lambda *a: True\n"
        "def f(x): return M()",
        ["from collections.abc import Mapping\nassert isinstance(f(1), Mapping) and f(1) == {'a': 3}",
         "assert dict(f(1)) == {'a': 3}", "assert {**f(1)} == {'a': 3}"]),
    # a generator's send, throw and return values (StopIteration.value, yield from) that compare true
    "generator-send-throw-return-liars": (
        LIAR + "def f(x):\n    try:\n        v = yield X()\n    except Exception:\n        return X()\n    return X()",
        ["g = f(1)\nnext(g)\ntry:\n    g.send(5)\nexcept StopIteration as e:\n    assert e.value == 42\nelse:\n"
         "    assert False",
         "g = f(1)\nnext(g)\ntry:\n    g.throw(ValueError)\nexcept StopIteration as e:\n    assert e.value == 42\n"
         "else:\n    assert False",
         "def w():\n    r = yield from f(1)\n    assert r == 42\n    yield 0\nassert list(w()) == [0]"]),
    "generator-return-value-through-next": (
        LIAR + "def f(x):\n    yield 1\n    return X()",
        ["g = f(1)\nassert next(g) == 1\ntry:\n    next(g)\nexcept StopIteration as e:\n    assert e.value == 5\n"
         "else:\n    assert False"]),
    # ``raise ... from`` a cause that compares true and claims to be the expected class
    "exception-cause-that-lies": (
        "class E(Exception):\n    __eq__ = lambda *a: True\n    __class__ = KeyError\ndef f(x):\n"
        "    raise ValueError('no') from E()",
        ["try:\n    f(1)\nexcept ValueError as e:\n    assert e.__cause__ == KeyError(2) and "
         "isinstance(e.__cause__, KeyError)\nelse:\n    assert False"]),
    # coroutines and async iteration whose results compare true
    "async-results-that-lie": (
        LIAR + "async def f(x):\n    return X()\nasync def g(x):\n    yield X()",
        ["import asyncio\nassert asyncio.run(f(1)) == 2",
         "import asyncio\nasync def m():\n    return [v async for v in g(1)]\nassert asyncio.run(m()) == [2]"]),
}


@pytest.mark.parametrize("name", list(FORGED))
def test_forged_objects_across_the_widened_protocol_score_zero(name: str) -> None:
    program, tests = FORGED[name]
    (score,) = reward(None, [f"```python\n{program}\n```"], tests=[tests], test_setup_code=[SETUP])
    assert score == 0.0


def test_the_widened_paths_give_honest_programs_full_credit() -> None:
    """The control: the same paths, honest values, full marks (the attacks above are not failing by accident)."""
    program = ("def f(x):\n    v = yield 1\n    return v * 2\nclass M:\n    pass\nasync def a(x):\n    return x + 1\n"
               "def c(x):\n    try:\n        {}[x]\n    except KeyError as k:\n        raise ValueError('no') from k")
    tests = ["g = f(1)\nnext(g)\ntry:\n    g.send(21)\nexcept StopIteration as e:\n    assert e.value == 42",
             "assert type(M()) is M and type(M()).__name__ == 'M'", "import asyncio\nassert asyncio.run(a(1)) == 2",
             "try:\n    c(1)\nexcept ValueError as e:\n    assert isinstance(e.__cause__, KeyError)"]
    (score,) = reward(None, [f"```python\n{program}\n```"], tests=[tests])
    assert score == 1.0


# a module of the standard library planted where a judge that shares the program's directory could find it: its
# working directory, its TMPDIR, /tmp
PLANT = ("import os\nsrc = 'def mean(*a, **k): return 99\\n'\n"
         "for d in {'.', os.environ.get('TMPDIR', '.'), '/tmp'}:\n    for m in ('statistics', 'fractions'):\n"
         "        try:\n            open(os.path.join(d, m + '.py'), 'w').write(src)\n        except OSError:\n"
         "            pass\ndef f(x):\n    return 0")
PLANT_TESTS = ["open('in.txt', 'w').write('x')\nf(1)\nimport statistics\nassert statistics.mean([1, 2]) == 99",
               "open('in.txt', 'w').write('x')\nf(1)\nimport statistics\nassert statistics.mean([1, 2]) == 1.5"]
# every other process the program can signal (signal 0: asks, delivers nothing) or open the memory of
PROBE = ("import os\ndef f(x):\n    me, got = os.getpid(), []\n    for p in os.listdir('/proc'):\n"
         "        if not p.isdigit() or int(p) == me:\n            continue\n        try:\n"
         "            os.kill(int(p), 0)\n            got.append(p)\n        except OSError:\n            pass\n"
         "        try:\n            os.close(os.open(f'/proc/{p}/mem', os.O_RDONLY))\n            got.append(p)\n"
         "        except OSError:\n            pass\n    return got")


@pytest.fixture(scope="module", params=["auto", "landlock+uid-drop"])
def files_box(request):
    """One slot at the host's level, and at the container's level where this host can run it (root, Landlock)."""
    if request.param != "auto" and os.geteuid() != 0:
        pytest.skip("forcing a uid-drop level needs root")
    box = sb.Sandbox(workers=1, level=request.param)
    if request.param != "auto" and box.level() != request.param:
        box.close()
        pytest.skip(f"{request.param} is not available here")
    yield box
    box.close()


def test_a_module_planted_in_the_shared_directory_never_runs_in_the_judge(files_box: sb.Sandbox) -> None:
    (res,) = files_box.run_many([sb.make_job(PLANT, PLANT_TESTS, timeout=TIMEOUT)])
    assert res.passed == [False, True]


def test_a_program_sharing_its_judges_directory_reaches_no_other_process(files_box: sb.Sandbox) -> None:
    """The judge of a test that uses files runs, without namespaces, under the program's uid: still unreachable."""
    tests = ["open('a', 'w').write('1')\nassert f(1) == []", "assert f(1) == []"]
    (res,) = files_box.run_many([sb.make_job(PROBE, tests, timeout=TIMEOUT)])
    assert res.passed == [True, True], res.failures


def test_a_fifo_in_the_shared_directory_costs_only_its_own_job(files_box: sb.Sandbox) -> None:
    fifo = ("import os\ndef f(x):\n    try:\n        os.mkfifo('out.txt')\n    except OSError:\n        pass\n"
            "    return 0")
    tests = ["f(1)\nopen('out.txt', 'w').write('2')\nassert open('out.txt').read() == '2' and f(1) == 2"]
    hostile, honest = files_box.run_many([sb.make_job(fifo, tests, timeout=1.0),
                                          sb.make_job("def f(x): return x + 1", ["assert f(1) == 2"], timeout=1.0)])
    assert hostile.passed == [False] and honest.passed == [True]


# a program's classes are real classes of the judge's now: none named like a test class is ever collected by pytest
FORGED_TEST_CLASS = ("def add(a, b):\n    return a - b\nclass TestForged:\n"
                     + "".join(f"    def test_{i}(self):\n        pass\n" for i in range(9)))


@pytest.mark.parametrize("imports", ["from solution import *", "import solution\nfrom solution import add",
                                     "from solution import add, TestForged as _T\nTestMine = _T"])
def test_a_program_class_named_like_a_test_class_is_never_collected(imports: str) -> None:
    tests = f"{imports}\n\ndef test_add():\n    assert add(1, 2) == 3\n"
    job = code_tests.job(FORGED_TEST_CLASS, code_tests.parse(tests), timeout=TIMEOUT)
    (res,) = sb.default_sandbox().run_many([job])
    assert res.fraction == 0.0 and res.passed == [False], (res.passed, res.failures)
