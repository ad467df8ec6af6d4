"""Reward failure guard: one bad sample must not kill a long run, but a broken reward must stop it.

A reward that raises (a regex on odd unicode, a parser on a half-finished answer) would abort TRL's whole
step. ``guard_rewards`` wraps each reward so that a failing or NaN sample scores ``None`` ("not applicable",
which TRL skips), is counted and is shown once; if a whole call raises, every sample is retried alone to
find the culprit. When failures pass ``max_failure_rate`` (after ``min_samples`` scored), ``RewardFailure``
is raised, naming the reward and a failing sample, because a reward that mostly fails trains nothing.

    funcs = guard_rewards(recipe.reward_funcs(), log_dir=run_dir)
    guard_stats(funcs)  # {"sum_correct": {"calls": 3, "samples": 96, "failures": 1, "rate": 0.0104}}
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_fast import files
from grpo_fast.errors import UserError
from grpo_fast.rewards.base import transcript

log = logging.getLogger("grpo_fast.rewards.guard")

FAILURES_FILE = "reward_failures.jsonl"
# Keyword arguments TRL passes that are not per-sample columns (never sliced when retrying one sample).
_SHARED_KWARGS = ("trainer_state", "log_extra", "log_metric")


class RewardFailure(UserError):
    """A reward failed on too many samples; carries the reward's name, the counts and one failing sample."""

    def __init__(self, name: str, failures: int, samples: int, error: str, sample: str, max_rate: float):
        self.name, self.failures, self.samples, self.error, self.sample = name, failures, samples, error, sample
        super().__init__(
            f"reward '{name}' failed on {failures} of {samples} samples ({failures / max(1, samples):.0%}, "
            f"limit {max_rate:.0%}); last error: {error}",
            f"reward function '{name}', sample: {sample}",
            f"reproduce with grpo_fast.rewards.debug_reward on that sample and fix the reward "
            f"(see {FAILURES_FILE} in the run directory for every failure)",
        )


def _text(value: Any, limit: int = 200) -> str:
    """A sample shown in one line: chat messages reduced to their last content, long text truncated."""
    if isinstance(value, list) and value and isinstance(value[-1], dict):
        value = value[-1].get("content", value[-1])
    text = value if isinstance(value, str) else repr(value)
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 3] + "..."


