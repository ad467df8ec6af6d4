"""Length rewards. All are factories: the target is a training decision, not a dataset column.

Length is counted in tokens when the factory gets a tokenizer (or, for the overlong penalty, from TRL's
``completion_ids``), else in whitespace-separated words.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from grpo_fast.rewards.answers import words
from grpo_fast.rewards.base import against_column, bound, completion_texts, factory


class _Counter:
    """Length of a text in the tokenizer's tokens, else in words (a class, not a lambda: rewards pickle)."""

    def __init__(self, tokenizer: Any = None):
        self.tokenizer = tokenizer

    def __call__(self, text: str) -> int:
        if self.tokenizer is None:
            return len(words(text))
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])



def _lengths(texts: list[str], completion_ids: Any, tokenizer: Any, use_ids: bool) -> list[int]:
    if use_ids and tokenizer is None and completion_ids is not None and len(completion_ids) == len(texts):
        return [len(ids) for ids in completion_ids]
    count = _Counter(tokenizer)
    return [count(t) for t in texts]


@factory
def make_ideal_length_reward(target: int = 200, tokenizer: Any = None, name: str | None = None) -> Any:
    """1.0 at ``target`` length, falling linearly to 0 at 0 and at 2×target: no reward for padding."""
    if target <= 0:
        raise ValueError("target must be positive")
    return bound(_ideal_length, SimpleNamespace(target=target, count=_Counter(tokenizer)),
                 name or f"ideal_length_{target}", "length")


def _ideal_length(cfg: SimpleNamespace, /, prompts: Any = None, completions: Any = None, **kwargs: Any) -> list[float]:
    return [max(0.0, 1.0 - abs(cfg.count(t) - cfg.target) / cfg.target) for t in completion_texts(completions)]


@factory
def make_relative_length_reward(
    ratio: float = 0.2, column: str = "document", tokenizer: Any = None, name: str = "relative_length"
) -> Any:
    """Ideal length relative to a source column (summaries ≈ ``ratio`` × document); None without a source."""
    return bound(_relative_length, SimpleNamespace(ratio=ratio, column=column, count=_Counter(tokenizer)), name,
                 "length")


def _relative_length(cfg: SimpleNamespace, /, prompts: Any = None, completions: Any = None,
                     **kwargs: Any) -> list[float | None]:
    def score(text: str, source: Any) -> float:
        target = max(1.0, cfg.ratio * cfg.count(str(source)))
        return max(0.0, 1.0 - abs(cfg.count(text) - target) / target)

    return against_column(completions, kwargs, cfg.column, score)


@factory
def make_min_length_reward(min_length: int = 50, tokenizer: Any = None, name: str | None = None) -> Any:
    """Fraction of ``min_length`` reached, capped at 1. Hackable by padding on its own: pair with a cap."""
    return bound(_min_length, SimpleNamespace(min_length=min_length, count=_Counter(tokenizer)),
                 name or f"min_length_{min_length}", "length")


def _min_length(cfg: SimpleNamespace, /, prompts: Any = None, completions: Any = None, **kwargs: Any) -> list[float]:
    return [min(1.0, cfg.count(t) / max(1, cfg.min_length)) for t in completion_texts(completions)]


@factory
def make_max_length_penalty(max_length: int = 512, tokenizer: Any = None, name: str | None = None) -> Any:
    """0 up to ``max_length``, then −(excess / max_length), floored at −1."""
    return bound(_max_length_penalty, SimpleNamespace(max_length=max_length, count=_Counter(tokenizer)),
                 name or f"max_length_penalty_{max_length}", "length", -1.0, 0.0)


def _max_length_penalty(cfg: SimpleNamespace, /, prompts: Any = None, completions: Any = None,
                        **kwargs: Any) -> list[float]:
    cap = max(1, cfg.max_length)
    return [-min(1.0, max(0, cfg.count(t) - cfg.max_length) / cap) for t in completion_texts(completions)]


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
    cfg = SimpleNamespace(start=max_length - cache_length, cache_length=cache_length, tokenizer=tokenizer)
    return bound(_soft_overlong, cfg, name, "length", -1.0, 0.0)


def _soft_overlong(cfg: SimpleNamespace, /, prompts: Any = None, completions: Any = None, completion_ids: Any = None,
                   **kwargs: Any) -> list[float]:
    lengths = _lengths(completion_texts(completions), completion_ids, cfg.tokenizer, use_ids=True)
    return [-min(1.0, max(0, n - cfg.start) / cfg.cache_length) for n in lengths]
