"""A ``python`` tool for tool-integrated reasoning: the model's code runs in the kit's sandbox, not in the trainer.

One ``PythonSession`` per episode (a rollout). Each call runs in a fresh sandboxed process (no network, no host
files, time, memory and output limits) that first replays the episode's earlier calls quietly, so variables persist
from call to call as in a notebook, while nothing is shared between episodes, rows or completions: there is no
long-lived interpreter to leak through. A call that raised, timed out or flooded is not replayed (as if the model
had not made it: its traceback or error is what it sees). Replay re-runs earlier code, so a call that depends on
wall-clock time or unseeded randomness can see different values than it did the first time. Hostile code gets an
error string back; the session and the run go on.

A call's cost is bounded however long the episode: the replay and the new cell together get ``REPLAY_BUDGET``
times the per-call timeout, at most ``MAX_CALLS`` cells. A cell that is slow only when replayed (or earlier cells
that add up) makes the next calls fail with a timeout, never grow toward minutes.
"""

from __future__ import annotations

from grpo_fast.sandbox import Sandbox, default_sandbox, make_cells_job

MAX_CALLS = 16  # calls replayed per episode; later calls are refused with a message
REPLAY_BUDGET = 2.0  # a call's wall-clock limit, replay included, in per-call timeouts


class PythonSession:
    """An episode's Python interpreter, as TRL's tool loop sees it: call ``python(code)``, get its output."""

    def __init__(self, sandbox: Sandbox | None = None, timeout: float = 5.0, memory_mb: int = 512,
                 max_chars: int = 2000) -> None:
        self.sandbox, self.timeout, self.memory_mb, self.max_chars = sandbox, timeout, memory_mb, max_chars
        self.cells: list[str] = []

    def reset(self, **_: object) -> None:
        """A new episode: forget every earlier call."""
        self.cells = []

    def python(self, code: str) -> str:
        """Run Python code and return what it printed (and the value of its last expression); variables persist
        between calls within one episode.

        Args:
            code: Python source to run.
        """
        if not isinstance(code, str) or not code.strip():
            return "error: no code given"
        if len(self.cells) >= MAX_CALLS:
            return f"error: at most {MAX_CALLS} python calls per answer"
        cells = [*self.cells, code]
        box = self.sandbox or default_sandbox()
        limit = self.timeout * min(len(cells), REPLAY_BUDGET)  # bounded: never one timeout per earlier cell
        (res,) = box.run_many([make_cells_job(cells, limit, self.memory_mb)])
        why = res.failures[0] if res.failures else "no result"
        if not why:
            self.cells = cells  # replayed later only when it ran cleanly: a failed call cannot poison the next ones
        elif why == "timeout":
            return f"error: timed out after {limit:g} s (earlier calls replayed included)"
        elif not why.startswith("runtime error"):  # a raised exception shows its traceback below
            return f"error: {why}"
        text = res.stdout + (res.stderr if res.stderr.strip() else "")
        if len(text) > self.max_chars:
            text = text[: self.max_chars] + f"\n[... {len(text) - self.max_chars} more characters]"
        return text if text.strip() else "(no output)"
