"""VRAM planner: parameter counts, monotonicity, propose(), resolve(), profiles and calibration (no weights)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from grpo_fast.errors import UserError
from grpo_fast.models.plan import (
    GIB,
    MemoryPlan,
    PlanInput,
    compare,
    estimate,
    measured_peak_gb,
    profile_for,
    propose,
)
from grpo_fast.models.shapes import KNOWN_MODELS, ModelShape

# Published totals (model cards / safetensors metadata), in parameters.
PUBLISHED = {
    "Qwen/Qwen2.5-0.5B-Instruct": 0.49e9,
    "Qwen/Qwen2.5-1.5B-Instruct": 1.54e9,
    "Qwen/Qwen2.5-3B-Instruct": 3.09e9,
    "Qwen/Qwen2.5-7B-Instruct": 7.61e9,
    "meta-llama/Llama-3.2-1B-Instruct": 1.24e9,
    "meta-llama/Llama-3.2-3B-Instruct": 3.21e9,
    "meta-llama/Llama-3.1-8B-Instruct": 8.03e9,
    "HuggingFaceTB/SmolLM2-135M-Instruct": 134.5e6,
    "Qwen/Qwen3-0.6B": 0.6e9,
    "Qwen/Qwen3-8B": 8.2e9,
}


def shape(name: str = "Qwen/Qwen2.5-1.5B-Instruct") -> ModelShape:
    return ModelShape.resolve(name)


@pytest.mark.parametrize("name,published", PUBLISHED.items())
def test_parameter_count_matches_published_total(name: str, published: float) -> None:
    assert ModelShape.resolve(name).n_params == pytest.approx(published, rel=0.01)


def test_every_table_entry_resolves() -> None:
    for name in KNOWN_MODELS:
        assert ModelShape.resolve(name).n_params > 1e8


def test_from_pretrained_config_object() -> None:
    from transformers import LlamaConfig

    cfg = LlamaConfig(**{k: v for k, v in KNOWN_MODELS["HuggingFaceTB/SmolLM2-135M-Instruct"].items()
                         if k != "model_type"})
    assert ModelShape.from_config(cfg) == shape("HuggingFaceTB/SmolLM2-135M-Instruct")


def test_resolve_local_dir_aliases_and_unknown(tmp_path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(KNOWN_MODELS["Qwen/Qwen2.5-1.5B-Instruct"]))
    assert ModelShape.resolve(str(tmp_path)) == shape()
    for alias in ("unsloth/Qwen2.5-1.5B-Instruct", "unsloth/Qwen2.5-1.5B-Instruct-bnb-4bit", "Qwen/Qwen2.5-1.5B"):
        assert ModelShape.resolve(alias) == shape()
    assert ModelShape.resolve("unsloth/Meta-Llama-3.1-8B-Instruct-unsloth-bnb-4bit").n_params == pytest.approx(
        8.03e9, rel=0.01)
    with pytest.raises(UserError) as err:
        ModelShape.resolve("someone/NoSuchModel-3B")
    assert "config.json" in str(err.value) and "Qwen/Qwen2.5-1.5B-Instruct" in str(err.value)


def test_incomplete_config_is_a_user_error() -> None:
    with pytest.raises(UserError, match="hidden_size"):
        ModelShape.from_config({"model_type": "llama"})


@pytest.mark.parametrize("unsloth", [False, True])
def test_monotonic(unsloth: bool) -> None:
    base = PlanInput(shape(), unsloth=unsloth, num_generations=8, per_device_train_batch_size=8)
    gb = estimate(base).total_gb
    # With a fixed micro-batch, a bigger group only grows the generation phase (peak = max of the phases).
    assert estimate(replace(base, num_generations=16)).total_gb >= gb
    # Generation-bound: a whole group is generated at once, micro-batch 1, MHA model with a big KV cache.
    gen_only = replace(base, shape=shape("HuggingFaceTB/SmolLM2-1.7B-Instruct"), per_device_train_batch_size=1)
    assert estimate(replace(gen_only, num_generations=16)).total_gb > estimate(gen_only).total_gb
    assert estimate(replace(base, per_device_train_batch_size=16, num_generations=16)).total_gb > gb
    assert estimate(replace(base, max_completion_length=4096)).total_gb > gb
    assert estimate(replace(base, gradient_checkpointing=False)).total_gb > gb
    assert estimate(replace(base, load_in_4bit=True)).total_gb < gb
    assert estimate(replace(base, lora_r=64)).total_gb > gb


def test_full_finetune_costs_more_and_reference_model_only_without_lora() -> None:
    lora = PlanInput(shape(), beta=0.04)
    full = replace(lora, lora=False, full_finetune=True)
    assert "reference model" not in estimate(lora).components
    assert "reference model" in estimate(full).components
    assert estimate(full).total_gb > estimate(lora).total_gb
    assert estimate(replace(full, optim="adamw_torch")).total_gb > estimate(full).total_gb


def test_vllm_modes() -> None:
    base = PlanInput(shape(), use_vllm=True, card_gb=80, vllm_gpu_memory_utilization=0.5, unsloth=False)
    assert estimate(base).components["vLLM (colocated)"] == pytest.approx(40 * GIB)
    assert "vLLM (colocated)" not in estimate(replace(base, vllm_mode="server")).components


def test_invalid_inputs_are_user_errors() -> None:
    with pytest.raises(UserError):
        PlanInput(shape(), lora=False, load_in_4bit=True, full_finetune=True)
    with pytest.raises(UserError):
        PlanInput(shape(), optim="sgd")
    with pytest.raises(UserError):
        PlanInput(shape(), lora_target=("q_proj", "nope")).lora_params()


def test_table_and_units() -> None:
    plan = estimate(PlanInput(shape(), card_gb=16))
    text = plan.table()
    assert "weights" in text and "total (peak)" in text and "fits" in text
    assert plan.total_gb == pytest.approx(plan.total_bytes / GIB)
    assert plan.allocated_gb < plan.total_gb


@pytest.mark.parametrize("card", [16, 24, 40, 80])
@pytest.mark.parametrize("name", ["HuggingFaceTB/SmolLM2-135M-Instruct", "Qwen/Qwen2.5-1.5B-Instruct",
                                  "Qwen/Qwen2.5-7B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"])
def test_propose_fits_card(card: int, name: str) -> None:
    s = shape(name)
    p = propose(s, card, PlanInput(s, max_completion_length=2048))
    assert estimate(p).total_gb <= card
    assert p.num_generations in (4, 8, 16)
    assert p.num_generations % p.per_device_train_batch_size == 0
    if card < 40:
        assert p.load_in_4bit and p.optim != "adamw_torch" and p.num_generations <= 8
    else:
        assert p.use_vllm and p.dtype == "bf16"


def test_propose_prefers_larger_groups_on_big_cards() -> None:
    s = shape()
    assert propose(s, 80, PlanInput(s)).num_generations == 16
    assert propose(s, 16, PlanInput(s)).num_generations == 8


def test_propose_shrinks_long_completions_on_small_cards() -> None:
    s = shape("meta-llama/Llama-3.1-8B-Instruct")
    p = propose(s, 16, PlanInput(s, max_completion_length=32768, unsloth=False))
    assert p.max_completion_length < 32768 and estimate(p).total_gb <= 16


def test_propose_raises_when_impossible() -> None:
    s = shape("meta-llama/Llama-3.1-8B-Instruct")
    with pytest.raises(UserError) as err:
        propose(s, 4, PlanInput(s))
    msg = str(err.value)
    assert "smaller model" in msg and "4-bit" in msg and "shorter" in msg
    with pytest.raises(UserError):
        propose(s, 24, PlanInput(s, lora=False, full_finetune=True))


def test_profile_thresholds() -> None:
    assert profile_for(None) == "cpu"
    assert profile_for(15.0) == "memory" and profile_for(24) == "memory" and profile_for(39.9) == "memory"
    assert profile_for(40) == "performance" and profile_for(80) == "performance"


def test_measured_peak_and_compare() -> None:
    import torch

    if not torch.cuda.is_available():
        assert measured_peak_gb() is None
    plan = MemoryPlan(PlanInput(shape()), {"weights": 9 * GIB, "cuda context": 1 * GIB})
    assert compare(plan, 10.0) == pytest.approx(-0.1)
    with pytest.raises(ValueError):
        compare(plan, 0.0)


# ---- calibration against published numbers (docs/memory.md has the table) --------------------------------
UNSLOTH_20K = {"load_in_4bit": True, "lora": True, "lora_r": 16, "num_generations": 8,
               "per_device_train_batch_size": 8, "max_prompt_tokens": 512, "max_completion_length": 20480 - 512,
               "use_vllm": True, "unsloth": True}


def test_calibration_unsloth_long_context_total() -> None:
    """Unsloth blog (Feb 2025): Llama-3.1-8B, 20K context, 8 generations, QLoRA -> 54.3 GB."""
    plan = estimate(PlanInput(shape("meta-llama/Llama-3.1-8B-Instruct"), **UNSLOTH_20K))
    assert abs(plan.total_gb - 54.3) / 54.3 < 0.15
    # Their "GRPO memory cost" line: fp32 logits of one 20K sequence = 9.8 GB.
    assert plan.components["logits"] / GIB == pytest.approx(9.8, rel=0.05)


def test_calibration_unsloth_t4_notebook() -> None:
    """Unsloth Llama3.1_(8B)-GRPO notebook on a T4 (14.74 GiB): vLLM reports 5.60 GiB of 4-bit weights."""
    s = shape("meta-llama/Llama-3.1-8B-Instruct")
    p = PlanInput(s, load_in_4bit=True, lora_r=32, optim="paged_adamw_8bit", num_generations=6,
                  per_device_train_batch_size=6, max_prompt_tokens=256, max_completion_length=768, dtype="fp16",
                  use_vllm=True, vllm_gpu_memory_utilization=0.59, unsloth=True, card_gb=14.74)
    plan = estimate(p)
    assert plan.components["weights"] / GIB == pytest.approx(5.60, rel=0.02)
    assert plan.total_gb <= 14.74
    assert s.kv_bytes_per_token * 20480 / GIB == pytest.approx(2.5, rel=0.01)  # blog's KV line for 20K


@pytest.mark.parametrize("name,card", [("Qwen/Qwen2.5-1.5B-Instruct", 24), ("Qwen/Qwen2.5-3B-Instruct", 40)])
def test_calibration_easyr1_bf16_full_finetune_fits(name: str, card: int) -> None:
    """EasyR1 README (estimated): GRPO full fine-tuning, BF16 + adamw_bf16: 1.5B on 1x24GB, 3B on 1x40GB."""
    p = PlanInput(shape(name), lora=False, full_finetune=True, optim="adamw_torch", unsloth=False,
                  num_generations=5, per_device_train_batch_size=4, max_prompt_tokens=2048,
                  max_completion_length=2048, use_vllm=True, vllm_mode="server")  # veRL frees vLLM for the update
    gb = estimate(p).total_gb
    assert 0.6 * card < gb <= card


def test_propose_prefers_smaller_batch_then_4bit_before_fewer_generations() -> None:
    s = shape("Qwen/Qwen2.5-7B-Instruct")
    p = propose(s, 40, PlanInput(s, max_completion_length=2048, unsloth=False))
    assert p.max_completion_length == 2048  # completion length is the last resort
    assert estimate(p).total_gb <= 40
