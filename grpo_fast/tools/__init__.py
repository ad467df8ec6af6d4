"""Tools a model can call while it generates, backed by the kit's sandbox (see ``python``)."""

from grpo_fast.tools.python import PythonSession

__all__ = ["PythonSession"]
