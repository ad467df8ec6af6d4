"""LLM-judge reward: a rubric, a backend (HTTP endpoint or in-process model), pointwise or group-relative scoring.

    rewards: [qa_correct, {name: llm_judge, rubric: qa, endpoint: http://127.0.0.1:8000/v1, judge_model: m}]
    rewards: [sum_rouge, {name: llm_judge, rubric: summarization, judge_model: embedded, mode: group}]

A timeout, an error or an unparsable verdict scores None (TRL skips it), never 0, and is counted: ``stats()`` has
the counts, the guard (``guard.GuardedReward``) counts them as failures (``take_failures``) so a judge that fails
mid-run trips ``max_reward_failure_rate`` like any broken reward, and each call logs ``judge/seconds`` (the
judge's wall time in the step) through TRL's ``log_metric``, with the share of completions that address the
judge and their mean score (``judge/<name>/addressed``, ``.../addressed_score``: the health monitor's
judge_hacking). Scores are cached by (rubric, prompt, completion).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from grpo_fast.errors import UserError
from grpo_fast.rewards.base import blank, column, completion_texts, factory, user_text
from grpo_fast.rewards.judge_client import Backend, CallFailed, HttpJudge, LocalJudge
from grpo_fast.rewards.judge_prompts import (
    Case,
    Rubric,
    addresses_grader,
    groupwise,
    make_rubric,
    parse_group,
    parse_verdict,
    pointwise,
    screened,
)

SOURCE_COLUMNS = ("context", "document", "source")
REFERENCE_COLUMNS = ("answer", "summary", "reference")
CACHE_LIMIT = 100_000  # entries; past it the cache starts over rather than grow with the run
COUNTS = ("judged", "cached", "screened", "timeouts", "errors", "unparsable")


def case_of(prompt: Any, row: dict[str, Any]) -> Case:
    """The judge's view of a row: the user's task, the first source column, the reference (all of a QA row's
    acceptable answers)."""
    source = next((str(row[c]) for c in SOURCE_COLUMNS if not blank(row.get(c))), "")
    ref = next((row[c] for c in REFERENCE_COLUMNS if row.get(c) not in (None, "", [])), "")
    reference = " | ".join(str(r) for r in ref) if isinstance(ref, (list, tuple)) else str(ref)
    return Case(user_text(prompt), source, reference)


class JudgeReward:
    """The reward TRL calls; picklable (the backend's weights and lock are rebuilt where it lands)."""

    reward_kind = "judge"
    reward_range = (0.0, 1.0)

    def __init__(self, rubric: Rubric, backend: Backend, *, name: str = "llm_judge", mode: str = "pointwise",
                 timeout: float = 30.0, screen: bool = True, self_test: str = "warn", min_agreement: float = 0.6,
                 self_test_rows: int = 8):
        self.__name__ = self.__qualname__ = name
        self.rubric, self.backend, self.mode, self.timeout, self.screen = rubric, backend, mode, timeout, screen
        self.self_test, self.min_agreement, self.self_test_rows = self_test, min_agreement, self_test_rows
        self.counts: Counter[str] = Counter({k: 0 for k in ("calls", "samples", *COUNTS)})
        self.seconds = 0.0
        self.last_seconds = 0.0
        self.cache: dict[tuple, Any] = {}
        self.agreement: float | None = None  # the self-test's, once it ran (judge_checks.run_self_tests)
        self._failed: dict[int, str] = {}
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _lock=threading.Lock())

    def __repr__(self) -> str:
        return f"<judge {self.__name__}: {self.rubric.name} rubric, {self.mode}, {self.backend.label}>"

    def stats(self) -> dict[str, Any]:
        """Counts (calls, samples, judged, cached, screened, timeouts, errors, unparsable) and judge seconds."""
        return {**self.counts, "seconds": round(self.seconds, 3), "last_seconds": round(self.last_seconds, 3),
                "self_test_agreement": self.agreement}

    def take_failures(self) -> dict[int, str]:
        """Samples of the last call that scored None because the judge failed (index -> why), for the guard."""
        with self._lock:
            failed, self._failed = self._failed, {}
        return failed

    # ------------------------------------------------------------------------------------------- the call

    def __call__(self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None,
                 **columns: Any) -> list[float | None]:
        began = time.perf_counter()
        texts = completion_texts(completions)
        n = len(texts)
        prompts = list(prompts) if prompts is not None else [""] * n
        cols = {c: column(columns, c, n) for c in (*SOURCE_COLUMNS, *REFERENCE_COLUMNS)}
        cases = [case_of(prompts[i], {c: v[i] for c, v in cols.items()}) for i in range(n)]
        scores: list[float | None] = [None] * n
        failed: dict[int, str] = {}
        todo = []
        for i, (text, case) in enumerate(zip(texts, cases)):
            why = screened(text, case.source) if self.screen else None
            if why is not None:
                scores[i] = 0.0
                self.counts["screened"] += 1
            else:
                todo.append(i)
        if self.mode == "group":
            self._group(todo, prompts, cases, texts, scores, failed)
        else:
            self._pointwise(todo, cases, texts, scores, failed)
        if len(self.cache) > CACHE_LIMIT:
            self.cache.clear()
        self.last_seconds = time.perf_counter() - began
        self.seconds += self.last_seconds
        self.counts["calls"] += 1
        self.counts["samples"] += n
        with self._lock:
            self._failed = failed
        log_metric = columns.get("log_metric")
        if callable(log_metric):
            log_metric("judge/seconds", self.last_seconds)
            log_metric(f"judge/{self.__name__}/failed", len(failed) / max(1, n))
            # completions that speak to the judge, and what it gave them: the health monitor's judge_hacking
            addressed = [scores[i] for i, text in enumerate(texts) if addresses_grader(text)]
            log_metric(f"judge/{self.__name__}/addressed", len(addressed) / max(1, n))
            if any(s is not None for s in addressed):
                log_metric(f"judge/{self.__name__}/addressed_score",
                           sum(s for s in addressed if s is not None) / sum(s is not None for s in addressed))
        return scores

    def _key(self, case: Case, *answers: str) -> tuple:
        return (self.rubric, case, self.mode, answers)

    def _ask(self, conversations: list[list[dict[str, str]]], scale: tuple[int, int] | None = None,
             max_tokens: int | None = None) -> list[str | CallFailed]:
        if not conversations:
            return []
        replies = list(self.backend.complete_many(conversations, self.timeout, scale, max_tokens))
        if len(replies) != len(conversations):
            return [CallFailed("error", f"backend gave {len(replies)} replies for {len(conversations)}")] * len(
                conversations)
        return replies

    def _started(self, messages: list[dict[str, str]], start: str) -> list[dict[str, str]]:
        """Start the judge's reply with the verdict's form where the backend continues a reply (in-process)."""
        if getattr(self.backend, "starts_reply", False):
            return [*messages, {"role": "assistant", "content": start}]
        return messages

    def _failure(self, reply: CallFailed, i: int, failed: dict[int, str]) -> None:
        self.counts["timeouts" if reply.kind == "timeout" else "errors"] += 1
        failed[i] = f"judge {reply.kind}: {reply.message}"

    def _pointwise(self, todo: list[int], cases: list[Case], texts: list[str], scores: list[float | None],
                   failed: dict[int, str]) -> None:
        ask = []
        for i in todo:
            hit = self.cache.get(self._key(cases[i], texts[i]))
            if hit is not None:
                scores[i] = hit
                self.counts["cached"] += 1
            else:
                ask.append(i)
        replies = self._ask([self._started(pointwise(self.rubric, cases[i], texts[i]), "Score:") for i in ask],
                            scale=(self.rubric.low, self.rubric.high))
        for i, reply in zip(ask, replies):
            if isinstance(reply, CallFailed):
                self._failure(reply, i, failed)
                continue
            value = parse_verdict(reply, self.rubric, [texts[i]])
            if value is None:
                self.counts["unparsable"] += 1
                failed[i] = f"unparsable verdict: {reply[:120]!r}"
            else:
                self.counts["judged"] += 1
                scores[i] = self.cache[self._key(cases[i], texts[i])] = value

    def _group(self, todo: list[int], prompts: list[Any], cases: list[Case], texts: list[str],
               scores: list[float | None], failed: dict[int, str]) -> None:
        """TRL lays a step's completions out prompt by prompt: each run of one prompt is a group."""
        groups: list[list[int]] = []
        for i in todo:
            if groups and repr(prompts[groups[-1][-1]]) == repr(prompts[i]):
                groups[-1].append(i)
            else:
                groups.append([i])
        ask = []
        for members in groups:
            key = self._key(cases[members[0]], *sorted(texts[i] for i in members))
            hit = self.cache.get(key)
            if hit is not None:
                for i in members:
                    scores[i] = hit[texts[i]]
                self.counts["cached"] += len(members)
            else:
                ask.append((members, key))
        longest = max((len(m) for m, _ in ask), default=0)  # a line per answer: "<n>: <score>"
        replies = self._ask([self._started(groupwise(self.rubric, cases[m[0]], [texts[i] for i in m]), "1:")
                             for m, _ in ask], max_tokens=8 * longest + 8)
        for (members, key), reply in zip(ask, replies):
            if isinstance(reply, CallFailed):
                for i in members:
                    self._failure(reply, i, failed)
                continue
            values = parse_group(reply, self.rubric, [texts[i] for i in members])
            for i, value in zip(members, values):
                if value is None:
                    self.counts["unparsable"] += 1
                    failed[i] = f"group verdict has no score for this answer: {reply[:120]!r}"
                else:
                    self.counts["judged"] += 1
                    scores[i] = value
            if all(v is not None for v in values):
                self.cache[key] = {texts[i]: v for i, v in zip(members, values)}


