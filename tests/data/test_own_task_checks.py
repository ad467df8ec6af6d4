"""Bringing a task of one's own, checked without training: TRL-format data, notebook-style rewards, the new keys
and a recipe by reference; each bad input gets one message naming the key and the way forward (exit 2)."""

from __future__ import annotations

import pytest
from own_task import TEMPLATE, write_task

from grpo_fast.cli import main
from grpo_fast.run.prepare import prepare
from grpo_fast.run.resolve import resolve_config
from grpo_fast.watch.signals import RewardScale

NOTEBOOK_REWARDS = "rewards=[{name: rewards.py:check_answer, kind: correctness}, {name: rewards.py:short_reply}]"


def _train(args, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = main(["train", *args, "max_steps=1", "--dry-run"])
    return code, capsys.readouterr().err


def _one_message(code, err, *needles):
    assert code == 2, err
    assert err.startswith("error: ") and err.count("error: ") == 1 and "\n  fix: " in err and "Traceback" not in err
    for needle in needles:
        assert needle in err, f"{needle!r} not in:\n{err}"


def test_trl_format_data_under_a_recipe_that_needs_other_columns_names_the_trl_path(tiny_model_dir, tmp_path,
                                                                                   monkeypatch, capsys):
    data = write_task(tmp_path, "chat")
    code, err = _train(["math", f"model={tiny_model_dir}", f"dataset={data}"], tmp_path, monkeypatch, capsys)
    _one_message(code, err, "column 'question'", "TRL-format data", "recipe: trl")


def test_a_kind_not_one_of_the_four(tiny_model_dir, tmp_path, monkeypatch, capsys):
    data = write_task(tmp_path)
    rewards = "rewards=[{name: rewards.py:check_answer, kind: judge}]"
    code, err = _train(["trl", f"model={tiny_model_dir}", f"dataset={data}", rewards], tmp_path, monkeypatch, capsys)
    _one_message(code, err, "rewards[0].kind", "'judge'", "kind: correctness, format, length or style")


def test_a_range_upside_down(tiny_model_dir, tmp_path, monkeypatch, capsys):
    data = write_task(tmp_path)
    rewards = "rewards=[{name: rewards.py:check_answer, kind: correctness, range: [5, -4.5]}]"
    code, err = _train(["trl", f"model={tiny_model_dir}", f"dataset={data}", rewards], tmp_path, monkeypatch, capsys)
    _one_message(code, err, "rewards[0].range", "range: [lowest, highest]")


def test_custom_rewards_without_a_judge_say_how_to_mark_one(tiny_model_dir, tmp_path, monkeypatch, capsys):
    data = write_task(tmp_path)
    rewards = "rewards=[{name: rewards.py:check_answer}]"
    code, err = _train(["trl", f"model={tiny_model_dir}", f"dataset={data}", rewards], tmp_path, monkeypatch, capsys)
    _one_message(code, err, "no correctness reward", "kind: correctness")


@pytest.mark.parametrize("template", ["{% for m in messages %}{{ m['content'] }", "{{ raise_exception('no') }}",
                                      "missing_template.jinja"])
def test_a_template_that_does_not_render(template, tiny_model_dir, tmp_path, monkeypatch, capsys):
    data = write_task(tmp_path)
    (tmp_path / "run.yaml").write_text(f"recipe: trl\ndataset: data.jsonl\nchat_template: {template!r}\n")
    code, err = _train([str(tmp_path / "run.yaml"), f"model={tiny_model_dir}", f"dataset={data}"], tmp_path,
                       monkeypatch, capsys)
    _one_message(code, err, "chat_template", "run.yaml:3")
    assert "fix the Jinja" in err or "path of a .jinja file" in err


@pytest.mark.parametrize(("ref", "needle"), [("my_task.py:NOT_A_RECIPE", "is a dict, not a Recipe"),
                                             ("my_task.py:RECIPES", "no Recipe 'RECIPES'"),
                                             ("nowhere.py:RECIPE", "does not exist")])
def test_a_recipe_reference_that_is_not_a_recipe(ref, needle, tiny_model_dir, tmp_path, monkeypatch, capsys):
    write_task(tmp_path)
    code, err = _train([f"recipe={ref}", f"model={tiny_model_dir}"], tmp_path, monkeypatch, capsys)
    _one_message(code, err, needle, "recipe")


def test_text_prompts_become_chat_and_every_column_reaches_the_rewards(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = write_task(tmp_path, "text")
    prep = prepare(resolve_config("trl", [f"model={tiny_model_dir}", f"dataset={data}", NOTEBOOK_REWARDS,
                                          "system_prompt=Answer with just the number."]))
    assert all(r["prompt"][0] == {"role": "system", "content": "Answer with just the number."}
               and r["prompt"][1]["role"] == "user" and "answer" in r for r in prep.train_rows + prep.eval_rows)
    assert prep.recipe.system_prompt == "Answer with just the number."
    assert prep.rewards.correctness == "check_answer" and prep.rewards.format is None
    # the bare reference earns check_answer's 5: the gold self-test ran on every row, against the new system prompt
    assert f"gold self-test (all {len(prep.train_rows)} rows): every reference gets full 'check_answer'" in prep.report
    assert any("short_reply declare(s) no score range" in line and "learns" in line for line in prep.report)


def test_a_judge_that_wants_a_layout_gets_one_line_not_a_refusal(tiny_model_dir, tmp_path, monkeypatch,
                                                                   capsys):
    monkeypatch.chdir(tmp_path)
    data = write_task(tmp_path, "chat")
    (tmp_path / "strict.py").write_text(
        "import re\n\ndef check_answer(prompts, completions, answer, **kwargs):\n"
        "    found = [re.search(r'<SOLUTION>(.+?)</SOLUTION>', c if isinstance(c, str) else c[0]['content'])\n"
        "             for c in completions]\n"
        "    return [5.0 if f and f.group(1) == str(a) else -4.5 for f, a in zip(found, answer)]\n")
    strict = "rewards=[{name: strict.py:check_answer, kind: correctness, range: [-4.5, 5]}]"
    prep = prepare(resolve_config("trl", [f"model={tiny_model_dir}", f"dataset={data}", strict]))
    said = [line for line in prep.report if line.startswith("gold self-test")]
    assert said == [said[0]] and "not checked" in said[0] and "'gold' column" in said[0]
    # `rewards check` says the same of the same config, not that no row has a reference
    assert main(["rewards", "check", "trl", f"model={tiny_model_dir}", f"dataset={data}", strict]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0] == said[0] and "every reference" not in out and "no row has a reference" not in out
    with_gold = write_task(tmp_path, "chat", gold=True)
    prep = prepare(resolve_config("trl", [f"model={tiny_model_dir}", f"dataset={with_gold}", strict]))
    assert any(line.startswith("gold self-test (all ") and "every reference" in line for line in prep.report)


def test_a_template_that_opens_a_reasoning_tag_turns_thinking_on(tiny_model_dir, tmp_path):
    write_task(tmp_path, "chat", gold=True)
    (tmp_path / "run.yaml").write_text(
        "recipe: trl\ndataset: data.jsonl\nchat_template: template.jinja\n"
        "thinking_tags: [<start_working_out>, <end_working_out>]\nmax_completion_length: 12\nrewards:\n"
        "  - {name: rewards.py:check_answer, kind: correctness, range: [-4.5, 5]}\n")
    cfg = resolve_config(str(tmp_path / "run.yaml"), [f"model={tiny_model_dir}", f"dataset={tmp_path / 'data.jsonl'}"])
    assert cfg.chat_template == str(tmp_path / "template.jinja")  # relative to the config file
    prep = prepare(cfg)
    assert prep.tokenizer.chat_template == TEMPLATE
    assert prep.thinking.active and prep.thinking.opened and prep.thinking.tags[0] == "<start_working_out>"
    rendered = prep.tokenizer.apply_chat_template(prep.train_rows[0]["prompt"], add_generation_prompt=True,
                                                  tokenize=False)
    assert rendered.endswith("<start_working_out>")
    assert any(line.startswith("gold self-test (all ") and "every reference" in line for line in prep.report)
    assert not any("declare(s) no score range" in line for line in prep.report)  # range: given


def test_rewards_check_runs_on_a_recipe_by_reference(tmp_path, monkeypatch, capsys):
    write_task(tmp_path)
    monkeypatch.chdir(tmp_path)
    code = main(["rewards", "check", "my_task.py:RECIPE"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "every reference gets full 'first_number_right'" in out and "wrong_answer" in out


def test_rewards_check_runs_on_trl_format_data(tmp_path, monkeypatch, capsys):
    data = write_task(tmp_path, "text")
    monkeypatch.chdir(tmp_path)
    code = main(["rewards", "check", "trl", f"dataset={data}", NOTEBOOK_REWARDS])
    out = capsys.readouterr().out
    assert "every reference gets full 'check_answer'" in out and "tag_stuffing" in out
    # the probes find what is real: an empty reply earns short_reply's +1 (the bare reference is the gold here)
    assert code == 1 and "no row has a reference" not in out
    assert [line for line in out.splitlines() if "short_reply" in line and "FAIL" in line and "empty" in line]


def test_health_learns_the_span_of_a_reward_without_a_range():
    scale = RewardScale()
    assert scale.span == 1.0
    scale = scale.observed({"reward": -3.0, "reward_std": 1.0}).observed({"reward": 4.0, "reward_std": 0.5})
    assert scale.learned == (-4.0, 4.5) and scale.span == 8.5
    declared = RewardScale(0.0, 2.0)
    assert declared.observed({"reward": 9.0, "reward_std": 3.0}) is declared and declared.span == 2.0
