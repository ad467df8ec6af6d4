"""Export on CPU: a tiny trained run, merged, must generate exactly what base + adapter generates."""

from __future__ import annotations

import argparse
import json

import pytest
import torch
import yaml
from tiny import VARIED_REWARDS

from grpo_fast import export
from grpo_fast.errors import UserError
from grpo_fast.recipes.demo import make_rows
from grpo_fast.run.resolve import resolve_config
from grpo_fast.train import train


@pytest.fixture(scope="module")
def run_dir(tiny_model_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("export-run") / "run"
    cfg = resolve_config("demo", [f"model={tiny_model_dir}", "max_steps=2", "max_completion_length=8",
                                  "learning_rate=0.05", f"run_dir={out}", VARIED_REWARDS])
    return train(cfg).path


def _cli(argv: list[str]) -> int:
    """The CLI's error path (UserError -> message, exit 2), as grpo_fast.cli.main does it."""
    args = _parser().parse_args(argv)
    try:
        return args.func(args)
    except UserError as err:
        print(err)
        return 2


def _greedy(model, tok, prompts, n=12):
    texts = [tok.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts]
    enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad():
        ids = model.generate(**enc, max_new_tokens=n, do_sample=False, pad_token_id=tok.pad_token_id)
        logits = model(**enc).logits
    return ids[:, enc["input_ids"].shape[1]:], logits


def test_merged_export_generates_what_base_plus_adapter_generates(run_dir, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = export.export_run(run_dir, "merged", out=tmp_path / "merged")
    assert (out / "model.safetensors").exists() and (out / "tokenizer.json").exists()
    assert not list(tmp_path.glob(".merged.*"))  # the temp folder was renamed, nothing left behind
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    tok = AutoTokenizer.from_pretrained(out)
    tok.padding_side = "left"
    prompts = [r["prompt"] for r in make_rows(6, seed=3)]

    base = AutoModelForCausalLM.from_pretrained(cfg["model"])
    base_ids, base_logits = _greedy(base, tok, prompts)
    adapted = PeftModel.from_pretrained(base, str(run_dir / "adapter")).eval()
    ref_ids, ref_logits = _greedy(adapted, tok, prompts)
    merged = AutoModelForCausalLM.from_pretrained(out).eval()
    assert merged.dtype == torch.float32  # CPU keeps fp32: the merge is exact up to rounding
    got_ids, got_logits = _greedy(merged, tok, prompts)

    assert torch.equal(got_ids, ref_ids)
    torch.testing.assert_close(got_logits, ref_logits, atol=1e-4, rtol=1e-4)
    assert not torch.allclose(base_logits, ref_logits, atol=1e-4)  # the adapter did change the model


def test_model_card_names_base_recipe_rewards_hyperparameters_versions(run_dir, tmp_path):
    (run_dir / "eval.json").write_text(json.dumps({  # the shape grpo_fast.evaluate writes
        "comparison": [{"metric": "accuracy", "base": 0.1, "trained": 0.5, "delta": 0.4}],
        "settings": {"rows": 16, "max_new_tokens": 24}}))
    try:
        out = export.export_run(run_dir, "adapter", out=tmp_path / "adapter")
    finally:
        (run_dir / "eval.json").unlink()
    assert (out / "adapter_model.safetensors").exists() and (out / "adapter_config.json").exists()
    card = (out / "README.md").read_text()
    meta = yaml.safe_load(card.split("---")[1])
    assert meta["library_name"] == "peft" and "grpo" in meta["tags"]
    assert "recipe `demo`" in card
    assert "`ideal_length_4` (weight 1)" in card and "`numeric_match` (weight 2)" in card
    assert "| max_steps | 2 |" in card and "| learning_rate | 0.05 |" in card
    assert "| accuracy | 0.1 | 0.5 | +0.4 |" in card and "rows=16" in card
    assert f"| trl | {json.loads((run_dir / 'versions.json').read_text())['trl']} |" in card


def test_refuses_unfinished_run_bad_quant_and_gguf_without_unsloth(run_dir, tmp_path, capsys):
    half = tmp_path / "half"
    half.mkdir()
    (half / "config.yaml").write_text((run_dir / "config.yaml").read_text())
    assert _cli(["export", str(half)]) == 2
    assert "not a finished run" in capsys.readouterr().out
    assert _cli(["export", str(tmp_path / "nothing")]) == 2
    assert "not a grpo_fast run directory" in capsys.readouterr().out

    with pytest.raises(UserError, match="q4_k_m, q5_k_m"):  # the valid ones are listed
        export.export_run(run_dir, "gguf", quant="q9_z")
    with pytest.raises(UserError, match="--format gguf only"):
        export.export_run(run_dir, "merged", quant="q8_0")
    with pytest.raises(UserError, match="unknown export format"):
        export.export_run(run_dir, "onnx")
    with pytest.raises(UserError, match="llama.cpp") as err:  # no CUDA/Unsloth in the CPU suite
        export.export_run(run_dir, "gguf", quant="q8_0", out=tmp_path / "g")
    assert "requirements-gpu.txt" in str(err.value) and not (tmp_path / "g").exists()


def test_push_to_hub_argument_is_checked_before_any_work(run_dir, tmp_path):
    with pytest.raises(UserError, match="not a hub repository id"):
        export.export_run(run_dir, "adapter", out=tmp_path / "x", push_to_hub="no-owner")
    assert not (tmp_path / "x").exists()
    export.check_hub_repo("me/my-model")  # well-formed: accepted (the upload itself needs network)
    args = _parser().parse_args(["export", str(run_dir), "--push-to-hub", "me/m", "--private"])
    assert args.push_to_hub == "me/m" and args.private and args.format == "merged"


def test_existing_destination_is_not_overwritten(run_dir, tmp_path):
    dest = tmp_path / "taken"
    dest.mkdir()
    (dest / "keep.txt").write_text("mine")
    with pytest.raises(UserError, match="already exists"):
        export.export_run(run_dir, "adapter", out=dest)
    assert (dest / "keep.txt").read_text() == "mine"


def _parser():
    parser = argparse.ArgumentParser()
    export.add_parser(parser.add_subparsers(dest="command"))
    return parser
