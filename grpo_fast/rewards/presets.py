"""Reward sets: weighted rewards with a named judge; the four presets are ready for TRL.

    trainer = GRPOTrainer(..., reward_funcs=MATH_REASONING_REWARDS.funcs,
                          args=GRPOConfig(..., reward_weights=MATH_REASONING_REWARDS.weights))

Weights follow one scale: correctness 2.0, format 0.5-1.0, length 0.1-0.5, style ±0.5, so being right always
outweighs looking right.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from grpo_fast.errors import UserError
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
class RewardSet:
    """Weighted rewards for one run or task, and which of them judge correctness and format.

    ``funcs``/``weights`` return fresh lists (TRL may append to its list). Maxima come from each reward's
    declared ``reward_range``, so nothing is typed twice.
    """

    name: str
    rewards: tuple[tuple[RewardFunc, float], ...]
    correctness: str
    """``__name__`` of the reward that says whether the answer is right (gold self-test, evaluation)."""
    format: str | None = None
    """``__name__`` of the format-compliance reward, if any (evaluation, health monitor)."""

    @property
    def funcs(self) -> list[RewardFunc]:
        return [f for f, _ in self.rewards]

    @property
    def weights(self) -> list[float]:
        return [float(w) for _, w in self.rewards]

    @property
    def names(self) -> list[str]:
        return [f.__name__ for f, _ in self.rewards]

    def get(self, name: str | None) -> RewardFunc | None:
        return next((f for f, _ in self.rewards if f.__name__ == name), None) if name else None

    @property
    def judge(self) -> RewardFunc:
        """The correctness reward."""
        fn = self.get(self.correctness)
        if fn is None:
            raise ValueError(f"reward set {self.name!r} has no reward named {self.correctness!r}")
        return fn

    @property
    def correctness_max(self) -> float:
        """What the correctness reward gives a right answer."""
        return float(getattr(self.judge, "reward_range", (0.0, 1.0))[1])

    @property
    def max_total(self) -> float | None:
        """Highest weighted total a completion can earn; None when a reward declares no range."""
        ranges = [getattr(f, "reward_range", None) for f in self.funcs]
        if any(r is None for r in ranges):
            return None
        return sum(w * (r[1] if w >= 0 else r[0]) for w, r in zip(self.weights, ranges))

    def with_weights(self, weights: list[float]) -> RewardSet:
        return replace(self, rewards=tuple(zip(self.funcs, weights)))

    def describe(self) -> str:
        return f"{self.name}: " + ", ".join(f"{n}x{w:g}" for n, w in zip(self.names, self.weights))


MATH_REASONING_REWARDS = RewardSet(
    name="math_reasoning",
    rewards=(
        (math_accuracy_reward, 2.0),
        (soft_xml_format_reward, 0.5),
        (xml_count_reward, 0.5),
        (reasoning_steps_reward, 0.2),
    ),
    correctness="math_accuracy_reward",
    format="soft_xml_format_reward",
)

CODE_GENERATION_REWARDS = RewardSet(
    name="code_generation",
    rewards=(
        (code_execution_reward, 2.0),
        (code_block_reward, 0.5),
        (python_syntax_reward, 0.5),
    ),
    correctness="code_execution_reward",
    format="code_block_reward",
)

SUMMARIZATION_REWARDS = RewardSet(
    name="summarization",
    rewards=(
        (make_rouge_reward(column="summary", kind="rougeL"), 2.0),
        # as long as the reference, and its words found in the article: the reference itself earns 1.0 and
        # 0.7-1.0 (20% of the article and shared 3-grams gave it 0.0-0.4 and paid a copied lead 1.0)
        (make_relative_length_reward(ratio=1.0, column="summary"), 0.3),
        (make_faithfulness_reward(column="document", ngram_size=1), 0.5),
        (make_repetition_penalty(ngram_size=3), 0.5),
    ),
    correctness="rouge_l",
)

QA_REWARDS = RewardSet(
    name="qa",
    rewards=(
        (make_fuzzy_match_reward(column="answer"), 2.0),
        (make_citation_reward(column="context", source_column="source"), 0.5),
        (make_ideal_length_reward(target=40), 0.2),
    ),
    correctness="fuzzy_match",
)

PRESETS: dict[str, RewardSet] = {
    p.name: p for p in (MATH_REASONING_REWARDS, CODE_GENERATION_REWARDS, SUMMARIZATION_REWARDS, QA_REWARDS)
}
PRESETS.update(
    {"math": MATH_REASONING_REWARDS, "code": CODE_GENERATION_REWARDS, "summarize": SUMMARIZATION_REWARDS}
)


def get_preset(name: str) -> RewardSet:
    """Preset by name: math_reasoning/math, code_generation/code, summarization, qa."""

    key = name.lower().removesuffix("_rewards")
    if key not in PRESETS:
        raise UserError(f"unknown reward preset {name!r}", fix=f"use one of: {', '.join(sorted(PRESETS))}")
    return PRESETS[key]
