"""What a test changed in its own process, applied in the program's (the judge's side is ``shared_state``)."""

from __future__ import annotations

import builtins
import os
import random
import sys
from typing import Any

from .scratch import Scratch


class ProgramState:
    """What the test changed in its process, applied here (``shared_state.SharedState`` sends it)."""

    def __init__(self) -> None:
        self.input, self.stdin = builtins.input, sys.stdin
        self.scratch = Scratch()

    def apply(self, changes: dict[str, Any]) -> None:
        if "files" in changes:
            self.scratch.apply(changes["files"])
        for key, value in (changes.get("env") or {}).items():
            if type(key) is str and value is None:
                os.environ.pop(key, None)
            elif type(key) is str and type(value) is str:
                os.environ[key] = value
        if "random" in changes:
            random.setstate(changes["random"])
        if "input" in changes:
            builtins.input = changes["input"] if changes["input"] is not None else self.input
        if "stdin" in changes:
            sys.stdin = changes["stdin"] if changes["stdin"] is not None else self.stdin
