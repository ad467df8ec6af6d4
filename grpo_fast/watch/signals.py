"""What the health rules read and raise: a logged step (``Row``) and its finite values, the reward's known range
(``RewardScale``), and the event a rule raises (``HealthEvent``). The rules themselves are in ``alarms``."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from grpo_fast.watch.remedies import NOTES

Row = dict[str, float | None]
JUDGED = ("judge", "preference")
"""``reward_kind`` of the judged rewards: an LLM judge (rewards.judged), a reward model (rewards.reward_model)."""


@dataclass
class HealthEvent:
    """One alarm or note: what was seen, at which step, the measured value against its threshold, what to do.
    ``action``: warn, stop (with on_alarm: stop) or note (informational)."""

    step: int
    kind: str
    message: str
    remedy: str
    value: float | None
    threshold: float | None
    action: str = "warn"
    time: float = 0.0
    count: int = 1
    """Logged steps of this episode of trouble at which the rule held (one event per episode, not per window)."""
    last_step: int | None = None

    @property
    def is_note(self) -> bool:
        return self.kind in NOTES

    def text(self, replayed: bool = False) -> str:
        """The printed lines; ``replayed``: read back from a finished run, where a stop is what would have been."""
        if self.is_note:
            return f"HEALTH note [{self.kind}] step {self.step}: {self.message}\n  suggestion: {self.remedy}"
        stop = ("  -> on_alarm: stop stops here" if replayed else "  -> stopping the run (checkpoint saved)") \
            if self.action == "stop" else ""
        again = f" (held at {self.count} logged steps, last at step {self.last_step})" if self.count > 1 else ""
        return f"HEALTH [{self.kind}] step {self.step}{again}: {self.message}{stop}\n  remedy: {self.remedy}"

    def closing(self) -> str:
        """The line printed when an episode that held at more than one step ends (its start was printed)."""
        return f"HEALTH [{self.kind}] from step {self.step} to {self.last_step}: held at {self.count} logged steps"


@dataclass(frozen=True)
class RewardScale:
    """The total reward's known range (None where a reward declares none) and which rewards judge format and
    correctness, with their own ranges: what the rules weigh the logged numbers against. Without a declared range
    the span is learnt from the steps observed (``learned``), so a -4.5..5 notebook reward is not weighed as 0-1."""

    low: float | None = None
    high: float | None = None
    format_reward: str | None = None
    correctness_reward: str | None = None
    ranges: tuple[tuple[str, float, float], ...] = ()
    judges: tuple[str, ...] = ()
    """The judged rewards (an LLM judge, a reward model): scores a model can talk up, checked against the rest."""
    learned: tuple[float, float] | None = None
    """The lowest and highest mean reward minus / plus its spread seen so far (only when no range is declared)."""
    unknown: str = ""
    """Why a replay could not rebuild the run's rewards (its range is then unknown): said beside the verdict."""

    @property
    def declared(self) -> bool:
        return self.low is not None and self.high is not None and self.high > self.low

    @property
    def span(self) -> float:
        if self.declared:
            return self.high - self.low  # type: ignore[operator]
        if self.learned is not None and self.learned[1] > self.learned[0]:
            return self.learned[1] - self.learned[0]
        return 1.0

    def observed(self, row: Row) -> RewardScale:
        """This scale after one logged step: a declared range stays; an undeclared one widens to the step's mean
        reward plus and minus its spread."""
        mean = value(row, "reward")
        if self.declared or mean is None:
            return self
        spread = value(row, "reward_std") or 0.0
        low, high = self.learned or (mean - spread, mean + spread)
        return replace(self, learned=(min(low, mean - spread), max(high, mean + spread)))

    def span_of(self, name: str) -> float:
        return next((hi - lo for n, lo, hi in self.ranges if n == name and hi > lo), 1.0)

    def low_of(self, name: str) -> float | None:
        return next((lo for n, lo, _ in self.ranges if n == name), None)

    @property
    def gameable(self) -> list[str]:
        """The rewards other than the judge (format, style, length): those a model can game (the format reward
        alone when the rewards declare no ranges)."""
        names = [n for n, _, _ in self.ranges if n != self.correctness_reward and n not in self.judges]
        return names or ([self.format_reward] if self.format_reward else [])

    @classmethod
    def of(cls, rewards: Any) -> RewardScale:
        """From a ``RewardSet``: weighted floor and maximum of the total, the judge and the format reward, the
        judged rewards."""
        spans, low, high = [], 0.0, 0.0
        judges = tuple(fn.__name__ for fn, _ in rewards.rewards if getattr(fn, "reward_kind", None) in JUDGED)
        for fn, weight in rewards.rewards:
            lo, hi = getattr(fn, "reward_range", (None, None))
            if lo is None or hi is None:
                return cls(format_reward=rewards.format, correctness_reward=rewards.correctness, judges=judges)
            spans.append((fn.__name__, float(lo), float(hi)))
            low += weight * (lo if weight >= 0 else hi)
            high += weight * (hi if weight >= 0 else lo)
        return cls(low, high, rewards.format, rewards.correctness, tuple(spans), judges)


def value(row: Row, key: str) -> float | None:
    value = row.get(key)
    return value if value is not None and math.isfinite(value) else None


def series(rows: Sequence[Row], key: str) -> list[float]:
    """The finite values of ``key`` in ``rows``; [] unless every row has one."""
    values = [value(r, key) for r in rows]
    return [] if not values or any(v is None for v in values) else values  # type: ignore[return-value]


def finite(rows: Sequence[Row], key: str) -> list[float]:
    """The finite values of ``key`` in ``rows``, skipping steps without one (a whole run's history)."""
    return [v for r in rows if (v := value(r, key)) is not None]


def shift(before: Sequence[float], after: Sequence[float]) -> tuple[float, float]:
    """How much the mean moved from ``before`` to ``after``, and that move's standard error."""
    def var(values: Sequence[float]) -> float:
        return statistics.variance(values) / len(values) if len(values) > 1 else 0.0
    return statistics.fmean(after) - statistics.fmean(before), math.sqrt(var(before) + var(after))

