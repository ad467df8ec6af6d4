"""Rewards for reasoning models: correctness gated on closed thinking, and correctness scaled by length.

``reasoning_accuracy`` is TRL's ``reasoning_accuracy_reward``: the answer is what follows the last closing tag,
and a completion that never closes its thinking scores 0 whatever it wrote. ``cosine_scaled`` ("Demystifying
Long Chain-of-Thought Reasoning", open-r1 and TRL) and ``kimi_length`` (Kimi 1.5, open-r1's ``len_reward``)
reward short right answers over long ones. All three compare with math-verify (``mathverify.verify_answers``) and
give None where the gold cannot be parsed, so TRL skips the row instead of teaching from a broken reference.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from grpo_fast.rewards.base import THINK_TAGS, after_thinking, bound, column, completion_texts, factory
from grpo_fast.rewards.mathverify import extract_math_answer, verify_answers


def _closed_answer(text: str, delimiters: Sequence[str]) -> str | None:
    """What follows the last of ``delimiters`` in ``text``; None when none occurs (the thinking never closed) or
    a ``</tag>`` delimiter's ``<tag>`` opens again after it."""
    ends = [(text.rfind(d), d) for d in delimiters if d in text]
    if not ends:
        return None
    at, delim = max(ends)
    rest = text[at + len(delim):]
    reopened = delim.startswith("</") and "<" + delim[2:] in rest
    return None if reopened else rest


def _correct(texts: list[str], golds: list[Any], delimiters: Sequence[str] | None) -> list[float | None]:
    """math-verify verdict per completion: 1.0/0.0, None for an unparsable gold (whatever the completion: the row
    is not applicable, as in every correctness reward here); with ``delimiters``, a completion without one is wrong
    (0.0), as in TRL."""
    answers = [_closed_answer(t, delimiters) if delimiters else t for t in texts]
    verdicts = verify_answers(golds, [extract_math_answer(a) if a is not None else None for a in answers])
    return [0.0 if a is None and v is not None else v for a, v in zip(answers, verdicts)]


@factory
def make_reasoning_accuracy_reward(column: str = "answer", reasoning_delimiters: Sequence[str] = (THINK_TAGS[1],),
                                   name: str = "reasoning_accuracy_reward") -> Any:
    """1.0 when the answer after the last closing delimiter equals the gold; 0 without a closing delimiter
    (thinking never closed), even when the right answer sits inside the thinking; None for an unparsable gold."""
    if not reasoning_delimiters:
        raise ValueError("reasoning_accuracy needs at least one closing delimiter, e.g. ['</think>']")
    cfg = SimpleNamespace(column=column, delimiters=tuple(reasoning_delimiters))
    fn = reads_thinking(bound(_reasoning_accuracy, cfg, name, "correctness"))
    fn.needs_thinking = all("think" in d for d in reasoning_delimiters)  # 0 for every answer of a model that doesn't
    return fn


def reads_thinking(fn: Any) -> Any:
    """Mark a reward that reads the thinking tags itself (``rewards.thinking`` hands it the whole completion)."""
    fn.reads_thinking = True
    return fn


def _reasoning_accuracy(cfg: SimpleNamespace, /, prompts: Any = None, completions: Any = None,
                        **kwargs: Any) -> list[float | None]:
    texts = completion_texts(completions)
    return _correct(texts, column(kwargs, cfg.column, len(texts)), cfg.delimiters)


def _lengths(texts: list[str], completion_ids: Any) -> list[int]:
    """Tokens when TRL passes ``completion_ids`` (the length that was trained), else characters."""
    if completion_ids is not None and len(completion_ids) == len(texts):
        return [len(ids) for ids in completion_ids]
    return [len(t) for t in texts]


