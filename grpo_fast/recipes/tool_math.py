"""Tool use: multiply two 3-4 digit numbers with a sandboxed ``python`` tool, then reply with the product.

A 135M model cannot multiply 4837 by 2913 in its head (the embedded SmolLM2 is right on about 0 in 100), but it
can write ``print(4837 * 2913)`` and copy the tool's output. The model sees the tool's schema in its system
prompt (the chat template renders it), calls it as ``<tool_call>{"name": "python", ...}</tool_call>``, TRL's tool
loop runs the call in the kit's sandbox (``grpo_fast.tools.PythonSession``: one interpreter per episode) and shows
the output, and the model answers. A short SFT warm-up on demonstrations teaches the call syntax the base model
has never seen; GRPO then rewards right final answers.

- ``final_answer_correct`` (the judge, x2): the last assistant message's final answer equals the product, by the
  math verifier (``14090181``, ``14,090,181``, ``\\boxed{14090181}`` and a sentence ending in it all count).
- ``python_ran`` (format, x0.5): the completion called ``python`` and the call ran without an error.

Held-out questions come from a second seed and use no operand pair that training saw.
"""

from __future__ import annotations

import random
import re
from collections.abc import Collection
from typing import Any

from grpo_fast.config import RunConfig
from grpo_fast.recipes import Recipe
from grpo_fast.rewards.base import content_to_text, reward_meta
from grpo_fast.rewards.check import answer_probes
from grpo_fast.rewards.mathverify import extract_math_answer, verify_answers
from grpo_fast.rewards.presets import RewardSet

SYSTEM_PROMPT = "Use the python tool to compute the answer, then reply with only the number."
LOW, HIGH = 100, 9999
TRAIN_ROWS = 128
HOLDOUT_SEED_OFFSET = 1_000_003
ENVIRONMENT = "grpo_fast.tools.python:PythonSession"
NUMBER = re.compile(r"\d+")
ERROR = re.compile(r"^(error:|\{'error'|Traceback)", re.M)


def final_message(completion: Any) -> str:
    """The final reply: the last message when it is the assistant's and calls no tool (a conversation that ends on
    a call or a tool's output has not answered); a plain string as it is."""
    if isinstance(completion, str):
        return completion
    last = completion[-1] if completion else None
    if not isinstance(last, dict) or last.get("role", "assistant") != "assistant" or last.get("tool_calls"):
        return ""
    return content_to_text(last.get("content"))


@reward_meta("correctness", 0.0, 1.0)
def final_answer_correct(completions: list, answer: list[str], **kwargs: Any) -> list[float | None]:
    """1.0 when the final reply's answer equals ``answer`` (math-verify); the tool's output does not count."""
    preds = [extract_math_answer(final_message(c)) for c in completions]
    return verify_answers(list(answer), preds, prompts=kwargs.get("prompts"))


@reward_meta("format", 0.0, 1.0)
def python_ran(completions: list, **kwargs: Any) -> list[float]:
    """1.0 when the completion called ``python`` and every call's output is free of errors, else 0.0."""
    scores = []
    for completion in completions:
        messages = completion if isinstance(completion, list) else []
        calls = [c for m in messages if isinstance(m, dict) for c in m.get("tool_calls") or []]
        outputs = [str(m.get("content", "")) for m in messages if isinstance(m, dict) and m.get("role") == "tool"]
        ok = calls and outputs and all(c.get("function", {}).get("name") == "python" for c in calls) \
            and not any(ERROR.search(o) for o in outputs)
        scores.append(1.0 if ok else 0.0)
    return scores


def _row(a: int, b: int) -> dict:
    return {"prompt": [{"role": "system", "content": SYSTEM_PROMPT},
                       {"role": "user", "content": f"What is {a} * {b}?"}],
            "answer": str(a * b)}


def make_rows(n: int = TRAIN_ROWS, seed: int = 0, exclude: Collection[tuple[int, int]] = ()) -> list[dict]:
    """``n`` distinct questions a * b (a, b in LOW..HIGH), none in ``exclude``; deterministic for a seed."""
    rng, seen, rows = random.Random(seed), set(exclude), []
    while len(rows) < n:
        pair = (rng.randint(LOW, HIGH), rng.randint(LOW, HIGH))
        if pair not in seen:
            seen.add(pair)
            rows.append(_row(*pair))
    return rows


def pair_of(row: dict) -> tuple[int, int]:
    a, b = NUMBER.findall(row["prompt"][-1]["content"])
    return int(a), int(b)


def holdout(cfg: RunConfig, train_rows: list[dict]) -> list[dict]:
    """``cfg.eval_rows`` questions drawn with another seed, none of them a training pair."""
    return make_rows(cfg.eval_rows, seed=cfg.seed + HOLDOUT_SEED_OFFSET, exclude={pair_of(r) for r in train_rows})


def gold(row: dict) -> str:
    return str(row["answer"])


def demonstration(row: dict) -> list[dict]:
    """The warm-up's completion: one python call, the tool's reply, the number."""
    a, b = pair_of(row)
    call = {"type": "function", "function": {"name": "python", "arguments": {"code": f"print({a} * {b})"}}}
    return [{"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "name": "python", "content": f"{a * b}\n"},
            {"role": "assistant", "content": str(a * b)}]


REWARDS = RewardSet("tool_math", ((final_answer_correct, 2.0), (python_ran, 0.5)),
                    correctness="final_answer_correct", format="python_ran")
PROBES = tuple(p for p in answer_probes(gold, gold) if p[0] != "answer_no_reasoning")

RECIPE = Recipe(
    name="tool_math",
    description="multiply 3-4 digit numbers with a sandboxed python tool (tool calling; SFT warm-up, then GRPO)",
    system_prompt=SYSTEM_PROMPT,
    rows=lambda cfg: make_rows(seed=cfg.seed),
    holdout=holdout,
    rewards=REWARDS,
    gold=gold,
    probes=PROBES,
    required=("prompt", "answer"),
    environment=ENVIRONMENT,
    demonstration=demonstration,
    defaults={
        "stages": [{"name": "warmup", "sft": True, "max_steps": 20, "learning_rate": 1.0e-3},
                   {"name": "grpo", "max_steps": 8}],
        "learning_rate": 2.0e-4,
        "per_device_train_batch_size": 8,
        "num_generations": 8,
        "max_completion_length": 96,
        "max_tool_calling_iterations": 2,
        "temperature": 1.0,
        "logging_steps": 1,
        "eval_rows": 100,
        "eval_k": 1,
    },
)
