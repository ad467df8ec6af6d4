"""Code-execution reward (stub; full implementation follows)."""
from __future__ import annotations

from typing import Any


def extract_code(text: str) -> str | None:
    """Return the Python code in a completion, or None."""
    raise NotImplementedError


def code_execution_reward(prompts: Any, completions: Any, **kw: Any) -> list[float | None]:
    """TRL reward: fraction of tests passed per completion."""
    raise NotImplementedError
