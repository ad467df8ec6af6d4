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
from collections.abc import Callable, Sequence

from grpo_fast.config import HealthSettings
from grpo_fast.watch.remedies import REMEDIES
from grpo_fast.watch.signals import HealthEvent, RewardScale, Row, finite, series, shift, value

Add = Callable[[str, str, "float | None", "float | None"], None]
"""How a rule raises an event: ``add(kind, message, value, threshold)``."""

class Rules:
    """Every rule, evaluated on the rows logged so far (a TRL ``log_history`` entry per step)."""

    def __init__(self, settings: HealthSettings, scale: RewardScale):
        self.s = settings
        self.scale = scale
        self.rows: list[Row] = []

    def add(self, row: Row) -> None:
        self.rows.append(row)
        self.scale = self.scale.observed(row)  # a reward without a declared range: its span, as observed

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
                     self.plateau, self.hacking, self.judge_outran, self.judge_addressed, self.entropy,
                     self.no_correct):
            rule(add)
        return found

    # ----------------------------------------------------------------- single-step and sustained rules

    def nonfinite(self, add: Add) -> None:
        last = self.rows[-1]
        bad = [k for k in ("loss", "grad_norm") if last.get(k) is not None and not math.isfinite(last[k])]
        if bad:
            add("nonfinite", f"{' and '.join(bad)} is {last[bad[0]]}", last[bad[0]], None)

    def reward_errors(self, add: Add) -> None:
        rows = self.rows[-self.s.window:]
        rates = {key.split("/")[1]: statistics.fmean(v) for key in self.rows[-1]
                 if key.startswith("rewards/") and key.endswith("/failure_rate") and (v := series(rows, key))}
        if rates:
            name, rate = max(rates.items(), key=lambda item: item[1])
            if rate > self.s.max_reward_errors:
                add("reward_errors", f"reward '{name}' failed on {rate:.0%} of completions over the last "
                    f"{len(rows)} steps (> {self.s.max_reward_errors:.0%})", rate, self.s.max_reward_errors)

    def kl(self, add: Add) -> None:
        kl = value(self.rows[-1], "kl")
        if kl is not None and kl > self.s.max_kl:
            add("kl_high", f"kl is {kl:.3f} (> {self.s.max_kl:g})", kl, self.s.max_kl)

    def clipped(self, add: Add) -> None:
        w = self.s.window
        clipped = series(self.rows[-w:], "completions/clipped_ratio") if len(self.rows) >= w else []
        if clipped and statistics.fmean(clipped) > self.s.max_clipped_ratio:
            share = statistics.fmean(clipped)
            add("clipped", f"{share:.0%} of completions were cut at max_completion_length over the last {w} steps "
                f"(> {self.s.max_clipped_ratio:.0%})", share, self.s.max_clipped_ratio)

    def thinking(self, add: Add) -> None:
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

    def spread(self, add: Add) -> None:
        """Groups without spread are an alarm when the reward also sits at its floor, is the same in every group,
        or has not risen since the run began; at the ceiling they mean the task is learned (a ``converged``
        note), and so does a reward that rose and is now the same everywhere when no maximum is declared."""
        n = self.s.spread_window
        rows = self.rows[-n:]
        rewards = series(rows, "reward")
        if len(self.rows) < n or not rewards:
            return
        scale = self.scale
        span = scale.span
        level = statistics.fmean(rewards)
        between = statistics.pstdev(rewards)
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
        zero = series(rows, "frac_reward_zero_std")
        stds = series(rows, "reward_std")
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

    def no_signal(self, add: Add) -> bool:
        """The reward sat at its declared maximum with (almost) no group spread from the run's first
        ``spread_window`` steps and still does: nothing was ever learnable (a task too easy, a judge that says yes
        to everything), not a run that learned (that one started below the maximum: the converged note)."""
        n = self.s.spread_window
        first = self.rows[:n]
        last = self.rows[-n:]
        if self.scale.high is None or len(self.rows) < n:
            return False
        for rows in (first, last):
            rewards, zero = series(rows, "reward"), series(rows, "frac_reward_zero_std")
            if not rewards or not zero or not self.at_ceiling(rewards) \
                    or statistics.fmean(zero) < self.s.max_zero_std_frac:
                return False
        level = statistics.fmean(series(last, "reward"))
        share = statistics.fmean(series(last, "frac_reward_zero_std"))
        add("no_signal", f"the mean reward {level:.3f} has sat at its maximum {self.scale.high:g} with "
            f"{share:.0%} of groups without spread since the first {n} steps", share, self.s.max_zero_std_frac)
        return True

    # ----------------------------------------------------------------- trends against the run's own start

    def plateau(self, add: Add) -> None:
        """The reward has not risen since the run began, surely (its gain plus one standard error is below the
        plateau gain), and it is not near the maximum."""
        t = self.s.trend_window
        half = t // 2
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

    def hacking(self, add: Add) -> None:
        """A non-judge reward rose from the run's first ``window`` steps to its last ``trend_window / 2`` (beyond one
        standard error) while the judge did not rise at all (its gain below ``hacking_max_gain`` of its span) and
        sits at its floor (where its range is declared). A format learned first, with correctness rising more
        slowly or already above its floor, is the demo's healthy course."""
        ok = self.scale.correctness_reward
        t = self.s.trend_window
        half = t // 2
        if not ok or len(self.rows) < t:
            return
        right = self.component(ok)
        if len(right) < t:
            return
        c_span = self.scale.span_of(ok)
        floor = self.scale.low_of(ok)
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

    # ----------------------------------------------------------------- judged rewards talked up

    def judges(self) -> list[str]:
        """The run's judged rewards (LLM judges, reward models): from its reward set, else from what they log."""
        logged = {k.split("/")[1] for row in self.rows[-1:] for k in row
                  if k.startswith("judge/") and k.endswith("/addressed")}
        return sorted(set(self.scale.judges) | logged)

    def judge_outran(self, add: Add) -> None:
        """A judged reward rose from the run's first ``window`` steps to its last ``trend_window / 2`` (beyond one
        standard error, by ``hacking_min_rise`` of its span) while the run's independent check, its correctness
        reward (string overlap, a verifier), did not rise at all: the policy learnt what pleases the judge, not
        what the task asks. Where the judge is the correctness reward itself there is no independent check."""
        ok = self.scale.correctness_reward
        t = self.s.trend_window
        half = t // 2
        if not ok or ok in self.judges() or len(self.rows) < t:
            return
        check = self.component(ok)
        if len(check) < t:
            return
        w = min(self.s.window, half)
        gain, gain_se = shift(check[:w], check[-half:])
        if gain >= self.s.hacking_max_gain * self.scale.span_of(ok):
            return
        for name in self.judges():
            values = self.component(name)
            if len(values) < t:
                continue
            rise, rise_se = shift(values[:w], values[-half:])
            if rise - rise_se >= self.s.hacking_min_rise * self.scale.span_of(name):
                add("judge_hacking", f"the judged reward '{name}' rose {rise:+.3f} (+/- {rise_se:.3f}) while the "
                    f"independent check '{ok}' moved {gain:+.3f} (+/- {gain_se:.3f}), from the first {w} steps to "
                    f"the last {half}", rise, self.s.hacking_min_rise * self.scale.span_of(name))
                return

    def judge_addressed(self, add: Add) -> None:
        """Over the last ``window`` steps more than ``max_judge_addressed`` of the completions address the judge (a
        ``Score:`` line, "ignore previous instructions", "dear judge": ``judge/<name>/addressed``) and the judge
        scores them above its floor and no lower than the rest (``judge/<name>/addressed_score``): it is being
        talked up. With the judge's screen on they score 0 and this stays quiet."""
        w = self.s.window
        if len(self.rows) < w:
            return
        rows = self.rows[-w:]
        for name in self.judges():
            shares = series(rows, f"judge/{name}/addressed")
            theirs = finite(rows, f"judge/{name}/addressed_score")
            overall = finite(rows, f"rewards/{name}/mean")
            if not shares or not theirs or not overall:
                continue
            share, score, mean = statistics.fmean(shares), statistics.fmean(theirs), statistics.fmean(overall)
            floor = self.scale.low_of(name)
            if share > self.s.max_judge_addressed and score >= mean and score > (floor or 0.0):
                add("judge_hacking", f"{share:.0%} of completions over the last {w} steps address the judge "
                    f"'{name}' (> {self.s.max_judge_addressed:.0%}) and it scores them {score:.3f}, no lower than "
                    f"its mean {mean:.3f}", share, self.s.max_judge_addressed)
                return

    def entropy(self, add: Add) -> None:
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

    # ----------------------------------------------------------------- the judge at its floor from the start

    def no_correct(self, add: Add) -> None:
        """At the run's ``window``-th logged step: the judge's per-step mean sat at its declared floor in every one
        of them (every completion of every group scored the floor), so GRPO has no right answer to reinforce. The
        other rewards (format, length, style) still give the groups a spread, so the spread rules stay quiet while
        the run trains for nothing its judge measures; this rule names it once, at the start. A judge without a
        declared range, or one that scored anything, is left alone."""
        name = self.scale.correctness_reward
        n = self.s.window
        if not name or len(self.rows) != n:
            return
        means = self.component(name)
        floor = self.scale.low_of(name)
        if floor is None or len(means) < n or max(means) > floor + 1e-9:
            return
        message = (f"the judge '{name}' gave every completion of the first {n} steps its floor {floor:g}: no group "
                   "held a right answer, so GRPO cannot reinforce correctness (the other rewards can still move)")
        add("no_correct", message, max(means), floor)
