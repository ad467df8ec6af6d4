"""The command line: one clear message and exit code 2 for bad input, no traceback, nothing written."""

from __future__ import annotations

import subprocess
import sys

import pytest


def run(*args, cwd):
    return subprocess.run([sys.executable, "-m", "grpo_fast", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["train", "missing.yaml"], "does not exist"),
        (["train", "demo", "learning_rat=0.1"], "did you mean 'learning_rate'"),
        (["train", "demo", "max_prompt_length=256"], "max_prompt_tokens"),
        (["train", "demo", "load_in_4bit=true"], "needs a CUDA GPU"),
        (["train", "demo", "use_vllm=true"], "needs a CUDA GPU"),
        (["train", "demo", "backend=unsloth"], "needs a CUDA GPU"),
        (["train", "demo", "model=./no/such/model"], "neither a local model folder"),
        (["train", "nonsense"], "unknown recipe"),
    ],
)
def test_bad_input_exits_2_with_one_message(args, needle, tmp_path):
    proc = run(*args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr and "Traceback" not in proc.stderr
    assert "error:" in proc.stderr and "fix:" in proc.stderr
    assert not (tmp_path / "runs").exists()


def test_yaml_error_names_line(tmp_path):
    (tmp_path / "bad.yaml").write_text("recipe: demo\nmax_steps: [3\n")
    proc = run("train", "bad.yaml", cwd=tmp_path)
    assert proc.returncode == 2 and "bad.yaml:" in proc.stderr and "Traceback" not in proc.stderr


def test_dry_run_passes_and_writes_nothing(tiny_model_dir, tmp_path):
    proc = run("train", "demo", f"model={tiny_model_dir}", "--dry-run", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "dry run: every check passed" in proc.stdout and "gold self-test" in proc.stdout
    assert list(tmp_path.iterdir()) == []


def test_plan_prints_estimate_and_proposals(tmp_path):
    proc = run("plan", "demo", "model=Qwen/Qwen2.5-1.5B-Instruct", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "1.54 B parameters" in proc.stdout and "24 GB:" in proc.stdout


def _commands(parser):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield name, sub
                yield from _commands(sub)


def test_every_command_teaches_its_options_and_shows_examples(capsys):
    from grpo_fast.cli import build_parser

    commands = dict(_commands(build_parser()))
    assert {"train", "plan", "eval", "report", "health", "rewards", "check", "recipes", "export", "chat", "generate",
            "doctor"} <= set(commands)
    for name, sub in commands.items():
        for action in sub._actions:
            assert action.help, f"{name}: {action.dest} has no help"
        if name != "rewards":
            assert "grpo-fast " in (sub.epilog or "") and name in sub.epilog, f"{name} has no example"
    text = " ".join(commands["check"].format_help().split())
    assert "(default: 0.5)" in text and "(default: 8)" in text


def test_verbose_is_accepted_anywhere_and_recipes_are_listed(tiny_model_dir, capsys, tmp_path, monkeypatch):
    from grpo_fast.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["train", "demo", f"model={tiny_model_dir}", "--dry-run", "-v"]) == 0
    assert main(["-v", "train", "demo", f"model={tiny_model_dir}", "--dry-run"]) == 0
    capsys.readouterr()
    assert main(["recipes"]) == 0
    out = capsys.readouterr().out
    for name in ("demo", "math", "code", "qa", "summarization"):
        assert f"\n{name} " in f"\n{out}"
    assert "rewards: math_accuracy_reward x2" in out and "judge: fuzzy_match" in out
