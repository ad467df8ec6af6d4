"""Evaluation: unbiased pass@k against known values, metrics on the tiny model, a run dir evaluated end to end."""

from __future__ import annotations

import json
import math

import pytest

from grpo_fast import rundir
from grpo_fast.errors import UserError
from grpo_fast.evaluate import EVAL_FILE, compare, evaluate, evaluate_run, format_table, pass_at_k
from grpo_fast.files import write_jsonl, write_yaml
from grpo_fast.models.completions import generate
from grpo_fast.recipes import demo
from grpo_fast.rewards import RewardSet
from grpo_fast.rewards.base import reward_meta


@pytest.mark.parametrize("n, c, k, expected", [
    (10, 0, 1, 0.0),
    (10, 10, 5, 1.0),
    (10, 3, 1, 0.3),                                       # pass@1 is c / n
    (10, 3, 2, 1 - math.comb(7, 2) / math.comb(10, 2)),    # 1 - 21/45 = 0.5333
    (5, 1, 5, 1.0),                                        # n - c < k: certain
    (200, 20, 10, 1 - math.comb(180, 10) / math.comb(200, 10)),
])
def test_pass_at_k_known_values(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_matches_the_numerically_stable_product_form():
    # Chen et al.'s reference implementation: 1 - prod(1 - k / arange(n - c + 1, n + 1))
    n, c, k = 20, 4, 5
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1 - k / i
    assert pass_at_k(n, c, k) == pytest.approx(1 - prod)
    assert pass_at_k(10, 3, 2) == pytest.approx(0.5333, abs=1e-4)
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)


@pytest.fixture(scope="module")
def tiny():
    from tiny import tiny_model, tiny_tokenizer

    tok = tiny_tokenizer()
    return tiny_model(tok), tok


