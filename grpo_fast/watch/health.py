"""Training health: spot a GRPO run that has stopped learning, early, say what to change, and stay quiet on one
that learns.

GRPO fails quietly: when every completion in a group gets the same reward there is no advantage and the
loss is ~0, yet the run goes on for hours. ``HealthMonitor`` feeds TRL's logged metrics, step by step, to the
rules in ``grpo_fast.watch.alarms`` and raises an event for each failure pattern, with its remedy. Each warning is
printed once per episode of trouble (the steps over which its rule keeps holding, with gaps shorter than
``window``), appended to ``health.jsonl`` in the run directory when the episode starts and, with
``on_alarm="stop"``, ends the run cleanly with a checkpoint; when an episode ends its count and last step are
printed and kept in ``summary()``. Informational notes (converged) never stop a run.

``grpo_fast.health(run)`` (the ``grpo-fast health`` command) replays a run's logged metrics through the same
monitor after the fact: a kit run directory, a corpus trace, or any TRL run's ``trainer_state.json``.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from tqdm.auto import tqdm
from transformers import TrainerCallback  # noqa: TID253  # subclassed here: this module loads after Unsloth

from grpo_fast import files, rundir
from grpo_fast.config import HealthSettings, RewardSpec
from grpo_fast.entry import make_callable
from grpo_fast.errors import UserError
from grpo_fast.recipes import get_recipe
from grpo_fast.rewards.registry import resolve_rewards
from grpo_fast.watch.alarms import Rules
from grpo_fast.watch.remedies import NOTES, REMEDIES
from grpo_fast.watch.signals import HealthEvent, RewardScale

HEALTH_FILE = "health.jsonl"
ON_ALARM = ("warn", "stop")
__all__ = ["HEALTH_FILE", "HealthEvent", "HealthMonitor", "Replay", "health", "read_events"]


def _finite(value: Any) -> float | None:
    """A logged number, or None when absent/not a number (NaN stays NaN: the rules decide)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _settings(settings: HealthSettings | dict | None, thresholds: dict[str, Any]) -> HealthSettings:
    base = settings.model_dump() if isinstance(settings, HealthSettings) else dict(settings or {})
    try:
        return HealthSettings(**{**base, **thresholds})
    except ValidationError as err:
        raise UserError(f"bad health threshold: {err.errors()[0]['msg']}", "health",
                        f"known thresholds: {', '.join(HealthSettings.model_fields)}") from None


