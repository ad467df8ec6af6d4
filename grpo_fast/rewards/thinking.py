"""A run's rewards as a thinking model's run sees them.

A thinking model reasons between two tags and then answers. Built-in correctness rewards already judge what
follows ``</think>`` (``base.after_thinking``), but two things only the run knows change what they must see: the
chat template may open the tag in the prompt (DeepSeek-R1 distills: the completion starts inside the thinking and
has no opening tag), and the tags may be other than ``<think>``. ``thinking_view`` wraps each reward once so that:

* correctness and format rewards see only what follows the closing tag ("" while the thinking is open, so an
  unclosed completion scores 0 and the answer format is judged on the answer, not on the reasoning);
* rewards that read the tags themselves (``reads_thinking``: think_answer_format, reasoning_accuracy, cosine and
  Kimi length) and length and style rewards see the whole completion, with the opening tag put back where the
  template wrote it, so a template that opens the tag is not mistaken for a malformed completion.

The judge's view also logs, per batch, ``thinking/open`` (share of completions whose thinking never closed) and
``thinking/open_clipped`` (share of the completions cut at max_completion_length whose thinking is open): the
health monitor's "thinking never closes" alarm reads the second.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from grpo_fast.rewards.base import THINK_TAGS, after_thinking, completion_text, content_to_text
from grpo_fast.rewards.presets import RewardSet

# Rewards that read the thinking tags themselves: they get the whole completion.
READS_THINKING = frozenset({"think_answer_format_reward", "think_format_reward", "reasoning_steps_reward"})


def reads_thinking(fn: Any) -> bool:
    return bool(getattr(fn, "reads_thinking", False)) or getattr(fn, "__name__", "") in READS_THINKING


def own_tags(fn: Any) -> bool:
    """A factory reward set to read other tags than ``<think>`` (its ``tags`` or ``reasoning_delimiters``): it
    reads the model's own tags, so the view must not rewrite them to ``<think>``."""
    settings = getattr(fn, "settings", None)
    tags = getattr(settings, "tags", None) or getattr(settings, "delimiters", None)
    return tags is not None and tuple(tags) not in (THINK_TAGS, THINK_TAGS[1:])


def thinking_open(text: str, tags: Sequence[str] = THINK_TAGS, opened: bool = False) -> bool:
    """The completion's thinking never closed (``after_thinking`` would give nothing to judge)."""
    start, close = tags
    end = text.rfind(close)
    return start in text[end + len(close):] if end >= 0 else (opened or start in text)


def split_thinking(text: str, tags: Sequence[str] = THINK_TAGS, opened: bool = False) -> tuple[str | None, str]:
    """(the thinking, the answer it leads to) of a completion, for showing it folded: no thinking gives
    (None, text); thinking left open gives (all of it, "")."""
    start, close = tags
    if thinking_open(text, tags, opened):
        at = text.find(start)
        return (text[at + len(start):] if at >= 0 else text).strip(), ""
    end = text.rfind(close)
    if end < 0:
        return None, text
    head = text[:end]
    at = head.find(start)
    return (head[at + len(start):] if at >= 0 else head).strip(), text[end + len(close):].strip()


def folded(record: dict[str, Any], text: str, tags: Sequence[str] = THINK_TAGS, opened: bool = False) -> dict:
    """``record`` with ``thinking`` and ``answer`` (what the judge read) beside its completion ``text``."""
    thinking, answer = split_thinking(text, tags, opened)
    return record if thinking is None else {**record, "thinking": thinking, "answer": answer,
                                            "thinking_closed": not thinking_open(text, tags, opened)}


class ThinkingView:
    """One reward seen through the run's thinking template; picklable, TRL logs it by the reward's own name."""

    def __init__(self, fn: Any, tags: Sequence[str], opened: bool, max_length: int | None = None,
                 log: bool = False):
        self.fn, self.tags, self.opened, self.max_length, self.log = fn, tuple(tags), opened, max_length, log
        self.answer_only = getattr(fn, "reward_kind", None) in ("correctness", "format") and not reads_thinking(fn)
        self.rewrite = self.tags != THINK_TAGS and not own_tags(fn)
        self.__name__ = self.__qualname__ = getattr(fn, "__name__", type(fn).__name__)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or "fn" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.fn, name)  # reward_kind, reward_range, last_details...

    def seen(self, completion: Any) -> Any:
        """The completion as this reward should see it (same shape: text, or chat messages)."""
        if isinstance(completion, str):
            return self._text(completion)
        if not isinstance(completion, Sequence):
            return completion
        messages = [dict(m) for m in completion if isinstance(m, dict)]
        spoken = [i for i, m in enumerate(messages) if m.get("role", "assistant") == "assistant"]
        if not spoken:
            return completion
        if not self.answer_only:
            first = messages[spoken[0]]
            first["content"] = self._text(content_to_text(first.get("content")))
            return messages
        whole = "\n".join(content_to_text(messages[i].get("content")) for i in spoken)
        answer = self._text(whole)
        for i in spoken:
            messages[i]["content"] = ""
        messages[spoken[-1]]["content"] = answer
        return messages

    def _text(self, text: str) -> str:
        if self.answer_only:
            return after_thinking(text, self.tags, self.opened)
        start = self.tags[0]
        if self.opened and not text.lstrip().startswith(start):
            text = start + text  # where the template wrote it
        if self.rewrite:  # the built-in rewards read <think>; the model wrote the run's own tags
            text = text.replace(start, THINK_TAGS[0]).replace(self.tags[1], THINK_TAGS[1])
        return text

    def __call__(self, /, prompts: Any = None, completions: Any = None, **kwargs: Any) -> list[float | None]:
        completions = list(completions or [])
        if self.log and callable(kwargs.get("log_metric")) and completions:
            self._log(completions, kwargs.get("completion_ids"), kwargs["log_metric"])
        scores = self.fn(prompts=prompts, completions=[self.seen(c) for c in completions], **kwargs)
        if not self.answer_only:
            return scores
        # thinking that never closed has no answer: the lowest score, not what the reward makes of "" (a format
        # reward may pay an empty answer for its brevity)
        low = getattr(self.fn, "reward_range", (0.0, 1.0))[0]
        return [low if s is not None and thinking_open(completion_text(c), self.tags, self.opened) else s
                for s, c in zip(scores, completions)]

    def _log(self, completions: list[Any], ids: Any, log_metric: Any) -> None:
        open_ = [thinking_open(completion_text(c), self.tags, self.opened) for c in completions]
        log_metric("thinking/open", sum(open_) / len(open_))
        if self.max_length and ids is not None and len(ids) == len(open_):
            clipped = [o for o, i in zip(open_, ids) if len(i) >= self.max_length]
            if clipped:
                log_metric("thinking/open_clipped", sum(clipped) / len(clipped))


def thinking_view(rewards: RewardSet, tags: Sequence[str] = THINK_TAGS, opened: bool = False,
                  max_length: int | None = None) -> RewardSet:
    """``rewards`` seen through a thinking template (see the module docstring); names and weights unchanged."""
    if len(tags) != 2 or not all(isinstance(t, str) and t for t in tags):
        raise ValueError(f"thinking tags must be two non-empty strings (opening, closing), got {tags!r}")
    judge = rewards.correctness
    views = tuple((fn if _is_async(fn) else ThinkingView(fn, tags, opened, max_length, log=fn.__name__ == judge), w)
                  for fn, w in rewards.rewards)
    return replace(rewards, rewards=views)


def _is_async(fn: Any) -> bool:
    """An async custom reward is left as it is (a sync view would hand TRL an unawaited coroutine)."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)
