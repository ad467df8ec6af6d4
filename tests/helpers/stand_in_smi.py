"""A stand-in ``nvidia-smi`` for a host this machine is not: the calls the kit makes, answered as the real one
prints them (the banner with ``CUDA Version``, ``--query-gpu=name,driver_version`` as doctor asks, and
``--query-gpu=name,compute_cap`` as the lock decision asks). The same shape as tests/gpu/test_doctor.py's."""

from __future__ import annotations

from pathlib import Path

# The four hosts of issue 49, as (driver, CUDA the driver runs, card, compute capability).
HOSTS = {
    "L4 on a CUDA 13 driver": ("580.82.07", "13.0", "NVIDIA L4", "8.9"),
    "T4 on a CUDA 12.8 driver": ("570.172.08", "12.8", "Tesla T4", "7.5"),
    "A100 on a CUDA 12.4 driver": ("550.54.15", "12.4", "NVIDIA A100-SXM4-40GB", "8.0"),
}


def stand_in_smi(folder: Path, driver: str, cuda: str, gpu: str, capability: str) -> Path:
    """Write ``folder/nvidia-smi``; put ``folder`` first on PATH to make it this host's."""
    folder.mkdir(parents=True, exist_ok=True)
    smi = folder / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "--query-gpu=name,driver_version" ]; then echo "{gpu}, {driver}"; exit 0; fi\n'
        f'if [ "$1" = "--query-gpu=name,compute_cap" ]; then echo "{gpu}, {capability}"; exit 0; fi\n'
        f'echo "| NVIDIA-SMI {driver}   Driver Version: {driver}   CUDA Version: {cuda} |"\n')
    smi.chmod(0o755)
    return smi
