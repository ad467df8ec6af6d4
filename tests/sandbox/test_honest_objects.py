"""Honest object-heavy programs (tests/sandbox/honest_objects*.py) through the real code reward (issue 52, item 7).

Each passes in plain Python (checked here first). Through the sandbox each must earn the full reward, unless it is
named in ``OUTSIDE``: a pattern the two-process design cannot give plain-Python behaviour (docs/sandbox.md,
"Outside the design"); those must score below 1.0 with every failed test counted as outside the design, never a
silent zero. ``python tests/sandbox/test_honest_objects.py`` prints the table by family.
"""

from __future__ import annotations

import collections
import os
import sys
import tempfile
import types

import pytest
from honest_objects import OBJECTS
from honest_objects_io import OBJECTS_IO

from grpo_fast import sandbox as sb
from grpo_fast.rewards.code import make_code_execution_reward

TIMEOUT = 20.0  # generous: the machine running the tests may be busy
PROGRAMS = {**OBJECTS, **OBJECTS_IO}
# Correct programs the two-process design cannot serve (docs/sandbox.md, "Outside the design"): name -> why. They
# must score below 1.0 with every failed test counted as outside the design.
OUTSIDE = {
    "eq_with_int": "a program's __eq__ never judges a plain value",
    "compare_with_number": "a program's ordering never judges a plain value",
    "dict_key_from_program": "a dict keyed by program objects is a program object",
    "radd_with_sum": "arithmetic between a plain value and a program object",
    "add_int_to_object": "arithmetic between a plain value and a program object",
    "mul_by_scalar": "arithmetic between a plain value and a program object",
    "truediv_by_number": "arithmetic between a plain value and a program object",
    "contains_only": "a plain value's membership is checked by iterating",
    "index_protocol": "__index__ is never asked of a program",
    "cm_suppress_own": "no program hook swallows a test's exception",
    "cm_suppress_records": "no program hook swallows a test's exception",
    "dataclass_asdict": "dataclasses' functions need the program's own instance",
    "dataclass_replace": "dataclasses' functions need the program's own instance",
    "type_mro_names": "a program class's __mro__ is its stand-in's",
}


def plain_python_failures(solution: str, tests: list[str]) -> list[str]:
    """The asserts that fail when the solution and its tests share one plain interpreter and directory."""
    failed: list[str] = []
    cwd, mod = os.getcwd(), types.ModuleType("solution")
    sys.modules["solution"] = mod
    with tempfile.TemporaryDirectory() as workdir:
        os.chdir(workdir)
        try:
            exec(compile(solution, "solution.py", "exec"), mod.__dict__)  # noqa: S102 - our own corpus
            for i, test in enumerate(tests):
                try:
                    exec(compile(test, f"<test {i}>", "exec"), dict(mod.__dict__))  # noqa: S102
                except BaseException as err:  # noqa: BLE001 - any exception fails the assert
                    failed.append(f"{i}: {type(err).__name__}: {err}")
        finally:
            os.chdir(cwd)
            sys.modules.pop("solution", None)
    return failed


def measure() -> dict[str, tuple[str, float | None, sb.SandboxResult]]:
    """name -> (family, code reward, the sandbox's result with its reasons), every program in one batch each."""
    names = sorted(PROGRAMS)
    reward = make_code_execution_reward(timeout=TIMEOUT)
    scores = reward(None, [f"```python\n{PROGRAMS[n][1]}\n```" for n in names], tests=[PROGRAMS[n][2] for n in names])
    results = sb.run_many([PROGRAMS[n][1] for n in names], tests=[PROGRAMS[n][2] for n in names], timeout=TIMEOUT)
    return {n: (PROGRAMS[n][0], s, r) for n, s, r in zip(names, scores, results)}


def verdict(score: float | None, res: sb.SandboxResult) -> str:
    """``full``, ``outside`` (every failed test counted as outside the design) or ``silent`` (some failure is not)."""
    if score == 1.0:
        return "full"
    failed = [f for ok, f in zip(res.passed, res.failures) if not ok] or [res.error or res.status]
    return "outside" if all(f.startswith("outside design") for f in failed) else "silent"


@pytest.fixture(scope="module")
def measured() -> dict[str, tuple[str, float | None, sb.SandboxResult]]:
    return measure()


def test_the_battery_is_broad() -> None:
    families = collections.Counter(family for family, _, _ in PROGRAMS.values())
    assert len(PROGRAMS) >= 120 and len(families) >= 10 and min(families.values()) >= 8


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_correct_in_plain_python(name: str) -> None:
    assert plain_python_failures(PROGRAMS[name][1], PROGRAMS[name][2]) == []


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_honest_object_program_scores_full_or_is_said_outside(name: str, measured: dict) -> None:
    family, score, res = measured[name]
    if name in OUTSIDE:
        assert score is not None and score < 1.0 and verdict(score, res) == "outside", (res.failures, res.error)
    else:
        assert score == 1.0, (family, score, res.status, res.error, res.failures, res.stderr[-300:])


def table(rows: dict[str, tuple[str, float | None, sb.SandboxResult]]) -> str:
    """Programs by family: how many score full, how many are counted outside the design, how many lose silently."""
    count: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for family, score, res in rows.values():
        count[family][verdict(score, res)] += 1
        count[family]["n"] += 1
    lines = ["| family | programs | full | outside design (said) | silent |", "|---|---|---|---|---|"]
    for family, c in [*sorted(count.items()), ("all", sum(count.values(), collections.Counter()))]:
        lines.append(f"| {family} | {c['n']} | {c['full']} | {c['outside']} | {c['silent']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    rows = measure()
    print(table(rows))
    for name, (family, score, res) in sorted(rows.items()):
        if score != 1.0:
            print(f"{verdict(score, res):8} {family:14} {name}: {score} {res.status} {res.error[:120]} "
                  f"{[f[:140] for f in res.failures if f]}")