def _rewards(correct_always: bool) -> RewardSet:
    @reward_meta("correctness", 0.0, 2.0)
    def sum_correct(completions, answer, **kw):
        return [2.0 if correct_always else 0.0 for _ in completions]

    @reward_meta("format", 0.0, 1.0)
    def answer_tags(completions, **kw):
        return [1.0, 0.5] * (len(completions) // 2) + [1.0] * (len(completions) % 2)

    return RewardSet("test", ((answer_tags, 1.0), (sum_correct, 1.0)), "sum_correct", "answer_tags")


def test_generate_left_pads_and_counts_tokens(tiny):
    model, tok = tiny
    tok.padding_side = "right"
    prompts = [[{"role": "user", "content": "hi"}], [{"role": "user", "content": "a much longer question here"}]]
    out = generate(model, tok, prompts, n=3, greedy=False, max_new_tokens=5, temperature=1.0)
    assert tok.padding_side == "right"  # restored
    assert [len(group) for group in out] == [3, 3]
    assert all(isinstance(text, str) and 0 <= length <= 5 for group in out for text, length in group)
    greedy_one = generate(model, tok, prompts[1:], max_new_tokens=5)
    greedy_batched = generate(model, tok, prompts, max_new_tokens=5)
    assert greedy_batched[1] == greedy_one[0]  # left padding: batching does not change the answer


def test_evaluate_metrics_on_the_tiny_model(tiny):
    model, tok = tiny
    rows = demo.make_rows(4, seed=1)
    right = evaluate(model, tok, rows, _rewards(True), k=2, n=3, max_new_tokens=4, seed=0)
    assert right["accuracy"] == 1.0 and right["score"] == 1.0 and right["pass@1"] == 1.0 and right["pass@2"] == 1.0
    assert right["format"] == 0.5 and right["n"] == 3 and 0 < right["mean_length"] <= 4
    assert len(right["examples"]) == 4 and right["examples"][0]["prompt"].startswith("What is")
    wrong = evaluate(model, tok, rows, _rewards(False), k=2, max_new_tokens=4, seed=0)
    assert wrong["accuracy"] == 0.0 and wrong["pass@2"] == 0.0
    assert wrong["mean_length"] == right["mean_length"]  # same seed, same greedy completions
    # each reward's own mean over the greedy completions: a recipe's metrics side by side
    assert right["rewards"] == {"answer_tags": 0.75, "sum_correct": 2.0} and wrong["rewards"]["sum_correct"] == 0.0
    table = compare(wrong, right)
    assert [r["metric"] for r in table] == ["accuracy", "score", "format", "mean_length", "clipped", "pass@1",
                                            "pass@2", "reward answer_tags", "reward sum_correct"]
    assert table[-1] == {"metric": "reward sum_correct", "base": 0.0, "trained": 2.0, "delta": 2.0}
    assert table[0] == {"metric": "accuracy", "base": 0.0, "trained": 1.0, "delta": 1.0}
    assert "accuracy" in format_table(table) and "+1.000" in format_table(table)
    with pytest.raises(UserError, match="no held-out rows"):
        evaluate(model, tok, [], _rewards(True))


def test_evaluate_run_writes_eval_json(tiny_model_dir, tmp_path):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from grpo_fast.run.prepare import prepare
    from grpo_fast.run.resolve import resolve_config

    run = tmp_path / "run"
    cfg = resolve_config("demo", [f"model={tiny_model_dir}", "eval_rows=4", "max_completion_length=4",
                                  "cpu_threads=1"])
    write_yaml(run / "config.yaml", cfg.to_dict())
    rows = prepare(cfg, force=True).eval_rows
    write_jsonl(run / rundir.HELDOUT, rows)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir),
                           LoraConfig(r=4, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 1.0)  # a trained-looking adapter that changes the outputs
    model.save_pretrained(run / "adapter")

    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        result = evaluate_run(run, k=2)
        assert torch.get_num_threads() == 1  # the run's cpu_threads, as training ran (`grpo-fast eval` too)
    finally:
        torch.set_num_threads(threads)
    assert json.loads((run / EVAL_FILE).read_text()) == json.loads(json.dumps(result))
    assert result["settings"] == {"k": 2, "n": 2, "max_new_tokens": 4, "temperature": 1.0, "seed": 42,
                                  "batch_size": 64, "merged_generation": True}
    assert result["base"]["rows"] == result["trained"]["rows"] == 4
    assert [r["metric"] for r in result["comparison"]][:3] == ["accuracy", "score", "format"]
    assert result["base"]["examples"][0]["prompt"] == result["trained"]["examples"][0]["prompt"]
    base_texts = [e["completion"] for e in result["base"]["examples"]]
    assert base_texts != [e["completion"] for e in result["trained"]["examples"]]  # the adapter was applied
    # Base side really is the base model: the same as generating with no adapter at all.
    from transformers import AutoTokenizer

    plain = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    expected = [g[0][0] for g in generate(plain, tok, [r["prompt"] for r in rows], max_new_tokens=4)]
    assert base_texts == expected
    # The trained side, generated on merged weights, is what peft's own (unmerged) adapter generates.
    from peft import PeftModel

    unmerged = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model_dir), run / "adapter")
    expected = [g[0][0] for g in generate(unmerged, tok, [r["prompt"] for r in rows], max_new_tokens=4)]
    assert [e["completion"] for e in result["trained"]["examples"]] == expected


def test_a_second_run_with_the_same_base_rows_and_settings_reuses_the_base_evaluation(tiny_model_dir, tmp_path,
                                                                                      monkeypatch):
    """Runs that differ only in training (here: the adapter) share the base model's evaluation; a change of an
    evaluation setting, or ``reuse_base=False``, evaluates the base again."""
    import shutil

    monkeypatch.setenv("GRPO_FAST_CACHE", str(tmp_path / "cache"))  # nothing kept by other tests

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from grpo_fast.run.prepare import prepare
    from grpo_fast.run.resolve import resolve_config

    first, second = tmp_path / "first", tmp_path / "second"
    cfg = resolve_config("demo", [f"model={tiny_model_dir}", "eval_rows=4", "max_completion_length=4"])
    write_yaml(first / "config.yaml", cfg.to_dict())
    write_jsonl(first / rundir.HELDOUT, prepare(cfg, force=True).eval_rows)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir),
                           LoraConfig(r=4, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))
    model.save_pretrained(first / "adapter")
    shutil.copytree(first, second)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 1.0)
    model.save_pretrained(second / "adapter")  # another training outcome, same base

    made = evaluate_run(first, k=2)
    assert "base_from" not in made
    reused = evaluate_run(second, k=2)
    assert reused["base_from"] == str(first) and reused["base"] == made["base"]
    assert reused["trained"]["examples"] != made["trained"]["examples"]  # the trained side is always evaluated
    assert json.loads((second / EVAL_FILE).read_text())["base_from"] == str(first)
    assert "base_from" not in evaluate_run(second, k=1)  # another setting: another base evaluation
    fresh = evaluate_run(second, k=2, reuse_base=False)
    assert "base_from" not in fresh and fresh["base"] == made["base"]  # evaluated again, the same scores


