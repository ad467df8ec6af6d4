"""Training health monitor: spot a GRPO run that has stopped learning, early, and say what to change.

GRPO fails quietly: when every completion in a group gets the same reward there is no advantage and the
loss is ~0, yet the run goes on for hours. ``HealthMonitor`` reads TRL's logged metrics each step and
raises an event for each known failure pattern, with its remedy. Each event is printed once per window,
appended to ``health.jsonl`` in the run directory and, with ``on_alarm="stop"``, ends the run cleanly
with a checkpoint. See docs/health.md for what each alarm means.
"""

from __future__ import annotations

import math
import sys
import time
from collections import deque
from collections.abc import Collection
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from transformers import TrainerCallback

from grpo_fast import rundir
from grpo_fast.config import HealthSettings

HEALTH_FILE = "health.jsonl"
ON_ALARM = ("warn", "stop")

# Remedies, from the troubleshooting table in docs/health.md.
REMEDIES: dict[str, str] = {
    "low_reward_std": "groups get (almost) the same reward, so there is nothing to learn from: raise "
                      "num_generations, raise temperature, or use a task/reward with partial credit "
                      "(too hard: every answer 0; too easy: every answer max)",
    "zero_std_groups": "most groups have identical rewards: raise num_generations, give partial credit, or filter "
                       "prompts the model always (or never) solves",
    "kl_high": "the policy drifted far from the reference: lower learning_rate, raise beta, or clip harder "
               "(epsilon)",
    "plateau": "reward stopped improving: if it is near the maximum the run is done; otherwise lower "
               "learning_rate, raise num_generations, or check the reward logic with `grpo-fast rewards check`",
    "nonfinite": "loss or gradient is NaN/inf: lower learning_rate, set max_grad_norm (e.g. 1.0), use bf16 "
                 "instead of fp16, and check rewards for NaN/inf",
    "reward_hacking": "the format reward rises while correctness stays flat: the model games the format. "
                      "Lower the format reward's weight (or gate it on correctness) and check the correctness "
                      "reward logic on real samples",
    "clipped": "many completions hit max_completion_length and are cut off: raise max_completion_length, "
               "ask for shorter answers in the prompt, or add a length penalty",
    "entropy_collapse": "token entropy collapsed: the model answers the same way every time. Lower learning_rate, "
                        "raise temperature, or stop here (check samples.jsonl for repeated text)",
}


@dataclass
class HealthEvent:
    """One alarm: what was seen, at which step, the measured value against its threshold, and what to do."""

    step: int
    kind: str
    message: str
    remedy: str
    value: float | None
    threshold: float | None
    action: str = "warn"
    time: float = 0.0

    def text(self) -> str:
        stop = "  -> stopping the run (checkpoint saved)" if self.action == "stop" else ""
        return f"HEALTH [{self.kind}] step {self.step}: {self.message}{stop}\n  remedy: {self.remedy}"


