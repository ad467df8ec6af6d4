"""The health monitor's rules: which logged numbers make an alarm, weighed against the run's own history and
the reward's known range, so a healthy run stays quiet and a broken one is named early.

A GRPO step's reward is noisy (a step sees a handful of prompts), so a rule that reads a trend asks whether it
holds beyond one standard error of the means it compares, and thresholds are shares of the reward's span
(its maximum minus its minimum, from the rewards' ``reward_range``; 1 when a reward declares none). Falling
entropy, groups without spread and a flat curve are what a *learning* run shows too once it has learned; the
rules tell the two apart by asking whether the reward rose since the run began, and whether it sits at its
floor (too hard, or broken) or its ceiling (done: an informational note, not a warning).
docs/health.md lists every rule with its threshold and what the recorded corpus measured.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from grpo_fast.config import HealthSettings

Row = dict[str, float | None]

# What to do about each kind, from the troubleshooting table in docs/health.md.
REMEDIES: dict[str, str] = {
    "low_reward_std": "groups get (almost) the same reward, so there is nothing to learn from: raise "
                      "num_generations, raise temperature, or use a task/reward with partial credit "
                      "(too hard: every answer 0; a reward that ignores the answer: every answer alike)",
    "zero_std_groups": "groups have identical rewards and the reward is at its floor or the same everywhere: "
                       "give partial credit, use easier prompts (or filter those never solved), raise "
                       "num_generations or temperature, and check the reward reads the completion",
    "kl_high": "the policy drifted far from the reference: lower learning_rate, raise beta, or clip harder "
               "(epsilon)",
    "plateau": "the reward has not risen since the run began: lower or raise learning_rate, raise "
               "num_generations, or check the reward logic with `grpo-fast rewards check`",
    "nonfinite": "loss or gradient is NaN/inf: lower learning_rate, set max_grad_norm (e.g. 1.0), use bf16 "
                 "instead of fp16, and check rewards for NaN/inf",
    "reward_hacking": "a non-judge reward (format, style, length) rises while the judge stays at its floor: the "
                      "model games that reward. Lower its weight (or gate it on correctness) and check the judge's "
                      "logic on real samples (`grpo-fast rewards check`)",
    "no_signal": "the reward sat at its maximum with no spread from the first steps: GRPO has nothing to learn. "
                 "Use a harder task (harder prompts, a stricter judge), or run `grpo-fast rewards check` on the "
                 "judge: one that says yes to everything gives wrong answers full marks",
    "no_correct": "the model is never right on these rows: add (or lengthen) an SFT warm-up stage on the gold "
                  "answers (stages: [{sft: true, ...}, {...}], as recipes/*_cpu.yaml do), train on rows it sometimes "
                  "solves (difficulty_filter: 8), raise num_generations, or use a bigger model",
    "clipped": "many completions hit max_completion_length and are cut off: raise max_completion_length, "
               "ask for shorter answers in the prompt, or add a length penalty",
    "thinking_open": "thinking never closes: the completions cut at max_completion_length are still thinking, so "
                     "they never reach an answer and every correctness reward gives them 0. Raise "
                     "max_completion_length (thinking models need 1-4k tokens), ask for shorter reasoning, or set "
                     "thinking: off",
    "entropy_collapse": "token entropy collapsed while the reward did not rise: the model answers the same way "
                        "every time. Lower learning_rate, raise temperature, or check samples.jsonl for "
                        "repeated text",
    "reward_errors": "a reward raises (or returns NaN) on some completions, which then count as not applicable: "
                     "see reward_failures.jsonl in the run directory and fix the reward for those inputs",
    "converged": "the reward is at its maximum and no longer moving: later steps add little, so you can stop "
                 "here (or make the task harder)",
}
NOTES = frozenset({"converged"})
"""Informational kinds: printed once, recorded, never a warning and never a reason to stop."""


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
    correctness, with their own ranges: what the rules weigh the logged numbers against."""

    low: float | None = None
    high: float | None = None
    format_reward: str | None = None
    correctness_reward: str | None = None
    ranges: tuple[tuple[str, float, float], ...] = ()

    @property
    def span(self) -> float:
        return self.high - self.low if self.low is not None and self.high is not None and self.high > self.low \
            else 1.0

    def span_of(self, name: str) -> float:
        return next((hi - lo for n, lo, hi in self.ranges if n == name and hi > lo), 1.0)

    def low_of(self, name: str) -> float | None:
        return next((lo for n, lo, _ in self.ranges if n == name), None)

    @property
    def gameable(self) -> list[str]:
        """The rewards other than the judge (format, style, length): those a model can game (the format reward
        alone when the rewards declare no ranges)."""
        names = [n for n, _, _ in self.ranges if n != self.correctness_reward]
        return names or ([self.format_reward] if self.format_reward else [])

    @classmethod
    def of(cls, rewards: Any) -> RewardScale:
        """From a ``RewardSet``: weighted floor and maximum of the total, the judge and the format reward."""
        spans, low, high = [], 0.0, 0.0
        for fn, weight in rewards.rewards:
            lo, hi = getattr(fn, "reward_range", (None, None))
            if lo is None or hi is None:
                return cls(format_reward=rewards.format, correctness_reward=rewards.correctness)
            spans.append((fn.__name__, float(lo), float(hi)))
            low += weight * (lo if weight >= 0 else hi)
            high += weight * (hi if weight >= 0 else lo)
        return cls(low, high, rewards.format, rewards.correctness, tuple(spans))


