"""Exact resume and survived faults: kill -9 then resume gives the straight run's adapter (single- and multi-stage);
a damaged newest checkpoint is skipped by name; a full disk stops with exit 2 and earlier checkpoints resume."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from grpo_fast.errors import UserError
from grpo_fast.run import checkpoints

pytestmark = pytest.mark.slow  # whole runs in fresh interpreters: `make test-fast` leaves them out

STEPS = 8
STAGES = "stages=[{name: warm, max_steps: 3}, {name: main, max_steps: 3}]"
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def _args(model_dir, run_dir, *extra):
    return ["train", "demo", f"model={model_dir}", f"max_steps={STEPS}", "save_steps=2", "save_total_limit=2",
            "max_completion_length=16", "learning_rate=0.005", "evaluate=false", f"run_dir={run_dir}", *extra]


def _cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "grpo_fast", *args], env=ENV, capture_output=True, text=True,
                          timeout=600, **kw)


def _same_adapter(a_dir: Path, b_dir: Path) -> None:
    a = load_file(a_dir / "adapter" / "adapter_model.safetensors")
    b = load_file(b_dir / "adapter" / "adapter_model.safetensors")
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-4, atol=1e-6)


def _steps(run_dir: Path) -> list[int]:
    return [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _kill_after(args: list[str], folder: Path, step: int) -> None:
    """Start a run and kill -9 it once ``folder`` holds a complete checkpoint at ``step`` or later."""
    proc = subprocess.Popen([sys.executable, "-m", "grpo_fast", *args], env=ENV, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if any(checkpoints.step_of(c) >= step for c in checkpoints.complete(folder)):
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the run finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()


@pytest.fixture(scope="module")
def straight(tiny_model_dir, tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("straight") / "run"
    done = _cli(*_args(tiny_model_dir, run))
    assert done.returncode == 0, done.stderr[-2000:]
    return run


def test_kill_and_resume_matches_straight_run(straight, tiny_model_dir, tmp_path):
    killed = tmp_path / "killed"
    _kill_after(_args(tiny_model_dir, killed), killed / "checkpoints", 2)
    assert not (killed / "summary.json").exists()
    resumed_from = checkpoints.complete(killed / "checkpoints")[-1]
    assert 2 <= checkpoints.step_of(resumed_from) < STEPS

    again = _cli("train", "--resume", str(killed))
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"resuming {killed} from {resumed_from.name}\n" in again.stdout  # one line in plain words
    said = (again.stdout + again.stderr).splitlines()
    assert sum("backend: " in line for line in said) == 1, "\n".join(said)  # the backend named once
    _same_adapter(straight, killed)
    assert _steps(killed) == list(range(1, STEPS + 1))
    assert json.loads((killed / "summary.json").read_text())["steps"] == STEPS


def test_multi_stage_kill_and_resume_matches_straight_run(tiny_model_dir, tmp_path):
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    done = _cli(*_args(tiny_model_dir, straight, STAGES, "save_steps=1"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert _steps(straight) == list(range(1, 7))

    _kill_after(_args(tiny_model_dir, killed, STAGES, "save_steps=1"), killed / "stages" / "main" / "checkpoints", 1)
    assert (killed / "stages" / "warm" / "stage_done.json").exists() and not (killed / "summary.json").exists()
    again = _cli("train", "--resume", str(killed))
    assert again.returncode == 0, again.stderr[-2000:]
    assert "at stage main from checkpoint-" in again.stdout
    _same_adapter(straight, killed)
    assert _steps(killed) == list(range(1, 7))
    assert json.loads((killed / "summary.json").read_text())["steps"] == 6


def test_damaged_newest_checkpoint_is_skipped_and_nothing_changes_before_loading(straight, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(straight, run)
    newest = checkpoints.complete(run / "checkpoints")[-1]
    weights = newest / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])  # torn by a crash or a bad copy
    summary = (run / "summary.json").read_bytes()

    resumed = _cli("train", "--resume", str(run))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"skipping {newest}: adapter_model.safetensors has" in resumed.stdout
    previous = checkpoints.step_of(newest) - 2
    assert f"from checkpoint-{previous}" in resumed.stdout
    _same_adapter(straight, run)  # the previous checkpoint leads to the same weights
    assert _steps(run) == list(range(1, STEPS + 1))

    for checkpoint in (run / "checkpoints").glob("checkpoint-*"):  # nothing left to resume from
        (checkpoint / "trainer_state.json").write_text("{")
    (run / "summary.json").write_bytes(summary)
    metrics = (run / "metrics.jsonl").read_bytes()
    failed = _cli("train", "--resume", str(run))
    assert failed.returncode == 2 and "no complete checkpoint" in failed.stderr and "Traceback" not in failed.stderr
    assert (run / "summary.json").read_bytes() == summary and (run / "metrics.jsonl").read_bytes() == metrics


@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0, reason="needs unshare -m (root)")
def test_full_disk_stops_with_exit_2_and_earlier_checkpoints_resume(straight, tiny_model_dir, tmp_path):
    """The run directory lives on a 64 MiB tmpfs that a filler file fills once checkpoint-2 is complete."""
    out = tmp_path / "out"
    script = f"""
