"""Reward library: TRL-compatible reward functions, factories, combinators, presets and a self-check.

Every reward is ``fn(prompts, completions, completion_ids=None, **dataset_columns) -> list[float | None]``.
Parametrised rewards come from factories so parameters never collide with dataset columns. ``REWARDS`` maps
config names to rewards or factories; ``get_reward(name, **params)`` resolves one (factories are called).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from grpo_fast.rewards.base import RewardFunc, completion_text, extract_final_answer
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
    make_json_schema_reward,
    python_syntax_reward,
    soft_xml_format_reward,
    strict_xml_format_reward,
    think_answer_format_reward,
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
    RewardPreset,
    get_preset,
)
from grpo_fast.rewards.style import (
    language_consistency_reward,
    make_citation_reward,
    make_faithfulness_reward,
    make_repetition_penalty,
    reasoning_steps_reward,
    repetition_penalty_reward,
)

make_code_execution_reward.is_reward_factory = True
make_code_execution_reward.reward_kind = "correctness"

# name -> reward function, or factory (``is_reward_factory``) called by ``get_reward`` with the YAML params.
REWARDS: dict[str, Callable[..., Any]] = {
    # correctness
    "exact_match": make_exact_match_reward,
    "fuzzy_match": make_fuzzy_match_reward,
    "numeric_match": make_numeric_match_reward,
    "math_accuracy": math_accuracy_reward,
    "multiple_choice": make_multiple_choice_reward,
    "json_field_match": make_json_field_match_reward,
    "code_execution": make_code_execution_reward,
    "rouge": make_rouge_reward,
    # format
    "strict_xml_format": strict_xml_format_reward,
    "soft_xml_format": soft_xml_format_reward,
    "xml_count": xml_count_reward,
    "think_answer_format": think_answer_format_reward,
    "json_valid": json_valid_reward,
    "json_schema": make_json_schema_reward,
    "code_block": code_block_reward,
    "python_syntax": python_syntax_reward,
    # length
    "ideal_length": make_ideal_length_reward,
    "relative_length": make_relative_length_reward,
    "min_length": make_min_length_reward,
    "max_length_penalty": make_max_length_penalty,
    "soft_overlong_punishment": make_soft_overlong_punishment,
    # style
    "reasoning_steps": reasoning_steps_reward,
    "citation": make_citation_reward,
    "repetition_penalty": make_repetition_penalty,
    "language_consistency": language_consistency_reward,
    "faithfulness": make_faithfulness_reward,
}


def register_reward(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """Make your own reward (or factory, marked ``is_reward_factory``) nameable in configs: ``rewards: [name]``."""
    REWARDS[name] = fn
    return fn


def is_factory(obj: Any) -> bool:
    return bool(getattr(obj, "is_reward_factory", False))


def get_reward(name: str, **params: Any) -> RewardFunc:
    """Resolve a reward by registry name; factories get ``params``, plain rewards must get none.

    ``name`` may carry a ``_reward`` suffix (``math_accuracy_reward``) as TRL logs it.
    """
    from grpo_fast.errors import UserError

    key = name.strip()
    if key not in REWARDS and key.removesuffix("_reward") in REWARDS:
        key = key.removesuffix("_reward")
    if key not in REWARDS:
        close = difflib.get_close_matches(key, REWARDS, n=3)
        hint = (
            f"did you mean {', '.join(close)}?" if close else f"known rewards: {', '.join(sorted(REWARDS))}"
        )
        raise UserError(f"unknown reward {name!r}", fix=hint)
    entry = REWARDS[key]
    if is_factory(entry):
        try:
            return entry(**params)
        except TypeError as err:
            raise UserError(f"bad parameters for reward {key!r}: {err}", fix="see docs/rewards.md") from err
    if params:
        raise UserError(
            f"reward {key!r} takes no parameters (got {', '.join(params)})",
            fix="remove the parameters, or pick a factory reward",
        )
    return entry


__all__ = [
    "REWARDS",
    "PRESETS",
    "RewardPreset",
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
] + [n for n in dir() if n.startswith("make_")]


def debug_reward(fn: RewardFunc, samples: Any, **columns: Any) -> list[float | None]:
    """Print each sample's score next to what was extracted (see ``grpo_fast.rewards.debug``)."""
    from grpo_fast.rewards.debug import debug_reward as _debug

    return _debug(fn, samples, **columns)
