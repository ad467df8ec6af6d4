"""Judged rewards' settings and bad input: a reward model's dtype and 4-bit keys, and every bad judge entry refused
by the CLI with one message naming its key, exit 2 (docs/rewards.md "Judged rewards")."""

from __future__ import annotations

import subprocess
import sys

import pytest

from grpo_fast.config import RewardSpec
from grpo_fast.errors import UserError
from grpo_fast.recipes import get_recipe
from grpo_fast.rewards.base import score_rows
from grpo_fast.rewards.presets import QA_REWARDS
from grpo_fast.rewards.registry import resolve_rewards
from grpo_fast.rewards.reward_model import RewardModel, trl_reward_funcs
from grpo_fast.run.resolve import resolve_config

QA = get_recipe("qa")
QA_ROWS = QA.rows(resolve_config("qa"))[:2]


@pytest.fixture(scope="module")
def tiny_reward_model(tmp_path_factory) -> str:
    from transformers import LlamaConfig, LlamaForSequenceClassification

    from tests.helpers.tiny import tiny_tokenizer

    folder = tmp_path_factory.mktemp("rm") / "tiny-rm"
    tok = tiny_tokenizer()
    config = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=4, num_key_value_heads=2, num_labels=1, pad_token_id=tok.pad_token_id)
    LlamaForSequenceClassification(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


def test_a_reward_model_is_loaded_with_the_runs_dtype_by_trls_own_call(tiny_reward_model):
    import torch
    from transformers import PreTrainedModel

    rewards = resolve_rewards([RewardSpec(name="fuzzy_match"), RewardSpec(model=tiny_reward_model, dtype="bfloat16")],
                              QA_REWARDS)
    model = rewards.funcs[1]
    assert isinstance(model, RewardModel) and model.dtype == "bfloat16" and not model.load_in_4bit
    loaded = trl_reward_funcs(rewards.funcs)[1]  # what GRPOTrainer gets: the model, loaded as TRL would
    assert isinstance(loaded, PreTrainedModel) and loaded.dtype == torch.bfloat16 and loaded.num_labels == 1
    scores = score_rows(model, QA_ROWS, ["Paris", "Rome"])  # outside training: the same settings
    assert model.load()[0].dtype == torch.bfloat16 and all(isinstance(s, float) for s in scores)
    plain = resolve_rewards([RewardSpec(name="fuzzy_match"), RewardSpec(model=tiny_reward_model)], QA_REWARDS)
    assert trl_reward_funcs(plain.funcs)[1] == tiny_reward_model  # no settings: TRL loads it from its location


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="the refusal is for a host without CUDA")
def test_a_4bit_reward_model_on_a_host_without_cuda_names_the_key(tiny_reward_model):
    with pytest.raises(UserError) as err:
        resolve_rewards([RewardSpec(name="fuzzy_match"), RewardSpec(model=tiny_reward_model, load_in_4bit=True)],
                        QA_REWARDS, where=lambda k: k)
    assert err.value.where == "rewards[1].load_in_4bit" and "CUDA GPU" in err.value.what


def test_reward_model_settings_on_a_named_reward_name_the_key():
    with pytest.raises(UserError) as err:
        resolve_rewards([RewardSpec(name="fuzzy_match", dtype="float16")], QA_REWARDS, where=lambda k: k)
    assert err.value.where == "rewards[0].dtype"


def _dry_run(model_dir, rewards: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grpo_fast", "train", "qa", f"model={model_dir}",
                           f"rewards=[fuzzy_match, {rewards}]", "--dry-run"],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # each case a whole dry run in a fresh interpreter: `make test-fast` leaves them out
@pytest.mark.parametrize("entry, key, said", [
    ("{name: llm_judge, rubric: qa, judge_model: /no/such/judge}", "rewards[1].judge_model", "/no/such/judge"),
    ("{model: /no/such/reward-model}", "rewards[1].model", "/no/such/reward-model"),
    ("{name: llm_judge, rubric: 'Is the answer polite?'}", "rewards[1].scale", "scale"),
    ("{name: llm_judge, rubric: qa, endpoint: 'http://127.0.0.1:9/v1'}", "rewards[1].endpoint", "does not answer"),
    ("{model: embedded, dtype: float8}", "rewards[1].dtype", "float8"),
] + ([] if __import__("torch").cuda.is_available() else [
    ("{model: embedded, load_in_4bit: true}", "rewards[1].load_in_4bit", "CUDA GPU")]))
def test_the_cli_refuses_bad_judge_input_naming_the_key_with_exit_2(tiny_model_dir, in_tmp, entry, key, said):
    done = _dry_run(tiny_model_dir, entry)
    assert done.returncode == 2, done.stderr[-2000:]
    assert key in done.stderr and said in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr


def test_self_test_off_as_yaml_reads_it_turns_the_self_test_off():
    rewards = resolve_rewards([RewardSpec(name="fuzzy_match"), RewardSpec(name="llm_judge", rubric="qa",
                                                                           self_test=False)], QA_REWARDS)
    assert rewards.funcs[1].self_test == "off"  # `self_test: off` unquoted is YAML's false


def test_a_vllm_endpoint_is_known_by_its_models_reply_and_its_verdicts_held_to_the_scale():
    import re

    from grpo_fast.rewards.judge_client import HttpJudge, on_scale, served_by_vllm

    assert served_by_vllm(b'{"object": "list", "data": [{"id": "m", "owned_by": "vllm"}]}')
    assert not served_by_vllm(b'{"data": [{"id": "judge"}]}') and not served_by_vllm(b"not json")
    pattern = re.compile(on_scale((0, 10)))
    assert all(pattern.fullmatch(v) for v in (" 7", "10", "0")) and not any(
        pattern.fullmatch(v) for v in ("11", " -1", "7.5", "Score: 7"))
    judge = HttpJudge("http://127.0.0.1:9/v1", "m", check=False)
    judge.starts_reply = True  # what ping sets for a vLLM server
    started = [{"role": "user", "content": "grade"}, {"role": "assistant", "content": "Score:"}]
    body = judge.request_body(started, scale=(0, 10))
    assert body["continue_final_message"] and not body["add_generation_prompt"]
    assert body["structured_outputs"] == {"regex": on_scale((0, 10))}
    assert "structured_outputs" not in HttpJudge("http://127.0.0.1:9/v1", "m", check=False).request_body(started)


@pytest.mark.slow
def test_a_run_trains_two_steps_with_a_bfloat16_reward_model_handed_to_trl(tiny_model_dir, tiny_reward_model, in_tmp):
    import json

    from grpo_fast import train

    cfg = resolve_config("qa", [f"model={tiny_model_dir}", "max_steps=2", "max_completion_length=8",
                                "evaluate=false", f"rewards=[fuzzy_match, {{model: '{tiny_reward_model}', "
                                "dtype: bfloat16, weight: 0.5}]"])
    run = train(cfg)
    assert run.summary["steps"] == 2
    metrics = [json.loads(line) for line in (run.path / "metrics.jsonl").read_text().splitlines()]
    assert all("rewards/tiny-rm/mean" in m for m in metrics if "reward" in m)  # TRL's name for it: the folder's
