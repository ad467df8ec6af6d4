"""Reward library: TRL-compatible reward functions, factories, combinators, presets and a self-check.

Every reward is ``fn(prompts, completions, completion_ids=None, **dataset_columns) -> list[float | None]``.
Parametrised rewards come from factories so parameters never collide with dataset columns. ``REWARDS`` maps
config names to rewards or factories; ``get_reward(name, **params)`` resolves one (factories are called),
``resolve_rewards`` turns a config's ``rewards:`` into the run's ``RewardSet``.
"""

from __future__ import annotations

from typing import Any

from grpo_fast.rewards import debug
from grpo_fast.rewards.answers import extract_final_answer
from grpo_fast.rewards.base import RewardFunc, completion_text, score_rows
from grpo_fast.rewards.code import code_execution_reward, extract_code, make_code_execution_reward
from grpo_fast.rewards.combine import AdaptiveRewardScaler, clip, gate, normalize, weighted_sum
from grpo_fast.rewards.correctness import (
    exact_match_reward,
    fuzzy_match_reward,
    make_exact_match_reward,
    make_fuzzy_match_reward,
    make_json_field_match_reward,
    make_multiple_choice_reward,
    make_numeric_match_reward,
    make_rouge_reward,
    multiple_choice_reward,
    numeric_match_reward,
)
from grpo_fast.rewards.format import (
    code_block_reward,
    json_valid_reward,
    make_code_block_reward,
    make_json_schema_reward,
    python_syntax_reward,
    soft_xml_format_reward,
    strict_xml_format_reward,
    think_answer_format_reward,
    think_format_reward,
    xml_count_reward,
)
from grpo_fast.rewards.length import (
    make_ideal_length_reward,
    make_max_length_penalty,
    make_min_length_reward,
    make_relative_length_reward,
    make_soft_overlong_punishment,
)
from grpo_fast.rewards.mathverify import math_accuracy_reward, math_equal
from grpo_fast.rewards.presets import (
    CODE_GENERATION_REWARDS,
    MATH_REASONING_REWARDS,
    PRESETS,
    QA_REWARDS,
    SUMMARIZATION_REWARDS,
    RewardSet,
    get_preset,
)
from grpo_fast.rewards.reasoning import (
    make_cosine_scaled_reward,
    make_kimi_length_reward,
    make_reasoning_accuracy_reward,
    reasoning_accuracy_reward,
)
from grpo_fast.rewards.registry import REWARDS, get_reward, is_factory, load_reward, register_reward, resolve_rewards
from grpo_fast.rewards.style import (
    language_consistency_reward,
    make_citation_reward,
    make_faithfulness_reward,
    make_repetition_penalty,
    reasoning_steps_reward,
    repetition_penalty_reward,
)

__all__ = [
    "REWARDS",
    "PRESETS",
    "RewardSet",
    "load_reward",
    "resolve_rewards",
    "score_rows",
    "RewardFunc",
    "get_reward",
    "register_reward",
    "get_preset",
    "is_factory",
    "MATH_REASONING_REWARDS",
    "CODE_GENERATION_REWARDS",
    "SUMMARIZATION_REWARDS",
    "QA_REWARDS",
    "math_accuracy_reward",
    "math_equal",
    "code_execution_reward",
    "extract_code",
    "make_code_execution_reward",
    "exact_match_reward",
    "fuzzy_match_reward",
    "numeric_match_reward",
    "multiple_choice_reward",
    "strict_xml_format_reward",
    "soft_xml_format_reward",
    "xml_count_reward",
    "think_answer_format_reward",
    "think_format_reward",
    "json_valid_reward",
    "code_block_reward",
    "python_syntax_reward",
    "reasoning_steps_reward",
    "language_consistency_reward",
    "repetition_penalty_reward",
    "AdaptiveRewardScaler",
    "weighted_sum",
    "gate",
    "clip",
    "normalize",
    "completion_text",
    "extract_final_answer",
    "debug_reward",
    "make_citation_reward",
    "make_code_block_reward",
    "make_cosine_scaled_reward",
    "make_kimi_length_reward",
    "make_reasoning_accuracy_reward",
    "reasoning_accuracy_reward",
    "make_exact_match_reward",
    "make_faithfulness_reward",
    "make_fuzzy_match_reward",
    "make_ideal_length_reward",
    "make_json_field_match_reward",
    "make_json_schema_reward",
    "make_max_length_penalty",
    "make_min_length_reward",
    "make_multiple_choice_reward",
    "make_numeric_match_reward",
    "make_relative_length_reward",
    "make_repetition_penalty",
    "make_rouge_reward",
    "make_soft_overlong_punishment",
]


def debug_reward(fn: RewardFunc, samples: Any, **columns: Any) -> list[float | None]:
    """Print each sample's score next to what was extracted (see ``grpo_fast.rewards.debug``)."""
    return debug.debug_reward(fn, samples, **columns)
