"""The test sets the zygote compiled for its judges, remembered: the completions of one prompt (a GRPO group) share
their tests, and an evaluation set comes back whole, so judging them again compiles nothing."""

from __future__ import annotations

from typing import Any

from ..verdict import judge

# a whole evaluation set's (HumanEval's 164), within a bound on their tests' source (what their code objects grow
# with)
COMPILED_KEPT = 256
COMPILED_SOURCE_BYTES = 32 << 20


def source_bytes(key: tuple) -> int:
    """The source a remembered test set was compiled from: its tests, setup and trusted helpers."""
    return sum(len(text) for text in (*key[0], key[1], key[2]) if isinstance(text, str))


class CompiledTests:
    """``judge.compile_job`` for the last distinct test sets, least recently used dropped first."""

    def __init__(self) -> None:
        self.sets: dict[tuple, dict[str, Any]] = {}  # least recently used first
        self.source = 0  # the remembered tests' source, in characters

    def get(self, fields: dict[str, Any]) -> dict[str, Any]:
        key = (tuple(fields.get("tests") or ()), fields.get("setup") or "", fields.get("trusted") or "")
        compiled = self.sets.pop(key, None)
        if compiled is None:
            compiled = judge.compile_job(fields)
        else:
            self.source -= source_bytes(key)
        self.sets[key] = compiled
        self.source += source_bytes(key)
        while len(self.sets) > COMPILED_KEPT or (self.source > COMPILED_SOURCE_BYTES and len(self.sets) > 1):
            oldest = next(iter(self.sets))
            self.source -= source_bytes(oldest)
            del self.sets[oldest]
        return compiled