def test_a_full_fine_tune_is_evaluated_against_its_base_model(tiny_model_dir, tmp_path, monkeypatch):
    """No adapter: the run's saved model is the trained side and the base model the base side (loaded only for
    its own pass); a second evaluation reuses the base's."""
    monkeypatch.setenv("GRPO_FAST_CACHE", str(tmp_path / "cache"))
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from grpo_fast.run.prepare import prepare
    from grpo_fast.run.resolve import resolve_config

    run = tmp_path / "run"
    cfg = resolve_config("demo", [f"model={tiny_model_dir}", "eval_rows=4", "max_completion_length=4", "lora=false"])
    write_yaml(run / "config.yaml", cfg.to_dict())
    rows = prepare(cfg, force=True).eval_rows
    write_jsonl(run / rundir.HELDOUT, rows)
    tuned = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    with torch.no_grad():
        for param in tuned.parameters():
            param.add_(torch.randn_like(param) * 0.5)  # a trained-looking full fine-tune
    tuned.save_pretrained(run / "adapter")

    made = evaluate_run(run, k=2)
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    prompts = [r["prompt"] for r in rows]
    plain = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert [e["completion"] for e in made["base"]["examples"]] == \
        [g[0][0] for g in generate(plain, tok, prompts, max_new_tokens=4)]
    assert [e["completion"] for e in made["trained"]["examples"]] == \
        [g[0][0] for g in generate(tuned, tok, prompts, max_new_tokens=4)]
    again = evaluate_run(run, k=2)
    assert again["base_from"] == str(run) and again["base"] == made["base"] and again["trained"] == made["trained"]


def test_the_kept_base_evaluation_follows_the_reward_source_and_skips_unknown_weights(tiny_model_dir, tmp_path,
                                                                                     monkeypatch):
    """An edited reward file is another reward: its base results are not reused. A hub model that is not in the
    local cache cannot be fingerprinted: nothing is kept for it (and evaluation does not fail on it)."""
    from types import SimpleNamespace

    from transformers import AutoTokenizer

    from grpo_fast.evaluate import base_evaluation_file
    from grpo_fast.run.resolve import resolve_config

    monkeypatch.setenv("GRPO_FAST_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    reward = tmp_path / "my_rewards.py"
    reward.write_text("def brevity(completions, **kw):\n    return [1.0 for _ in completions]\n")
    cfg = resolve_config("demo", {"model": str(tiny_model_dir), "rewards": [{"name": f"{reward}:brevity"}]})
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    run = SimpleNamespace(base_model=str(tiny_model_dir), path=tmp_path / "run")
    rows, settings = [{"prompt": "1+1?", "answer": "2"}], {"k": 1, "n": 1, "max_new_tokens": 4}
    before = base_evaluation_file(run, cfg, rows, settings, tok, None)
    assert before == base_evaluation_file(run, cfg, rows, settings, tok, None)  # stable
    reward.write_text("def brevity(completions, **kw):\n    return [0.0 for _ in completions]\n")
    assert base_evaluation_file(run, cfg, rows, settings, tok, None) not in (None, before)
    assert base_evaluation_file(run, cfg, [*rows, rows[0]], settings, tok, None) != before
    hub = SimpleNamespace(base_model="nobody-here/not-a-cached-model", path=tmp_path / "run")
    assert base_evaluation_file(hub, cfg, rows, settings, tok, None) is None


def test_evaluate_run_refuses_a_folder_that_is_not_a_run(tmp_path):
    with pytest.raises(UserError, match="not a grpo_fast run directory") as info:
        evaluate_run(tmp_path)
    assert "fix:" in str(info.value)
    (tmp_path / "config.yaml").write_text("recipe: demo\n")
    with pytest.raises(UserError, match="no trained weights"):
        evaluate_run(tmp_path)
