"""Honest programs (tests/sandbox/honest_programs.py) through the real code reward: every one must score 1.0.

A reward that gives 0 to correct code trains the model away from correct code, silently; these cover what models
write for MBPP / HumanEval / LeetCode-style tasks.
"""

from __future__ import annotations

import pytest
from honest_programs import HUMANEVAL, MBPP

from grpo_fast import sandbox as sb
from grpo_fast.rewards.code import make_code_execution_reward

TIMEOUT = 10.0  # generous: the machine running the tests may be busy
reward = make_code_execution_reward(timeout=TIMEOUT)


def _setup(case: tuple) -> str:
    return case[2] if len(case) > 2 else ""


@pytest.fixture(scope="module")
def mbpp_scores() -> dict[str, float | None]:
    names = sorted(MBPP)
    completions = [f"Here is my solution.\n```python\n{MBPP[n][0]}\n```\nIt runs in O(n)." for n in names]
    scores = reward(None, completions, tests=[MBPP[n][1] for n in names],
                    test_setup_code=[_setup(MBPP[n]) for n in names])
    return dict(zip(names, scores))


@pytest.fixture(scope="module")
def humaneval_scores() -> dict[str, float | None]:
    names = sorted(HUMANEVAL)
    cases = [HUMANEVAL[n] for n in names]
    scores = reward([c[0] for c in cases], [c[1] for c in cases], test=[c[2] for c in cases],
                    entry_point=[c[3] for c in cases])
    return dict(zip(names, scores))


def _why(name: str) -> str:
    """On failure only: rerun the case directly to show the judge's reasons."""
    code, tests = MBPP[name][0], MBPP[name][1]
    res = sb.run_program(code, tests=tests, setup=_setup(MBPP[name]), timeout=TIMEOUT)
    return f"{res.status} {res.error} {res.failures} {res.stderr[-500:]}"


def test_suite_is_big_enough() -> None:
    assert len(MBPP) + len(HUMANEVAL) >= 60


PROCESS_POOLS = ("multiprocessing_pool", "process_pool")  # their locks live in /dev/shm


@pytest.mark.parametrize("name", sorted(MBPP))
def test_honest_mbpp_scores_full(name: str, mbpp_scores: dict[str, float | None]) -> None:
    if name in PROCESS_POOLS and sb.isolation_level() == "landlock+own-uid":
        assert "multiprocessing: unavailable" in " ".join(sb.default_sandbox().threats())
        pytest.skip("a normal user without user namespaces: /dev/shm stays closed, said at run start")
    score = mbpp_scores[name]
    assert score == 1.0, _why(name)


@pytest.mark.parametrize("name", sorted(HUMANEVAL))
def test_honest_humaneval_scores_full(name: str, humaneval_scores: dict[str, float | None]) -> None:
    assert humaneval_scores[name] == 1.0


def test_packages_can_be_hidden() -> None:
    """Opt-out per recipe: with packages=False, numpy is not importable by the program."""
    plain = make_code_execution_reward(timeout=TIMEOUT, packages=False)
    prog = "```python\ntry:\n    import numpy\n    HAVE = True\nexcept ImportError:\n    HAVE = False\n```"
    assert plain(None, [prog], tests=[["assert HAVE is False"]]) == [1.0]
    assert reward(None, [prog], tests=[["assert HAVE is True"]]) == [1.0]
