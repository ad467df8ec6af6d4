"""Experiment trackers (``report_to``), as TRL users expect them: checked before any weights load, writing
under the run directory at a stable path, and named with the command that opens them when the run ends.

TensorBoard writes ``RUN/tensorboard/<stage>/``; Trackio (local-first) keeps its database in ``RUN/trackio/``
(project ``grpo_fast``, one run per run directory). Other transformers integrations (wandb, mlflow, ...) work as
transformers runs them; the kit only checks that they are installed.
"""

from __future__ import annotations

import difflib
import functools
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from grpo_fast.config import RunConfig
from grpo_fast.errors import UserError

PROJECT = "grpo_fast"
INSTALL = {
    "tensorboard": "pip install 'grpo_fast[tensorboard]'   (or: pip install tensorboard)",
    "trackio": "pip install 'grpo_fast[trackio]'   (or: pip install trackio)",
}


def requested(cfg: RunConfig) -> list[str]:
    """The trackers a config reports to (TRL normalises ``report_to`` to a list; "all" is expanded by it)."""
    return [str(name) for name in (cfg.args.report_to or []) if name != "none"]


def check(cfg: RunConfig) -> None:
    """Every requested tracker is known to transformers and installed here, or one message saying how."""
    from transformers.integrations import get_available_reporting_integrations
    from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK

    available = set(get_available_reporting_integrations())
    for name in requested(cfg):
        if name not in INTEGRATION_TO_CALLBACK:
            close = difflib.get_close_matches(name, list(INTEGRATION_TO_CALLBACK), n=1)
            raise UserError(f"unknown tracker {name!r} in report_to", cfg.where("report_to"),
                            (f"did you mean '{close[0]}'? " if close else "") +
                            f"known: none, all, {', '.join(INTEGRATION_TO_CALLBACK)}")
        if name not in available:
            raise UserError(f"report_to includes {name!r} but {name} is not installed", cfg.where("report_to"),
                            INSTALL.get(name, f"pip install {name}") + ", or set report_to: none")
        failure = load_failure(name) if name in INSTALL else None
        if failure:
            raise UserError(f"report_to includes {name!r} but {name} does not load: {failure}"[:400],
                            cfg.where("report_to"), "reinstall it: " + INSTALL[name] + ", or set report_to: none")


@functools.cache  # once per process: every stage of a run is checked, the answer is the same
def load_failure(name: str) -> str | None:
    """Installed is not enough (a broken install fails on import): build the tracker's transformers callback in a
    fresh interpreter, so that nothing it fixes at import (trackio's directory) is fixed in this process.
    None when it loads, else the error's last line."""

    code = f"from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK as c\nc[{name!r}]()"
    with tempfile.TemporaryDirectory() as scratch:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                              env={**os.environ, "TRACKIO_DIR": scratch, "TRANSFORMERS_VERBOSITY": "error"})
    lines = proc.stderr.strip().splitlines()
    return None if proc.returncode == 0 else (lines[-1] if lines else f"exit code {proc.returncode}")


def point_at(run_dir: Path, stage: str | None, cfg: RunConfig) -> dict[str, Any]:
    """Send the trackers' files under ``run_dir`` (environment for the transformers callbacks) and return the
    GRPOConfig changes that name the project and the run."""
    names = requested(cfg)
    changes: dict[str, Any] = {}
    if "tensorboard" in names:
        os.environ["TENSORBOARD_LOGGING_DIR"] = str(run_dir / "tensorboard" / (stage or "grpo"))
    if "trackio" in names:
        os.environ.setdefault("TRACKIO_DIR", str(run_dir / "trackio"))
        changes.update(project=PROJECT, run_name=run_dir.name)
    return changes


def where(cfg: RunConfig, run_dir: Path) -> dict[str, str]:
    """For the end-of-run summary: each tracker's files and the command that opens them."""
    names = requested(cfg)
    out = {}
    if "tensorboard" in names:
        out["tensorboard"] = f"tensorboard --logdir {run_dir / 'tensorboard'}"
    if "trackio" in names:
        store = _trackio_dir(run_dir)
        out["trackio"] = f"TRACKIO_DIR={store} trackio show --project {PROJECT}"
    return out


def _trackio_dir(run_dir: Path) -> Path:
    """Where trackio really writes: fixed when trackio is first imported (an earlier run in this process may
    have set it), else the run directory."""
    module = sys.modules.get("trackio.utils")
    if module is not None:
        return Path(module.TRACKIO_DIR)
    return Path(os.environ.get("TRACKIO_DIR") or run_dir / "trackio")
