"""Each way of bringing one's own task trains 2 steps on CPU with the embedded model and evaluates held out:
TRL-format rows (text prompts with a system_prompt and notebook-style rewards scoring -4.5..5; chat prompts under an
Unsloth-style template that opens <start_working_out>), and a Recipe by reference."""

from __future__ import annotations

import json

import pytest
from own_task import SMALL, write_task

import grpo_fast


def _trained_and_evaluated(run, judge: str) -> dict:
    assert run.summary["steps"] == 2
    evaluation = json.loads((run.path / "eval.json").read_text())
    for side in ("base", "trained"):
        assert len(evaluation[side]["per_row"]["correct"]) == SMALL["eval_rows"]
    assert evaluation["comparison"][0]["metric"] == "accuracy"
    metrics = [json.loads(line) for line in (run.path / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2] and all(f"rewards/{judge}/mean" in m for m in metrics)
    return evaluation


@pytest.mark.slow
def test_trl_text_prompts_with_a_system_prompt_and_notebook_rewards(in_tmp, capsys):
    data = write_task(in_tmp, "text")
    (in_tmp / "run.yaml").write_text(
        f"recipe: trl\ndataset: {data.name}\nsystem_prompt: Reply with only the number.\nrewards:\n"
        "  - {name: rewards.py:check_answer, kind: correctness, range: [-4.5, 5]}\n"
        "  - {name: rewards.py:short_reply, kind: format, weight: 0.5}\n")
    run = grpo_fast.train(str(in_tmp / "run.yaml"), **SMALL)
    _trained_and_evaluated(run, "check_answer")
    metrics = [json.loads(line) for line in (run.path / "metrics.jsonl").read_text().splitlines()]
    assert any(m["rewards/check_answer/mean"] < 0 or m["rewards/check_answer/mean"] > 1 for m in metrics)
    held_out = [json.loads(line) for line in (run.path / "heldout.jsonl").read_text().splitlines()]
    assert all(r["prompt"][0] == {"role": "system", "content": "Reply with only the number."} for r in held_out)
    printed = capsys.readouterr().out  # the pre-training report: the gold self-test ran, the span is learnt
    assert "every reference gets full 'check_answer'" in printed and "short_reply declare(s) no score range" in printed


@pytest.mark.slow
def test_trl_chat_prompts_under_a_template_that_opens_a_reasoning_tag(in_tmp):
    data = write_task(in_tmp, "chat", gold=True)
    (in_tmp / "run.yaml").write_text(
        f"recipe: trl\ndataset: {data.name}\nchat_template: template.jinja\n"
        "thinking_tags: [<start_working_out>, <end_working_out>]\nrewards:\n"
        "  - {name: rewards.py:check_answer, kind: correctness, range: [-4.5, 5]}\n")
    run = grpo_fast.train(str(in_tmp / "run.yaml"), **SMALL)
    evaluation = _trained_and_evaluated(run, "check_answer")
    assert "opens <start_working_out> in the prompt" in evaluation["thinking"]
    saved = json.loads((run.path / "adapter" / "tokenizer_config.json").read_text()).get("chat_template") or (
        run.path / "adapter" / "chat_template.jinja").read_text()
    assert "<start_working_out>" in saved  # chat and generate render prompts as training did


@pytest.mark.slow
def test_a_recipe_by_reference(in_tmp):
    write_task(in_tmp)
    run = grpo_fast.train("my_task.py:RECIPE", **SMALL)
    _trained_and_evaluated(run, "first_number_right")
    assert run.path.name.startswith("my_sums-")
    assert json.loads((run.path / "eval.json").read_text())["recipe"] == "my_sums"