class HealthMonitor(TrainerCallback):
    """Watches TRL's GRPO metrics in ``on_log``; warns, records and optionally stops the run.

    The thresholds, their defaults and what each one catches are declared once, in ``config.HealthSettings``
    (the config's ``health:`` section; docs/health.md explains them). ``on_alarm="stop"`` stops training with
    a checkpoint on any warning kind in ``stop_on`` (default: all). A warning kind fires once per
    episode: the rule holding again within ``window`` logged steps of its last hold counts in the same event
    (``count``, ``last_step``); a note once per run.
    """

    def __init__(self, run_dir: str | Path | None = None, settings: HealthSettings | None = None, *,
                 on_alarm: str = "warn", scale: RewardScale | None = None, echo: bool = True, **thresholds: Any):
        """``settings`` (or single ``thresholds`` such as ``window=3``) override HealthSettings' defaults;
        ``scale``: the reward's range and its format/correctness rewards (``RewardScale.of(reward_set)``)."""
        if on_alarm not in ON_ALARM:
            raise UserError(f"unknown on_alarm {on_alarm!r}", "config key 'on_alarm'", "use warn or stop")
        self.settings = _settings(settings, thresholds)
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.on_alarm = on_alarm
        self.stop_on = set(self.settings.stop_on) if self.settings.stop_on is not None else set(REMEDIES) - NOTES
        self.rules = Rules(self.settings, scale or RewardScale())
        self.echo = echo
        self.last_fired: dict[str, int] = {}
        self.open: dict[str, HealthEvent] = {}  # each warning kind's episode under way
        self.events: list[HealthEvent] = []
        self.stopped_by: HealthEvent | None = None
        self._main = True

    @classmethod
    def for_run(cls, run_dir: str | Path | None, settings: Any, rewards: Any, on_alarm: str = "warn") -> HealthMonitor:
        """A monitor with the config's ``health:`` thresholds, wired to the run's reward set (its range, its
        format and correctness rewards)."""
        return cls(run_dir, settings, on_alarm=on_alarm, scale=RewardScale.of(rewards))

    @property
    def scale(self) -> RewardScale:
        return self.rules.scale

    @property
    def warnings(self) -> list[HealthEvent]:
        return [e for e in self.events if not e.is_note]

    # ----------------------------------------------------------------- callback

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "reward" not in logs:
            return  # the end-of-training summary and eval logs carry no reward
        self._main = state.is_world_process_zero  # every rank decides to stop alike; only rank 0 writes
        self.observe(state.global_step, logs, control)
        return control

    def observe(self, step: int, logs: dict[str, Any], control: Any = None) -> list[HealthEvent]:
        """One logged step: its rows into the rules, new events out (and into ``control`` when stopping)."""
        self.rules.add({key: _finite(value) for key, value in logs.items()})
        new = [e for e in self.rules.check(step) if self._emit(e, control)]
        logged = len(self.rules.rows)
        for kind in [k for k, e in self.open.items() if logged - self.last_fired[k] >= self.settings.window]:
            self._close(kind)
        return new

    def on_train_end(self, args, state, control, **kwargs):
        for kind in list(self.open):
            self._close(kind)

    def _close(self, kind: str) -> None:
        event = self.open.pop(kind)
        if event.count > 1 and self.echo and self._main:
            _print(event.closing())

    # ----------------------------------------------------------------- reporting

    def _emit(self, event: HealthEvent, control: Any) -> bool:
        logged, last = len(self.rules.rows), self.last_fired.get(event.kind)
        if event.is_note and last is not None:
            return False  # one note per run
        self.last_fired[event.kind] = logged
        if event.kind in self.open:  # the same episode of trouble: counted, not printed again
            self.open[event.kind].count += 1
            self.open[event.kind].last_step = event.step
            return False
        event.last_step = event.step
        if not event.is_note:
            self.open[event.kind] = event
        if event.is_note:
            event.action = "note"
        elif self.on_alarm == "stop" and event.kind in self.stop_on:
            event.action = "stop"
            if control is not None:
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
            files.append_jsonl(self.run_dir / HEALTH_FILE, asdict(event))
        return True

    def summary(self) -> dict[str, Any]:
        """For summary.json: episodes per kind (notes included), each episode's first and last step and count,
        and the event that stopped the run, if any."""
        counts: dict[str, int] = {}
        for event in self.events:
            counts[event.kind] = counts.get(event.kind, 0) + 1
        episodes = [{"kind": e.kind, "step": e.step, "last_step": e.last_step, "count": e.count} for e in self.events]
        return {"events": counts, "episodes": episodes,
                "stopped_by": asdict(self.stopped_by) if self.stopped_by else None}


def _print(text: str) -> None:
    """Print above a tqdm progress bar without breaking it."""
    tqdm.write(text, file=sys.stderr)


def read_events(run_dir: str | Path) -> list[dict]:
    """The health events of a run directory (empty when none were raised)."""
    return files.read_jsonl(Path(run_dir) / HEALTH_FILE)


# --------------------------------------------------------------------------- replay


@dataclass
class Replay:
    """A run's logged metrics re-evaluated by the current monitor: its events and where the numbers came from."""

    source: Path
    steps: int
    scale: RewardScale
    events: list[HealthEvent] = field(default_factory=list)
    stopped_by: HealthEvent | None = None

    @property
    def warnings(self) -> list[HealthEvent]:
        return [e for e in self.events if not e.is_note]

    def first_step(self, kinds: set[str] | list[str]) -> int | None:
        """The step at which any of ``kinds`` first fired, or None."""
        return next((e.step for e in self.events if e.kind in kinds), None)

    def text(self) -> str:
        lines = [e.text(replayed=True) for e in self.events]
        reward = (f"reward range {self.scale.low:g}..{self.scale.high:g}" if self.scale.high is not None
                  else "reward range unknown" + (f" ({self.scale.unknown})" if self.scale.unknown else ""))
        verdict = (f"{len(self.warnings)} warning(s)" if self.warnings else "no warning") + \
            (f", {len(self.events) - len(self.warnings)} note(s)" if len(self.events) > len(self.warnings) else "")
        stop = f"; on_alarm: stop would stop it at step {self.stopped_by.step}" if self.stopped_by else ""
        return "\n".join([*lines, f"{self.source}: {self.steps} logged steps, {reward}: {verdict}{stop}"])


