"""What a test changes in its own process that the program would see if both ran in one interpreter.

In a pytest job the judge keeps the program's process in step, at each call the test makes into the program:
environment variables (``monkeypatch.setenv``), ``builtins.input`` and ``sys.stdin`` (``monkeypatch.setattr``,
``mock.patch``: the test's function or stream is lent to the program, which calls back into the judge), and the
global ``random`` generator (``random.seed`` in the test, draws in the program, and back: one stream, as in one
interpreter). Only what changed since the last call is sent; nothing is sent for a test that changes none of it.
A program sends back only its ``random`` state, as data (``random.setstate`` checks it). The program's side is
``runner.ProgramState``.
"""

from __future__ import annotations

import builtins
import os
import random
import sys
from typing import Any

from .connection import Connection
from .proxy import Remote
from .wire import Deadline, Lost


class SharedState(Connection):
    """The judge's end of a pytest job: a ``Connection`` that brings the test's process state along on each call."""

    def __init__(self, sock: Any, deadline: float, shared_workdir: bool = False) -> None:
        super().__init__(sock, deadline, shared_workdir)
        self.env = dict(os.environ)
        self.random = random.getstate()
        self.input, self.stdin = builtins.input, sys.stdin
        self.own_input, self.own_stdin = builtins.input, sys.stdin
        self.random_shared = False  # once the test has changed the generator, it follows the program's draws
        self.logs = False  # the running test reads log records: the program's come back into the test's logging

    def call(self, fn: Any, args: tuple, kwargs: dict) -> Any:
        changes = self.changes()
        if self.logs:
            changes["logs"] = _levels()
        if changes:
            self.request("state", changes)
        try:
            result = super().call(fn, args, kwargs)
            kind = object.__getattribute__(result, "_sbx_kind") if isinstance(result, Remote) else ""
            if kind == "async_generator":
                return _async_generator(self, result)
            return result
        except BaseException as exc:  # what the call printed before it raised still reaches the test's capture
            captured = sys.stdout is not sys.__stdout__ or sys.stderr is not sys.__stderr__
            if captured and not isinstance(exc, (Deadline, Lost)) and not self.dead:
                printed = self.request("unsent")
                if type(printed) is tuple and len(printed) == 2 and all(type(t) is str for t in printed):
                    for text, stream in zip(printed, (sys.stdout, sys.stderr)):
                        if text and stream is not sys.__stdout__ and stream is not sys.__stderr__:
                            stream.write(text)
            raise
        finally:
            if self.logs and not self.dead:
                _relog(self.request("logged"))
            if self.random_shared and not self.dead:
                state = self.request("random_state")
                try:
                    random.setstate(state)
                except (TypeError, ValueError):  # not a state: the test's generator stays as it was
                    pass
                self.random = random.getstate()

    def request(self, op: str | None, *args: Any) -> Any:
        """A ``with`` statement's ``__enter__``/``__exit__`` go as calls: what they print is captured, what they
        change in containers the test handed over comes back, as for any other call into the program."""
        if op == "method" and len(args) == 4 and args[1] in ("__enter__", "__exit__") and not args[3]:
            bound = super().request("getattr", args[0], args[1])
            return self.call(bound, args[2], {})
        return super().request(op, *args)

    def changes(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        env = dict(os.environ)
        if env != self.env:
            out["env"] = {k: env.get(k) for k in set(env) | set(self.env) if env.get(k) != self.env.get(k)}
            self.env = env
        state = random.getstate()
        if state != self.random:
            out["random"], self.random, self.random_shared = state, state, True
        if builtins.input is not self.input:
            self.input = builtins.input
            out["input"] = None if builtins.input is self.own_input else builtins.input
        if sys.stdin is not self.stdin and not _captured(sys.stdin):
            self.stdin = sys.stdin
            out["stdin"] = None if sys.stdin is self.own_stdin else sys.stdin
        return out


async def _async_generator(conn: Connection, remote: Any) -> Any:
    """The program's async generator as one of the test's process (``async for``): each step runs in the
    program's own event loop, the item comes back as any reply does."""
    while True:
        reply = conn.request("anext", remote)
        if type(reply) is not tuple or len(reply) != 2 or reply[0] is not False:
            return
        yield reply[1]


def _levels() -> dict[str, int]:
    """The levels set on the test's loggers (root: ""), as the program's loggers should have them."""
    import logging  # noqa: PLC0415 - only where a test reads logs

    levels = {name: lg.level for name, lg in list(logging.root.manager.loggerDict.items())
              if isinstance(lg, logging.Logger) and lg.level}
    return {"": logging.root.level, **dict(list(levels.items())[:200])}


def _relog(records: Any) -> None:
    """The program's log records, handled by the test's loggers (``caplog``, ``assertLogs`` see them); plain
    strings, never formatted again."""
    import logging  # noqa: PLC0415 - as above

    for item in records[:1000] if type(records) is list else ():
        if type(item) is tuple and len(item) == 3 and type(item[0]) is str and type(item[1]) is int \
                and type(item[2]) is str:
            logger = logging.getLogger(item[0]) if item[0] and item[0] != "root" else logging.getLogger()
            logger.handle(logger.makeRecord(logger.name, item[1], "solution.py", 0, item[2], (), None))


def _captured(stream: Any) -> bool:
    """pytest's own stand-in for stdin while it captures (reading it fails): not the test's doing."""
    return type(stream).__name__ == "DontReadFromInput"
