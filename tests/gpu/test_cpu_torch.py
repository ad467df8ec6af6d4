"""``make setup``'s torch step (grpo_fast/models/cpu_torch.py) on this machine, where PyTorch's CPU index cannot
be reached: the probe gives up within seconds, pip installs what it finds, and the step says which build."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import background
import pytest
from stand_in_smi import HOSTS, stand_in_smi

from grpo_fast.models import cpu_torch

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "grpo_fast" / "models" / "cpu_torch.py"


def test_the_pin_is_the_cpu_sets_torch():
    assert cpu_torch.torch_pin(ROOT / "requirements.txt") == "2.13.0"
    assert cpu_torch.torch_pin(ROOT / "requirements-gpu-cu12.txt") == "2.10.0"


def test_an_unreachable_index_is_named_within_seconds():
    start = time.monotonic()
    why = cpu_torch.unreachable(cpu_torch.CPU_INDEX)
    if why is None:
        pytest.skip("PyTorch's CPU index answers from here: the fallback is not exercised")
    assert time.monotonic() - start < cpu_torch.PROBE_S + 2 and why


def test_bad_requirements_exit_2_with_one_line(tmp_path):
    (tmp_path / "r.txt").write_text("numpy==2.0\n")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--requirements", str(tmp_path / "r.txt")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0 and "pins no torch==" in proc.stderr


def test_a_gpu_host_keeps_the_requirements_torch(tmp_path):
    stand_in_smi(tmp_path, *HOSTS["T4 on a CUDA 12.8 driver"])
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    proc = subprocess.run([sys.executable, str(SCRIPT), "--python", sys.executable, "--requirements",
                           str(ROOT / "requirements.txt")], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0 and "an NVIDIA GPU (Tesla T4)" in proc.stdout


def setup_without_nvidia() -> subprocess.CompletedProcess:
    """A fresh venv, as make setup makes it, set up with no nvidia-smi on PATH."""
    venv = Path(tempfile.mkdtemp(prefix="cpu-torch-")) / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True,
                   timeout=120)  # the outer pip installs into it (no pip of its own to install first)
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, str(SCRIPT), "--python", str(venv / "bin" / "python"), "--requirements",
                           str(ROOT / "requirements.txt"), "--pip-arg=--ignore-installed"],
                          capture_output=True, text=True, timeout=900, env=env)


# started when the suite is collected (tests/helpers/background.py)
BACKGROUND = {"test_setup_falls_back_fast_and_says_which_build": setup_without_nvidia}


@pytest.mark.slow
def test_setup_falls_back_fast_and_says_which_build():
    """A fresh venv, as make setup makes it, with no nvidia-smi on PATH: the index probe fails in seconds and
    torch 2.13.0 comes from pip's indexes (on this machine its find-links folder: the CPU build)."""
    proc = background.result("test_setup_falls_back_fast_and_says_which_build")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    probe_s = float(re.search(r"cannot be reached \(.*; ([\d.]+) s\)", proc.stdout).group(1))
    assert probe_s < cpu_torch.PROBE_S + 1, proc.stdout
    installed = re.search(r"installed torch (\S+) \((.*)\)", proc.stdout)
    assert installed and installed.group(1).startswith("2.13.0"), proc.stdout
    assert installed.group(2) in ("the CPU build", "a CUDA 13.0 build")
    print(f"fallback: probe {probe_s} s: {installed.group(0)}")
