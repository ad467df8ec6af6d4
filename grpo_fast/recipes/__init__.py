"""Recipes: a dataset mapper, a reward preset and default settings for one task, under one name.

A recipe module defines ``RECIPE``; ``get_recipe(name)`` finds it. The YAML files in the top-level
``recipes/`` folder select a recipe and override its defaults.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from grpo_fast.errors import UserError

NAMES = ("demo", "math", "code", "qa", "summarization")


@dataclass(frozen=True)
class Recipe:
    """One task. ``rows`` yields mapped rows: a chat ``prompt`` plus the gold columns the rewards read."""

    name: str
    description: str
    rows: Callable[[Any], list[dict]]
    """Load and map the dataset for a RunConfig (offline sample when ``dataset`` is None)."""
    reward_funcs: Callable[[], list[Callable]]
    """The reward functions, built fresh per run (some hold state)."""
    reward_weights: list[float]
    correctness: str
    """``__name__`` of the reward that says whether an answer is right (gold self-test, evaluation)."""
    gold: Callable[[dict], str]
    """A completion that must earn full correctness for a mapped row (the gold self-test)."""
    correctness_max: float = 1.0
    """What the correctness reward gives a right answer."""
    reward_max: float = 1.0
    """Highest weighted total reward a completion can earn (reported beside the reward curve)."""
    format_reward: str | None = None
    """``__name__`` of the reward that measures format compliance (evaluation, health monitor)."""
    required: tuple[str, ...] = ("prompt",)
    """Columns every mapped row must have, non-empty."""
    holdout: Callable[[Any, list[dict]], list[dict]] | None = None
    """Generated tasks: (config, training rows) -> held-out rows of the same kind, disjoint from training.
    Used instead of splitting ``rows`` when no ``dataset`` is set. None: a seeded split of ``rows``."""
    defaults: dict[str, Any] = field(default_factory=dict)
    """Config defaults for this task (any RunConfig or GRPOConfig key)."""


def get_recipe(name: str) -> Recipe:
    if name not in NAMES:
        import difflib

        close = difflib.get_close_matches(name, NAMES, n=1)
        raise UserError(
            f"unknown recipe {name!r}", "config key 'recipe'",
            (f"did you mean '{close[0]}'? " if close else "") + f"built-in recipes: {', '.join(NAMES)}",
        )
    module = importlib.import_module(f"grpo_fast.recipes.{name}")
    return module.RECIPE
