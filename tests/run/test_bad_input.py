"""Bad input, the way users type it: each gets exit code 2, one message naming the key (full path), file:line
where there is one, and a fix; no traceback and no run directory. Runs `grpo-fast train` in-process (a
subprocess per case would cost ~10 s of imports each); test_cli runs the real entry point."""

from __future__ import annotations

import pytest

from grpo_fast.cli import main

YAML_CASES = [
    # (YAML text below a first line `recipe: demo`, what the message must say)
    ("rewards:\n  - {name: math_accuracy, weight: heavy}\n", ["rewards[0].weight", "run.yaml:3", "valid number"]),
    ("stages:\n  - {name: a, max_steps: 1}\n  - {name: b, max_stepz: 3}\n",
     ["stages[1].max_stepz", "run.yaml:4", "did you mean 'max_steps'"]),
    ("stages:\n  - {name: a, sft: maybe}\n", ["stages[0].sft", "true or false"]),
    ("stages: fast\n", ["stages", "valid list"]),
    ("health:\n  windw: 3\n", ["health.windw", "run.yaml:3", "did you mean 'window'"]),
    ("health:\n  stop_on: [boredom]\n", ["health.stop_on[0]", "run.yaml:3", "'low_reward_std'", "boredom"]),
    ("rewards:\n  - {weight: 2.0}\n", ["rewards[0].name", "needs a name (or a model)"]),
    ("rewards:\n  - fuzzy_matsch\n", ["rewards[0].name", "did you mean fuzzy_match"]),
    ("rewards:\n  - {name: fuzzy_match, colum: answer}\n", ["rewards[0].name", "colum"]),
    ("rewards:\n  - {name: missing_file.py:brevity}\n", ["rewards[0].name", "missing_file.py", "does not exist"]),
    ("rewards: nonsense_preset\n", ["rewards", "unknown reward preset"]),
    ("learning_rat: 1.0e-4\n", ["learning_rat", "run.yaml:2", "did you mean 'learning_rate'"]),
    ("adaptive_bounds: [3, 1]\n", ["adaptive_bounds", "min <= max"]),
    ("lora_dropout: 1.5\n", ["lora_dropout", "less than 1"]),
]

CLI_CASES = [
    (["learning_rate=-0.1"], ["learning_rate", "greater than 0"]),
    (["max_completion_length=0"], ["max_completion_length", "greater than or equal to 1"]),
    (["eval_rows=100000"], ["eval_rows=100000", "questions that training does not use"]),
    (["eval_rows=100000", "recipe=qa"], ["eval_rows=100000", "at most a quarter"]),
    (["eval_rows=0"], ["eval_rows", "evaluate: false"]),
    (["num_generations=1"], ["num_generations", "greater than or equal to 2", "compares completions"]),
    (["per_device_train_batch_size=3"], ["divisible", "num_generations"]),
    (["max_steps=abc"], ["max_steps", "valid integer"]),
    (["temperature=0"], ["temperature", "greater than 0"]),
    (["lora_r=0"], ["lora_r", "greater than or equal to 1"]),
    (["on_alarm=panic"], ["on_alarm", "'warn' or 'stop'"]),
    (["difficulty_filter=1"], ["difficulty_filter", "k >= 2"]),
    (["backend=fast"], ["backend", "'auto', 'unsloth' or 'transformers'"]),
    (["max_prompt_length=256"], ["max_prompt_tokens"]),
    (["output_dir=/tmp/x"], ["set 'run_dir' instead"]),
    (["profile=fast"], ["unknown profile 'fast'"]),
]


def _run(args, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = main(["train", *args])
    err = capsys.readouterr().err
    return code, err


def _assert_one_clear_message(code, err, needles, tmp_path):
    assert code == 2, err
    assert err.startswith("error: ") and "\n  fix: " in err and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, f"{needle!r} not in:\n{err}"
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(("text", "needles"), YAML_CASES, ids=[c[1][0] for c in YAML_CASES])
def test_bad_yaml(text, needles, tiny_model_dir, tmp_path, monkeypatch, capsys):
    (tmp_path / "run.yaml").write_text(f"recipe: demo\n{text}")
    code, err = _run([str(tmp_path / "run.yaml"), f"model={tiny_model_dir}", "max_steps=1"], tmp_path, monkeypatch,
                     capsys)
    _assert_one_clear_message(code, err, needles, tmp_path)


@pytest.mark.parametrize(("args", "needles"), CLI_CASES, ids=[c[0][0] for c in CLI_CASES])
def test_bad_command_line(args, needles, tiny_model_dir, tmp_path, monkeypatch, capsys):
    code, err = _run(["demo", f"model={tiny_model_dir}", "max_steps=1", *args], tmp_path, monkeypatch, capsys)
    _assert_one_clear_message(code, err, needles, tmp_path)


def test_numbers_written_as_yaml_strings_are_accepted(tiny_model_dir, tmp_path):
    from grpo_fast.run.resolve import resolve_config

    (tmp_path / "run.yaml").write_text("recipe: demo\nlearning_rate: 1e-5\nmax_steps: '7'\nhealth: {max_kl: 2e-1}\n")
    cfg = resolve_config(str(tmp_path / "run.yaml"), [f"model={tiny_model_dir}"])
    assert cfg.args.learning_rate == 1e-5 and cfg.args.max_steps == 7 and cfg.health.max_kl == 0.2


def test_kit_choices_are_reported_once(tiny_model_dir, tmp_path):
    """The profile's choices and a default eval_rows shrunk to fit a small dataset are each said once."""
    import json

    from grpo_fast.run.prepare import prepare
    from grpo_fast.run.resolve import resolve_config

    data = tmp_path / "qa.jsonl"
    data.write_text("".join(json.dumps({"question": f"q{i}?", "answer": f"a{i}", "context": f"c {i}."}) + "\n"
                            for i in range(40)))
    report = prepare(resolve_config("qa", [f"model={tiny_model_dir}", f"dataset={data}"])).report
    assert [line for line in report if line.startswith("profile cpu")] == [
        "profile cpu (no GPU): bf16=False, use_cpu=True, gradient_checkpointing=False, cpu_threads=auto, "
        "cpu_autocast_training=auto, shared_prefill=auto, merged_generation=auto"]
    assert "eval_rows 16 -> 10: at most a quarter of the 40 rows is held out" in report


def test_help_config_lists_every_key(capsys):
    assert main(["train", "--help-config"]) == 0
    out = capsys.readouterr().out
    for key in ("recipe:", "lora_r:", "health.window:", "rewards[].weight:", "learning_rate =", "num_generations ="):
        assert key in out, key


@pytest.mark.slow
def test_dry_run_of_the_embedded_model_converts_nothing(tmp_path, monkeypatch, capsys):
    """The tokenizer comes from the GGUF file: a dry run on a new machine takes seconds, not a conversion."""
    from grpo_fast import embedded

    def boom():
        raise AssertionError("a dry run must not convert the embedded model")

    monkeypatch.setenv("GRPO_FAST_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(embedded, "embedded_model_dir", boom)
    monkeypatch.chdir(tmp_path)
    assert main(["train", "demo", "--dry-run"]) == 0, capsys.readouterr().err
    assert "dry run: every check passed" in capsys.readouterr().out
    assert not (tmp_path / "cache").exists()
