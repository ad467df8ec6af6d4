"""CPU speed-ups for TRL's GRPOTrainer that its config cannot express, applied to a built trainer.

On CPU a GRPO step is generation (prefill + decoding) plus the training forward and backward. TRL's
``bf16=True`` wraps the model's forward in autocast everywhere, generation included; and it hands
``generate`` every prompt ``num_generations`` times, so the same prompt is prefilled once per completion.

- ``autocast_training_pass``: bf16 autocast around the loss computation only (with ``bf16: false``, so
  generation and sampling stay fp32). The training forward is the compute-bound part where bf16 pays.
- ``shared_prompt_prefill``: prefill each distinct prompt once, then copy its KV cache to the group's rows
  before decoding. Same tokens in, same distribution out; the prompt's prefill cost falls by the group size.
- ``merged_lora_generation``: generate with each LoRA delta folded into a temporary copy of its base weight, so
  a decoding step runs one matmul per linear layer instead of three (plus dropout, scale and add). The
  trained weights are never touched (the copies are dropped after ``generate``); only rounding differs.

Measured figures are in ``benchmarks/bench_trainer.py``.
"""

from __future__ import annotations

import functools
from typing import Any


def autocast_training_pass(trainer: Any) -> None:
    """Run ``trainer.compute_loss`` (the training forward; backward follows its graph) under CPU bf16 autocast."""
    import torch

    original = trainer.compute_loss

    @functools.wraps(original)
    def compute_loss(*args: Any, **kwargs: Any) -> Any:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return original(*args, **kwargs)

    trainer.compute_loss = compute_loss


def shared_prompt_prefill(model: Any) -> None:
    """Make ``model.generate`` prefill each distinct prompt row once and share its KV cache within the batch.

    Falls back to plain ``generate`` when every row differs, when a cache is already given, or for inputs
    other than ``input_ids`` + ``attention_mask`` (multimodal, encoder-decoder).
    """
    import torch

    original = model.generate

    @functools.wraps(original)
    def generate(*args: Any, input_ids: Any = None, attention_mask: Any = None, **kwargs: Any) -> Any:
        other_inputs = kwargs.get("past_key_values") is not None or any(
            isinstance(v, torch.Tensor) for v in kwargs.values())
        if args or input_ids is None or attention_mask is None or other_inputs or input_ids.shape[1] < 2:
            return original(*args, input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        cache = prefill_shared(model, input_ids, attention_mask)
        if cache is None:
            return original(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        return original(input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache, **kwargs)

    model.generate = generate


def prefill_shared(model: Any, input_ids: Any, attention_mask: Any) -> Any:
    """A DynamicCache holding every row's prompt except its last token, computed once per distinct row; or None.

    Positions follow ``generate``'s rule for left padding (cumulative sum of the mask), so decoding continues
    exactly where a full prefill would have put it.
    """
    import torch
    from transformers import DynamicCache

    rows = torch.cat([input_ids, attention_mask.to(input_ids.dtype)], dim=1)
    unique, inverse = torch.unique(rows, dim=0, return_inverse=True)
    if unique.shape[0] == rows.shape[0]:
        return None
    width = input_ids.shape[1]
    ids, mask = unique[:, :width - 1], unique[:, width:2 * width - 1]
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    cache = DynamicCache(config=getattr(model, "config", None))
    with torch.no_grad():
        model(input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=cache, use_cache=True)
    cache.reorder_cache(inverse)
    return cache


def merged_lora_generation(model: Any) -> bool:
    """Make ``model.generate`` run on merged copies of its LoRA linear layers; False (unchanged) when the model
    is not a plain-LoRA PEFT model (DoRA, quantized or non-linear LoRA layers keep peft's own path)."""
    import torch
    from peft.tuners.lora import Linear, LoraLayer

    layers = [m for m in model.modules() if isinstance(m, LoraLayer)]
    plain = all(type(m) is Linear and not any(m.use_dora.values()) and not any(m.lora_bias.values())
                for m in layers)
    if not layers or not plain or not hasattr(model, "disable_adapter"):
        return False
    original = model.generate

    @functools.wraps(original)
    def generate(*args: Any, **kwargs: Any) -> Any:
        swapped = []
        try:
            with torch.no_grad():
                for m in layers:
                    active = [a for a in m.active_adapters if a in m.lora_A]
                    if active:
                        base = m.base_layer
                        merged = base.weight + sum(m.get_delta_weight(a) for a in active)
                        swapped.append((base, base.weight))
                        base.weight = torch.nn.Parameter(merged, requires_grad=False)
            with model.disable_adapter():
                return original(*args, **kwargs)
        finally:
            for base, weight in swapped:
                base.weight = weight

    model.generate = generate
    return True


def apply_speedups(trainer: Any, cfg: Any) -> list[str]:
    """Apply the run config's speed-ups (``cpu_threads``, ``cpu_autocast_training``, ``shared_prefill``,
    ``merged_generation``)."""
    import torch

    applied = []
    if cfg.cpu_threads is not None and not torch.cuda.is_available():
        threads = busy_aware_threads() if cfg.cpu_threads == "auto" else int(cfg.cpu_threads)
        torch.set_num_threads(threads)
        applied.append(f"cpu_threads={threads}")
    if cfg.cpu_autocast_training and not torch.cuda.is_available():
        autocast_training_pass(trainer)
        applied.append("cpu_autocast_training")
    if cfg.shared_prefill and not cfg.args.use_vllm:
        shared_prompt_prefill(trainer.model)
        applied.append("shared_prefill")
    if cfg.merged_generation and not cfg.args.use_vllm and merged_lora_generation(trainer.model):
        applied.append("merged_generation")
    if applied:
        print("speed-ups: " + ", ".join(applied), flush=True)
    return applied


def busy_cores(window: float = 0.5) -> float:
    """Cores busy with any work over ``window`` seconds (Linux /proc/stat), sampled while this process waits.

    The load average is no use here: it lags by a minute and counts this process's own previous work.
    Where /proc/stat is missing, the 1-minute load average stands in.
    """
    import os
    import time

    def sample() -> tuple[int, int]:
        fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
        return sum(fields), fields[3] + (fields[4] if len(fields) > 4 else 0)  # total, idle + iowait

    try:
        total0, idle0 = sample()
        time.sleep(window)
        total1, idle1 = sample()
    except (OSError, ValueError, IndexError):
        return os.getloadavg()[0]
    share = 1.0 - (idle1 - idle0) / max(1, total1 - total0)
    return share * (os.cpu_count() or 1)


def busy_aware_threads(cores: int | None = None, busy: float | None = None) -> int:
    """Threads for torch on a CPU run: the cores not busy with other jobs, at least one.

    OpenMP kernels wait for their slowest thread at every op, so on cores shared with other jobs two threads
    measured up to 2x slower than one; on idle cores all of them are used.
    """
    import os

    cores = cores or os.cpu_count() or 1
    busy = busy_cores() if busy is None else busy
    return max(1, min(cores, round(cores - busy)))
