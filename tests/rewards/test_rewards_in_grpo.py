"""One real GRPO step on the tiny CPU model with each reward preset (rewards plug straight into TRL)."""

from __future__ import annotations

import math

import pytest
from tiny import tiny_grpo_trainer, tiny_model, tiny_tokenizer

import grpo_fast.rewards as R
from grpo_fast.config import RunConfig
from grpo_fast.recipes import recipe_for_preset

pytest.importorskip("trl")


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


def test_tiny_builders(tokenizer):
    tok = tiny_tokenizer()
    model = tiny_model(tok)
    assert tok.pad_token_id is not None and tok.chat_template
    ids = tok.apply_chat_template([{"role": "user", "content": "héllo 你好"}], add_generation_prompt=True)
    assert tok.decode(ids if isinstance(ids, list) else ids["input_ids"]).endswith("<|assistant|>")
    assert model.config.hidden_size == 32 and model.config.vocab_size == len(tok)


@pytest.mark.parametrize(
    "preset",
    [R.MATH_REASONING_REWARDS, R.CODE_GENERATION_REWARDS, R.SUMMARIZATION_REWARDS, R.QA_REWARDS],
    ids=lambda p: p.name,
)
def test_one_grpo_step(preset, tokenizer, tmp_path):
    recipe = recipe_for_preset(preset)
    rows = (recipe.rows(RunConfig(recipe=recipe.name)) * 4)[:4]
    trainer = tiny_grpo_trainer(tokenizer, preset.funcs, preset.weights, rows, tmp_path)
    trainer.train()
    logs = trainer.state.log_history[0]
    for name in preset.names:
        assert f"rewards/{name}/mean" in logs
    assert math.isfinite(logs["loss"])
