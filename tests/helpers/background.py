"""Whole-process checks started when the suite is collected, one at a time beside the suite's own process.

On 2 cores the suite's process mostly keeps one busy: a test whose work is a single fresh interpreter (a benchmark
script, a sandbox suite rerun as another user or in a container) can run there from the start and be waited for
when its turn comes. A test module lists such runs in ``BACKGROUND`` (the test's name -> a function of no
arguments that runs the process and returns its ``subprocess.CompletedProcess``); tests/conftest.py starts those of
the selected tests and moves those tests to the end of the run, and each test waits for ``result(its name)``."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="background-test")
_RUNS: dict[str, Future] = {}


def start(key: str, run: Callable[[], subprocess.CompletedProcess]) -> None:
    """Queue ``run()`` under ``key``, once."""
    if key not in _RUNS:
        _RUNS[key] = _POOL.submit(run)


def result(key: str) -> subprocess.CompletedProcess:
    """The run queued under ``key``, once it has ended (its exception, if it raised one, is raised here)."""
    return _RUNS[key].result()


def stop() -> None:
    """Drop the runs no test waited for (their test was deselected after collection, or the session failed)."""
    for future in _RUNS.values():
        future.cancel()
    _POOL.shutdown(wait=True, cancel_futures=True)