def health(run: str | Path, *, settings: HealthSettings | dict | None = None, on_alarm: str = "warn",
           echo: bool = False, **thresholds: Any) -> Replay:
    """Replay a run's logged metrics through the current health monitor and return its events.

    ``run``: a run directory (``metrics.jsonl``; its ``config.yaml`` or ``run.yaml`` gives the rewards' range
    and the ``health:`` thresholds), a ``metrics.jsonl`` file, or a TRL ``trainer_state.json`` (or the output
    folder holding it or its checkpoints). ``on_alarm="stop"`` says where that setting would have stopped it.
    """
    source, rows, config = _read_trace(Path(run).expanduser())
    if settings is None and isinstance(config.get("health"), dict):
        settings = config["health"]
    monitor = HealthMonitor(None, _settings(settings, {}), on_alarm=on_alarm, scale=_scale(config, source),
                            echo=echo, **thresholds)
    steps = 0
    for i, row in enumerate(rows, start=1):
        step = int(row.get("step") or i)
        monitor.observe(step, row)
        steps += 1
        if monitor.stopped_by is not None:
            break
    return Replay(source, steps, monitor.scale, monitor.events, monitor.stopped_by)


def _read_trace(path: Path) -> tuple[Path, list[dict], dict]:
    """(the file read, its GRPO rows, the run's config when next to it)."""
    if not path.exists():
        raise UserError(f"{path} does not exist", str(path),
                        "pass a run directory, a metrics.jsonl or a TRL trainer_state.json")
    folder = path if path.is_dir() else path.parent
    if path.is_dir():
        candidates = [path / "metrics.jsonl", path / "trainer_state.json",
                      *sorted(path.glob("checkpoint-*/trainer_state.json"), key=lambda p: _number(p.parent.name)),
                      *sorted(path.glob("checkpoints/checkpoint-*/trainer_state.json"),
                              key=lambda p: _number(p.parent.name))]
        found = [p for p in candidates if p.is_file()]
        if not found:
            raise UserError(f"{path} holds no logged metrics (no metrics.jsonl or trainer_state.json)", str(path),
                            "pass a run directory written by `grpo-fast train` (or a TRL output folder)")
        path = found[0] if found[0].name == "metrics.jsonl" else found[-1]
    fix = "pass metrics.jsonl (one JSON object per line) or trainer_state.json (with log_history)"
    try:
        if path.suffix == ".jsonl":
            entries = files.read_jsonl(path)  # a line torn by a crash is skipped
            if not entries and path.read_text().strip():
                raise UserError(f"{path} is not a metrics log (no line is a JSON object)", str(path), fix)
        else:
            entries = json.loads(path.read_text()).get("log_history", [])
    except (json.JSONDecodeError, AttributeError, UnicodeDecodeError) as err:
        raise UserError(f"{path} is not a metrics log ({err})", str(path), fix) from None
    rows = [e for e in entries if isinstance(e, dict) and "reward" in e]
    if not rows:
        raise UserError(f"{path} has no logged GRPO step (no entry with a 'reward' key)", str(path),
                        "replay a GRPO run that logged at least one step (logging_steps >= 1)")
    return path, rows, _config(folder)


def _number(name: str) -> int:
    tail = name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else -1


def _config(folder: Path) -> dict:
    """The run's config (config.yaml from the kit, run.yaml in the corpus), looked for here and one level up."""
    for place in (folder, folder.parent):
        for name in (rundir.CONFIG, "run.yaml"):
            if (place / name).is_file():
                try:
                    data = files.read_yaml(place / name)
                except Exception as err:  # a config that does not parse: replay without the reward range, said
                    return {"_unknown": f"{place / name} does not parse: {type(err).__name__}"}
                if not isinstance(data, dict):
                    return {"_unknown": f"{place / name} is not a mapping"}
                return {**data, "_base": str(place)}
    return {}


def _scale(config: dict, source: Path) -> RewardScale:
    """The reward's range from the run's config, when its rewards can be built here; else unknown."""
    if not config:
        return RewardScale(unknown="no config.yaml or run.yaml beside the metrics")
    if "_unknown" in config:
        return RewardScale(unknown=config["_unknown"])

    try:
        recipe = get_recipe(str(config.get("recipe", "demo")))
        spec = config.get("rewards")
        if isinstance(spec, list):
            base = Path(config["_base"])
            items = [{"name": r} if isinstance(r, str) else dict(r) for r in spec]
            for item in items:
                ref, _, fn = str(item.get("name") or "").partition(".py:")
                if fn and not Path(ref).is_absolute():
                    item["name"] = f"{base / ref}.py:{fn}"
            spec = [RewardSpec(**item) for item in items]
        weights = config.get("reward_weights")
        return RewardScale.of(resolve_rewards(spec, recipe.rewards, list(weights) if weights else None))
    except Exception as err:  # a reward this machine cannot import (moved file, missing package): range unknown
        first = (str(err).strip().splitlines() or [""])[0].removeprefix("error: ")
        return RewardScale(unknown=f"the run's rewards cannot be built here: {first}"[:300])


make_callable(__name__, health)