@factory
def make_llm_judge_reward(rubric: str | dict | None = None, scale: Sequence[int] | None = None,
                          endpoint: str | None = None, judge_model: str = "embedded", api_key_env: str | None = None,
                          mode: str = "pointwise", timeout: float = 30.0, concurrency: int = 4,
                          max_tokens: int = 32, screen: bool = True, self_test: str | bool = "warn",
                          min_agreement: float = 0.6, self_test_rows: int = 8, name: str = "llm_judge"
                          ) -> JudgeReward:
    """An LLM judge: ``rubric`` (qa | summarization | your criteria with ``scale: [low, high]``), served by
    ``endpoint`` (OpenAI-compatible base URL; ``judge_model`` is the served model's name, ``api_key_env`` the
    environment variable holding the key) or, without an endpoint, ``judge_model`` loaded in-process.
    ``mode``: pointwise | group. ``self_test``: warn | refuse | off, against ``min_agreement``. A UserError's
    ``where`` is the parameter's name; the registry makes it ``rewards[i].<name>``."""
    where: Callable[[str], str] = str
    if self_test is False:  # YAML reads an unquoted `off` as false
        self_test = "off"
    if mode not in ("pointwise", "group"):
        raise UserError(f"mode {mode!r} is not pointwise or group", where("mode"), "mode: pointwise (or group)")
    if self_test not in ("warn", "refuse", "off"):
        raise UserError(f"self_test {self_test!r} is not warn, refuse or off", where("self_test"), "self_test: warn")
    if not timeout or timeout <= 0:
        raise UserError(f"timeout {timeout!r} must be a positive number of seconds", where("timeout"), "timeout: 30")
    chosen = make_rubric(rubric, scale, where)
    if endpoint:
        backend: Backend = HttpJudge(endpoint, judge_model, api_key_env, concurrency, max_tokens, where)
    else:
        backend = LocalJudge(judge_model, max_new_tokens=max_tokens, where=where)
    return JudgeReward(chosen, backend, name=name, mode=mode, timeout=float(timeout), screen=screen,
                       self_test=self_test, min_agreement=min_agreement, self_test_rows=self_test_rows)
