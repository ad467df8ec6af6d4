"""Colocated vLLM on CPU at vLLM's own speed: packed weights, packed again after each weight sync.

``prepare_vllm_on_cpu`` readies TRL's colocated engine for vLLM's CPU build (an opt-in correctness check:
``GRPO_FAST_VLLM_CPU=1``): its environment, eager mode, the packed dtype, and plain weights kept beside packed ones.

When a model loads, vLLM's CPU build hands each linear layer's weight to ``dispatch_cpu_unquantized_gemm``
(``process_weights_after_loading``), which packs it for its oneDNN or AMX (sgl-kernel) GEMM and drops the plain
weight. TRL's colocate sync writes the new weights into the plain parameters (``model.load_weights``), so it would
find nothing to load into, and the packed copies would stay stale anyway. Here every layer keeps its plain weight
(``remove_weight=False``, as vLLM does for the embedding that doubles as lm_head), TRL loads the merged weights
into it, and the layers the sync touched are packed again from it. With LoRA only the adapted layers change, so only
their merged weights are pushed (TRL pushes every parameter: the embedding alone is a fifth of a 135M model),
computed beside the training weights rather than by peft's merge and unmerge in place.

Each sync's cost (push, pack, MB) goes to ``vllm_colocate_sync.jsonl`` in the run directory; ``vllm_sync`` checks
that vLLM's log-probabilities of a fixed completion match the trainer's after a sync.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from grpo_fast.config import RunConfig
from grpo_fast.models import machine
from grpo_fast.models.cpu_choice import cpu_class

FILE = "vllm_colocate_sync.jsonl"
VLLM_CPU_ENV_DEFAULTS = {"VLLM_CPU_KVCACHE_SPACE": "1"}


def vllm_cpu_environment() -> None:
    """vLLM's CPU build reads its KV-cache size and thread binding from the environment (not set_num_threads)."""
    for key, value in VLLM_CPU_ENV_DEFAULTS.items():
        os.environ.setdefault(key, value)
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", ",".join(map(str, cores)))


def packed_dtype() -> str:
    """bf16 where the CPU computes it natively (AVX512-BF16/AMX: vLLM's fastest CPU kernels), fp32 elsewhere
    (emulated bf16 is several times slower than fp32: models/cpu_choice.py)."""
    return "bfloat16" if cpu_class().native_bf16 else "float32"


def keep_plain_weights() -> None:
    """Pack every linear layer as vLLM does, but keep its plain weight (the sync loads into it)."""
    from vllm.model_executor.layers import utils

    dispatch = getattr(utils, "dispatch_cpu_unquantized_gemm", None)
    if dispatch is None or getattr(dispatch, "_grpo_fast", False):
        return  # a vLLM without weight packing on CPU, or done already

    def keep(layer: Any, remove_weight: bool) -> None:
        dispatch(layer, remove_weight=False)

    keep._grpo_fast = True  # type: ignore[attr-defined]
    keep.original = dispatch  # type: ignore[attr-defined]
    utils.dispatch_cpu_unquantized_gemm = keep


def prepare_vllm_on_cpu() -> None:
    """Make TRL's colocated vLLM engine start on CPU: KV-cache size, threads, engine arguments, and weights that
    stay packed for vLLM's CPU kernels across TRL's syncs. Never used on CUDA.

    TRL builds the engine itself and has no option for ``enforce_eager``/``dtype``, so its ``LLM`` is wrapped
    to add them: eager mode, bf16 where the CPU has it natively (fp32 elsewhere).
    """
    vllm_cpu_environment()
    keep_plain_weights()
    from trl.generation import vllm_generation

    if getattr(vllm_generation.LLM, "_grpo_fast_cpu", False):
        return
    wrapped = functools.partial(vllm_generation.LLM, enforce_eager=True, dtype=packed_dtype())
    wrapped._grpo_fast_cpu = True  # type: ignore[attr-defined]
    vllm_generation.LLM = wrapped


def pack_layers(model: Any, names: set[str] | None = None) -> int:
    """Pack again, from their plain weights, the layers of vLLM's ``model`` that hold ``names`` (vLLM's parameter
    names as TRL pushes them: ``...q_proj.weight`` lives in ``...qkv_proj``); all packed layers if None. Returns the
    number packed."""
    from vllm.model_executor.layers import utils

    dispatch = getattr(utils.dispatch_cpu_unquantized_gemm, "original", utils.dispatch_cpu_unquantized_gemm)
    packed_as = {part: whole for whole, parts in getattr(model, "packed_modules_mapping", {}).items()
                 for part in parts}
    modules = dict(model.named_modules())
    if names is None:
        wanted = [m for m in modules.values() if hasattr(m, "cpu_linear")]
    else:
        paths = set()
        for name in names:
            path, _, leaf = name.rpartition(".")[0].rpartition(".")
            paths.add(f"{path}.{packed_as.get(leaf, leaf)}" if path else packed_as.get(leaf, leaf))
        if not paths <= modules.keys():  # a model that renames weights as it loads them: pack every layer
            return pack_layers(model)
        wanted = [modules[p] for p in sorted(paths) if hasattr(modules[p], "cpu_linear")]
    for layer in wanted:
        if layer.weight.numel():
            dispatch(layer, remove_weight=False)
    return len(wanted)