def _finite(value: Any) -> float | None:
    """A logged number, or None when absent/not a number (NaN stays NaN: the caller decides)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _mean(values: Collection[float]) -> float:
    return sum(values) / len(values)


class HealthMonitor(TrainerCallback):
    """Watches TRL's GRPO metrics in ``on_log``; warns, records and optionally stops the run.

    The thresholds, their defaults and what each one catches are declared once, in ``config.HealthSettings``
    (the config's ``health:`` section; docs/health.md explains them). Sustained checks look at the last
    ``window`` logged steps, trend checks at the last ``trend_window``. ``on_alarm="stop"`` stops training with
    a checkpoint on any kind in ``stop_on`` (default: all kinds). A kind fires at most once per ``window``
    logged steps (``nonfinite``: once per step it happens).
    """

    def __init__(self, run_dir: str | Path | None = None, settings: HealthSettings | None = None, *,
                 on_alarm: str = "warn", format_reward: str | None = None, correctness_reward: str | None = None,
                 reward_max: float | None = None, echo: bool = True, **thresholds: Any):
        """``settings`` (or single ``thresholds`` such as ``window=3``) override HealthSettings' defaults."""
        from grpo_fast.errors import UserError

        if on_alarm not in ON_ALARM:
            raise UserError(f"unknown on_alarm {on_alarm!r}", "config key 'on_alarm'", "use warn or stop")
        try:
            settings = HealthSettings(**{**(settings or HealthSettings()).model_dump(), **thresholds})
        except ValidationError as err:
            raise UserError(f"bad health threshold: {err.errors()[0]['msg']}", "health",
                            f"known thresholds: {', '.join(HealthSettings.model_fields)}") from None
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.on_alarm = on_alarm
        self.settings = settings
        self.stop_on = set(settings.stop_on) if settings.stop_on is not None else set(REMEDIES)
        self.format_reward, self.correctness_reward, self.reward_max = format_reward, correctness_reward, reward_max
        self.window, self.trend_window = settings.window, settings.trend_window
        self.min_reward_std, self.max_zero_std_frac, self.max_kl = (settings.min_reward_std,
                                                                   settings.max_zero_std_frac, settings.max_kl)
        self.plateau_min_gain = settings.plateau_min_gain
        self.hacking_min_rise, self.hacking_max_gain = settings.hacking_min_rise, settings.hacking_max_gain
        self.max_clipped_ratio, self.min_entropy, self.entropy_drop = (settings.max_clipped_ratio,
                                                                       settings.min_entropy, settings.entropy_drop)
        self.echo = echo
        self.history: deque[dict[str, float | None]] = deque(maxlen=max(self.window, self.trend_window))
        self.first_entropy: list[float] = []
        self.logged = 0
        self.last_fired: dict[str, int] = {}
        self.events: list[HealthEvent] = []
        self.stopped_by: HealthEvent | None = None
        self._main = True

    @classmethod
    def for_run(cls, run_dir: str | Path | None, settings: Any, rewards: Any, on_alarm: str = "warn") -> HealthMonitor:
        """A monitor with the config's ``health:`` thresholds, wired to the run's reward set (its format and
        correctness rewards for the hacking check, its maximum total for the plateau check)."""
        return cls(run_dir, settings, on_alarm=on_alarm, format_reward=rewards.format,
                   correctness_reward=rewards.correctness, reward_max=rewards.max_total)

    # ----------------------------------------------------------------- callback

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "reward" not in logs:
            return  # the end-of-training summary and eval logs carry no reward
        self._main = state.is_world_process_zero  # every rank decides to stop alike; only rank 0 writes
        self.logged += 1
        row = {key: _finite(value) for key, value in logs.items()}
        self.history.append(row)
        entropy = row.get("entropy")
        if entropy is not None and math.isfinite(entropy) and len(self.first_entropy) < self.window:
            self.first_entropy.append(entropy)
        for event in self.check(state.global_step):
            self._emit(event, control)
        return control

    # ----------------------------------------------------------------- checks

    def _series(self, key: str, n: int) -> list[float]:
        """The last ``n`` finite values of a metric, or [] when fewer than ``n`` steps logged it."""
        rows = list(self.history)[-n:]
        values = [r.get(key) for r in rows]
        if len(rows) < n or any(v is None or not math.isfinite(v) for v in values):
            return []
        return values  # type: ignore[return-value]

    def _gain(self, key: str) -> float | None:
        """Mean of the last half minus mean of the first half of ``trend_window`` steps."""
        values = self._series(key, self.trend_window)
        if not values:
            return None
        half = len(values) // 2
        return _mean(values[half:]) - _mean(values[:half])

    def check(self, step: int) -> list[HealthEvent]:
        """Every alarm the current history raises (before dedupe)."""
        found: list[HealthEvent] = []

        def add(kind: str, message: str, value: float | None, threshold: float | None) -> None:
            found.append(HealthEvent(step, kind, message, REMEDIES[kind], value, threshold))

        last = self.history[-1]
        bad = [k for k in ("loss", "grad_norm") if last.get(k) is not None and not math.isfinite(last[k])]
        if bad:
            add("nonfinite", f"{' and '.join(bad)} is {last[bad[0]]}", last[bad[0]], None)

        w = self.window
        stds = self._series("reward_std", w)
        if stds and _mean(stds) < self.min_reward_std:
            add("low_reward_std", f"reward_std averaged {_mean(stds):.3f} over the last {w} steps "
                f"(< {self.min_reward_std:g}): rewards barely differ within groups", _mean(stds), self.min_reward_std)
        zero = self._series("frac_reward_zero_std", w)
        if zero and _mean(zero) > self.max_zero_std_frac:
            add("zero_std_groups", f"{_mean(zero):.0%} of groups had identical rewards over the last {w} steps "
                f"(> {self.max_zero_std_frac:.0%})", _mean(zero), self.max_zero_std_frac)

        kl = last.get("kl")
        if kl is not None and math.isfinite(kl) and kl > self.max_kl:
            add("kl_high", f"kl is {kl:.3f} (> {self.max_kl:g})", kl, self.max_kl)

        gain = self._gain("reward")
        if gain is not None and gain < self.plateau_min_gain:
            current = _mean(self._series("reward", self.trend_window)[self.trend_window // 2:])
            if self.reward_max is None or current < 0.95 * self.reward_max:
                add("plateau", f"mean reward {current:.3f} gained {gain:+.3f} over the last {self.trend_window} "
                    f"steps (< {self.plateau_min_gain:g})", gain, self.plateau_min_gain)

        if self.format_reward and self.correctness_reward:
            rise = self._gain(f"rewards/{self.format_reward}/mean")
            correct = self._gain(f"rewards/{self.correctness_reward}/mean")
            if rise is not None and correct is not None and rise >= self.hacking_min_rise \
                    and correct < self.hacking_max_gain:
                add("reward_hacking", f"'{self.format_reward}' rose {rise:+.3f} while '{self.correctness_reward}' "
                    f"moved {correct:+.3f} over the last {self.trend_window} steps", rise, self.hacking_min_rise)

        clipped = self._series("completions/clipped_ratio", w)
        if clipped and _mean(clipped) > self.max_clipped_ratio:
            add("clipped", f"{_mean(clipped):.0%} of completions were cut at max_completion_length over the last "
                f"{w} steps (> {self.max_clipped_ratio:.0%})", _mean(clipped), self.max_clipped_ratio)

        entropy = self._series("entropy", w)
        if entropy:
            floor = self.min_entropy
            if len(self.first_entropy) >= w and self.logged > 2 * w:
                floor = max(floor, self.entropy_drop * _mean(self.first_entropy))
            if _mean(entropy) < floor:
                add("entropy_collapse", f"token entropy averaged {_mean(entropy):.3f} nats over the last {w} steps "
                    f"(< {floor:.3f})", _mean(entropy), floor)
        return found

    # ----------------------------------------------------------------- reporting

    def _emit(self, event: HealthEvent, control: Any) -> None:
        last = self.last_fired.get(event.kind)
        if event.kind != "nonfinite" and last is not None and self.logged - last < self.window:
            return  # one warning per kind per window
        self.last_fired[event.kind] = self.logged
        if self.on_alarm == "stop" and event.kind in self.stop_on:
            event.action = "stop"
            control.should_training_stop = True
            control.should_save = True  # the Trainer saves a checkpoint right after on_log
            if self.stopped_by is None:
                self.stopped_by = event
        event.time = time.time()
        self.events.append(event)
        if self.echo and self._main:
            _print(event.text())
        if self.run_dir is not None and self._main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            rundir.append_jsonl(self.run_dir / HEALTH_FILE, asdict(event))

    def summary(self) -> dict[str, Any]:
        """For summary.json: counts per kind and the event that stopped the run, if any."""
        counts: dict[str, int] = {}
        for event in self.events:
            counts[event.kind] = counts.get(event.kind, 0) + 1
        return {"events": counts, "stopped_by": asdict(self.stopped_by) if self.stopped_by else None}


def _print(text: str) -> None:
    """Print above a tqdm progress bar without breaking it."""
    try:
        from tqdm.auto import tqdm

        tqdm.write(text, file=sys.stderr)
    except ImportError:  # pragma: no cover
        print(text, file=sys.stderr, flush=True)


def read_events(run_dir: str | Path) -> list[dict]:
    """The health events of a run directory (empty when none were raised)."""
    return rundir.read_jsonl(Path(run_dir) / HEALTH_FILE)
