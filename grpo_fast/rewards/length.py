"""Length rewards. All are factories: the target is a training decision, not a dataset column.

Length is counted in tokens when the factory gets a tokenizer (or, for the overlong penalty, from TRL's
``completion_ids``), else in whitespace-separated words.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from grpo_fast.rewards.base import against_column, completion_texts, factory, named, words


def _counter(tokenizer: Any = None) -> Callable[[str], int]:
    if tokenizer is None:
        return lambda text: len(words(text))
    return lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])


def _lengths(texts: list[str], completion_ids: Any, tokenizer: Any, use_ids: bool) -> list[int]:
    if use_ids and tokenizer is None and completion_ids is not None and len(completion_ids) == len(texts):
        return [len(ids) for ids in completion_ids]
    count = _counter(tokenizer)
    return [count(t) for t in texts]


@factory
def make_ideal_length_reward(target: int = 200, tokenizer: Any = None, name: str | None = None) -> Any:
    """1.0 at ``target`` length, falling linearly to 0 at 0 and at 2×target: no reward for padding."""
    if target <= 0:
        raise ValueError("target must be positive")
    count = _counter(tokenizer)

    def reward(prompts: Any, completions: Any, **kwargs: Any) -> list[float]:
        return [max(0.0, 1.0 - abs(count(t) - target) / target) for t in completion_texts(completions)]

    return named(reward, name or f"ideal_length_{target}", reward_kind="length", reward_range=(0.0, 1.0))


@factory
def make_relative_length_reward(
    ratio: float = 0.2, column: str = "document", tokenizer: Any = None, name: str = "relative_length"
) -> Any:
    """Ideal length relative to a source column (summaries ≈ ``ratio`` × document); None without a source."""
    count = _counter(tokenizer)

    def score(text: str, source: Any) -> float:
        target = max(1.0, ratio * count(str(source)))
        return max(0.0, 1.0 - abs(count(text) - target) / target)

    def reward(prompts: Any, completions: Any, **kwargs: Any) -> list[float | None]:
        return against_column(completions, kwargs, column, score)

    return named(reward, name, reward_kind="length", reward_range=(0.0, 1.0))


@factory
def make_min_length_reward(min_length: int = 50, tokenizer: Any = None, name: str | None = None) -> Any:
    """Fraction of ``min_length`` reached, capped at 1. Hackable by padding on its own: pair with a cap."""
    count = _counter(tokenizer)

    def reward(prompts: Any, completions: Any, **kwargs: Any) -> list[float]:
        return [min(1.0, count(t) / max(1, min_length)) for t in completion_texts(completions)]

    return named(reward, name or f"min_length_{min_length}", reward_kind="length", reward_range=(0.0, 1.0))


@factory
def make_max_length_penalty(max_length: int = 512, tokenizer: Any = None, name: str | None = None) -> Any:
    """0 up to ``max_length``, then −(excess / max_length), floored at −1."""
    count = _counter(tokenizer)

    def reward(prompts: Any, completions: Any, **kwargs: Any) -> list[float]:
        return [
            -min(1.0, max(0, count(t) - max_length) / max(1, max_length))
            for t in completion_texts(completions)
        ]

    return named(
        reward, name or f"max_length_penalty_{max_length}", reward_kind="length", reward_range=(-1.0, 0.0)
    )


@factory
def make_soft_overlong_punishment(
    max_length: int = 1024,
    cache_length: int = 256,
    tokenizer: Any = None,
    name: str = "soft_overlong_punishment",
) -> Any:
    """DAPO soft overlong punishment: 0 up to L_max − L_cache, linear to −1 at L_max (tokens)."""
    if not 0 < cache_length <= max_length:
        raise ValueError("need 0 < cache_length <= max_length")
    start = max_length - cache_length

    def reward(prompts: Any, completions: Any, completion_ids: Any = None, **kwargs: Any) -> list[float]:
        lengths = _lengths(completion_texts(completions), completion_ids, tokenizer, use_ids=True)
        return [-min(1.0, max(0, n - start) / cache_length) for n in lengths]

    return named(reward, name, reward_kind="length", reward_range=(-1.0, 0.0))
