"""Rewards that break a run on purpose, for the health corpus (benchmarks/health_corpus.py).

Each one is a real reward the kit loads by path (``rewards: [{name: ../../health_rewards.py:constant_half}]``)
and scores the demo's questions (``What is a + b?``) with; each makes GRPO fail in one known way.
"""

from __future__ import annotations

import re
from typing import Any

from grpo_fast.rewards.base import completion_text, reward_meta

NUMBER = re.compile(r"-?\d+")


def _operands(prompt: Any) -> tuple[int, int]:
    """``(a, b)`` of the demo question in a prompt (a chat message list or a plain string)."""
    text = prompt[-1]["content"] if isinstance(prompt, list) else str(prompt)
    a, b = NUMBER.findall(text)[-2:]
    return int(a), int(b)


def _first_number(completion: Any) -> str | None:
    found = NUMBER.search(completion_text(completion))
    return found.group() if found else None


@reward_meta("correctness", 0.0, 1.0)
def constant_half(completions: list, **kwargs: Any) -> list[float]:
    """The same score for every reply: no group ever has spread, so GRPO has nothing to learn from."""
    return [0.5 for _ in completions]


@reward_meta("correctness", 0.0, 1.0)
def cubic_answer(completions: list, prompts: list, **kwargs: Any) -> list[float]:
    """Too hard for a 135M model: the first number must be a * b * b + 7 (never guessed)."""
    return [1.0 if _first_number(c) == str(a * b * b + 7) else 0.0
            for c, (a, b) in zip(completions, map(_operands, prompts))]


@reward_meta("correctness", 0.0, 1.0)
def product_correct(completions: list, prompts: list, **kwargs: Any) -> list[float]:
    """Correctness the model does not reach in a short run: the first number is a * b (the question asks a + b)."""
    return [1.0 if _first_number(c) == str(a * b) else 0.0 for c, (a, b) in zip(completions, map(_operands, prompts))]


@reward_meta("format", 0.0, 1.0)
def wordy(completions: list, **kwargs: Any) -> list[float]:
    """A gameable "format" reward: longer replies score more (1.0 at 40+ characters), whatever they say."""
    return [min(1.0, len(completion_text(c).strip()) / 40) for c in completions]


@reward_meta("correctness", 0.0, 1.0)
def sum_correct_flaky(completions: list, prompts: list, answer: list[str], **kwargs: Any) -> list[float]:
    """The demo's correctness reward with a bug on some rows: it raises on a wrong reply to a question whose sum
    is a multiple of 5 (right replies, such as the gold self-test's, score fine)."""
    scores = []
    for c, p, gold in zip(completions, prompts, answer):
        a, b = _operands(p)
        if (a + b) % 5 == 0 and completion_text(c).strip() != str(gold):
            raise ValueError(f"cannot score a wrong reply to {a} + {b}")
        scores.append(1.0 if _first_number(c) == str(gold) else 0.0)
    return scores


@reward_meta("correctness", 0.0, 1.0)
def always_yes(completions: list, **kwargs: Any) -> list[float]:
    """A judge that says yes to everything: every reply scores the maximum from the first step, nothing to learn."""
    return [1.0 for _ in completions]


@reward_meta("format", 0.0, 1.0)
def sentence_format(completions: list, **kwargs: Any) -> list[float]:
    """A gameable format reward: a quarter for each of a capital first letter, a closing period, at least five
    words and at most thirty, whatever the reply says (the demo's lone numbers score a quarter or less)."""
    scores = []
    for completion in completions:
        text = completion_text(completion).strip()
        words = text.split()
        marks = [bool(text) and text[0].isupper(), text.endswith("."), len(words) >= 5, 0 < len(words) <= 30]
        scores.append(sum(marks) / 4)
    return scores
