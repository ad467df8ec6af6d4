"""Inference on CPU: batch generation to JSONL, an interactive chat over a pipe, engine selection."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from grpo_fast import infer
from grpo_fast.errors import UserError
from grpo_fast.recipes.demo import SYSTEM_PROMPT
from grpo_fast.run.resolve import resolve_config
from grpo_fast.rundir import Run
from grpo_fast.train import train

# Runs the chat subcommand as the user would, whether or not cli.py has registered it yet.
_CHAT = """
import sys
from grpo_fast import cli, infer
build = cli.build_parser
def patched():
    parser = build()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    if "chat" not in sub.choices:
        infer.add_parser(sub)
    return parser
cli.build_parser = patched
sys.exit(cli.main(sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def run_dir(tiny_model_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("infer-run") / "run"
    cfg = resolve_config("demo", [f"model={tiny_model_dir}", "max_steps=1", "max_completion_length=8",
                                  f"run_dir={out}"])
    return train(cfg).path


def test_engine_selection_simulated():
    sel = infer.select_engine
    assert sel(cuda=False, vllm=False, unsloth=False).name == "transformers"
    assert sel(cuda=False, vllm=True, unsloth=True).name == "transformers"  # vLLM needs CUDA
    assert sel(cuda=True, vllm=True, unsloth=True).name == "unsloth"
    assert sel(cuda=True, vllm=True, unsloth=False).name == "vllm"
    assert sel(cuda=True, vllm=False, unsloth=True).name == "transformers"
    assert sel("transformers", cuda=True, vllm=True, unsloth=True).name == "transformers"
    with pytest.raises(UserError, match="needs a CUDA GPU and vllm"):
        sel("vllm", cuda=False, vllm=False, unsloth=False)
    with pytest.raises(UserError, match="unknown engine"):
        sel("tgi")


def test_generate_writes_one_record_per_prompt(run_dir, tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "What is 2 + 3?"}\n"What is 4 + 4?"\n'
                       '{"messages": [{"role": "user", "content": "What is 1 + 1?"}]}\n')
    out = tmp_path / "gen.jsonl"
    args = _parser().parse_args(["generate", str(run_dir), "--prompts", str(prompts), "--out", str(out),
                                 "--max-new-tokens", "6", "--engine", "transformers"])
    assert args.func(args) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["prompt"] for r in records][:2] == ["What is 2 + 3?", "What is 4 + 4?"]
    assert len(records) == 3 and all(isinstance(r["completion"], str) for r in records)
    # greedy by default: the same file gives the same completions
    again = infer.generate_file(run_dir, prompts, None, max_new_tokens=6)
    assert [r["completion"] for r in again] == [r["completion"] for r in records]


def test_system_prompt_comes_from_the_recipe(run_dir):
    info = Run.open(run_dir)
    assert infer.system_prompt(info) == SYSTEM_PROMPT
    msgs = infer.as_messages("hi", SYSTEM_PROMPT)
    assert msgs == [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "hi"}]
    own = [{"role": "system", "content": "mine"}, {"role": "user", "content": "hi"}]
    assert infer.as_messages(own, SYSTEM_PROMPT) == own  # a prompt's own system message wins


def test_chat_loop_keeps_history_and_resets(run_dir):
    info = Run.open(run_dir)
    gen = infer.Generator(info, infer.select_engine("transformers"), max_new_tokens=4)
    seen = []
    real = gen.stream
    gen.stream = lambda messages, out: seen.append(list(messages)) or real(messages, out)
    out = io.StringIO()
    assert infer.chat_loop(gen, ["What is 2 + 2?", "and 3 + 3?", "/reset", "hello", "/exit", "never"], out) == 3
    assert [len(m) for m in seen] == [2, 4, 2]  # system + user; + reply + user; cleared
    assert seen[0][0]["content"] == SYSTEM_PROMPT


@pytest.mark.slow
def test_chat_over_stdin_two_lines_then_eof(run_dir):
    proc = subprocess.run([sys.executable, "-c", _CHAT, "chat", str(run_dir), "--max-new-tokens", "5"],
                          input="What is 2 + 3?\nWhat is 7 + 1?\n", capture_output=True, text=True, timeout=180,
                          cwd=Path(run_dir).parent)
    assert proc.returncode == 0, proc.stderr
    assert "chatting with" in proc.stdout and proc.stdout.count("> ") >= 3


def test_chat_without_adapter_is_a_user_error(run_dir, tmp_path):
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "config.yaml").write_text((run_dir / "config.yaml").read_text())
    proc = subprocess.run([sys.executable, "-c", _CHAT, "chat", str(bare)], input="", capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and "no LoRA adapter" in proc.stderr


def test_bad_prompts_files(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        infer.read_prompts(tmp_path / "missing.txt")
    bad = tmp_path / "p.jsonl"
    bad.write_text('{"prompt": "ok"}\n{oops\n')
    with pytest.raises(UserError, match="not valid JSONL"):
        infer.read_prompts(bad)
    txt = tmp_path / "p.txt"
    txt.write_text("one\n\ntwo\n")
    assert infer.read_prompts(txt) == ["one", "two"]


def _parser():
    parser = argparse.ArgumentParser()
    infer.add_parser(parser.add_subparsers(dest="command"))
    return parser


def test_vllm_engine_on_cpu_only_with_the_opt_in():
    sel = infer.select_engine
    with pytest.raises(UserError, match="needs a CUDA GPU"):
        sel("vllm", cuda=False, vllm=True, unsloth=False, vllm_cpu=False)
    assert sel("vllm", cuda=False, vllm=True, unsloth=False, vllm_cpu=True).name == "vllm"
    with pytest.raises(UserError, match="needs a CUDA GPU"):  # Unsloth's engine stays GPU-only
        sel("unsloth", cuda=False, vllm=True, unsloth=True, vllm_cpu=True)
    assert sel(cuda=False, vllm=True, unsloth=False, vllm_cpu=True).name == "transformers"  # auto: not on CPU


def test_unsloth_engine_serves_the_saved_adapter_rank(run_dir):
    kwargs = infer.unsloth_infer_kwargs(Run.open(run_dir))
    assert kwargs["fast_inference"] is True and kwargs["max_lora_rank"] == infer.adapter_rank(run_dir / "adapter")
    assert kwargs["max_lora_rank"] == 16 and kwargs["gpu_memory_utilization"] == 0.3