set -u
mount -t tmpfs -o size=64m tmpfs {tmp_path}/disk || exit 99
cd {tmp_path}
{sys.executable} -m grpo_fast {' '.join(f"'{a}'" for a in _args(tiny_model_dir, tmp_path / 'disk' / 'run'))} \\
    >first.out 2>first.err &
pid=$!
until [ -f disk/run/checkpoints/checkpoint-2/grpo_fast_manifest.json ] || ! kill -0 $pid 2>/dev/null
do sleep 0.05; done
dd if=/dev/zero of=disk/filler bs=1M count=64 2>/dev/null
wait $pid; echo $? >first.rc
cp -r disk/run before-resume
rm disk/filler
{sys.executable} -m grpo_fast train --resume disk/run >second.out 2>second.err; echo $? >second.rc
cp -r disk/run {out}
"""
    (tmp_path / "disk").mkdir()
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script], env=ENV, capture_output=True, text=True,
                          timeout=900)
    if proc.returncode == 99 or not (tmp_path / "first.rc").exists():
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr[-300:]}")
    first_err = (tmp_path / "first.err").read_text()
    assert (tmp_path / "first.rc").read_text().strip() == "2", first_err[-2000:]
    assert "disk is full" in first_err and "Traceback" not in first_err and "--resume" in first_err
    assert checkpoints.complete(tmp_path / "before-resume" / "checkpoints")  # earlier checkpoints intact
    assert (tmp_path / "second.rc").read_text().strip() == "0", (tmp_path / "second.err").read_text()[-2000:]
    _same_adapter(straight, out)
    assert _steps(out) == list(range(1, STEPS + 1))


def test_resume_errors(tmp_path):
    with pytest.raises(UserError, match="not a grpo_fast run directory"):
        checkpoints.resume_point(tmp_path)
    (tmp_path / "config.yaml").write_text("recipe: demo\n")
    with pytest.raises(UserError, match="no complete checkpoint"):
        checkpoints.resume_point(tmp_path)
    proc = _cli("train", "--resume", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_resume_refuses_another_config(tiny_model_dir, tmp_path):
    from grpo_fast.files import write_yaml
    from grpo_fast.run.resolve import resolve_config
    from grpo_fast.train import check_resumable

    run = tmp_path / "run"
    run.mkdir()
    write_yaml(run / "config.yaml", resolve_config("demo", [f"model={tiny_model_dir}"]).to_dict())
    check_resumable(resolve_config("demo", [f"model={tiny_model_dir}", "max_steps=99"]), run)  # steps may change
    with pytest.raises(UserError, match="lora_r: checkpoint 16, now 8"):
        check_resumable(resolve_config("demo", [f"model={tiny_model_dir}", "lora_r=8"]), run)


def test_resume_line_is_plain_words(tmp_path):
    point = checkpoints.ResumePoint(tmp_path, checkpoint=tmp_path / "checkpoints" / "checkpoint-2")
    assert point.describe(["train"]) == f"resuming {tmp_path} from checkpoint-2"
    staged = checkpoints.ResumePoint(tmp_path, stage=1)
    assert staged.describe(["warm", "main"]) == f"resuming {tmp_path} at stage main from its start"


def on_a_full_disk(tmp_path: Path, probe: str) -> tuple[str, str]:
    """Run ``probe`` (Python) with a 1 MiB tmpfs mounted at ``tmp_path/disk``, in a mount namespace of its own; it
    prints the error's type, then ``write_error``'s message. Skips where no tmpfs can be mounted."""
    (tmp_path / "probe.py").write_text(probe)
    script = f"mount -t tmpfs -o size=1m tmpfs {tmp_path}/disk || exit 99\n{sys.executable} {tmp_path}/probe.py"
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script], env=ENV, capture_output=True, text=True, timeout=300)
    if proc.returncode == 99:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr[-300:]}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    kind, message = proc.stdout.split("\n", 1)
    return kind, message


@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0, reason="needs unshare -m (root)")
def test_full_disk_in_a_safetensors_write_is_one_message(tmp_path):
    """A real SafetensorError (ENOSPC on a 1 MiB tmpfs while a checkpoint's tensors are written) becomes the one
    disk-full message: the path, the intact checkpoint before it, and the --resume command that continues."""
    (tmp_path / "disk").mkdir()
    run = tmp_path / "disk" / "run"
    probe = f"""
import torch
from pathlib import Path
from safetensors.torch import save_file
from grpo_fast.run import checkpoints
from grpo_fast.train import write_error
run = Path({str(run)!r})
intact = run / "checkpoints" / "checkpoint-2"
intact.mkdir(parents=True)
save_file({{"w": torch.zeros(4)}}, str(intact / "adapter_model.safetensors"))
(intact / "trainer_state.json").write_text('{{"global_step": 2}}')
checkpoints.write_manifest(intact)
try:
    save_file({{"w": torch.zeros(2**20)}}, str(run / "checkpoints" / "adapter_model.safetensors"))
except Exception as err:
    print(type(err).__name__)
    print(write_error(err, run))
"""
    kind, message = on_a_full_disk(tmp_path, probe)
    assert kind == "SafetensorError"
    assert message.startswith("error: the disk is full: cannot write"), message
    assert "checkpoint-2 are intact" in message and f"grpo-fast train --resume {run}" in message


@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0, reason="needs unshare -m (root)")
def test_full_disk_in_a_torch_save_is_one_message(tmp_path):
    """torch.save on a full disk (the trainer's optimizer state) raises a RuntimeError whose words name no errno
    ("unexpected pos 704 vs 598"): still the one disk-full message, never a traceback (it failed a full-disk run
    with exit 1 once, when the disk filled inside the optimizer's file)."""
    (tmp_path / "disk").mkdir()
    run = tmp_path / "disk" / "run"
    probe = f"""
import torch
from pathlib import Path
from grpo_fast.train import write_error
run = Path({str(run)!r})
(run / "checkpoints" / "checkpoint-2").mkdir(parents=True)
Path({str(tmp_path / "disk" / "filler")!r}).write_bytes(bytes(1024 * 1024 - 64 * 1024))
try:
    torch.save({{"w": torch.zeros(2**18)}}, str(run / "checkpoints" / "optimizer.pt"))
except Exception as err:
    print(type(err).__name__)
    print(write_error(err, run))
"""
    kind, message = on_a_full_disk(tmp_path, probe)
    assert kind == "RuntimeError"
    assert message.startswith("error: the disk is full: cannot write"), message


@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0, reason="needs unshare -m (root)")
def test_full_disk_before_the_first_checkpoint_is_one_message(tiny_model_dir, tmp_path):
    """A disk already full when the run writes its first files (config.yaml, versions.json): exit 2, one message
    naming the path and that nothing is saved yet, no traceback."""
    script = f"""
mount -t tmpfs -o size=1m tmpfs {tmp_path}/disk || exit 99
dd if=/dev/zero of={tmp_path}/disk/filler bs=64k count=64 2>/dev/null
{sys.executable} -m grpo_fast {' '.join(f"'{a}'" for a in _args(tiny_model_dir, tmp_path / 'disk' / 'run'))}
"""
    (tmp_path / "disk").mkdir()
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script], env=ENV, capture_output=True, text=True,
                          timeout=600)
    if proc.returncode == 99:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr[-300:]}")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "error: the disk is full: cannot write" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert "no checkpoint was saved yet" in proc.stderr
