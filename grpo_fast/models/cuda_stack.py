"""What a GPU host can actually run: the NVIDIA driver's CUDA, the CUDA each locked binary was built for, and
whether each binary extension loads.

Version strings say nothing of this: torch 2.13.0 from PyPI is a CUDA 13 build that sees no GPU under an older
driver (and the kit would quietly pick the ``cpu`` profile), and PyPI's xformers 0.0.35 is a CUDA 12.8 build
(its binary needs ``libcudart.so.12``), so beside the lock's CUDA 13 torch it installs but cannot load.
``grpo-fast doctor`` reports both from these facts; tests stand in a fake ``nvidia-smi`` and a fake extension.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata

from packaging.requirements import InvalidRequirement, Requirement

# The oldest Linux driver branch that runs each CUDA major (NVIDIA's CUDA toolkit release notes, table 3).
DRIVER_FOR_CUDA = {12: "525", 13: "580"}
# How the kit checks that a package's binary loads: the call its users make first (Unsloth calls xformers'
# _register_extensions itself). Only installed packages are probed, each in a fresh interpreter.
EXTENSION_PROBES = {
    "xformers": "from xformers._cpp_lib import _register_extensions; _register_extensions()",
    "vllm": "import vllm._C_stable_libtorch",  # what vllm/platforms/cuda.py imports first (0.32.0)
    "flash_attn": "import flash_attn_2_cuda",
}
# What to do when a probed extension cannot load, beside rebuilding it for this torch.
EXTENSION_FIX = {
    "xformers": "pip uninstall -y xformers (Unsloth then uses PyTorch attention; the GPU lock removes it)",
    "vllm": "pip install -r requirements-gpu.txt (vLLM is built for one torch)",
    "flash_attn": "pip uninstall -y flash-attn, or install the build for this torch and CUDA",
}


@dataclass
class Driver:
    """The NVIDIA driver as ``nvidia-smi`` reports it."""

    version: str
    cuda: tuple[int, int]  # the newest CUDA it runs
    gpu: str


def _smi(smi: str, *args: str) -> str | None:
    try:  # a wedged driver can hang nvidia-smi: doctor must still answer
        proc = subprocess.run([smi, *args], capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def nvidia_driver(smi: str | None = None) -> Driver | None:
    """The driver, or None where there is no ``nvidia-smi`` or it finds no GPU."""
    smi = smi or shutil.which("nvidia-smi")
    if not smi:
        return None
    query = _smi(smi, "--query-gpu=name,driver_version", "--format=csv,noheader")
    banner = _smi(smi)
    found = re.search(r"CUDA Version:\s*(\d+)\.(\d+)", banner or "")
    if not query or not query.strip() or not found:
        return None
    name, _, version = query.strip().splitlines()[0].rpartition(",")
    return Driver(version.strip(), (int(found.group(1)), int(found.group(2))), name.strip())


def cuda_of(dist: str) -> tuple[int, int] | None:
    """The CUDA (major, minor or 0) an installed package was built for, from its requirements: ``cuda-toolkit==``
    or ``nvidia-*-cuNN`` packages and ``[cuNN]`` extras. None for a CPU build or a package not installed."""
    try:
        lines = metadata.requires(dist) or []
    except metadata.PackageNotFoundError:
        return None
    majors = []
    for line in lines:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue  # an extra's requirement, or another platform's
        if req.name == "cuda-toolkit":
            exact = next((s.version for s in req.specifier if s.operator == "=="), "")
            found = re.match(r"(\d+)\.(\d+)", exact)
            if found:
                return int(found.group(1)), int(found.group(2))
        tagged = re.search(r"-cu(\d\d)$", req.name) or next(
            (m for e in req.extras if (m := re.fullmatch(r"cu(\d\d)", e))), None)
        if tagged:
            majors.append(int(tagged.group(1)))
    return (max(majors), 0) if majors else None


def torch_cuda() -> tuple[int, int] | None:
    """The CUDA torch was built for (also where no GPU is visible), or None for a CPU build."""
    import torch

    found = re.match(r"(\d+)\.(\d+)", torch.version.cuda or "")
    return (int(found.group(1)), int(found.group(2))) if found else None


def load_extension(code: str, path: list[str] | None = None, timeout: float = 300.0) -> str:
    """'ok', or why the binary cannot load (the error's last line), run in a fresh interpreter so a crash
    cannot take the caller down. ``path`` goes first on its sys.path (tests put a stand-in package there)."""
    env = None
    if path:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([*path, os.environ.get("PYTHONPATH", "")])}
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return f"cannot load: no answer in {timeout:.0f} s"
    if proc.returncode == 0:
        return "ok"
    lines = [ln.strip() for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
    return "cannot load: " + (lines[-1][:240] if lines else f"exit {proc.returncode}")


def probe_extensions(installed: set[str], probes: dict[str, str] | None = None,
                     path: list[str] | None = None) -> dict[str, str]:
    """Each installed package's extension, loaded for real."""
    probes = EXTENSION_PROBES if probes is None else probes
    return {name: load_extension(code, path) for name, code in probes.items() if name in installed}


def driver_problem(driver: Driver, built: tuple[int, int], what: str) -> tuple[str, str] | None:
    """(severity 'FAIL' | 'warn', note) where ``what``, built for CUDA ``built``, cannot (or may not) run under
    ``driver``; None where it runs."""
    have = f"this driver ({driver.version}) runs CUDA up to {driver.cuda[0]}.{driver.cuda[1]}"
    if driver.cuda[0] < built[0]:
        need = DRIVER_FOR_CUDA.get(built[0], "a newer")
        return "FAIL", (f"{what} is built for CUDA {built[0]}.{built[1]}; {have}, so it sees no GPU. Update the "
                        f"NVIDIA driver to {need} or newer, or install the lock this driver runs (grpo-fast doctor "
                        "names it: docs/usage.md#the-gpu-locks)")
    if driver.cuda < built:
        return "warn", (f"{what} is built for CUDA {built[0]}.{built[1]}; {have}: it runs by CUDA's minor-version "
                        "compatibility, but kernels compiled at run time (Triton, PTX) may fail; update the driver")
    return None
