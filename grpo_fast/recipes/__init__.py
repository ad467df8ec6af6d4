"""Recipes: a dataset mapper, a reward preset and default settings for one task, under one name.

A recipe module defines ``RECIPE``; ``get_recipe(name)`` finds it, a built-in by name or the user's own by
reference (``my_task.py:RECIPE``, ``package.module:RECIPE``): one contract for both. The YAML files in the
top-level ``recipes/`` folder select a recipe and override its defaults.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from grpo_fast.config.references import is_reference, load_object
from grpo_fast.errors import UserError
from grpo_fast.recipes.common import Source
from grpo_fast.rewards.check import CheckLine, Probe
from grpo_fast.rewards.presets import RewardSet

NAMES = ("demo", "math", "code", "qa", "summarization", "tool_math", "trl")
MODULES = {"trl": "trl_format"}
"""Built-in recipes whose module is not named after them (``trl`` would read as TRL itself)."""


@dataclass(frozen=True)
class Recipe:
    """One task and everything the kit knows about it; every other module reads the task from here."""

    name: str
    description: str
    system_prompt: str
    """The system message of every prompt (``chat``/``generate`` use it too)."""
    rows: Callable[[Any], list[dict]]
    """Load and map the dataset for a RunConfig (offline sample when ``dataset`` is unset): a chat ``prompt``
    plus the gold columns the rewards read."""
    rewards: RewardSet
    """The reward preset: weighted rewards, the correctness judge and the format reward."""
    gold: Callable[[dict], str | None]
    """A completion that must earn full correctness for a mapped row (gold self-test, SFT warm-up)."""
    reference: Callable[[dict], str | None] | None = None
    """The bare reference answer of a row (e.g. its ``answer`` column), tried by the gold self-test when ``gold``
    gives none: full marks confirm the judge; a judge that wants a layout around it is reported, not refused."""
    probes: tuple[Probe, ...] = ()
    """Task-specific reward-hacking probes for ``rewards check`` (the generic ones always run)."""
    checks: tuple[Callable[[RewardSet], list[CheckLine]], ...] = ()
    """Task-specific checks of a reward set beyond the dataset's golds (``rewards check`` runs them)."""
    metric: str = "accuracy"
    """Headline of the evaluation: ``accuracy`` (share of greedy answers at full correctness) or ``score``
    (mean correctness score, for graded tasks such as ROUGE)."""
    required: tuple[str, ...] = ("prompt",)
    """Columns every mapped row must have, non-empty."""
    holdout: Callable[[Any, list[dict]], list[dict]] | None = None
    """Generated tasks: (config, training rows) -> held-out rows of the same kind, disjoint from training.
    Used instead of splitting ``rows`` when no ``dataset`` is set. None: a seeded split of ``rows``."""
    defaults: dict[str, Any] = field(default_factory=dict)
    """Config defaults for this task (any RunConfig or GRPOConfig key)."""
    environment: str | None = None
    """Tool use: the environment class, by reference (``pkg.module:Class``), TRL's ``environment_factory`` makes
    one per rollout; its public methods are the tools the model may call. The config key ``environment``
    overrides it."""
    demonstration: Callable[[dict], list[dict]] | None = None
    """The SFT warm-up's completion messages for a row (tool calls and their replies included); None: the gold
    answer as one assistant message."""
    sources: Callable[[Any], list[Source]] | None = None
    """The raw rows ``rows`` maps, one mapped row per raw row in the same order (``rewards check --programs``
    finds a row by its dataset id here). None: the recipe's completions are not programs."""
    drop_failed_gold: bool = False
    """Datasets whose own references sometimes fail (competitive programming): rows whose reference does not earn
    full marks are reported and not trained on. When every checked reference fails, training is refused (then the
    reward, not the data, is broken)."""


def get_recipe(name: str) -> Recipe:
    """A built-in recipe by name, or the user's own ``Recipe`` by reference (loaded once per reference)."""
    if is_reference(name):
        return own_recipe(name)
    if name not in NAMES:
        close = difflib.get_close_matches(name, NAMES, n=1)
        raise UserError(
            f"unknown recipe {name!r}", "config key 'recipe'",
            (f"did you mean '{close[0]}'? " if close else "") + f"built-in recipes: {', '.join(NAMES)}; or your "
            "own by reference: my_task.py:RECIPE",
        )
    module = importlib.import_module(f"grpo_fast.recipes.{MODULES.get(name, name)}")
    return module.RECIPE


_OWN: dict[str, Recipe] = {}


def own_recipe(ref: str) -> Recipe:
    """``my_task.py:RECIPE`` or ``package.module:RECIPE``: a ``Recipe`` like the built-ins, checked to be one."""
    if ref not in _OWN:
        try:
            obj = load_object(ref, "recipe", "Recipe")
        except UserError as err:
            raise UserError(err.what, "config key 'recipe'", err.fix) from None
        if not isinstance(obj, Recipe):
            raise UserError(f"recipe {ref!r} is a {type(obj).__name__}, not a Recipe", "config key 'recipe'",
                            "point at a Recipe object: RECIPE = Recipe(name=..., description=..., system_prompt=..., "
                            "rows=..., rewards=..., gold=...) with `from grpo_fast.recipes import Recipe` "
                            "(docs/recipes.md, 'Your own task')")
        _OWN[ref] = obj
    return _OWN[ref]


def all_recipes() -> list[Recipe]:
    return [get_recipe(name) for name in NAMES]


def recipe_for_preset(preset: RewardSet) -> Recipe | None:
    """The built-in recipe that uses ``preset`` (its sample rows and gold builder check the preset)."""
    return next((r for r in all_recipes() if r.rewards is preset), None)
