"""Multi-stage runs with an SFT warm-up, adaptive reward weights and the difficulty filter, on the tiny model."""

from __future__ import annotations

import json

import pytest

from grpo_fast.errors import UserError
from grpo_fast.run.resolve import resolve_config
from grpo_fast.train import train

TINY = ["max_completion_length=8", "evaluate=false", "learning_rate=0.01"]


def _metrics(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_stages_share_the_adapter_and_log_one_step_sequence(tiny_model_dir, in_tmp):
    stages = ("stages=[{name: warmup, sft: true, max_steps: 2}, {name: format, max_steps: 2, "
              "rewards: [xml_count, {name: numeric_match}]}, {name: correct, max_steps: 1}]")
    cfg = resolve_config("demo", [f"model={tiny_model_dir}", *TINY, stages])
    result = train(cfg)
    metrics = _metrics(result.path)
    assert [m["step"] for m in metrics] == [1, 2, 3, 4, 5]
    assert [m["stage"] for m in metrics] == ["warmup", "warmup", "format", "format", "correct"]
    assert "rewards/xml_count_reward/mean" in metrics[2] and "rewards/sum_correct/mean" in metrics[4]
    assert result.summary["steps"] == 5 and (result.path / "adapter" / "adapter_model.safetensors").exists()


def test_stage_errors_name_the_stage(tiny_model_dir):
    with pytest.raises(UserError) as err:
        train(resolve_config("demo", [f"model={tiny_model_dir}", "stages=[{max_step: 3}]"]))
    assert "stages[0]" in str(err.value) and "max_steps" in str(err.value)


def test_adaptive_weights_move_and_are_logged(tiny_model_dir, in_tmp):
    cfg = resolve_config("demo", [f"model={tiny_model_dir}", *TINY, "max_steps=3", "adaptive_rewards=true",
                                  "adaptive_bounds=[0.5, 2.0]"])
    metrics = _metrics(train(cfg).path)
    weights = [m["adaptive/sum_correct"] for m in metrics]
    assert all(0.5 <= w <= 2.0 for w in weights)
    assert weights[-1] != 1.0  # the tiny model never answers right: its weight rose from the base 1.0


def test_difficulty_filter_reports_and_refuses_when_nothing_is_left(tiny_model_dir, in_tmp, capsys):
    (in_tmp / "never.py").write_text("def never(completions, **kwargs):\n    return [0.0] * len(completions)\n\n"
                                     "never.reward_kind = 'correctness'\n")
    cfg = resolve_config("demo", [f"model={tiny_model_dir}", *TINY, "max_steps=1", "difficulty_filter=2",
                                  f"rewards=[{in_tmp / 'never.py'}:never]"])
    with pytest.raises(UserError, match="never solved: nothing left"):
        train(cfg, force=True)  # a judge nothing satisfies: every prompt is "never solved"
    assert "difficulty filter (k=2): kept 0 of" in capsys.readouterr().out
    assert not (in_tmp / "runs").exists()
