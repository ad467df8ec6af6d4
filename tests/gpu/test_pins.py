"""The GPU set must resolve together with the core pins (asks PyPI; skip offline with -m 'not network')."""

from __future__ import annotations

from pathlib import Path

import pytest
from pinned import resolve_gpu_set

ROOT = Path(__file__).resolve().parents[2]


def _pins(name: str) -> dict[str, str]:
    pins = {}
    for line in (ROOT / name).read_text().splitlines():
        line = line.split("#")[0].strip()
        if "==" in line:
            package, version = line.split("==")
            pins[package.lower().replace("_", "-")] = version
    return pins


def test_cpu_and_gpu_sets_share_the_base_and_differ_only_in_torch_and_gpu_packages():
    base, cpu, gpu = _pins("requirements-base.txt"), _pins("requirements.txt"), _pins("requirements-gpu.txt")
    assert base["trl"] == "1.14.2", "trl 1.15.0 crashes GRPO on CPU; unsloth caps trl<=1.15.0"
    assert base["transformers"] == "5.17.0"
    assert cpu["torch"] == gpu["torch"] == "2.13.0", "vllm 0.32.0 is built for torch 2.13.0, the CPU set's torch"
    assert {"unsloth", "unsloth-zoo", "vllm", "vllm-bnb-plugin", "bitsandbytes"} <= set(gpu)
    assert "xformers" not in gpu  # pulled in by unsloth, removed after install (tests/gpu/test_gpu_lock.py)


@pytest.mark.network
def test_gpu_set_resolves_with_pip_dry_run():
    chosen = {i["metadata"]["name"].lower().replace("_", "-"): i["metadata"]["version"] for i in resolve_gpu_set()}
    for package, version in _pins("requirements-gpu.txt").items():
        assert chosen.get(package) == version, f"{package}: pinned {version}, resolver chose {chosen.get(package)}"
