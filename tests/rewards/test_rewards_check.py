"""run_check: gold completions pass, hacking probes are caught, reports print."""

from __future__ import annotations

import pytest

import grpo_fast.rewards as R
from grpo_fast.config import RunConfig
from grpo_fast.recipes import get_recipe, recipe_for_preset
from grpo_fast.rewards.check import answer_probes, gold_failures, run_check


def sample_rows(name: str) -> list[dict]:
    return get_recipe(name).rows(RunConfig(recipe=name))


@pytest.mark.parametrize("name", ["math", "code", "summarization", "qa", "demo"])
def test_recipes_pass_their_own_check(name):
    recipe = get_recipe(name)
    report = run_check(recipe.rewards, sample_rows(name), gold=recipe.gold, probes=recipe.probes,
                       checks=recipe.checks)
    assert report.ok, report.table()
    assert any(line.check == "gold" for line in report.lines)
    assert {line.check for line in report.lines} >= {"empty", "echo_prompt", "wrong_answer"}


def test_each_preset_has_its_recipe():
    for preset in (R.MATH_REASONING_REWARDS, R.CODE_GENERATION_REWARDS, R.SUMMARIZATION_REWARDS, R.QA_REWARDS):
        assert recipe_for_preset(preset).rewards is preset


def test_gold_builders_write_what_the_prompts_ask_for():
    math_row, code_row = sample_rows("math")[0], sample_rows("code")[0]
    assert f"<answer>\n{math_row['answer']}\n</answer>" in get_recipe("math").gold(math_row)
    assert get_recipe("code").gold(code_row).startswith("Here is the solution.\n```python\n")
    qa_row = next(r for r in sample_rows("qa") if r["context"] and r["source"])
    qa = get_recipe("qa").gold(qa_row)
    assert f"<answer>{qa_row['answer'][0]}</answer>" in qa and '"' in qa and f"[{qa_row['source']}]" in qa
    row = sample_rows("summarization")[0]
    assert get_recipe("summarization").gold(row) == row["summary"]


def _math_rows():
    return [{"prompt": [{"role": "user", "content": "Natalia sold 48 clips in April and half as many in May. "
                                                    "How many in all?"}], "answer": "72"}]


def test_hackable_reward_is_flagged():
    def always_one(prompts, completions, **kw):
        return [1.0] * len(completions)

    def substring_match(prompts, completions, answer, **kw):  # classic bug: any mention of the gold counts
        return [1.0 if a in R.completion_text(c) else 0.0 for c, a in zip(completions, answer)]

    recipe = get_recipe("math")
    rewards = R.RewardSet("test", ((always_one, 1.0), (substring_match, 1.0)), correctness="substring_match")
    report = run_check(rewards, _math_rows(), gold=recipe.gold,
                       probes=answer_probes(lambda row: row["answer"], recipe.gold))
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

    gold = get_recipe("qa").gold
    for judge, note in ((never, "not recognised"), (boom, "RuntimeError")):
        rewards = R.RewardSet("test", ((judge, 1.0),), correctness=judge.__name__)
        report = run_check(rewards, sample_rows("qa"), gold=gold)
        assert note in {ln.reward: ln.note for ln in report.failures if ln.check == "gold"}[judge.__name__]
    missing = R.RewardSet("test", ((never, 1.0),), correctness="missing")
    assert any("not in list" in ln.note for ln in run_check(missing, sample_rows("qa"), gold=gold).failures)


def test_report_prints(capsys):
    recipe = get_recipe("math")
    run_check(recipe.rewards, _math_rows(), gold=recipe.gold).print()
    assert "reward check" in capsys.readouterr().out


def test_gold_failures_names_the_rows():
    recipe = get_recipe("math")
    rows = _math_rows() + [{**_math_rows()[0], "answer": "73"}]
    checked, failures = gold_failures(recipe.rewards, rows, lambda row: "<answer>72</answer>")
    assert checked == 2 and len(failures) == 1 and failures[0].startswith("row 1:")


def test_code_early_exit_probe_runs():
    recipe = get_recipe("code")
    report = run_check(recipe.rewards, sample_rows("code"), gold=recipe.gold, probes=recipe.probes)
    exits = [ln for ln in report.lines if ln.check in ("early_exit", "os_exit")]
    assert exits and all(ln.ok and ln.score == 0.0 for ln in exits)


def test_code_check_runs_honest_programs_and_catches_a_reward_that_fails_them():
    recipe = get_recipe("code")
    report = run_check(recipe.rewards, sample_rows("code"), gold=recipe.gold, probes=recipe.probes,
                       checks=recipe.checks)
    honest = [ln for ln in report.lines if ln.check == "honest_programs"]
    assert len(honest) == 1 and honest[0].ok, report.table()

    def no_classes(prompts=None, completions=(), **kw):  # a judge that takes Python away: classes score 0
        scores = R.code_execution_reward(prompts, completions, **kw)
        return [0.0 if "class " in R.completion_text(c) else s for c, s in zip(completions, scores)]

    no_classes.__name__ = "code_execution_reward"
    no_classes.reward_range = (0.0, 1.0)
    broken = R.RewardSet("broken", ((no_classes, 1.0),), correctness="code_execution_reward")
    line = recipe.checks[0](broken)[0]
    assert not line.ok and "class_used_by_tests" in line.note