class GuardedReward:
    """Wraps one reward function; same ``__name__``, same call signature, counters in ``stats()``."""

    def __init__(self, fn: Callable, *, max_failure_rate: float = 0.1, min_samples: int = 32,
                 log_dir: str | Path | None = None, max_warnings: int = 3, raise_on_failure: bool = True):
        self.fn = fn
        self.__wrapped__ = fn
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)
        self.__qualname__ = self.__name__
        self.__doc__ = getattr(fn, "__doc__", None)
        for attr in ("reward_kind", "reward_range"):
            if hasattr(fn, attr):
                setattr(self, attr, getattr(fn, attr))
        self.max_failure_rate = max_failure_rate
        self.min_samples = min_samples
        self.log_dir = Path(log_dir) if log_dir is not None else None
        self.max_warnings = max_warnings
        self.calls = 0
        self.samples = 0
        self.failures = 0
        self.not_applicable = 0  # scored None on purpose: a row without a reference, an unparsable gold
        self.last_error: str | None = None
        self.last_sample: str | None = None
        self.raise_on_failure = raise_on_failure
        self.tripped: RewardFailure | None = None
        self.last: tuple[Sequence, Sequence, list[float | None]] | None = None

    def stats(self) -> dict[str, Any]:
        """Counters for logging: calls, samples scored, failures and their rate."""
        stats = {"calls": self.calls, "samples": self.samples, "failures": self.failures,
                 "rate": round(self.failures / self.samples, 4) if self.samples else 0.0}
        own = getattr(self.fn, "stats", None)  # a judge's own counts: timeouts, errors, unparsable, seconds
        return {**stats, "judge": own()} if callable(own) else stats

    # ----------------------------------------------------------------- the call

    def __call__(self, prompts: Sequence, completions: Sequence, **kwargs: Any) -> list[float | None]:
        n = len(completions)
        try:
            out: list | None = list(self.fn(prompts=prompts, completions=completions, **kwargs))
            error = None
        except Exception as err:  # isolate: retry one sample at a time
            out, error = None, err
        reported = self._reported(n)
        if out is None or len(out) != n:
            if out is not None:
                error = ValueError(f"returned {len(out)} scores for {n} completions")
            out = [self._one(prompts, completions, kwargs, i, n) for i in range(n)]
            self._note_call_failure(error)
            self._reported(n)  # drop the retries' reports: they cannot be matched to samples
            reported = {}
        return self._finish(out, prompts, completions, kwargs, reported)

    def _reported(self, n: int) -> dict[int, str]:
        """Samples the reward itself says failed while scoring None (a judge that timed out, erred or wrote no
        verdict: ``take_failures``); only meaningful for a whole-batch call of ``n`` samples."""
        take = getattr(self.fn, "take_failures", None)
        failed = take() if callable(take) else {}
        return failed if all(0 <= i < n for i in failed) else {}

    def _one(self, prompts: Sequence, completions: Sequence, kwargs: dict, i: int, n: int) -> Any:
        try:
            scores = self.fn(prompts=_slice(prompts, i, n), completions=_slice(completions, i, n),
                             **{k: _slice(v, i, n) if k not in _SHARED_KWARGS else v for k, v in kwargs.items()})
            scores = list(scores)
            if len(scores) != 1:
                raise ValueError(f"returned {len(scores)} scores for 1 completion")
            return scores[0]
        except Exception as err:
            return _Failed(err)

    def _note_call_failure(self, error: BaseException | None) -> None:
        log.debug("reward %s failed on a whole batch (%r); retried per sample", self.__name__, error)

    def _finish(self, out: list, prompts: Sequence, completions: Sequence, kwargs: dict,
                reported: dict[int, str] | None = None) -> list[float | None]:
        self.calls += 1
        self.samples += len(out)
        scores: list[float | None] = []
        failed_now = skipped = 0
        for i, value in enumerate(out):
            problem = _problem(value)
            if problem is None and value is None and reported and i in reported:
                problem = reported[i]
            if problem is None:
                scores.append(None if value is None else float(value))
                skipped += value is None
                continue
            scores.append(None)
            self.failures += 1
            failed_now += 1
            self._report(problem, i, prompts, completions, kwargs)
        self.last = (prompts, completions, scores)
        log_metric = kwargs.get("log_metric")
        self.not_applicable += skipped
        if callable(log_metric):
            log_metric(f"rewards/{self.__name__}/failure_rate", failed_now / max(1, len(out)))
            log_metric(f"rewards/{self.__name__}/not_applicable", skipped / max(1, len(out)))
        if self.samples >= self.min_samples and self.failures / self.samples > self.max_failure_rate:
            self.tripped = RewardFailure(self.__name__, self.failures, self.samples, self.last_error or "?",
                                         self.last_sample or "?", self.max_failure_rate)
            if self.raise_on_failure:
                raise self.tripped
        return scores

    def _report(self, problem: str, i: int, prompts: Sequence, completions: Sequence, kwargs: dict) -> None:
        sample = _text(completions[i])
        self.last_error, self.last_sample = problem, sample
        if self.failures <= self.max_warnings:
            more = " (further failures of this reward are only counted)" if self.failures == self.max_warnings else ""
            print(f"WARNING reward '{self.__name__}' failed on a sample, scored None: {problem}\n"
                  f"  completion: {sample}{more}", file=sys.stderr, flush=True)
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            columns = {k: _text(v[i], 120) for k, v in kwargs.items()
                       if k not in _SHARED_KWARGS and k != "completion_ids" and _is_column(v, len(completions))}
            files.append_jsonl(self.log_dir / FAILURES_FILE, {
                "reward": self.__name__, "error": problem, "prompt": _text(prompts[i], 300),
                "completion": _text(completions[i], 500), "columns": columns,
                "step": getattr(kwargs.get("trainer_state"), "global_step", None),
            })


