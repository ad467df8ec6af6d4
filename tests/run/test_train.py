"""The training spine with TRL's real GRPOTrainer: tiny model for speed, the embedded model once."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
import yaml
from safetensors.torch import load_file
from tiny import VARIED_REWARDS

from grpo_fast import embedded, models
from grpo_fast.errors import UserError
from grpo_fast.run.prepare import prepare
from grpo_fast.run.resolve import resolve_config
from grpo_fast.train import train


def _assert_run_dir(run_dir, steps, rewards=("just_the_number", "sum_correct", "sum_mentioned")):
    for name in ("config.yaml", "versions.json", "metrics.jsonl", "samples.jsonl", "reward_curve.png",
                 "summary.json", "adapter/adapter_model.safetensors", "adapter/adapter_config.json"):
        assert (run_dir / name).exists(), name
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == list(range(1, steps + 1))
    assert all("reward" in m and f"rewards/{rewards[0]}/mean" in m for m in metrics)
    sample = json.loads((run_dir / "samples.jsonl").read_text().splitlines()[0])
    assert set(sample["rewards"]) == set(rewards) and isinstance(sample["completion"], str)
    assert sample["prompt"].startswith("What is")  # the question, not the templated system prompt
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["max_steps"] == steps and config["seed"] == 42
    assert "trl" in json.loads((run_dir / "versions.json").read_text())
    assert json.loads((run_dir / "summary.json").read_text())["steps"] == steps


def test_tiny_model_trains_and_writes_run_dir(tiny_model_dir, in_tmp):
    cfg = resolve_config("demo", [f"model={tiny_model_dir}", "max_steps=2", "max_completion_length=8",
                                  "learning_rate=0.01", VARIED_REWARDS])
    result = train(cfg)
    assert result.summary["steps"] == 2 and result.path.parent.name == "runs"
    chosen = {c["key"]: c for c in result.summary["cpu_choices"]["choices"]}  # the cpu profile's auto, decided
    assert set(chosen) == {"cpu_threads", "cpu_autocast_training", "shared_prefill", "merged_generation", "generation"}
    assert chosen["generation"]["value"] == "generate" and "measured" in chosen["generation"]["why"]
    assert isinstance(chosen["cpu_autocast_training"]["value"], bool) and "probe" in chosen["cpu_autocast_training"][
        "why"] and chosen["shared_prefill"]["value"] is True
    assert chosen["cpu_autocast_training"]["line"] in (result.path / "report.html").read_text()
    _assert_run_dir(result.path, 2, rewards=("ideal_length_4", "numeric_match"))
    weights = load_file(result.path / "adapter" / "adapter_model.safetensors")
    lora_b = [v for k, v in weights.items() if "lora_B" in k]
    assert lora_b and any(torch.count_nonzero(v) for v in lora_b)  # lora_B starts at zero: it moved


def test_dry_run_loads_no_weights_and_writes_nothing(tiny_model_dir, in_tmp, monkeypatch):
    def boom(cfg):
        raise AssertionError("dry run must not load weights")

    monkeypatch.setattr(models, "load_model", boom)
    monkeypatch.setattr(embedded, "embedded_model_dir", boom)
    prep = prepare(resolve_config("demo", [f"model={tiny_model_dir}"]))
    assert any(line.startswith("gold self-test (all ") and "every reference gets full" in line for line in prep.report)
    assert any(line.startswith("memory plan") for line in prep.report)
    assert not (in_tmp / "runs").exists()


def test_gold_self_test_refuses_a_broken_reward(tiny_model_dir, in_tmp, monkeypatch):
    from grpo_fast.recipes import demo

    def never_right(completions, **kw):
        return [0.0] * len(completions)

    never_right.__name__ = "sum_correct"
    never_right.reward_range = (0.0, 1.0)
    rewards = dataclasses.replace(demo.REWARDS, rewards=((demo.just_the_number, 0.5), (never_right, 2.0)))
    broken = dataclasses.replace(demo.RECIPE, rewards=rewards)
    monkeypatch.setattr(demo, "RECIPE", broken)
    cfg = resolve_config("demo", [f"model={tiny_model_dir}"])
    with pytest.raises(UserError, match="gold self-test failed"):
        prepare(cfg)
    assert prepare(cfg, force=True).train_rows  # --force trains anyway


def test_gpu_only_option_fails_before_any_file_is_written(in_tmp):
    with pytest.raises(UserError, match="needs a CUDA GPU"):
        train(resolve_config("demo", ["load_in_4bit=true"]))
    assert not (in_tmp / "runs").exists()


@pytest.mark.slow
def test_embedded_model_trains_a_few_steps(in_tmp):
    cfg = resolve_config("demo", ["max_steps=2", "max_completion_length=12", "eval_rows=8"])
    result = train(cfg)
    _assert_run_dir(result.path, 2)
    weights = load_file(result.path / "adapter" / "adapter_model.safetensors")
    assert any(torch.count_nonzero(v) for k, v in weights.items() if "lora_B" in k)
    config = json.loads((result.path / "adapter" / "adapter_config.json").read_text())
    assert config["r"] == 16 and config["lora_alpha"] == 32


@pytest.mark.parametrize("autocast", [True, False])
def test_the_sft_warm_up_gets_the_runs_cpu_threads_and_bf16_training_pass(tiny_model_dir, in_tmp, autocast):
    """The warm-up's SFT trainer trains as the GRPO stage would: on the configured threads, and its training
    forward under bf16 autocast exactly when the run chose the bf16 training pass."""
    from datasets import Dataset
    from tiny import tiny_model, tiny_tokenizer
    from trl import SFTConfig, SFTTrainer

    from grpo_fast.run.stages import warmup_speedups

    cfg = resolve_config("demo", [f"model={tiny_model_dir}", "profile=cpu", "cpu_threads=1",
                                  f"cpu_autocast_training={str(autocast).lower()}"])
    tok = tiny_tokenizer()
    trainer = SFTTrainer(model=tiny_model(tok), processing_class=tok,
                         args=SFTConfig(output_dir="sft", use_cpu=True, bf16=False, report_to="none", max_steps=1),
                         train_dataset=Dataset.from_list([{"text": "one two three four"}] * 4))
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        chosen = warmup_speedups(trainer, cfg)
        assert torch.get_num_threads() == 1 and chosen["cpu_autocast_training"] is autocast
        seen = []
        trainer.model.register_forward_pre_hook(lambda module, args: seen.append(torch.is_autocast_enabled("cpu")))
        trainer.compute_loss(trainer.model, trainer.data_collator([trainer.train_dataset[0]]))
        assert seen and all(on is autocast for on in seen)
    finally:
        torch.set_num_threads(before)
