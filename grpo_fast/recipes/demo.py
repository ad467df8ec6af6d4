"""The built-in demo: add two numbers from 0 to 12 and reply with only the sum; learnable on a laptop CPU.

Measured on SmolLM2-135M-Instruct (the embedded model): asked for a sum it writes ``9 + 4 = 13`` or a
sentence, and it never emits ``<answer>`` tags, not even in 1 of 50 samples, so a tag format gives GRPO
nothing to find. One worked example as an earlier chat turn (``What is 2 + 3?`` -> ``5``) makes it reply with a
lone number almost always, but a lone number it has not computed: right for about 1 question in 4. That
is what GRPO can teach: which lone number. With a large format reward and no one-shot turn it learned to
reply with a lone *wrong* number (the first operand), so the rewards weigh correctness first:

- ``sum_correct`` (the judge, x2): the first number in the reply is the sum. The base model's
  ``9 + 4 = 13`` answers 9 and scores 0; a lone ``13`` scores 1.
- ``sum_mentioned`` (shaping, x0.5): the sum appears in a short reply (at most three numbers, as in
  ``9 + 4 = 13``) that does not echo the question. Keeps the base model's right equations ahead of lone wrong
  numbers while the format is being learned; a list of guesses or an echo of the question earns nothing.
- ``just_the_number`` (format, x0.5): the reply is only the number; otherwise up to 0.25 for brevity.

Held-out questions are drawn with a second seed from the pairs (a, b) no training question uses.
"""

from __future__ import annotations

import random
import re
from collections.abc import Collection
from typing import Any

from grpo_fast.config import RunConfig
from grpo_fast.recipes import Recipe
from grpo_fast.rewards.base import completion_text, reward_meta
from grpo_fast.rewards.check import answer_probes
from grpo_fast.rewards.presets import RewardSet

SYSTEM_PROMPT = "Reply with only the number."
EXAMPLE = ("What is 2 + 3?", "5")
"""The one-shot turn before each question. Its pairs, (2, 3) and (3, 2), are never asked."""
LOW, HIGH = 0, 12
"""Operands are drawn from LOW..HIGH: 167 distinct questions (the example's excluded), 64 for training, 103 held out."""
TRAIN_ROWS = 64
HOLDOUT_SEED_OFFSET = 1_000_003
"""The held-out questions are drawn with seed + this, from the pairs training does not use."""
NUMBER = re.compile(r"-?\d+")
ONLY_NUMBER = re.compile(r"\s*-?\d+\s*\.?\s*")


@reward_meta("correctness", 0.0, 1.0)
def sum_correct(completions: list, answer: list[str], **kwargs: Any) -> list[float]:
    """Correctness: 1.0 when the reply's first number is the sum, else 0.0 (format is scored separately)."""
    scores = []
    for completion, gold in zip(completions, answer):
        first = NUMBER.search(completion_text(completion))
        scores.append(1.0 if first and first.group() == str(gold) else 0.0)
    return scores


@reward_meta("style", 0.0, 1.0)
def sum_mentioned(completions: list, answer: list[str], **kwargs: Any) -> list[float]:
    """Shaping: 1.0 when the sum appears in a reply of at most three numbers that does not repeat the question
    (an equation such as ``9 + 4 = 13`` counts; a list of guesses or an echo of the prompt does not)."""
    scores = []
    for completion, gold in zip(completions, answer):
        text = completion_text(completion)
        numbers = NUMBER.findall(text)
        honest = len(numbers) <= 3 and "what is" not in text.lower()
        scores.append(1.0 if honest and str(gold) in numbers else 0.0)
    return scores


@reward_meta("format", 0.0, 1.0)
def just_the_number(completions: list, **kwargs: Any) -> list[float]:
    """Format: 1.0 when the reply is only a number; otherwise up to 0.25 for brevity (0 at 60+ characters)."""
    scores = []
    for completion in completions:
        text = completion_text(completion)
        if ONLY_NUMBER.fullmatch(text):
            scores.append(1.0)
        else:
            scores.append(0.25 * max(0.0, 1.0 - len(text.strip()) / 60))
    return scores


def _row(a: int, b: int) -> dict:
    return {
        "prompt": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": EXAMPLE[0]},
                   {"role": "assistant", "content": EXAMPLE[1]}, {"role": "user", "content": f"What is {a} + {b}?"}],
        "answer": str(a + b),
    }


def make_rows(n: int = TRAIN_ROWS, seed: int = 0, exclude: Collection[tuple[int, int]] = ()) -> list[dict]:
    """``n`` distinct questions a + b (a, b in LOW..HIGH), none of them in ``exclude``; deterministic for a seed."""
    shown = {(2, 3), (3, 2)}
    pairs = [(a, b) for a in range(LOW, HIGH + 1) for b in range(LOW, HIGH + 1) if (a, b) not in {*exclude, *shown}]
    random.Random(seed).shuffle(pairs)
    return [_row(a, b) for a, b in pairs[:n]]


def pair_of(row: dict) -> tuple[int, int]:
    """The operands of a mapped row, read back from its question."""
    a, b = NUMBER.findall(row["prompt"][-1]["content"])
    return int(a), int(b)


def holdout(cfg: RunConfig, train_rows: list[dict]) -> list[dict]:
    """``cfg.eval_rows`` questions drawn with another seed from the pairs that no training row uses."""
    used = {pair_of(r) for r in train_rows}
    return make_rows(cfg.eval_rows, seed=cfg.seed + HOLDOUT_SEED_OFFSET, exclude=used)


def gold(row: dict) -> str:
    """The reply the system prompt asks for: only the number."""
    return str(row["answer"])


REWARDS = RewardSet("demo", ((just_the_number, 0.5), (sum_correct, 2.0), (sum_mentioned, 0.5)),
                    correctness="sum_correct", format="just_the_number")
# The bare answer is this task's format, so the "answer without reasoning" probe does not apply here.
PROBES = tuple(p for p in answer_probes(lambda row: str(row["answer"]), gold) if p[0] != "answer_no_reasoning")

RECIPE = Recipe(
    name="demo",
    description=f"add two numbers from {LOW} to {HIGH}, reply with only the sum (offline, CPU, learns in minutes)",
    system_prompt=SYSTEM_PROMPT,
    rows=lambda cfg: make_rows(seed=cfg.seed),
    holdout=holdout,
    rewards=REWARDS,
    gold=gold,
    probes=PROBES,
    required=("prompt", "answer"),
    defaults={
        "max_steps": 60,
        "learning_rate": 3.0e-4,
        "per_device_train_batch_size": 8,
        "num_generations": 8,
        "max_completion_length": 16,
        "temperature": 1.0,
        "logging_steps": 1,
        "eval_rows": 103,
        "eval_k": 1,
    },
)
