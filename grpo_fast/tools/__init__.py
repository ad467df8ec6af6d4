"""Tools a model can call while it generates, backed by the kit's sandbox (see ``python``).

A run's tools come from one environment class (TRL's ``environment_factory``): the recipe's, or the config key
``environment`` naming one by reference. ``chat`` makes the tokenizer render and parse tool calls; ``loop`` runs
the same tool loop as TRL's trainer for evaluation and inference.
"""

from __future__ import annotations

from typing import Any

from grpo_fast.config.references import load_object
from grpo_fast.errors import UserError
from grpo_fast.tools.chat import is_tool_name
from grpo_fast.tools.python import PythonSession

__all__ = ["PythonSession", "environment_class", "run_tools"]


def environment_class(cfg: Any, recipe: Any) -> Any | None:
    """The run's environment class (None: no tools), checked for TRL's contract: ``reset`` plus a public method."""
    ref = cfg.environment if cfg.environment is not None else recipe.environment
    if not ref or ref == "none":
        return None
    where = cfg.where("environment") if cfg.environment is not None else f"recipe {recipe.name}"
    cls = load_object(ref, "environment", "class")
    if not callable(cls):
        raise UserError(f"environment {ref!r} is not a class or factory", where,
                        "name a class whose methods are the tools (see docs/tools.md)")
    tools = [n for n in dir(cls) if is_tool_name(n) and callable(getattr(cls, n))]
    if not callable(getattr(cls, "reset", None)) or not tools:
        raise UserError(f"environment {ref!r} needs a reset(**row) method and at least one public method (a tool)",
                        where, "add `def reset(self, **row): ...` and a documented method per tool (docs/tools.md)")
    return cls


def run_tools(cfg: Any, recipe: Any) -> tuple[Any | None, int]:
    """(environment class or None, rounds of tool calls): what a run's tool loop runs with, wherever it runs
    (evaluation, chat, generate); the rounds are TRL's ``max_tool_calling_iterations``, 4 when unset."""
    return environment_class(cfg, recipe), int(cfg.args.max_tool_calling_iterations or 4)
