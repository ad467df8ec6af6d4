"""The GPU path's decisions, run on CPU with the real libraries: what the kit hands Unsloth, TRL and vLLM.

Each test here failed on the kit before issue 10: the vLLM rank whitelist, Unsloth's rewritten trainer
defaults, one vLLM memory share, the 4-bit compute dtype, full fine-tuning in fp16, vLLM on CPU as an opt-in.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from grpo_fast import models
from grpo_fast.config import grpo_args
from grpo_fast.errors import UserError
from grpo_fast.models import gpu
from grpo_fast.models.plan import plan_input
from grpo_fast.run.prepare import prepare
from grpo_fast.run.resolve import resolve_config


def _cfg(tiny_model_dir, *overrides):
    return resolve_config("demo", [f"model={tiny_model_dir}", *overrides])


# --------------------------------------------------------------------------- vLLM LoRA ranks (defect 7)


def test_vllm_lora_rank_outside_the_whitelist_is_refused_at_config_time(tiny_model_dir, monkeypatch):
    monkeypatch.setenv(models.VLLM_CPU_ENV, "1")  # use_vllm accepted on this CPU, so the rank is what fails
    monkeypatch.setattr(models.machine, "vllm_cpu_opted_in", lambda: True)
    cfg = _cfg(tiny_model_dir, "use_vllm=true", "lora_r=24")
    with pytest.raises(UserError) as err:
        prepare(cfg)
    text = str(err.value)
    assert "lora_r 24" in text and "1, 8, 16, 32, 64, 128, 256, 320, 512" in text and "command line" in text
    prepare(_cfg(tiny_model_dir, "use_vllm=true", "lora_r=32"))  # a served rank passes
    prepare(_cfg(tiny_model_dir, "lora_r=24"))  # without vLLM any rank is fine


# --------------------------------------------------------------------------- vLLM on CPU is an explicit opt-in


def test_use_vllm_on_cpu_needs_the_explicit_opt_in():
    with pytest.raises(UserError, match="use_vllm"):
        models.select_backend(use_vllm=True, cuda=False, unsloth=False, vllm_cpu=False)
    backend = models.select_backend(use_vllm=True, cuda=False, unsloth=False, vllm_cpu=True)
    assert backend.name == "transformers" and models.VLLM_CPU_ENV in backend.reason
    with pytest.raises(UserError, match="load_in_4bit"):  # the opt-in covers vLLM only
        models.select_backend(load_in_4bit=True, use_vllm=True, cuda=False, unsloth=False, vllm_cpu=True)
    assert models.VLLM_CPU_ENV not in models.select_backend(cuda=False, unsloth=False, vllm_cpu=True).reason


# --------------------------------------------------------------------------- Unsloth's defaults pinned (defect 8)


def test_every_default_unsloth_rewrites_is_passed_explicitly_and_equals_trl(tiny_model_dir):
    from trl import GRPOConfig

    cfg = _cfg(tiny_model_dir)
    args = grpo_args.trainer_args(dict(cfg.grpo), GRPOConfig)
    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    changed = set(grpo_args.UNSLOTH_CHANGED_DEFAULTS) & fields - {"seed"}
    assert changed <= set(args), changed - set(args)
    # on plain TRL the pins change nothing: the same config object either way
    pinned = GRPOConfig(output_dir="x", seed=1, **args)
    plain = GRPOConfig(output_dir="x", seed=1, **cfg.grpo)
    same = fields - {"epsilon_high"}  # None in TRL's config; its trainer reads None as epsilon, the value pinned
    assert {f: getattr(pinned, f) for f in same} == {f: getattr(plain, f) for f in same}
    # the values a user set win over the pins; Unsloth's values are not what TRL defaults to
    assert grpo_args.trainer_args({"weight_decay": 0.1}, GRPOConfig)["weight_decay"] == 0.1
    assert args["gradient_accumulation_steps"] == 1 and args["weight_decay"] == 0.0 and args["warmup_steps"] == 0
    assert plain.epsilon_high is None and args["epsilon_high"] == plain.epsilon  # not Unsloth's explicit-dapo 0.28
    assert args["mask_truncated_completions"] is False and args["vllm_importance_sampling_correction"] is True


# --------------------------------------------------------------------------- one vLLM memory share


def test_one_vllm_memory_share_reaches_trl_unsloth_and_the_planner(tiny_model_dir):
    from trl import GRPOConfig

    cfg = _cfg(tiny_model_dir, "vllm_gpu_memory_utilization=0.45")
    assert GRPOConfig(output_dir="x", **grpo_args.trainer_args(dict(cfg.grpo))).vllm_gpu_memory_utilization == 0.45
    assert gpu.unsloth_load_kwargs(cfg, "m")["gpu_memory_utilization"] == 0.45
    assert plan_input(cfg, str(tiny_model_dir), 24.0).vllm_gpu_memory_utilization == 0.45
    default = _cfg(tiny_model_dir)
    trl_default = next(f.default for f in dataclasses.fields(GRPOConfig) if f.name == "vllm_gpu_memory_utilization")
    assert gpu.unsloth_load_kwargs(default, "m")["gpu_memory_utilization"] == trl_default
    with pytest.raises(UserError) as err:  # the old kit name says what it became
        _cfg(tiny_model_dir, "gpu_memory_utilization=0.5")
    assert "renamed" in str(err.value) and "vllm_gpu_memory_utilization" in str(err.value)


# --------------------------------------------------------------------------- precision on cards without bf16


def test_4bit_compute_dtype_follows_the_training_precision():
    from transformers import BitsAndBytesConfig

    t4 = BitsAndBytesConfig(**gpu.bnb_config_kwargs("fp16"))
    a100 = BitsAndBytesConfig(**gpu.bnb_config_kwargs("bf16"))
    assert t4.bnb_4bit_compute_dtype == torch.float16 and a100.bnb_4bit_compute_dtype == torch.bfloat16
    assert t4.load_in_4bit and t4.bnb_4bit_quant_type == "nf4"


def test_full_finetuning_in_fp16_keeps_fp32_master_weights():
    """fp16 weights make the grad scaler refuse to unscale ("Attempting to unscale FP16 gradients"), as on a T4."""
    def unscale(dtype):
        layer = torch.nn.Linear(8, 8).to(dtype)
        opt = torch.optim.AdamW(layer.parameters())
        scaler = torch.amp.GradScaler("cpu")
        with torch.autocast("cpu", dtype=torch.float16):
            loss = layer(torch.randn(2, 8, dtype=dtype)).float().sum()
        scaler.scale(loss).backward()
        scaler.unscale_(opt)

    with pytest.raises(ValueError, match="unscale FP16 gradients"):
        unscale(torch.float16)  # what the kit loaded before: dtype fp16 on a non-bf16 card
    full = gpu.weights_dtype(lora=False, precision="fp16", cuda=True)
    assert full == torch.float32
    unscale(full)
    assert gpu.weights_dtype(lora=True, precision="fp16", cuda=True) == torch.float16  # LoRA: base frozen
    assert gpu.weights_dtype(lora=False, precision="bf16", cuda=True) == torch.bfloat16


def test_unsloth_full_finetuning_kwargs(tiny_model_dir):
    cfg = _cfg(tiny_model_dir, "lora=false", "use_vllm=true", "fp16=true")
    kwargs = gpu.unsloth_load_kwargs(cfg, "m")
    assert kwargs["full_finetuning"] is True and kwargs["fast_inference"] is False
    assert "max_lora_rank" not in kwargs and kwargs["dtype"] == torch.float16
    lora = gpu.unsloth_load_kwargs(_cfg(tiny_model_dir, "use_vllm=true", "lora_r=32"), "m")
    assert lora["fast_inference"] is True and lora["max_lora_rank"] == 32 and "full_finetuning" not in lora


def test_full_finetuning_with_vllm_on_unsloth_is_refused_or_switched_off(tiny_model_dir):
    unsloth = models.Backend("unsloth", "simulated")
    asked = _cfg(tiny_model_dir, "lora=false", "use_vllm=true")
    with pytest.raises(UserError) as err:
        gpu.check_gpu_path(asked, unsloth)
    assert "serves LoRA adapters only" in str(err.value) and "backend: transformers" in str(err.value)
    from grpo_fast.config import build_config
    from grpo_fast.run.resolve import PROFILES

    from_profile = build_config([(PROFILES["cpu"], "profile cpu"), ({"use_vllm": True}, "profile memory"),
                                 ({"model": str(tiny_model_dir), "lora": False}, "command line")])
    gpu.check_gpu_path(from_profile, unsloth)
    assert from_profile.args.use_vllm is False and from_profile.grpo["use_vllm"] is False
    assert any(n.startswith("use_vllm=False: the profile turned vLLM on") for n in from_profile.notes)
    plain = _cfg(tiny_model_dir, "lora=false")
    gpu.check_gpu_path(plain, models.Backend("transformers", ""))
    assert plain.notes == [n for n in plain.notes if not n.startswith("use_vllm")]


def test_vllm_server_mode_without_lora_on_cpu_is_refused_before_any_weights(tiny_model_dir, monkeypatch):
    """A full fine-tune reaches a vLLM server only through TRL 1.14.2's NCCL weight push (VLLMClient.init_communicator
    raises NotImplementedError for a non-CUDA device): on CPU the run would load the model, then fail at the first
    step. A LoRA run syncs the server by adapter (no NCCL), so it passes the check (tests_vllm runs it for real)."""
    monkeypatch.setattr(models.machine, "vllm_cpu_opted_in", lambda: True)
    with pytest.raises(UserError) as err:
        prepare(_cfg(tiny_model_dir, "use_vllm=true", "vllm_mode=server", "lora=false"))
    assert "vllm_mode: server with lora: false needs CUDA" in str(err.value) and "command line" in str(err.value)
    prepare(_cfg(tiny_model_dir, "use_vllm=true", "vllm_mode=server"))  # LoRA: by adapter
    prepare(_cfg(tiny_model_dir, "use_vllm=true", "vllm_mode=colocate"))  # colocate runs on CPU (make test-vllm)


def _installed(root, name: str, version: str) -> None:
    """A distribution's metadata on disk, as pip leaves it (the version check reads nothing else)."""
    info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_4bit_inside_a_vllm_without_bitsandbytes_is_refused_with_the_plugin_named(tmp_path, monkeypatch):
    """vLLM >= 0.28 has no bitsandbytes: load_in_4bit + use_vllm needs the plugin the GPU lock pins, said before
    any weights load; an older vLLM (in tree), the plugin installed, or no 4-bit inside vLLM pass."""
    from types import SimpleNamespace

    cfg = resolve_config("demo", ["load_in_4bit=true", "use_vllm=true"])
    new, old, plugin = tmp_path / "new", tmp_path / "old", tmp_path / "plugin"
    _installed(new, "vllm", "0.32.0")
    _installed(old, "vllm", "0.27.1")
    (plugin / "vllm_bnb_plugin").mkdir(parents=True)
    (plugin / "vllm_bnb_plugin" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(new))
    with pytest.raises(UserError) as err:
        gpu.check_gpu_path(cfg, SimpleNamespace(name="unsloth"))
    assert "pip install vllm-bnb-plugin" in err.value.fix and "load_in_4bit" in err.value.where
    assert gpu.missing_vllm_plugin(gpu.vllm_quantization(load_in_4bit=False, use_vllm=True)) is None
    monkeypatch.syspath_prepend(str(plugin))
    assert gpu.missing_vllm_plugin("bitsandbytes") is None
    monkeypatch.undo()
    monkeypatch.syspath_prepend(str(old))
    assert gpu.missing_vllm_plugin("bitsandbytes") is None
