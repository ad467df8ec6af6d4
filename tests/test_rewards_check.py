"""run_check: gold completions pass, hacking probes are caught, reports print."""

from __future__ import annotations

import pytest

import grpo_fast.rewards as R
from grpo_fast.rewards.check import SAMPLE_ROWS, check_preset, gold_completion, infer_kind, run_check


@pytest.mark.parametrize("name", ["math_reasoning", "code_generation", "summarization", "qa"])
def test_presets_pass_their_own_check(name):
    report = check_preset(name)
    assert report.ok, report.table()
    assert any(line.check == "gold" for line in report.lines)


def test_gold_builders():
    assert "<answer>\n72\n</answer>" in gold_completion(SAMPLE_ROWS["math"][0], "math")
    assert "```python\ndef add" in gold_completion(SAMPLE_ROWS["code"][0], "code")
    qa = gold_completion(SAMPLE_ROWS["qa"][0], "qa")
    assert "<answer>1889</answer>" in qa and '"' in qa and "[encyclopedia]" in qa
    row = SAMPLE_ROWS["summarization"][0]
    assert gold_completion(row, "summarization") == row["summary"]
    kinds = [infer_kind(SAMPLE_ROWS[k]) for k in ("math", "code", "qa", "summarization")]
    assert kinds == ["math", "code", "qa", "summarization"]


def test_hackable_reward_is_flagged():
    def always_one(prompts, completions, **kw):
        return [1.0] * len(completions)

    def substring_match(prompts, completions, answer, **kw):  # classic bug: any mention of the gold counts
        return [1.0 if a in R.completion_text(c) else 0.0 for c, a in zip(completions, answer)]

    report = run_check([always_one, substring_match], SAMPLE_ROWS["math"], correctness="substring_match")
    assert not report.ok
    flagged = {(ln.check, ln.reward) for ln in report.failures}
    assert ("empty", "always_one") in flagged
    assert ("tag_stuffing", "substring_match") in flagged
    assert ("several_answers", "substring_match") in flagged
    assert "FAIL" in report.table() and "FAILED" in str(report)


def test_gold_not_recognised_and_errors_fail():
    def never(prompts, completions, **kw):
        return [0.0] * len(completions)

    def boom(prompts, completions, **kw):
        raise RuntimeError("broken")

    report = run_check([never, boom], SAMPLE_ROWS["qa"], correctness=["never", "boom", "missing"])
    notes = {ln.reward: ln.note for ln in report.failures if ln.check == "gold"}
    assert "not recognised" in notes["never"] and "RuntimeError" in notes["boom"] and "missing" in notes


def test_correctness_defaults_to_marked_rewards(capsys):
    report = run_check([R.math_accuracy_reward, R.soft_xml_format_reward], SAMPLE_ROWS["math"][:1])
    assert report.correctness == ["math_accuracy_reward"] and report.ok
    report.print()
    assert "reward check" in capsys.readouterr().out


def test_code_early_exit_probe_runs():
    report = check_preset(R.CODE_GENERATION_REWARDS)
    exits = [ln for ln in report.lines if ln.check in ("early_exit", "os_exit")]
    assert exits and all(ln.ok and ln.score == 0.0 for ln in exits)
