"""The built-in demo: small additions answered inside <answer> tags, learnable on a laptop CPU in minutes.

Measured on SmolLM2-135M-Instruct: with plain `<answer>`-tag rewards and no shaping the model never
emits the tags and reward stays 0. Here a one-shot system prompt makes tags occasional, the format reward
gives partial credit per tag, and correctness gives a little credit for a right number without tags, so
every group has variance to learn from. Maximum total reward: 1.0 (format) + 2.0 (correct) = 3.0.
"""

from __future__ import annotations

import random
import re
from typing import Any

from grpo_fast.recipes import Recipe
from grpo_fast.rewards.base import completion_text, reward_meta
from grpo_fast.rewards.check import answer_probes
from grpo_fast.rewards.presets import RewardSet

SYSTEM_PROMPT = (
    "Answer the arithmetic question. Put only the final number inside <answer></answer> tags.\n"
    "Example:\nQ: What is 2 + 3?\nA: <answer>5</answer>"
)
ANSWER_RE = re.compile(r"<answer>\s*(-?\d+)\s*</answer>")


@reward_meta("format", 0.0, 1.0)
def answer_tags(completions: list, **kwargs: Any) -> list[float]:
    """Format: 0.25 per tag present, +0.5 when the reply is exactly one tagged number. Max 1.0."""
    scores = []
    for completion in completions:
        text = completion_text(completion)
        score = 0.25 * ("<answer>" in text) + 0.25 * ("</answer>" in text)
        score += 0.5 * bool(re.fullmatch(r"\s*<answer>\s*-?\d+\s*</answer>\s*", text))
        scores.append(score)
    return scores


@reward_meta("correctness", 0.0, 2.0)
def sum_correct(completions: list, answer: list[str], **kwargs: Any) -> list[float]:
    """Correctness: 2.0 for the right tagged number, 0.5 for the right number without tags. Max 2.0."""
    scores = []
    for completion, gold in zip(completions, answer):
        text = completion_text(completion)
        tagged = ANSWER_RE.search(text)
        if tagged:
            scores.append(2.0 if tagged.group(1) == str(gold) else 0.0)
        else:
            numbers = re.findall(r"-?\d+", text)
            scores.append(0.5 if numbers and numbers[-1] == str(gold) else 0.0)
    return scores


def make_rows(n: int = 200, seed: int = 0) -> list[dict]:
    """Questions a + b with a, b in 1..20, deterministic for a seed."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        a, b = rng.randint(1, 20), rng.randint(1, 20)
        rows.append({
            "prompt": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": f"What is {a} + {b}?"},
            ],
            "answer": str(a + b),
        })
    return rows


def gold(row: dict) -> str:
    return f"<answer>{row['answer']}</answer>"


REWARDS = RewardSet("demo", ((answer_tags, 1.0), (sum_correct, 1.0)), correctness="sum_correct",
                    format="answer_tags")

RECIPE = Recipe(
    name="demo",
    description="add two numbers up to 20, answer in <answer> tags (offline, CPU, learns in minutes)",
    system_prompt=SYSTEM_PROMPT,
    rows=lambda cfg: make_rows(seed=cfg.seed),
    rewards=REWARDS,
    gold=gold,
    probes=tuple(answer_probes(lambda row: str(row["answer"]), gold)),
    required=("prompt", "answer"),
    defaults={
        "max_steps": 30,
        "learning_rate": 2.0e-4,
        "per_device_train_batch_size": 8,
        "num_generations": 4,
        "max_completion_length": 24,
        "temperature": 1.0,
        "logging_steps": 1,
        "eval_rows": 16,
    },
)
