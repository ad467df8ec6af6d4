"""Combinators: build one reward from several (weighted sum, gate, clip/normalise, adaptive weights).

Prefer passing several rewards to TRL with ``reward_weights`` (each is logged separately); combine only when
the combination itself is the signal, e.g. "correctness counts only when the format holds".
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

from grpo_fast.rewards.base import RewardFunc, named


def _name(fn: Any) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


def _score(fn: RewardFunc, prompts: Any, completions: Any, kwargs: dict[str, Any]) -> list[float | None]:
    scores = list(fn(prompts=prompts, completions=completions, **kwargs))
    if len(scores) != len(completions):
        raise ValueError(
            f"reward {_name(fn)} returned {len(scores)} scores for {len(completions)} completions"
        )
    return scores


def weighted_sum(
    funcs: Sequence[RewardFunc], weights: Sequence[float] | None = None, name: str = "weighted_sum"
):
    """Σ wᵢ·rᵢ, skipping rewards that return None for a completion; None only if all do."""
    weights = list(weights) if weights is not None else [1.0] * len(funcs)
    if len(weights) != len(funcs):
        raise ValueError("one weight per reward")

    def reward(prompts: Any, completions: Any, **kwargs: Any) -> list[float | None]:
        columns = [_score(f, prompts, completions, kwargs) for f in funcs]
        out: list[float | None] = []
        for row in zip(*columns):
            vals = [w * s for w, s in zip(weights, row) if s is not None]
            out.append(sum(vals) if vals else None)
        return out

    return named(reward, name, reward_kind="combined")


def gate(
    condition: RewardFunc,
    then: RewardFunc,
    threshold: float = 1.0,
    otherwise: float = 0.0,
    name: str | None = None,
):
    """``then``'s score only where ``condition`` scores ≥ threshold, else ``otherwise``."""

    def reward(prompts: Any, completions: Any, **kwargs: Any) -> list[float | None]:
        cond = _score(condition, prompts, completions, kwargs)
        inner = _score(then, prompts, completions, kwargs)
        return [s if (c is not None and c >= threshold) else otherwise for c, s in zip(cond, inner)]

    attrs = {k: getattr(then, k) for k in ("reward_kind", "reward_range") if hasattr(then, k)}
    return named(reward, name or f"{_name(then)}_if_{_name(condition)}", **attrs)


def clip(fn: RewardFunc, low: float = -1.0, high: float = 1.0, name: str | None = None):
    """Clamp scores into [low, high] (None passes through)."""

    def reward(prompts: Any, completions: Any, **kwargs: Any) -> list[float | None]:
        return [
            None if s is None else min(high, max(low, s)) for s in _score(fn, prompts, completions, kwargs)
        ]

    return named(
        reward,
        name or _name(fn),
        reward_kind=getattr(fn, "reward_kind", "combined"),
        reward_range=(low, high),
    )


def normalize(fn: RewardFunc, low: float, high: float, name: str | None = None):
    """Map [low, high] linearly onto [0, 1] (clipped), so rewards with different scales can share a weight."""
    if high <= low:
        raise ValueError("need high > low")

    def reward(prompts: Any, completions: Any, **kwargs: Any) -> list[float | None]:
        scores = _score(fn, prompts, completions, kwargs)
        return [None if s is None else min(1.0, max(0.0, (s - low) / (high - low))) for s in scores]

    return named(
        reward, name or _name(fn), reward_kind=getattr(fn, "reward_kind", "combined"), reward_range=(0.0, 1.0)
    )


class AdaptiveRewardScaler:
    """One reward whose component weights follow each component's running success rate.

    Per batch, success rate = share of completions scoring ≥ ``success_threshold``; an EMA of it drives
    ``w = base · (1 + gain · (target_rate − ema))`` clamped to [w_min, w_max]: a skill the model already
    masters loses weight, one it fails at gains weight. ``weights`` has the current values; when TRL passes
    ``log_metric`` they are logged as ``adaptive/<name>``.
    """

    def __init__(
        self,
        funcs: Sequence[RewardFunc],
        base_weights: Sequence[float] | None = None,
        *,
        w_min: float = 0.1,
        w_max: float = 3.0,
        ema: float = 0.9,
        gain: float = 1.0,
        target_rate: float = 0.5,
        success_threshold: float = 0.5,
        name: str = "adaptive_reward",
    ):
        self.funcs = list(funcs)
        self.names = [_name(f) for f in self.funcs]
        self.base = list(base_weights) if base_weights is not None else [1.0] * len(self.funcs)
        if len(self.base) != len(self.funcs):
            raise ValueError("one base weight per reward")
        if w_min > w_max:
            raise ValueError("need w_min <= w_max")
        self.w_min, self.w_max, self.ema, self.gain = w_min, w_max, ema, gain
        self.target_rate, self.success_threshold = target_rate, success_threshold
        self.rates: list[float | None] = [None] * len(self.funcs)
        self._weights = [min(w_max, max(w_min, b)) for b in self.base]
        self._lock = threading.Lock()
        self.__name__ = name

    @property
    def weights(self) -> dict[str, float]:
        return dict(zip(self.names, self._weights))

    def observe(self, columns: list[list[float | None]]) -> None:
        """Fold one batch of per-reward scores into the running success rates and the weights."""
        with self._lock:
            for i, scores in enumerate(columns):
                valid = [s for s in scores if s is not None and not math.isnan(s)]
                if not valid:
                    continue
                rate = sum(1 for s in valid if s >= self.success_threshold) / len(valid)
                prev = self.rates[i]
                self.rates[i] = rate if prev is None else self.ema * prev + (1 - self.ema) * rate
                w = self.base[i] * (1 + self.gain * (self.target_rate - self.rates[i]))
                self._weights[i] = min(self.w_max, max(self.w_min, w))

    def __call__(self, prompts: Any, completions: Any, **kwargs: Any) -> list[float | None]:
        columns = [_score(f, prompts, completions, kwargs) for f in self.funcs]
        weights = list(self._weights)  # score this batch with the weights it was sampled under
        self.observe(columns)
        log_metric = kwargs.get("log_metric")
        if callable(log_metric):
            for n, w in self.weights.items():
                log_metric(f"adaptive/{n}", w)
        out: list[float | None] = []
        for row in zip(*columns):
            vals = [w * s for w, s in zip(weights, row) if s is not None]
            out.append(sum(vals) if vals else None)
        return out
