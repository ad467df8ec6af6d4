"""Honest programs in the families where the judge's two-process design could differ from plain Python: each must
earn the full code reward (tests/sandbox/honest_families.py). Those the design cannot serve are counted and named as
outside the design in the result, never a silent zero."""

from __future__ import annotations

import logging

import pytest
from honest_families import FAMILIES, OUTSIDE

from grpo_fast import sandbox as sb
from grpo_fast.rewards.code import make_code_execution_reward

TIMEOUT = 20.0  # generous: a few cases move tens of megabytes
reward = make_code_execution_reward(timeout=TIMEOUT)


@pytest.fixture(scope="module")
def scores() -> dict[str, float | None]:
    names = sorted(FAMILIES)
    completions = [f"```python\n{FAMILIES[n][1]}\n```" for n in names]
    return dict(zip(names, reward(None, completions, tests=[FAMILIES[n][2] for n in names])))


def test_every_family_is_covered() -> None:
    assert len(FAMILIES) >= 60 and len({family for family, _, _ in FAMILIES.values()}) >= 12


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_honest_family_scores_full(name: str, scores: dict[str, float | None]) -> None:
    if scores[name] != 1.0:
        res = sb.run_program(FAMILIES[name][1], tests=FAMILIES[name][2], timeout=TIMEOUT)
        pytest.fail(f"{name}: {scores[name]} {res.status} {res.error} {res.failures} {res.stderr[-300:]}")


@pytest.mark.parametrize("name", sorted(OUTSIDE))
def test_outside_the_design_is_counted_not_silent(name: str, caplog: pytest.LogCaptureFixture) -> None:
    why, program, tests = OUTSIDE[name]
    res = sb.run_program(program, tests=tests, timeout=TIMEOUT)
    assert res.fraction < 1.0 and res.outside_design == len(tests), res.failures
    fresh = make_code_execution_reward(timeout=TIMEOUT)
    with caplog.at_level(logging.WARNING, logger="grpo_fast.rewards"):
        assert fresh(None, [f"```python\n{program}\n```"], tests=[tests]) == [0.0]
    assert fresh.outside_design == 1 and "outside the design" in caplog.text.lower()
