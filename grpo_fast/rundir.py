"""The run directory: every file written atomically, so a crash never leaves a complete-looking run.

A run is finished when ``summary.json`` exists; it is written last.
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from grpo_fast.errors import UserError

SUMMARY = "summary.json"
LIBRARIES = ("grpo_fast", "torch", "transformers", "trl", "peft", "accelerate", "datasets", "unsloth",
             "unsloth_zoo", "vllm", "bitsandbytes", "xformers", "math-verify")


def new_run_dir(base: str | None, recipe: str) -> Path:
    """A fresh folder ``runs/<recipe>-<time>``; refuses to reuse a finished run."""
    path = Path(base) if base else Path("runs") / f"{recipe}-{time.strftime('%Y%m%d-%H%M%S')}"
    if (path / SUMMARY).exists():
        raise UserError(f"{path} already holds a finished run", "config key 'run_dir'", "choose another run_dir")
    path.mkdir(parents=True, exist_ok=True)
    return path


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write to a temporary file beside ``path`` and rename it into place (mode 0644, as a plain write)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, data: Any) -> None:
    atomic_write(path, json.dumps(data, indent=2, default=str) + "\n")


def write_yaml(path: Path, data: Any) -> None:
    atomic_write(path, yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


def read_yaml(path: Path) -> dict:
    return yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}


def append_jsonl(path: Path, record: dict) -> None:
    """One complete line per call; a reader skips a torn last line (see ``read_jsonl``)."""
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(record, default=str) + "\n")
        handle.flush()


def read_jsonl(path: Path) -> list[dict]:
    rows = []
    if not path.exists():
        return rows
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line torn by a crash
    return rows


def installed_versions(names: list[str] | tuple[str, ...]) -> dict[str, str]:
    """Installed versions of ``names``; packages that are not installed are left out."""
    found = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


def versions() -> dict[str, str]:
    """Python and the libraries a run depends on, as recorded in versions.json."""
    return {"python": platform.python_version(), **installed_versions(LIBRARIES)}


def plot_rewards(metrics: list[dict], path: Path, title: str) -> None:
    """Total and per-reward mean reward per step, raw and smoothed, as a PNG (the report's renderer)."""
    from grpo_fast.report import PlotSpec, render_plot

    keys = ("reward", *sorted({k for m in metrics for k in m if k.startswith("rewards/") and k.endswith("/mean")}))
    png = render_plot(PlotSpec("rewards", title, "mean reward per completion", keys), metrics)
    if png:
        atomic_write(path, png)


# --------------------------------------------------------------------------- checkpoints and resume

CHECKPOINTS = "checkpoints"
STEP_LOGS = ("metrics.jsonl", "samples.jsonl", "health.jsonl", "reward_failures.jsonl")


def is_main_process() -> bool:
    """Rank 0 writes the run directory; other ranks (torchrun/accelerate) only train."""
    return int(os.environ.get("RANK", "0")) == 0


def _complete(checkpoint: Path) -> bool:
    """A checkpoint is usable once trainer_state.json, written last by the Trainer, parses."""
    try:
        state = json.loads((checkpoint / "trainer_state.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    step = int(checkpoint.name.rsplit("-", 1)[1])
    return state.get("global_step") == step and (checkpoint / "rng_state.pth").exists()


def checkpoints(run_dir: Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first."""
    found = [p for p in (Path(run_dir) / CHECKPOINTS).glob("checkpoint-*") if p.name.rsplit("-", 1)[1].isdigit()]
    return sorted((p for p in found if _complete(p)), key=lambda p: int(p.name.rsplit("-", 1)[1]))


def resume_point(path: str | Path) -> tuple[Path, Path]:
    """(run dir, checkpoint) for ``--resume``: a run dir (newest complete checkpoint) or one checkpoint."""
    path = Path(path)
    if path.name.startswith("checkpoint-") and path.parent.name == CHECKPOINTS:
        if not _complete(path):
            raise UserError(f"{path} is not a complete checkpoint", str(path),
                            "resume from the run directory to take its newest complete checkpoint")
        return path.parent.parent, path
    if not (path / "config.yaml").exists():
        raise UserError(f"{path} is not a grpo_fast run directory (no config.yaml)", "--resume",
                        "pass a run directory such as runs/demo-20261202-101500, or one of its checkpoints")
    found = checkpoints(path)
    if not found:
        raise UserError(f"{path} has no complete checkpoint to resume from", f"{path}/{CHECKPOINTS}",
                        "checkpoints are written every save_steps steps; start a new run instead")
    return path, found[-1]


def step_of(checkpoint: Path) -> int:
    return int(checkpoint.name.rsplit("-", 1)[1])


def truncate_step_logs(run_dir: Path, step: int) -> None:
    """Drop log lines past the checkpoint, so a resumed run has no duplicate or orphan steps."""
    for name in STEP_LOGS:
        path = Path(run_dir) / name
        if path.exists():
            kept = [r for r in read_jsonl(path) if r.get("step", 0) <= step]
            atomic_write(path, "".join(json.dumps(r, default=str) + "\n" for r in kept))
