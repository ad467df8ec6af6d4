"""What this machine offers the models layer: CUDA, native bf16, GPU memory, Unsloth, and the vLLM-on-CPU opt-in.

Asked at the moment they matter (each probe imports torch or looks a package up), never cached at import time.
"""

from __future__ import annotations

import importlib.util
import os

# Set to 1 to let `use_vllm` (TRL colocate: packed weights, vllm_colocate) and `--engine vllm` run on a CPU with
# the vllm-cpu build; `generation: auto` sets it where it turns vLLM on. `make test-vllm` uses it.
VLLM_CPU_ENV = "GRPO_FAST_VLLM_CPU"


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def bf16_supported() -> bool:
    """Native bf16 (Ampere and newer); a T4 reports bf16 through slow emulation, so ask the compute capability."""
    import torch

    return torch.cuda.is_available() and torch.cuda.get_device_capability(0)[0] >= 8


def gpu_memory_gb() -> float | None:
    """Memory of GPU 0 in GiB, or None without CUDA."""
    import torch

    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_properties(0).total_memory / 2**30


def unsloth_importable() -> bool:
    return importlib.util.find_spec("unsloth") is not None


def vllm_cpu_opted_in() -> bool:
    """True when the user asked for vLLM on CPU (``GRPO_FAST_VLLM_CPU=1``) and a vLLM build is installed."""
    return os.environ.get(VLLM_CPU_ENV, "") == "1" and importlib.util.find_spec("vllm") is not None