@factory
def make_cosine_scaled_reward(max_len: int = 1000, min_value_wrong: float = -1.0, max_value_wrong: float = -0.5,
                              min_value_correct: float = 0.5, max_value_correct: float = 1.0,
                              column: str = "answer", tags: Sequence[str] = THINK_TAGS,
                              name: str = "cosine_scaled_reward") -> Any:
    """Correctness scaled along a cosine of length/``max_len`` (clamped at 1): a right answer earns
    ``max_value_correct`` when short down to ``min_value_correct`` at ``max_len``; a wrong one is penalised
    ``min_value_wrong`` when short, easing to ``max_value_wrong`` when long (exploring is cheaper than guessing).
    Open thinking (``tags[0]`` without ``tags[1]``) is wrong; None for an unparsable gold."""
    if max_len <= 0:
        raise ValueError("max_len must be positive")
    if not (min_value_wrong <= max_value_wrong <= min_value_correct <= max_value_correct):
        raise ValueError("need min_value_wrong <= max_value_wrong <= min_value_correct <= max_value_correct")
    cfg = SimpleNamespace(max_len=max_len, wrong=(max_value_wrong, min_value_wrong), column=column,
                          correct=(min_value_correct, max_value_correct), tags=tuple(tags))
    return reads_thinking(bound(_cosine_scaled, cfg, name, "length", min_value_wrong, max_value_correct))


def _verdicts(cfg: SimpleNamespace, completions: Any, kwargs: dict[str, Any]) -> tuple[list[str], list[Any]]:
    """Each completion's text and its verdict on what follows the thinking (open thinking: wrong)."""
    texts = completion_texts(completions)
    answers = [after_thinking(t, cfg.tags) for t in texts]
    return texts, _correct(answers, column(kwargs, cfg.column, len(texts)), None)


def _cosine_scaled(cfg: SimpleNamespace, /, prompts: Any = None, completions: Any = None, completion_ids: Any = None,
                   **kwargs: Any) -> list[float | None]:
    texts, verdicts = _verdicts(cfg, completions, kwargs)
    out: list[float | None] = []
    for verdict, n in zip(verdicts, _lengths(texts, completion_ids)):
        if verdict is None:
            out.append(None)
            continue
        low, high = cfg.correct if verdict else cfg.wrong
        out.append(float(low + 0.5 * (high - low) * (1.0 + math.cos(min(n / cfg.max_len, 1.0) * math.pi))))
    return out


@factory
def make_kimi_length_reward(column: str = "answer", tags: Sequence[str] = THINK_TAGS,
                            name: str = "kimi_length_reward") -> Any:
    """Kimi 1.5's length reward within each prompt's group: λ = 0.5 − (len − shortest)/(longest − shortest);
    a right answer earns λ (in [−0.5, 0.5]), a wrong one min(0, λ), so brevity never pays for being wrong.
    0 for a group of equal lengths; None for an unparsable gold."""
    return reads_thinking(bound(_kimi_length, SimpleNamespace(column=column, tags=tuple(tags)),
                               name, "length", -0.5, 0.5))


def _group_key(prompt: Any) -> str:
    return prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True, default=str)


def _kimi_length(cfg: SimpleNamespace, /, prompts: Any = None, completions: Any = None, completion_ids: Any = None,
                 **kwargs: Any) -> list[float | None]:
    texts, verdicts = _verdicts(cfg, completions, kwargs)
    lengths = _lengths(texts, completion_ids)
    keys = [_group_key(p) for p in prompts] if prompts is not None and len(prompts) == len(texts) else [""] * len(texts)
    groups: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    out: list[float | None] = [None] * len(texts)
    for members in groups.values():
        shortest, longest = min(lengths[i] for i in members), max(lengths[i] for i in members)
        for i in members:
            if verdicts[i] is None:
                continue
            lam = 0.0 if longest == shortest else 0.5 - (lengths[i] - shortest) / (longest - shortest)
            out[i] = float(lam if verdicts[i] else min(0.0, lam))
    return out


reasoning_accuracy_reward = make_reasoning_accuracy_reward()
