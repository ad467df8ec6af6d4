"""Exact resume: N steps straight == N/2-ish, kill -9, resume to N (adapter weights and the metrics log)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load_file

from grpo_fast import rundir
from grpo_fast.errors import UserError

STEPS = 8


def _args(model_dir, run_dir):
    return ["train", "demo", f"model={model_dir}", f"max_steps={STEPS}", "save_steps=2", "save_total_limit=2",
            "max_completion_length=16", "learning_rate=0.005", f"run_dir={run_dir}"]


def _cli(*args, cwd):
    return [sys.executable, "-m", "grpo_fast", *args]


def test_kill_and_resume_matches_straight_run(tiny_model_dir, tmp_path):
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(_cli(*_args(tiny_model_dir, straight), cwd=tmp_path), env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]

    proc = subprocess.Popen(_cli(*_args(tiny_model_dir, killed), cwd=tmp_path), env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if any(rundir.step_of(c) >= 2 for c in rundir.checkpoints(killed)):
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the run finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (killed / "summary.json").exists()
    resumed_from = rundir.checkpoints(killed)[-1]
    assert 2 <= rundir.step_of(resumed_from) < STEPS

    again = subprocess.run(_cli("train", "--resume", str(killed), cwd=tmp_path), env=env, capture_output=True,
                           text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"from {resumed_from.name}" in again.stdout

    a = load_file(straight / "adapter" / "adapter_model.safetensors")
    b = load_file(killed / "adapter" / "adapter_model.safetensors")
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-4, atol=1e-6)
    steps = [json.loads(line)["step"] for line in (killed / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, STEPS + 1))
    assert json.loads((killed / "summary.json").read_text())["steps"] == STEPS


def test_resume_errors(tiny_model_dir, tmp_path):
    with pytest.raises(UserError, match="not a grpo_fast run directory"):
        rundir.resume_point(tmp_path)
    (tmp_path / "config.yaml").write_text("recipe: demo\n")
    with pytest.raises(UserError, match="no complete checkpoint"):
        rundir.resume_point(tmp_path)
    proc = subprocess.run(_cli("train", "--resume", str(tmp_path / "nowhere"), cwd=tmp_path), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_resume_refuses_another_config(tiny_model_dir, tmp_path):
    from grpo_fast.train import check_resumable, resolve_config

    run = tmp_path / "run"
    run.mkdir()
    rundir.write_yaml(run / "config.yaml", resolve_config("demo", [f"model={tiny_model_dir}"]).to_dict())
    check_resumable(resolve_config("demo", [f"model={tiny_model_dir}", "max_steps=99"]), run)  # steps may change
    with pytest.raises(UserError, match="lora_r: checkpoint 16, now 8"):
        check_resumable(resolve_config("demo", [f"model={tiny_model_dir}", "lora_r=8"]), run)
