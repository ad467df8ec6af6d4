"""Math word problems with worked reasoning: GSM8K- and MATH-style data, graded by math-verify.

Real data: ``openai/gsm8k`` (config ``main``: ``question`` + ``answer`` ending in ``#### <number>``) or a
MATH-style set (``problem`` + ``solution`` with a ``\\boxed{}`` answer, or an ``answer`` column). Offline, the
shipped GSM8K-style and MATH-style samples are used together. Rewards: ``MATH_REASONING_REWARDS``.
"""

from __future__ import annotations

import re
from typing import Any

from grpo_fast.recipes import Recipe
from grpo_fast.recipes.common import Missing, chat, load, map_rows, text
from grpo_fast.rewards import MATH_REASONING_REWARDS as PRESET
from grpo_fast.rewards.base import last_boxed
from grpo_fast.rewards.check import gold_completion

SYSTEM_PROMPT = (
    "Solve the problem. Think step by step, then give only the final answer.\n"
    "Respond in this format, with each tag on its own line: <reasoning> ... </reasoning> <answer> ... </answer>"
)
# The format is shown on one line with placeholder content on purpose: a reply that echoes the prompt must not
# earn the format rewards (xml_count counts tags followed by newlines; soft_xml ignores "..." content).
SAMPLES = ("gsm8k_sample.jsonl", "math_sample.jsonl")
HINT = "'question' (or 'problem') plus 'answer' (GSM8K '#### n' or a short answer) or 'solution' with \\boxed{}"
_PLAIN_NUMBER = re.compile(r"-?[\d,]*\.?\d+")


def gold_answer(raw: dict) -> str:
    """The short gold answer: after GSM8K's ``####``, a short ``answer``, or the last ``\\boxed{}`` of ``solution``."""
    answer = raw.get("answer")
    if answer is not None and str(answer).strip():
        value = str(answer)
        if "####" in value:
            value = value.rsplit("####", 1)[1]
        elif "\n" in value.strip() or len(value) > 80:
            boxed = last_boxed(value)
            if boxed is None:
                raise Missing(["answer"], "holds a worked solution without '#### <answer>' or \\boxed{}",
                              "end each answer with '#### <final answer>' (GSM8K) or keep only the final answer")
            value = boxed
        value = value.strip()
        return value.replace(",", "") if _PLAIN_NUMBER.fullmatch(value) else value
    solution = text(raw, "solution", "answer")
    boxed = last_boxed(solution)
    if not boxed:
        raise Missing(["solution"], "has no \\boxed{...} final answer",
                      "put the final answer in \\boxed{...}, or add an 'answer' column")
    return boxed


def map_row(raw: dict) -> dict:
    """GSM8K or MATH row -> chat prompt + ``answer`` (what math_accuracy_reward compares with)."""
    question = text(raw, "question", "problem")
    return {"prompt": chat(SYSTEM_PROMPT, question), "answer": gold_answer(raw)}


def rows(cfg: Any) -> list[dict]:
    return map_rows(load(cfg, SAMPLES), map_row, HINT)


RECIPE = Recipe(
    name="math",
    description="math word problems (GSM8K / MATH style), <reasoning>/<answer> format, math-verify grading",
    rows=rows,
    reward_funcs=lambda: PRESET.funcs,
    reward_weights=PRESET.weights,
    correctness=PRESET.correctness,
    correctness_max=1.0,
    reward_max=3.2,  # 2.0 x math_accuracy 1 + 0.5 x soft_xml 1 + 0.5 x xml_count 1 + 0.2 x reasoning_steps 1
    format_reward=PRESET.format,
    gold=lambda row: gold_completion(row, "math"),
    required=("prompt", "answer"),
    # num_generations / per_device_train_batch_size come from the kit (8/8) or the profile: not pinned here.
    defaults={
        "max_completion_length": 512,
        "max_seq_length": 1024,
        "learning_rate": 5.0e-6,
        "save_steps": 100,
        "temperature": 1.0,
    },
)
