"""CPU speed-ups for TRL's GRPOTrainer that its config cannot express, applied to a built trainer.

On CPU a GRPO step is generation (prefill + decoding) plus the training forward and backward. TRL's
``bf16=True`` wraps the model's forward in autocast everywhere, generation included; and it hands
``generate`` every prompt ``num_generations`` times, so the same prompt is prefilled once per completion.

- ``autocast_training_pass``: bf16 autocast around the loss computation only (with ``bf16: false``, so
  generation and sampling stay fp32). bf16 can pay on CPUs with native bf16 only (elsewhere it is emulated and
  slower than fp32), and only where the micro-batch has enough tokens to outweigh re-casting the frozen base
  weights on every call (``cpu_choice`` decides ``auto`` with a probe of the training pass).
- ``shared_prompt_prefill``: prefill each distinct prompt once, then copy its KV cache to the group's rows
  before decoding. Same tokens in, same distribution out; the prompt's prefill cost falls by the group size.
- ``shared_prompt_training_forward``: the same for the training forward and backward: a group's completions
  attend to one copy of their prompt's keys and values, and the prompt's gradient is computed once.
- ``merged_lora_generation``: generate with each LoRA delta folded into a temporary copy of its base weight, so
  a decoding step runs one matmul per linear layer instead of three (plus dropout, scale and add). The
  trained weights are never touched (the copies are dropped after ``generate``); only rounding differs.

Measured figures are in ``benchmarks/bench_trainer.py`` (``--compare choices``: on vs off vs auto, per CPU).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import time
from collections.abc import Iterator
from typing import Any

from grpo_fast.config import RunConfig
from grpo_fast.models.cpu_choice import as_record, choose, cpu_class
from grpo_fast.models.generation import auto_note, choose_engine, set_engine


def mark(wrapper: Any, speedup: str) -> Any:
    """Tag a wrapper with the speed-up it installs. ``functools.wraps`` copies the tags of the function it wraps,
    so the outermost wrapper carries every speed-up beneath it (stages share one model: install each once)."""
    setattr(wrapper, f"grpo_fast_{speedup}", True)
    return wrapper


def installed(fn: Any, speedup: str) -> bool:
    return getattr(fn, f"grpo_fast_{speedup}", False)


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
    if installed(original, "shared_prompt_prefill"):
        return

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

    model.generate = mark(generate, "shared_prompt_prefill")


def prefill_shared(model: Any, input_ids: Any, attention_mask: Any) -> Any:
    """A DynamicCache holding every row's prompt except its last token, computed once per distinct row; or None.

    Positions follow ``generate``'s rule for left padding (cumulative sum of the mask), so decoding continues
    exactly where a full prefill would have put it.
    """
    import torch

    with torch.no_grad():
        return shared_prefix_cache(model, input_ids[:, :-1], attention_mask[:, :-1], generation_positions=True)


def shared_prefix_cache(model: Any, prefix_ids: Any, prefix_mask: Any, generation_positions: bool) -> Any:
    """The KV cache of ``prefix_ids``, computed once per distinct (ids, mask) row and indexed out to every row;
    None when every row differs. Gradients, where enabled, flow back through the one copy to the weights.

    ``generation_positions``: positions by ``generate``'s rule (cumulative sum of the mask); otherwise the
    model's default (0..n-1 with padding counted), which is what a training forward without a cache uses.
    """
    import torch
    from transformers import DynamicCache

    rows = torch.cat([prefix_ids, prefix_mask.to(prefix_ids.dtype)], dim=1)
    unique, inverse = torch.unique(rows, dim=0, return_inverse=True)
    if unique.shape[0] == rows.shape[0]:
        return None
    width = prefix_ids.shape[1]
    ids, mask = unique[:, :width], unique[:, width:]
    positions = (mask.cumsum(-1) - 1).clamp(min=0) if generation_positions else None
    cache = DynamicCache(config=getattr(model, "config", None))
    model(input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=cache, use_cache=True)
    cache.reorder_cache(inverse)
    return cache


def shared_prompt_training_forward(model: Any) -> None:
    """Make the training/scoring forward (TRL's: ``input_ids``, ``attention_mask``, ``logits_to_keep``, no cache)
    run each group's shared prompt once: the prompt's keys and values are computed for one copy and every
    completion of the group attends to them. Same logits and gradients up to rounding; the prompt's share of
    the forward and backward falls by the group size. Other calls (generation, a given cache, extra tensors such
    as images) go through unchanged. Needs gradient checkpointing off (checkpointed layers drop the cache).
    """
    import torch

    original = model.forward
    if installed(original, "shared_prompt_training_forward"):
        return

    @functools.wraps(original)
    def forward(*args: Any, input_ids: Any = None, attention_mask: Any = None, logits_to_keep: Any = 0,
                **kwargs: Any) -> Any:
        keep = logits_to_keep if isinstance(logits_to_keep, int) else 0
        other_inputs = kwargs.get("use_cache") or kwargs.get("past_key_values") is not None or any(
            isinstance(v, torch.Tensor) for v in kwargs.values())
        cache = None
        if not (args or input_ids is None or attention_mask is None or other_inputs or keep < 1
                or input_ids.shape[1] - keep < 1):
            split = input_ids.shape[1] - keep
            cache = shared_prefix_cache(model, input_ids[:, :split], attention_mask[:, :split],
                                        generation_positions=False)
        if cache is None:
            return original(*args, input_ids=input_ids, attention_mask=attention_mask,
                            logits_to_keep=logits_to_keep, **kwargs)
        return original(input_ids=input_ids[:, split:], attention_mask=attention_mask, past_key_values=cache,
                        logits_to_keep=keep, **kwargs)

    model.forward = mark(forward, "shared_prompt_training_forward")


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
    if installed(original, "merged_lora_generation"):
        return True  # a second stage on the same model: merging twice would add the adapter twice

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

    model.generate = mark(generate, "merged_lora_generation")
    return True


def apply_speedups(trainer: Any, cfg: RunConfig) -> dict[str, Any]:
    """Apply the run config's speed-ups (``cpu_threads``, ``cpu_autocast_training``, ``shared_prefill``,
    ``merged_generation``) and its generation engine (``generation``), ``auto`` decided by ``cpu_choice`` and
    ``generation`` from this machine; print and return what was chosen and why (summary.json's ``cpu_choices``)."""
    import torch

    cuda = torch.cuda.is_available()
    threads = set_cpu_threads(cfg)
    cls = None if cuda else cpu_class()
    choices = choose(cfg, cls=cls, threads=threads, cuda=cuda)
    engine = choose_engine(cfg, cuda)
    if engine.value:
        set_engine(trainer, engine.value)
        choices.append(engine)
    elif auto_note(cfg):  # colocated vLLM generates by generation: auto's measurement: the record says so too
        choices.append(dataclasses.replace(engine, value="colocated vLLM"))
    chosen = {c.key: c.value for c in choices}
    if chosen.get("cpu_autocast_training"):
        autocast_training_pass(trainer)
    # a static cache is allocated by generate itself: a prefilled dynamic cache cannot be handed to it
    if chosen.get("shared_prefill") and not cfg.args.use_vllm and engine.value == "generate":
        shared_prompt_prefill(trainer.model)
    if chosen.get("shared_prefill") and not cfg.args.gradient_checkpointing:
        shared_prompt_training_forward(trainer.model)
    if chosen.get("merged_generation") and not cfg.args.use_vllm and not merged_lora_generation(trainer.model):
        for c in choices:
            if c.key == "merged_generation":
                c.value, c.why = False, "the model is not a plain-LoRA model (DoRA, quantized or full weights)"
    if choices:
        head = "speed-ups" + (f" on {cls.label}" if cls else "") + ":\n"
        print(head + "\n".join(f"  {c.line()}" for c in choices), flush=True)
    return as_record(choices, cls)


def busy_cores(window: float = 0.5) -> float:
    """Cores busy with any work over ``window`` seconds (Linux /proc/stat), sampled while this process waits.

    The load average is no use here: it lags by a minute and counts this process's own previous work.
    Where /proc/stat is missing, the 1-minute load average stands in.
    """
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


def set_cpu_threads(cfg: RunConfig) -> int | None:
    """torch's threads for a CPU run, as ``cpu_threads`` says (``auto``: the cores free now); None on a GPU or
    when unset (torch's default: every core)."""
    import torch

    if cfg.cpu_threads is None or torch.cuda.is_available():
        return None
    threads = busy_aware_threads() if cfg.cpu_threads == "auto" else int(cfg.cpu_threads)
    torch.set_num_threads(threads)
    return threads


def busy_aware_threads(cores: int | None = None, busy: float | None = None) -> int:
    """Threads for torch on a CPU run: the cores not busy with other jobs, at least one.

    OpenMP kernels wait for their slowest thread at every op, so on cores shared with other jobs two threads
    measured up to 2x slower than one; on idle cores all of them are used.
    """
    cores = cores or os.cpu_count() or 1
    busy = busy_cores() if busy is None else busy
    return max(1, min(cores, round(cores - busy)))


@contextlib.contextmanager
def use_engine(trainer: Any, engine: str) -> Iterator[None]:
    """One of ``generation.ENGINES`` for the duration (the benchmark alternates them on one trainer)."""
    model = trainer.model
    own = model.__dict__.get("generate")
    set_engine(trainer, "generate" if engine in ("trl", "kit") else engine)
    if engine == "kit":
        shared_prompt_prefill(model)
        if not merged_lora_generation(model):
            raise ValueError("the kit's engine needs a plain-LoRA model")
    try:
        yield
    finally:
        if own is None:
            model.__dict__.pop("generate", None)
        else:
            model.generate = own
        set_engine(trainer, "generate")
