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
        self.records: list[tuple[str, int, str]] | None = None  # the program's log records, while a test reads them
        self.loop: Any = None  # the event loop that steps async generators for the test

    def logged(self) -> list[tuple[str, int, str]]:
        """Log records since the last step, as data (logger name, level, message), at most 1000."""
        if self.records is None:
            return []
        out, self.records[:] = self.records[:1000], []
        return out

    def run(self, aw: Any) -> Any:
        """Await ``aw`` to its end in an event loop kept for the job: what one await of the test starts (a task,
        a queue bound to the loop) is still there at its next, as in the test's own ``asyncio.run``."""
        import asyncio  # noqa: PLC0415 - only for a program using it

        async def main() -> Any:
            return await aw
        if self.loop is None:
            self.loop = asyncio.new_event_loop()
        return self.loop.run_until_complete(main())

    def anext(self, agen: Any) -> tuple[bool, Any]:
        """One step of an async generator, in the job's event loop (a loop per step would close it)."""
        try:
            return False, self.run(agen.__anext__())
        except StopAsyncIteration:
            return True, None

    def _listen(self, levels: Any) -> None:
        """The test reads log records (``caplog``, ``assertLogs``): its loggers' levels here too, and a handler that
        keeps what the program logs."""
        import logging  # noqa: PLC0415 - only where a test reads logs

        if self.records is None:
            self.records = []
            records = self.records

            class Keep(logging.Handler):
                def emit(self, record: logging.LogRecord) -> None:
                    try:
                        records.append((str(record.name), int(record.levelno), record.getMessage()[:10000]))
                    except Exception:  # noqa: BLE001, S110 - a message that cannot be formatted is dropped
                        pass

            logging.getLogger().addHandler(Keep())
        for name, level in (levels.items() if type(levels) is dict else ()):
            if type(name) is str and type(level) is int:
                (logging.getLogger(name) if name else logging.getLogger()).setLevel(level)

    def apply(self, changes: dict[str, Any]) -> None:
        if "files" in changes:
            self.scratch.apply(changes["files"])
        if "logs" in changes:
            self._listen(changes["logs"])
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