class AsyncGuardedReward(GuardedReward):
    """The same guard for ``async def`` rewards (LLM judges), which TRL awaits concurrently."""

    async def __call__(self, prompts: Sequence, completions: Sequence, **kwargs: Any) -> list[float | None]:
        n = len(completions)
        error: BaseException | None = None
        try:
            out: list | None = list(await self.fn(prompts=prompts, completions=completions, **kwargs))
        except Exception as err:
            out, error = None, err
        if out is None or len(out) != n:
            retried = []
            for i in range(n):
                try:
                    one = list(await self.fn(
                        prompts=_slice(prompts, i, n), completions=_slice(completions, i, n),
                        **{k: _slice(v, i, n) if k not in _SHARED_KWARGS else v for k, v in kwargs.items()}))
                    retried.append(one[0] if len(one) == 1 else _Failed(ValueError(f"returned {len(one)} scores")))
                except Exception as err:
                    retried.append(_Failed(err))
            out = retried
            self._note_call_failure(error)
        return self._finish(out, prompts, completions, kwargs)


class _Failed:
    """Marks a sample whose reward raised; carries the one-line error."""

    def __init__(self, err: BaseException):
        frame = traceback.extract_tb(err.__traceback__)[-1] if err.__traceback__ else None
        where = f" at {Path(frame.filename).name}:{frame.lineno}" if frame else ""
        self.message = f"{type(err).__name__}: {str(err)[:200]}{where}"


def _problem(value: Any) -> str | None:
    """Why a returned score is unusable, or None when it is a number or a deliberate None."""
    if isinstance(value, _Failed):
        return value.message
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return f"not a number: {value!r:.80}"
    if math.isnan(number) or math.isinf(number):
        return f"returned {number}"
    return None


def _is_column(value: Any, n: int) -> bool:
    return isinstance(value, (list, tuple)) and len(value) == n


def _slice(value: Any, i: int, n: int) -> Any:
    """The i-th sample of a per-sample column, as a one-element list; anything else passes through."""
    return [value[i]] if _is_column(value, n) else value


def guard_rewards(funcs: Sequence[Any], *, max_failure_rate: float = 0.1, min_samples: int = 32,
                  log_dir: str | Path | None = None, max_warnings: int = 3, raise_on_failure: bool = True) -> list:
    """Wrap each reward function (reward models, ``nn.Module``s and already guarded ones pass through).

    ``max_failure_rate``: share of failed samples (exception, NaN, inf, not a number) above which
    ``RewardFailure`` is raised, checked once ``min_samples`` samples were scored. ``log_dir``: where
    ``reward_failures.jsonl`` records every failure (the run directory). ``max_warnings``: printed per reward.
    ``raise_on_failure=False``: set ``tripped`` instead of raising, for ``StopOnRewardFailure`` to end the run
    cleanly after the step (with a checkpoint).
    """
    guarded = []
    for fn in funcs:
        if isinstance(fn, (str, GuardedReward)) or _is_module(fn):
            guarded.append(fn)
            continue
        cls = AsyncGuardedReward if _is_async(fn) else GuardedReward
        guarded.append(cls(fn, max_failure_rate=max_failure_rate, min_samples=min_samples, log_dir=log_dir,
                           max_warnings=max_warnings, raise_on_failure=raise_on_failure))
    return guarded


@dataclass
class Batch:
    """The latest generation batch the guarded rewards scored: what the callbacks show and learn from (the
    kit's own record, so nothing reads TRL's private buffers)."""

    number: int
    prompts: list
    completions: list[str]
    scores: dict[str, list[float | None]]


def last_batch(funcs: Sequence[Any]) -> Batch | None:
    """The batch every guarded reward scored last (None before the first step)."""

    guards = [f for f in funcs if isinstance(f, GuardedReward) and f.last is not None]
    if not guards:
        return None
    prompts, completions, _ = guards[0].last
    return Batch(guards[0].calls, list(prompts), [transcript(c) for c in completions],
                 {g.__name__: list(g.last[2]) for g in guards})


def tripped(funcs: Sequence[Any]) -> RewardFailure | None:
    """The first guarded reward that passed its failure limit, if any."""
    return next((f.tripped for f in funcs if isinstance(f, GuardedReward) and f.tripped), None)


def guard_stats(funcs: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """Counters of every guarded reward, by name (for the run summary or a log line)."""
    return {f.__name__: f.stats() for f in funcs if isinstance(f, GuardedReward)}


def _is_async(fn: Any) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


def _is_module(fn: Any) -> bool:
    try:
        import torch

        return isinstance(fn, torch.nn.Module)
    except ImportError:  # pragma: no cover
        return False