def _value(row: Row, key: str) -> float | None:
    value = row.get(key)
    return value if value is not None and math.isfinite(value) else None


def series(rows: Sequence[Row], key: str) -> list[float]:
    """The finite values of ``key`` in ``rows``; [] unless every row has one."""
    values = [_value(r, key) for r in rows]
    return [] if not values or any(v is None for v in values) else values  # type: ignore[return-value]


def finite(rows: Sequence[Row], key: str) -> list[float]:
    """The finite values of ``key`` in ``rows``, skipping steps without one (a whole run's history)."""
    return [v for r in rows if (v := _value(r, key)) is not None]


def shift(before: Sequence[float], after: Sequence[float]) -> tuple[float, float]:
    """How much the mean moved from ``before`` to ``after``, and that move's standard error."""
    def var(values: Sequence[float]) -> float:
        return statistics.variance(values) / len(values) if len(values) > 1 else 0.0
    return statistics.fmean(after) - statistics.fmean(before), math.sqrt(var(before) + var(after))


class Rules:
    """Every rule, evaluated on the rows logged so far (a TRL ``log_history`` entry per step)."""

    def __init__(self, settings: HealthSettings, scale: RewardScale):
        self.s, self.scale = settings, scale
        self.rows: list[Row] = []

    def add(self, row: Row) -> None:
        self.rows.append(row)

    def component(self, name: str) -> list[float]:
        """One reward's per-step mean over the run (``rewards/<name>/mean``; older TRL logs ``rewards/<name>``)."""
        return finite(self.rows, f"rewards/{name}/mean") or finite(self.rows, f"rewards/{name}")

    def at_ceiling(self, rewards: Sequence[float]) -> bool:
        """The mean reward is within ``edge_frac`` of the span below the known maximum."""
        high = self.scale.high
        return high is not None and statistics.fmean(rewards) >= high - self.s.edge_frac * self.scale.span

    def progress(self) -> tuple[float, float, bool, int]:
        """Did the reward rise since the run began: from its first ``window`` steps to its last ``n`` (n: half
        the steps so far, at most half the trend window), by more than the plateau gain plus one standard error?
        (gain, its standard error, yes/no, the first steps compared)"""
        rewards = finite(self.rows, "reward")
        n = min(len(rewards) // 2, self.s.trend_window // 2)
        start = min(n, self.s.window)  # the very start: a run that learns fast has learned within n steps
        if n < 1:
            return 0.0, 0.0, False, 0
        gain, se = shift(rewards[:start], rewards[-n:])
        return gain, se, gain - se > self.s.plateau_min_gain * self.scale.span, start

    def check(self, step: int) -> list[HealthEvent]:
        """Every alarm and note the rows raise at ``step`` (before dedupe)."""
        found: list[HealthEvent] = []

        def add(kind: str, message: str, value: float | None, threshold: float | None) -> None:
            found.append(HealthEvent(step, kind, message, REMEDIES[kind], value, threshold))

        for rule in (self.nonfinite, self.reward_errors, self.kl, self.clipped, self.thinking, self.spread,
                     self.plateau, self.hacking, self.entropy):
            rule(add)
        return found

    # ----------------------------------------------------------------- single-step and sustained rules

    def nonfinite(self, add: Any) -> None:
        last = self.rows[-1]
        bad = [k for k in ("loss", "grad_norm") if last.get(k) is not None and not math.isfinite(last[k])]
        if bad:
            add("nonfinite", f"{' and '.join(bad)} is {last[bad[0]]}", last[bad[0]], None)

    def reward_errors(self, add: Any) -> None:
        rows = self.rows[-self.s.window:]
        rates = {key.split("/")[1]: statistics.fmean(v) for key in self.rows[-1]
                 if key.startswith("rewards/") and key.endswith("/failure_rate") and (v := series(rows, key))}
        if rates:
            name, rate = max(rates.items(), key=lambda item: item[1])
            if rate > self.s.max_reward_errors:
                add("reward_errors", f"reward '{name}' failed on {rate:.0%} of completions over the last "
                    f"{len(rows)} steps (> {self.s.max_reward_errors:.0%})", rate, self.s.max_reward_errors)

    def kl(self, add: Any) -> None:
        kl = _value(self.rows[-1], "kl")
        if kl is not None and kl > self.s.max_kl:
            add("kl_high", f"kl is {kl:.3f} (> {self.s.max_kl:g})", kl, self.s.max_kl)

    def clipped(self, add: Any) -> None:
        w = self.s.window
        clipped = series(self.rows[-w:], "completions/clipped_ratio") if len(self.rows) >= w else []
        if clipped and statistics.fmean(clipped) > self.s.max_clipped_ratio:
            share = statistics.fmean(clipped)
            add("clipped", f"{share:.0%} of completions were cut at max_completion_length over the last {w} steps "
                f"(> {self.s.max_clipped_ratio:.0%})", share, self.s.max_clipped_ratio)

    def thinking(self, add: Any) -> None:
        """Thinking models: the share of cut completions whose thinking is open (``thinking/open_clipped``,
        logged by the judge's view in rewards.thinking), over the window, when completions are being cut."""
        w = self.s.window
        rows = self.rows[-w:] if len(self.rows) >= w else []
        share = series(rows, "thinking/open_clipped")
        cut = series(rows, "completions/clipped_ratio")
        if share and cut and statistics.fmean(cut) > 0 and statistics.fmean(share) > self.s.max_open_thinking:
            value = statistics.fmean(share)
            add("thinking_open", f"{value:.0%} of the completions cut at max_completion_length had not closed their "
                f"thinking over the last {w} steps (> {self.s.max_open_thinking:.0%}; {statistics.fmean(cut):.0%} "
                "were cut)", value, self.s.max_open_thinking)

    # ----------------------------------------------------------------- no spread, converged

    def spread(self, add: Any) -> None:
        """Groups without spread are an alarm when the reward also sits at its floor, is the same in every group,
        or has not risen since the run began; at the ceiling they mean the task is learned (a ``converged``
        note), and so does a reward that rose and is now the same everywhere when no maximum is declared."""
        n = self.s.spread_window
        rows = self.rows[-n:]
        rewards = series(rows, "reward")
        if len(self.rows) < n or not rewards:
            return
        scale, span = self.scale, self.scale.span
        level, between = statistics.fmean(rewards), statistics.pstdev(rewards)
        edge = self.s.edge_frac * span
        at_ceiling = self.at_ceiling(rewards)
        at_floor = scale.low is not None and level <= scale.low + edge
        alike = between <= self.s.min_reward_std * span
        if self.no_signal(add):
            return
        if at_ceiling:
            add("converged", f"mean reward {level:.3f} over the last {n} steps is within {self.s.edge_frac:.0%} of "
                f"the maximum {scale.high:g}", level, scale.high - edge)
            return
        zero, stds = series(rows, "frac_reward_zero_std"), series(rows, "reward_std")
        no_spread = bool(zero) and statistics.fmean(zero) >= self.s.max_zero_std_frac
        first = series(self.rows[:n], "reward_std")
        # a small but steady spread still teaches (GRPO divides by it): low only if it also shrank from the start
        low_std = bool(stds) and statistics.fmean(stds) < self.s.min_reward_std * span and (
            not first or statistics.fmean(stds) < self.s.std_drop * statistics.fmean(first))
        if not (no_spread or low_std):
            return
        gain, se, rose, start = self.progress()
        if rose and alike and scale.high is None:
            add("converged", f"mean reward {level:.3f} rose {gain:+.3f} (+/- {se:.3f}) since the first {start} steps "
                f"and is now the same in every step (std {between:.3f}) with no spread in groups; the rewards declare "
                f"no maximum, so this reads as learned", level, None)
            return
        if rose and not (at_floor or alike):
            return  # some prompts always solved, others never, after learning: sure of itself, not stuck
        why = (f"the mean reward {level:.3f} is at its floor {scale.low:g}" if at_floor else
               f"the mean reward {level:.3f} barely moves between steps (std {between:.3f} <= "
               f"{self.s.min_reward_std * span:.3f})" if alike else
               f"the mean reward {level:.3f} moved {gain:+.3f} (+/- {se:.3f}) since the first {start} steps")
        if no_spread:
            add("zero_std_groups", f"{statistics.fmean(zero):.0%} of groups had identical rewards over the last "
                f"{n} steps (>= {self.s.max_zero_std_frac:.0%}) and {why}", statistics.fmean(zero),
                self.s.max_zero_std_frac)
        else:
            add("low_reward_std", f"reward_std averaged {statistics.fmean(stds):.3f} over the last {n} steps "
                f"(< {self.s.min_reward_std * span:.3f}) and {why}", statistics.fmean(stds),
                self.s.min_reward_std * span)

    def no_signal(self, add: Any) -> bool:
        """The reward sat at its declared maximum with (almost) no group spread from the run's first
        ``spread_window`` steps and still does: nothing was ever learnable (a task too easy, a judge that says yes
        to everything), not a run that learned (that one started below the maximum: the converged note)."""
        n = self.s.spread_window
        first, last = self.rows[:n], self.rows[-n:]
        if self.scale.high is None or len(self.rows) < n:
            return False
        for rows in (first, last):
            rewards, zero = series(rows, "reward"), series(rows, "frac_reward_zero_std")
            if not rewards or not zero or not self.at_ceiling(rewards) \
                    or statistics.fmean(zero) < self.s.max_zero_std_frac:
                return False
        level, share = statistics.fmean(series(last, "reward")), statistics.fmean(series(last, "frac_reward_zero_std"))
        add("no_signal", f"the mean reward {level:.3f} has sat at its maximum {self.scale.high:g} with "
            f"{share:.0%} of groups without spread since the first {n} steps", share, self.s.max_zero_std_frac)
        return True

    # ----------------------------------------------------------------- trends against the run's own start

    def plateau(self, add: Any) -> None:
        """The reward has not risen since the run began, surely (its gain plus one standard error is below the
        plateau gain), and it is not near the maximum."""
        t, half = self.s.trend_window, self.s.trend_window // 2
        rewards = finite(self.rows, "reward")
        if len(rewards) < t:
            return
        span = self.scale.span
        gain, se = shift(rewards[:half], rewards[-half:])
        level = statistics.fmean(rewards[-half:])
        if self.at_ceiling(rewards[-half:]):
            return  # the converged note says it
        threshold = self.s.plateau_min_gain * span
        if gain + se < threshold:
            add("plateau", f"mean reward {level:.3f} moved {gain:+.3f} (+/- {se:.3f}) from the first {half} steps "
                f"to the last {half} (< {threshold:.3f})", gain, threshold)

    def hacking(self, add: Any) -> None:
        """A non-judge reward rose from the run's first ``window`` steps to its last ``trend_window / 2`` (beyond one
        standard error) while the judge did not rise at all (its gain below ``hacking_max_gain`` of its span) and
        sits at its floor (where its range is declared). A format learned first, with correctness rising more
        slowly or already above its floor, is the demo's healthy course."""
        ok, t, half = self.scale.correctness_reward, self.s.trend_window, self.s.trend_window // 2
        if not ok or len(self.rows) < t:
            return
        right = self.component(ok)
        if len(right) < t:
            return
        c_span, floor = self.scale.span_of(ok), self.scale.low_of(ok)
        w = min(self.s.window, half)  # the very start: a format gamed fast is gamed within the first half
        gain, gain_se = shift(right[:w], right[-half:])
        level = statistics.fmean(right[-half:])
        if gain >= self.s.hacking_max_gain * c_span or (
                floor is not None and level > floor + self.s.edge_frac * c_span):
            return
        risen = []
        for name in self.scale.gameable:
            values = self.component(name)
            if len(values) >= t:
                rise, rise_se = shift(values[:w], values[-half:])
                if rise - rise_se >= self.s.hacking_min_rise * self.scale.span_of(name):
                    risen.append((rise / self.scale.span_of(name), name, rise, rise_se))
        if risen:
            _, name, rise, rise_se = max(risen)
            where = f", at its floor {floor:g}" if floor is not None else ""
            add("reward_hacking", f"'{name}' rose {rise:+.3f} (+/- {rise_se:.3f}) while the judge '{ok}' moved "
                f"{gain:+.3f} (+/- {gain_se:.3f}){where}, from the first {w} steps to the last {half}", rise,
                self.s.hacking_min_rise * self.scale.span_of(name))

    def entropy(self, add: Any) -> None:
        """Entropy below its floor (absolute, and a share of the first window's), the reward not risen since the
        run began (and not at its maximum), and either samples repeat (most groups without spread) or the reward
        is surely flat: collapse. Entropy falling as the reward rises, or while groups still differ, is
        learning (the demo on seed 2 is sure of itself by step 15, with a noisy reward)."""
        w = self.s.window
        if len(self.rows) < 2 * w:
            return
        entropy = series(self.rows[-w:], "entropy")
        first = series(self.rows[:w], "entropy")
        rewards = series(self.rows[-w:], "reward")
        if not entropy or not rewards:
            return
        floor = max(self.s.min_entropy, self.s.entropy_drop * statistics.median(first) if first else 0.0)
        level = statistics.median(entropy)  # the median: one exploratory step does not hide a collapse
        if level >= floor or self.at_ceiling(rewards):
            return  # sure and right: the converged note's case
        gain, se, rose, start = self.progress()
        zero = series(self.rows[-w:], "frac_reward_zero_std")
        repeat = statistics.fmean(zero) if zero else 0.0
        flat = gain + se < self.s.plateau_min_gain * self.scale.span
        if not rose and (repeat >= self.s.repeat_frac or flat):
            add("entropy_collapse", f"token entropy's median over the last {w} steps is {level:.3f} nats "
                f"(< {floor:.3f}), {repeat:.0%} of groups had identical rewards (samples repeat at >= "
                f"{self.s.repeat_frac:.0%}), and the mean reward moved {gain:+.3f} (+/- {se:.3f}) since the first "
                f"{start} steps", level, floor)
