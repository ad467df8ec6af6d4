"""The run directory: every file written atomically (files.py), so a crash never leaves a complete-looking run.

A run is finished when ``summary.json`` exists; it is written last. ``Run`` is the one reader of a run
directory: evaluation, the report, export, chat and the Python API open runs through it.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_fast.errors import UserError
from grpo_fast.files import installed_versions, read_json, read_jsonl, read_yaml
from grpo_fast.models import EMBEDDED, EMBEDDED_NAME, resolve_model_path

SUMMARY = "summary.json"
CONFIG = "config.yaml"
HELDOUT = "heldout.jsonl"
EVAL_FILE = "eval.json"
REPORT_FILE = "report.html"
ADAPTER = "adapter"
LIBRARIES = ("grpo_fast", "torch", "transformers", "trl", "peft", "accelerate", "datasets", "unsloth",
             "unsloth_zoo", "vllm", "bitsandbytes", "xformers", "math-verify")


def new_run_dir(base: str | None, recipe: str) -> Path:
    """A fresh folder ``runs/<recipe>-<time>``; refuses to reuse a finished run."""
    path = Path(base) if base else Path("runs") / f"{recipe}-{time.strftime('%Y%m%d-%H%M%S')}"
    if (path / SUMMARY).exists():
        raise UserError(f"{path} already holds a finished run", "config key 'run_dir'", "choose another run_dir")
    path.mkdir(parents=True, exist_ok=True)
    return path


def versions() -> dict[str, str]:
    """Python and the libraries a run depends on, as recorded in versions.json."""
    return {"python": platform.python_version(), **installed_versions(LIBRARIES)}


def is_main_process() -> bool:
    """Rank 0 writes the run directory; other ranks (torchrun/accelerate) only train."""
    return int(os.environ.get("RANK", "0")) == 0


# --------------------------------------------------------------------------- reading a run


@dataclass
class Run:
    """A run directory as its files say: config, versions, summary (when finished), evaluation, adapter.

    ``Run.open`` is the one check of a run directory; what it refuses, it refuses with a fix.
    """

    path: Path
    config: dict[str, Any]
    versions: dict[str, str] = field(default_factory=dict)
    summary: dict[str, Any] | None = None
    evaluation: dict[str, Any] | None = None

    @classmethod
    def open(cls, run_dir: str | Path, *, finished: bool = False, adapter: bool = False,
             lora: bool = False) -> Run:
        """Read a run; ``finished``: it must have ended (summary.json); ``adapter``: it must hold trained
        weights; ``lora``: they must be a LoRA adapter (export and chat load base + adapter)."""
        path = Path(run_dir).expanduser()
        if not (path / CONFIG).is_file():
            raise UserError(f"{path} is not a grpo_fast run directory (no {CONFIG})", str(path),
                            "pass a folder under runs/ written by `grpo-fast train`")
        summary = read_json(path / SUMMARY)
        if finished and summary is None:
            raise UserError(f"{path} is not a finished run (no {SUMMARY}: training was interrupted or still runs)",
                            str(path), f"wait for training to end, or continue it: grpo-fast train --resume {path}")
        weights = path / ADAPTER
        if lora and not (weights / "adapter_config.json").is_file():
            raise UserError(f"{path} has no LoRA adapter ({ADAPTER}/adapter_config.json is missing)", str(weights),
                            "only LoRA runs (lora: true, the default) can be exported or chatted with; train again")
        if adapter and not ((weights / "adapter_config.json").is_file() or (weights / "config.json").is_file()):
            raise UserError(f"{path} has no trained weights ({ADAPTER}/ is missing or empty)", str(weights),
                            "wait for the run to finish, or use a run that completed (summary.json present)")
        return cls(path, read_yaml(path / CONFIG), read_json(path / "versions.json") or {}, summary,
                   read_json(path / EVAL_FILE))

    @property
    def adapter(self) -> Path:
        return self.path / ADAPTER

    @property
    def report(self) -> Path:
        return self.path / REPORT_FILE

    @property
    def recipe(self) -> str:
        return str(self.config.get("recipe") or "demo")

    @property
    def base_model(self) -> str:
        return str(self.config.get("model") or "embedded")

    @property
    def finished(self) -> bool:
        return self.summary is not None

    def base_model_path(self) -> str:
        return resolve_model_path(self.base_model)

    def base_model_name(self) -> str:
        """The public name of the base model (the embedded model's hub id, not a cache path)."""
        return EMBEDDED_NAME if self.base_model in ("", EMBEDDED) else self.base_model

    def heldout_rows(self) -> list[dict]:
        """The held-out rows training set aside (mapped: chat prompt + gold columns)."""
        rows = read_jsonl(self.path / HELDOUT)
        if not rows:
            raise UserError(f"{self.path} has no held-out rows ({HELDOUT})", str(self.path / HELDOUT),
                            "the run was trained with eval_rows: 0 or by an older grpo_fast; train again to evaluate")
        return rows

    def describe(self) -> str:
        """What a user wants to read when the run ends: reward, held-out before -> after, where things are."""
        lines = []
        s = self.summary
        if s:
            top = f"  (max possible {s['reward_max']:g})" if s.get("reward_max") is not None else ""
            lines += [f"reward (mean of first 5 -> last 5 logged steps): {s['reward_first']:.3f} -> "
                      f"{s['reward_last']:.3f}{top}",
                      f"{s['steps']} steps in {s['wall_s']:.0f} s ({s['s_per_step']:.1f} s/step, backend "
                      f"{s['backend']})"]
        else:
            lines.append("unfinished: no summary.json (training was interrupted or still runs)")
        if self.evaluation:
            rows = {r["metric"]: r for r in self.evaluation.get("comparison", [])}
            shown = [f"{m} {rows[m]['base']:.2f} -> {rows[m]['trained']:.2f}" for m in
                     ("accuracy", "format", f"pass@{self.evaluation.get('settings', {}).get('k', 4)}") if m in rows]
            lines.append(f"held-out ({self.evaluation['trained']['rows']} rows, base -> trained): " + ", ".join(shown))
        files = [f for f in ("config.yaml", "metrics.jsonl", "samples.jsonl", "reward_curve.png", ADAPTER + "/",
                             REPORT_FILE) if (self.path / f.rstrip("/")).exists()]
        lines.append(f"artifacts: {self.path}/ ({', '.join(files)})")
        lines += [f"{name} logs: {command}" for name, command in (s or {}).get("trackers", {}).items()]
        return "\n".join(lines)

    def __repr__(self) -> str:
        state = "finished" if self.finished else "unfinished"
        return f"Run({str(self.path)!r}, recipe={self.recipe!r}, {state})"


def load(run_dir: str | Path | Run) -> Run:
    """A run directory as a ``Run`` (finished or not): ``grpo_fast.load("runs/demo-...")``."""
    return run_dir if isinstance(run_dir, Run) else Run.open(run_dir)


def path_of(run: str | Path | Run) -> Path:
    """The folder of a run given as a path or a ``Run``."""
    return run.path if isinstance(run, Run) else Path(run).expanduser()
