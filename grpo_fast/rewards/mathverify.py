"""Math answer equivalence (math-verify) that is thread-safe and time-bounded.

math-verify bounds its own work with ``signal.alarm``, which only works in the main thread: TRL's async reward
loop, ``asyncio.to_thread`` and data-loader threads break it. So its timeouts are disabled and parsing and
verification run in a small pool of persistent worker *processes* (``_mathworker.py``, started with
``subprocess`` so no ``__main__`` re-import happens) with a per-item deadline; a stuck worker is killed and
replaced. Plain numeric answers (GSM8K) never leave the process: a fast path compares them directly.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import queue
import select
import subprocess
import sys
import threading
import time
from typing import Any

from grpo_fast.rewards.answers import MAX_ANSWER_CHARS, count_tag, extract_final_answer, parse_number
from grpo_fast.rewards.base import answer_texts, column, reward_meta, user_text
from grpo_fast.rewards.restatement import restates_question

logger = logging.getLogger(__name__)

_WORKER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_mathworker.py")


class _Worker:
    """One math-verify subprocess speaking JSON lines."""

    def __init__(self, memory_mb: int, startup_timeout: float):
        self.proc = subprocess.Popen(
            [sys.executable, _WORKER_SCRIPT, str(memory_mb)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )
        self._buf = b""
        self._next_id = 0
        ready = self._read_line(time.monotonic() + startup_timeout)
        if ready is None:
            self.kill()
            raise RuntimeError("math-verify worker did not start (is math-verify installed?)")

    def _read_line(self, deadline: float) -> Any:
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:  # worker died (e.g. memory limit)
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def check(self, gold: str, pred: str, timeout: float) -> tuple[bool, float | None]:
        """Returns (worker_still_healthy, result)."""
        self._next_id += 1
        item_id = self._next_id
        try:
            self.proc.stdin.write((json.dumps([item_id, gold, pred]) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return False, 0.0
        deadline = time.monotonic() + timeout
        while True:
            msg = self._read_line(deadline)
            if msg is None:
                return False, 0.0
            if msg[0] == item_id:
                return True, msg[1]

    def kill(self) -> None:
        try:
            self.proc.kill()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass


class MathVerifyPool:
    """Pool of math-verify worker processes with a per-item deadline; safe to call from any thread."""

    def __init__(
        self, workers: int = 2, timeout: float = 3.0, memory_mb: int = 4096, startup_timeout: float = 60.0
    ):
        self.max_workers = max(1, workers)
        self.timeout = timeout
        self.memory_mb = memory_mb
        self.startup_timeout = startup_timeout
        self._reset()
        atexit.register(self.close)

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._count = 0
        self._lock = threading.Lock()
        self.timeouts = 0

    def _acquire(self) -> _Worker:
        if self._pid != os.getpid():  # forked: the parent's pipes are not ours
            self._reset()
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            spawn = self._count < self.max_workers
            if spawn:
                self._count += 1
        if spawn:
            try:
                return _Worker(self.memory_mb, self.startup_timeout)
            except Exception:
                with self._lock:
                    self._count -= 1
                raise
        return self._idle.get()

    def _release(self, worker: _Worker | None) -> None:
        if worker is None:
            with self._lock:
                self._count -= 1
        else:
            self._idle.put(worker)

    def verify_many(self, pairs: list[tuple[str, str]]) -> list[float | None]:
        """Equivalence of each ``(gold, pred)``: 1.0 / 0.0, None if gold is unparseable; 0.0 on timeout."""
        results: list[float | None] = []
        worker: _Worker | None = None
        try:
            for gold, pred in pairs:
                if worker is None:
                    worker = self._acquire()
                healthy, result = worker.check(gold, pred, self.timeout)
                if not healthy:
                    self.timeouts += 1
                    logger.warning("math-verify timed out or crashed on %.80r; worker replaced", pred)
                    worker.kill()
                    self._release(None)
                    worker = None
                results.append(result)
        finally:
            if worker is not None:
                self._release(worker)
        return results

    def close(self) -> None:
        while True:
            try:
                self._idle.get_nowait().kill()
            except queue.Empty:
                break
        self._count = 0


_POOL: MathVerifyPool | None = None
_POOL_LOCK = threading.Lock()


def get_pool() -> MathVerifyPool:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = MathVerifyPool()
        return _POOL


def _fast_compare(gold: str, pred: str | None) -> float | None:
    """Plain-number comparison without sympy; ``None`` means 'needs the full verifier'."""
    g = parse_number(gold)
    if g is None:
        return None
    if pred is None or not pred.strip():
        return 0.0
    p = parse_number(pred)
    if p is None:
        return None
    if g.is_integer() and p.is_integer():  # counts and products: off by one is wrong, however large the number
        if max(abs(g), abs(p)) >= 2**53:
            return None  # beyond a float's exact integers: the full verifier compares exactly
        return 1.0 if g == p else 0.0
    return 1.0 if abs(g - p) <= 1e-6 * max(1.0, abs(g)) else 0.0


def math_equal(gold: Any, pred: str | None, pool: MathVerifyPool | None = None) -> float | None:
    """1.0 if ``pred`` is mathematically equivalent to ``gold``, 0.0 if not, None if gold is unparseable."""
    return verify_answers([gold], [pred], pool)[0]


def verify_answers(
    golds: list[Any], preds: list[str | None], pool: MathVerifyPool | None = None,
    prompts: list[Any] | None = None,
) -> list[float | None]:
    """Equivalence of each prediction with its gold (see ``math_equal``); with ``prompts``, an answer that is the
    expression its question asks to evaluate, handed back unevaluated, scores 0 (``restatement``)."""
    out: list[float | None] = [None] * len(golds)
    slow: list[int] = []
    for i, (gold, pred) in enumerate(zip(golds, preds)):
        if gold is None or not str(gold).strip():
            continue
        gold_s = str(gold)
        if len(gold_s) > MAX_ANSWER_CHARS:
            continue
        if pred is not None and len(pred) > MAX_ANSWER_CHARS:
            pred = None
        fast = _fast_compare(gold_s, pred)
        if fast is not None:
            out[i] = fast
        else:
            slow.append(i)
    if slow:
        try:
            results = (pool or get_pool()).verify_many(
                [
                    (str(golds[i]), preds[i] if preds[i] and len(preds[i]) <= MAX_ANSWER_CHARS else "")
                    for i in slow
                ]
            )
        except RuntimeError as err:  # verifier unavailable: say "not applicable" rather than guess
            logger.warning("%s", err)
            results = [None] * len(slow)
        for i, r in zip(slow, results):
            out[i] = r
    for i, prompt in enumerate(prompts or []):
        if out[i] and restates_question(preds[i], user_text(prompt), golds[i]):
            out[i] = 0.0
    return out


def extract_math_answer(text: str) -> str | None:
    """The answer a math completion commits to; None when it hedges with several ``<answer>`` blocks."""
    if count_tag(text, "answer") > 1:
        return None
    return extract_final_answer(text)


@reward_meta("correctness", 0.0, 1.0)
def math_accuracy_reward(
    prompts: Any, completions: Any, answer: Any = None, **kwargs: Any
) -> list[float | None]:
    """1.0 if the final answer (``<answer>``, else last ``\\boxed{}``, else last number) after the thinking equals
    ``answer``; 0 while the thinking is still open, and 0 for the question's own expression copied unevaluated.

    Symbolic equivalence via math-verify (fractions, roots, tuples, intervals, sets, expressions); None if the
    gold cannot be parsed. Thread-safe and time-bounded (see module docstring).
    """
    texts = answer_texts(completions)
    golds = column({"answer": answer}, "answer", len(texts))
    return verify_answers(golds, [extract_math_answer(t) for t in texts], prompts=prompts)
