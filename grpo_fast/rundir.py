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


def atomic_write(path: Path, text: str) -> None:
    """Write to a temporary file beside ``path`` and rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, data: Any) -> None:
    atomic_write(path, json.dumps(data, indent=2, default=str) + "\n")


def write_yaml(path: Path, data: Any) -> None:
    atomic_write(path, yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


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


def versions() -> dict[str, str]:
    """Installed versions of the libraries a run depends on (absent ones are left out)."""
    found = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


def plot_rewards(metrics: list[dict], path: Path, title: str) -> None:
    """Total and per-reward mean reward per step, raw and smoothed, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [m["step"] for m in metrics if "reward" in m]
    if not steps:
        return
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    keys = ["reward"] + sorted({k for m in metrics for k in m if k.startswith("rewards/") and k.endswith("/mean")})
    for key in keys:
        values = [m.get(key) for m in metrics if "reward" in m]
        label = "total" if key == "reward" else key.split("/")[1]
        (line,) = ax.plot(steps, values, alpha=0.35, linewidth=1)
        ax.plot(steps, _smooth(values), color=line.get_color(), linewidth=2, label=f"{label} (smoothed)")
    ax.set(title=title, xlabel="training step", ylabel="mean reward per completion")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".png", dir=path.parent)
    os.close(fd)
    fig.savefig(tmp)
    plt.close(fig)
    os.replace(tmp, path)


def _smooth(values: list[float | None], alpha: float = 0.3) -> list[float | None]:
    """Exponential moving average; the raw values are drawn beside it."""
    out, ema = [], None
    for v in values:
        if v is not None:
            ema = v if ema is None else alpha * v + (1 - alpha) * ema
        out.append(ema)
    return out