def colocated_on_cpu(cfg: RunConfig) -> bool:
    """Colocate mode on a machine without CUDA."""
    return bool(cfg.args.use_vllm and cfg.args.vllm_mode == "colocate" and not machine.cuda_available())


@contextlib.contextmanager
def packed_colocate(cfg: RunConfig, run_dir: Path) -> Iterator[None]:
    """While a GRPOTrainer is built: its colocated vLLM on CPU re-packs after each sync (colocate on CPU only)."""
    if not colocated_on_cpu(cfg):
        yield
        return
    from trl.trainer import grpo_trainer

    prepare_vllm_on_cpu()  # each stage's own config decides (generation: auto may turn vLLM on for one stage only)

    original = grpo_trainer.VLLMGeneration
    grpo_trainer.VLLMGeneration = functools.partial(_generation_class(), run_dir=run_dir)
    try:
        yield
    finally:
        grpo_trainer.VLLMGeneration = original


def colocated_generation(model: Any, tokenizer: Any, run_dir: Path, rows: int, **sampling: Any) -> Any:
    """TRL's colocated vLLM engine for ``model`` as the kit runs it on CPU (packed weights, the kit's sync), built
    outside a trainer with the arguments TRL's GRPOTrainer passes it (``grpo_fast.run.vllm_measure`` times it)."""
    from accelerate import Accelerator

    prepare_vllm_on_cpu()
    return _generation_class()(model=model, accelerator=Accelerator(cpu=True), processing_class=tokenizer,
                               mode="colocate", max_num_seqs=rows, logprobs=0, run_dir=run_dir, **sampling)


def merged_lora(model: Any) -> list[tuple[str, Any]] | None:
    """A plain-LoRA peft model's adapted layers as (module name, layer); None for anything else (DoRA, quantized
    or fan-in-fan-out bases, several adapters, trainable non-LoRA weights): TRL's own merge serves those."""
    import torch
    from peft.tuners.lora import LoraLayer

    if not hasattr(model, "merge_adapter"):
        return None
    layers = [(n, m) for n, m in model.named_modules() if isinstance(m, LoraLayer)]
    for _, layer in layers:
        if (list(layer.active_adapters) != ["default"] or layer.use_dora.get("default")
                or getattr(layer, "lora_bias", {}).get("default", False)
                or type(layer.get_base_layer()) is not torch.nn.Linear or getattr(layer, "fan_in_fan_out", False)
                or "default" not in layer.lora_A):
            return None
    trainable = [n for n, p in model.named_parameters() if p.requires_grad and "lora_" not in n]
    return layers if layers and not trainable else None


@functools.cache
def _generation_class() -> type:
    """TRL's VLLMGeneration whose colocate sync pushes the changed weights only and packs them again."""
    from trl.generation.vllm_generation import VLLMGeneration

    class PackedColocateGeneration(VLLMGeneration):
        def __init__(self, *args: Any, run_dir: Path, **kwargs: Any):
            self.run_dir = Path(run_dir)
            self.syncs = 0
            self.pushed: list[str] = []
            self.pushed_bytes = 0
            super().__init__(*args, **kwargs)

        def _merged_weights(self, layers: list[tuple[str, Any]]) -> Iterator[tuple[str, Any]]:
            """Each adapted layer's merged weight W + scale * B @ A, computed beside the training weights: peft's
            in-place merge and unmerge of every layer (TRL's way) measured 8x slower on CPU (docs/scale.md)."""
            import torch

            with torch.no_grad():
                for name, layer in layers:
                    merged = torch.addmm(layer.get_base_layer().weight, layer.lora_B["default"].weight,
                                         layer.lora_A["default"].weight, alpha=layer.scaling["default"])
                    name = f"{name}.weight".removeprefix("base_model.model.")
                    yield self._fix_param_name_to_vllm(name), merged

        def _counted(self, weights: Iterator[tuple[str, Any]]) -> Iterator[tuple[str, Any]]:
            for name, param in weights:
                self.pushed.append(name)
                self.pushed_bytes += param.numel() * param.element_size()
                yield name, param

        def sync_weights(self) -> None:
            layers = merged_lora(self.model)
            if self.mode != "colocate" or self.enable_sleep_mode or self._dist.is_zero3 or self._dist.is_fsdp:
                return super().sync_weights()
            start = time.perf_counter()
            self.pushed, self.pushed_bytes = [], 0
            engine = self.llm.llm_engine.model_executor.driver_worker.model_runner.model
            weights = self._merged_weights(layers) if layers else self._iter_named_params()
            engine.load_weights(self._counted(weights))  # one call: vLLM's loader walks the model once
            self.llm.reset_prefix_cache()
            loaded = time.perf_counter()
            packed = pack_layers(engine, set(self.pushed) if layers else None)
            done = time.perf_counter()
            self.syncs += 1
            record = {"sync": self.syncs, "pushed_mb": round(self.pushed_bytes / 2**20, 2),
                      "tensors": len(self.pushed), "layers_packed": packed, "merged_here": bool(layers),
                      "load_ms": round(1000 * (loaded - start), 1), "pack_ms": round(1000 * (done - loaded), 1),
                      "sync_ms": round(1000 * (done - start), 1)}
            with (self.run_dir / FILE).open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(record) + "\n")
            return None

    return PackedColocateGeneration
