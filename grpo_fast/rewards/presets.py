"""Reward presets: the rewards and weights for one kind of task, ready for TRL.

    trainer = GRPOTrainer(..., reward_funcs=MATH_REASONING_REWARDS.funcs,
                          args=GRPOConfig(..., reward_weights=MATH_REASONING_REWARDS.weights))

Weights follow one scale: correctness 2.0, format 0.5-1.0, length 0.1-0.5, style ±0.5, so being right always
outweighs looking right.
"""

from __future__ import annotations

from dataclasses import dataclass

from grpo_fast.rewards.base import RewardFunc
from grpo_fast.rewards.code import code_execution_reward
from grpo_fast.rewards.correctness import make_fuzzy_match_reward, make_rouge_reward
from grpo_fast.rewards.format import (
    code_block_reward,
    python_syntax_reward,
    soft_xml_format_reward,
    xml_count_reward,
)
from grpo_fast.rewards.length import make_ideal_length_reward, make_relative_length_reward
from grpo_fast.rewards.mathverify import math_accuracy_reward
from grpo_fast.rewards.style import (
    make_citation_reward,
    make_faithfulness_reward,
    make_repetition_penalty,
    reasoning_steps_reward,
)


@dataclass(frozen=True)
class RewardPreset:
    """Named rewards with weights. ``funcs``/``weights`` return fresh lists (TRL may append to its list)."""

    name: str
    kind: str  # math | code | summarization | qa: picks the gold builder and probes in ``check``
    rewards: tuple[tuple[RewardFunc, float], ...]
    correctness: str  # __name__ of the reward that says whether the answer is right
    format: str | None = None  # __name__ of the format-compliance reward, if any

    @property
    def funcs(self) -> list[RewardFunc]:
        return [f for f, _ in self.rewards]

    @property
    def weights(self) -> list[float]:
        return [float(w) for _, w in self.rewards]

    @property
    def names(self) -> list[str]:
        return [f.__name__ for f, _ in self.rewards]

    def describe(self) -> str:
        return f"{self.name}: " + ", ".join(f"{n}×{w:g}" for n, w in zip(self.names, self.weights))


MATH_REASONING_REWARDS = RewardPreset(
    name="math_reasoning",
    kind="math",
    rewards=(
        (math_accuracy_reward, 2.0),
        (soft_xml_format_reward, 0.5),
        (xml_count_reward, 0.5),
        (reasoning_steps_reward, 0.2),
    ),
    correctness="math_accuracy_reward",
    format="soft_xml_format_reward",
)

CODE_GENERATION_REWARDS = RewardPreset(
    name="code_generation",
    kind="code",
    rewards=(
        (code_execution_reward, 2.0),
        (code_block_reward, 0.5),
        (python_syntax_reward, 0.5),
    ),
    correctness="code_execution_reward",
    format="code_block_reward",
)

SUMMARIZATION_REWARDS = RewardPreset(
    name="summarization",
    kind="summarization",
    rewards=(
        (make_rouge_reward(column="summary", kind="rougeL"), 2.0),
        (make_relative_length_reward(ratio=0.2, column="document"), 0.3),
        (make_faithfulness_reward(column="document"), 0.5),
        (make_repetition_penalty(ngram_size=3), 0.5),
    ),
    correctness="rouge_l",
)

QA_REWARDS = RewardPreset(
    name="qa",
    kind="qa",
    rewards=(
        (make_fuzzy_match_reward(column="answer"), 2.0),
        (make_citation_reward(column="context", source_column="source"), 0.5),
        (make_ideal_length_reward(target=40), 0.2),
    ),
    correctness="fuzzy_match",
)

PRESETS: dict[str, RewardPreset] = {
    p.name: p for p in (MATH_REASONING_REWARDS, CODE_GENERATION_REWARDS, SUMMARIZATION_REWARDS, QA_REWARDS)
}
PRESETS.update(
    {"math": MATH_REASONING_REWARDS, "code": CODE_GENERATION_REWARDS, "summarize": SUMMARIZATION_REWARDS}
)


def get_preset(name: str) -> RewardPreset:
    """Preset by name: math_reasoning/math, code_generation/code, summarization, qa."""
    from grpo_fast.errors import UserError

    key = name.lower().removesuffix("_rewards")
    if key not in PRESETS:
        raise UserError(f"unknown reward preset {name!r}", fix=f"use one of: {', '.join(sorted(PRESETS))}")
    return PRESETS[key]
