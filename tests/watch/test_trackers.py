"""report_to as TRL users set it: real 2-step runs write TensorBoard events and a Trackio store under the run
directory; a tracker that is not installed stops before any weights load (exit 2, install command, no run dir)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import pytest

from grpo_fast.cli import main


def _hide(modules: list[str], argv: list[str], cwd) -> subprocess.CompletedProcess:
    """The CLI in a process where ``modules`` are not installed (as on a machine without the extra)."""
    code = (f"import sys\nfor m in {modules!r}: sys.modules[m] = None\n"
            f"from grpo_fast.cli import main\nsys.exit(main({argv!r}))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=300)


@pytest.mark.slow
def test_missing_tensorboard_stops_before_weights_with_the_install_command(tiny_model_dir, tmp_path):
    proc = _hide(["tensorboard", "tensorboardX"], ["train", "demo", f"model={tiny_model_dir}",
                                                   "report_to=tensorboard"], tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "report_to includes 'tensorboard' but tensorboard is not installed" in proc.stderr
    assert "pip install 'grpo_fast[tensorboard]'" in proc.stderr and "Traceback" not in proc.stderr
    assert "Loading weights" not in proc.stderr and not (tmp_path / "runs").exists()
    dry = _hide(["tensorboard", "tensorboardX"], ["train", "demo", f"model={tiny_model_dir}", "report_to=tensorboard",
                                                 "--dry-run"], tmp_path)
    assert dry.returncode == 2 and "grpo_fast[tensorboard]" in dry.stderr


@pytest.mark.parametrize(("value", "needle"), [("tensorbord", "did you mean 'tensorboard'"),
                                               ("wandb", "pip install wandb")])
def test_unknown_or_absent_tracker(value, needle, tiny_model_dir, tmp_path, monkeypatch, capsys):
    pytest.importorskip("transformers")
    if value == "wandb":
        import importlib.util

        if importlib.util.find_spec("wandb") is not None:
            pytest.skip("wandb is installed here")
    monkeypatch.chdir(tmp_path)
    assert main(["train", "demo", f"model={tiny_model_dir}", f"report_to={value}"]) == 2
    err = capsys.readouterr().err
    assert needle in err and "key 'report_to' (command line)" in err and not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_tensorboard_and_trackio_log_the_training_scalars_under_the_run(tiny_model_dir, tmp_path):
    """A real run in its own process (trackio fixes its folder when first imported)."""
    pytest.importorskip("tensorboard")
    pytest.importorskip("trackio")
    run = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "grpo_fast", "train", "demo", f"model={tiny_model_dir}",
                           "max_steps=2", "max_completion_length=8", "evaluate=false", f"run_dir={run}",
                           "report_to=[tensorboard, trackio]"], capture_output=True, text=True, cwd=tmp_path,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"tensorboard logs: tensorboard --logdir {run / 'tensorboard'}" in proc.stdout
    assert f"trackio logs: TRACKIO_DIR={run / 'trackio'} trackio show --project grpo_fast" in proc.stdout

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run / "tensorboard" / "grpo")).Reload()
    scalars = events.Tags()["scalars"]
    assert {"train/reward", "train/loss", "train/rewards/sum_correct/mean"} <= set(scalars), scalars
    assert [e.step for e in events.Scalars("train/reward")] == [1, 2]

    with sqlite3.connect(run / "trackio" / "grpo_fast.db") as db:
        logged = [row[0] for row in db.execute("select metrics from metrics")]
    assert sum('"train/reward"' in str(m) for m in logged) == 2, logged[:3]


@pytest.mark.slow
def test_a_tracker_installed_but_broken_stops_before_weights(tiny_model_dir, tmp_path):
    """find_spec sees the package, importing it fails (e.g. a protobuf clash): exit 2, no traceback, no run."""
    broken = tmp_path / "broken"
    for name in ("tensorboard", "tensorboardX"):
        (broken / name).mkdir(parents=True)
        (broken / name / "__init__.py").write_text("raise ImportError('cannot import name builder from protobuf')\n")
    proc = subprocess.run([sys.executable, "-m", "grpo_fast", "train", "demo", f"model={tiny_model_dir}",
                           "report_to=tensorboard", f"run_dir={tmp_path / 'run'}"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300, env={**os.environ, "PYTHONPATH": str(broken)})
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "report_to includes 'tensorboard' but tensorboard does not load: ImportError" in proc.stderr
    assert "reinstall it: pip install 'grpo_fast[tensorboard]'" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "run").exists()
