"""Whole-process checks started when the suite is collected, one at a time beside the suite's own process.

On 2 cores the suite's process mostly keeps one busy: a test whose work is a single fresh interpreter (a benchmark
script, a CLI run) can run there from the start and be waited for when its turn comes. A test module lists such
runs in ``BACKGROUND`` (the test's name -> the keyword arguments of ``subprocess.run``); tests/conftest.py starts
those of the selected tests, and the test waits for ``result(its name)``."""

from __future__ import annotations

import subprocess
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="background-test")
_RUNS: dict[str, Future] = {}


def start(key: str, **run: Any) -> None:
    """Queue ``subprocess.run(**run)`` (its output captured as text) under ``key``, once."""
    if key not in _RUNS:
        _RUNS[key] = _POOL.submit(subprocess.run, capture_output=True, text=True, **run)


def result(key: str) -> subprocess.CompletedProcess:
    """The run queued under ``key``, once it has ended."""
    return _RUNS[key].result()


def stop() -> None:
    """Drop the runs no test waited for (their test was deselected after collection, or the session failed)."""
    for future in _RUNS.values():
        future.cancel()
    _POOL.shutdown(wait=True, cancel_futures=True)
