"""Which engine serves a trained adapter for chat, generate and evaluation, and how the adapter reaches it.

vLLM (directly, or through Unsloth's ``fast_generate``) where CUDA and vLLM are there; transformers + peft
everywhere else. The choice carries its reason, printed like the training speed-ups'.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_fast.errors import UserError
from grpo_fast.models import machine
from grpo_fast.models.machine import VLLM_CPU_ENV

ENGINES = ("auto", "transformers", "vllm", "unsloth")


@dataclass(frozen=True)
class Engine:
    """The generation engine and why it was chosen."""

    name: str
    reason: str


def select_engine(requested: str = "auto", *, cuda: bool | None = None, vllm: bool | None = None,
                  unsloth: bool | None = None, vllm_cpu: bool | None = None) -> Engine:
    """``unsloth`` (fast_generate + the adapter as a LoRARequest), ``vllm`` (LLM + LoRARequest) or ``transformers``.

    ``vllm_cpu``: the ``GRPO_FAST_VLLM_CPU=1`` opt-in lets the vllm engine run on a CPU with vLLM's CPU build.
    """
    if requested not in ENGINES:
        raise UserError(f"unknown engine {requested!r}", "--engine", f"use one of: {', '.join(ENGINES)}")
    cuda = machine.cuda_available() if cuda is None else cuda
    vllm = importlib.util.find_spec("vllm") is not None if vllm is None else vllm
    unsloth = machine.unsloth_importable() if unsloth is None else unsloth
    vllm_cpu = machine.vllm_cpu_opted_in() if vllm_cpu is None else vllm_cpu
    if requested == "transformers":
        return Engine("transformers", "asked for")
    if requested == "vllm" and not cuda and vllm and vllm_cpu:
        return Engine("vllm", f"asked for; on CPU through {VLLM_CPU_ENV}=1 (a correctness check, not a speed path)")
    if requested in ("vllm", "unsloth"):
        missing = [n for n, ok in (("a CUDA GPU", cuda), ("vllm", vllm), ("unsloth", unsloth or requested == "vllm"))
                   if not ok]
        if missing:
            raise UserError(f"--engine {requested} needs {' and '.join(missing)}, not available here", "--engine",
                            "pip install -r requirements-gpu.txt on a GPU machine, or use --engine transformers")
        return Engine(requested, "asked for")
    if cuda and vllm and unsloth:
        return Engine("unsloth", "CUDA, vLLM and Unsloth present: Unsloth fast_generate with the LoRA")
    if cuda and vllm:
        return Engine("vllm", "CUDA and vLLM present: vLLM with enable_lora")
    return Engine("transformers", "no CUDA + vLLM here: transformers + peft")


def adapter_rank(adapter: Path) -> int:
    """The LoRA rank saved in adapter_config.json (vLLM must be started with max_lora_rank >= it)."""
    try:
        return int(json.loads((adapter / "adapter_config.json").read_text(encoding="utf-8"))["r"])
    except (OSError, ValueError, KeyError, TypeError):
        return 16


def lora_request(adapter: Path) -> Any:
    """The run's adapter as a vLLM ``LoRARequest`` (name, id, path). Both vLLM engines use it: Unsloth's
    ``fast_generate`` is its engine's ``generate``, and ``load_lora`` exists only on a model that went through
    Unsloth's ``get_peft_model``, which a model loaded for inference has not."""
    from vllm.lora.request import LoRARequest

    return LoRARequest("run", 1, str(adapter))
