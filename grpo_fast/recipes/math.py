"""Math word problems with worked reasoning: GSM8K- and MATH-style data, graded by math-verify.

Real data: ``openai/gsm8k`` (config ``main``: ``question`` + ``answer`` ending in ``#### <number>``) or a
MATH-style set (``problem`` + ``solution`` with a ``\\boxed{}`` answer, or an ``answer`` column). Offline, the
shipped GSM8K-style and MATH-style samples are used together. Rewards: ``MATH_REASONING_REWARDS``.
"""

from __future__ import annotations

import re

from grpo_fast.config import RunConfig
from grpo_fast.recipes import Recipe
from grpo_fast.recipes.common import Missing, chat, load, map_rows, text
from grpo_fast.rewards import MATH_REASONING_REWARDS as PRESET
from grpo_fast.rewards.answers import last_boxed
from grpo_fast.rewards.check import answer_probes

SYSTEM_PROMPT = (
    "Solve the problem. Think step by step, then give only the final answer.\n"
    "Respond in this format, with each tag on its own line: <reasoning> ... </reasoning> <answer> ... </answer>"
)
# The format is shown on one line with placeholder content on purpose: a reply that echoes the prompt must not
# earn the format rewards (xml_count counts tags followed by newlines; soft_xml ignores "..." content).
SAMPLES = ("gsm8k_sample.jsonl", "math_sample.jsonl")
HINT = "'question' (or 'problem') plus 'answer' (GSM8K '#### n' or a short answer) or 'solution' with \\boxed{}"
_PLAIN_NUMBER = re.compile(r"-?[\d,]*\.?\d+")
REASONING = (
    "Step 1: First, I restate what the question asks and list the given quantities.\n"
    "Step 2: Then, I set up the computation that connects the given values to the unknown.\n"
    "Step 3: Finally, I carry out the computation carefully and check the result."
)


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


def rows(cfg: RunConfig) -> list[dict]:
    return map_rows(load(cfg, SAMPLES), map_row, HINT)


def gold(row: dict) -> str | None:
    """Reasoning steps and the gold answer in the prompt's tags: full marks from every reward of the preset."""
    answer = str(row.get("answer") or "")
    return f"<reasoning>\n{REASONING}\n</reasoning>\n<answer>\n{answer}\n</answer>" if answer else None


RECIPE = Recipe(
    name="math",
    description="math word problems (GSM8K / MATH style), <reasoning>/<answer> format, math-verify grading",
    system_prompt=SYSTEM_PROMPT,
    rows=rows,
    rewards=PRESET,
    gold=gold,
    probes=tuple(answer_probes(lambda row: str(row.get("answer") or ""), gold)),
    required=("prompt", "answer"),
    # Only what the task needs: learning rate, group size, batch and checkpoints come from the kit or profile.
    defaults={
        "max_completion_length": 512,
        "max_seq_length": 1024,
    },
)
