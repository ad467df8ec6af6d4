"""A task of the user's own, written as TRL and Unsloth users write it: TRL-format rows, notebook-style rewards
(scores -4.5..5), an Unsloth-style chat template that opens <start_working_out>, and a Recipe module."""

from __future__ import annotations

import json
from pathlib import Path

QUESTIONS = [(a, b) for a in range(2, 9) for b in range(3, 7)]  # 28 distinct sums

REWARDS = '''import re

def check_answer(prompts, completions, answer, **kwargs):
    """Notebook style: 5 for the right number, -2.5 for a wrong one, -4.5 for no number."""
    scores = []
    for completion, gold in zip(completions, answer):
        text = completion[0]["content"] if isinstance(completion, list) else completion
        found = re.search(r"<SOLUTION>(.+?)</SOLUTION>", text) or re.search(r"-?\\d+", text)
        got = found.group(1) if found and found.re.pattern.startswith("<") else (found.group() if found else None)
        scores.append(-4.5 if got is None else 5.0 if got.strip() == str(gold) else -2.5)
    return scores

def short_reply(completions, **kwargs):
    """Notebook style: +1 for a reply under 40 characters, -1 otherwise."""
    texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
    return [1.0 if len(t) < 40 else -1.0 for t in texts]
'''

# Unsloth's GRPO notebooks: the generation prompt opens the reasoning tag; the answer goes in <SOLUTION>.
TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] + eos_token }}"
    "{% set loop_messages = messages[1:] %}{% else %}{{ 'Think, then answer in <SOLUTION></SOLUTION>.' + eos_token }}"
    "{% set loop_messages = messages %}{% endif %}"
    "{% for message in loop_messages %}{% if message['role'] == 'user' %}{{ message['content'] }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_working_out>' }}{% endif %}"
)

RECIPE = '''from grpo_fast.recipes import Recipe
from grpo_fast.recipes.common import chat
from grpo_fast.rewards.base import completion_text, reward_meta
from grpo_fast.rewards.check import answer_probes
from grpo_fast.rewards.presets import RewardSet

SYSTEM = "Reply with only the number."


@reward_meta("correctness", 0.0, 1.0)
def first_number_right(completions, answer, **kwargs):
    out = []
    for completion, gold in zip(completions, answer):
        words = completion_text(completion).replace(".", " ").split()
        out.append(1.0 if words and words[0] == str(gold) else 0.0)
    return out


def rows(cfg):
    return [{"prompt": chat(SYSTEM, f"What is {a} + {b}?"), "answer": str(a + b)}
            for a in range(2, 9) for b in range(3, 7)]


RECIPE = Recipe(
    name="my_sums", description="sums, as a recipe of my own", system_prompt=SYSTEM, rows=rows,
    rewards=RewardSet("my_sums", ((first_number_right, 1.0),), correctness="first_number_right"),
    gold=lambda row: row["answer"],
    probes=tuple(p for p in answer_probes(lambda row: row["answer"], lambda row: row["answer"])
                 if p[0] != "answer_no_reasoning"),
    defaults={"max_completion_length": 12, "eval_rows": 4},
)

NOT_A_RECIPE = {"name": "my_sums"}
'''


def write_task(folder: Path, prompts: str = "text", gold: bool = False) -> Path:
    """data.jsonl (``prompts``: text or chat), rewards.py and my_task.py in ``folder``; returns the data file."""
    lines = []
    for a, b in QUESTIONS:
        question = f"What is {a} + {b}?"
        prompt = question if prompts == "text" else [
            {"role": "system", "content": "Answer with just the number."}, {"role": "user", "content": question}]
        row = {"prompt": prompt, "answer": str(a + b)}
        if gold:
            row["gold"] = f"<SOLUTION>{a + b}</SOLUTION>"
        lines.append(json.dumps(row))
    data = folder / "data.jsonl"
    data.write_text("\n".join(lines) + "\n")
    (folder / "rewards.py").write_text(REWARDS)
    (folder / "my_task.py").write_text(RECIPE)
    (folder / "template.jinja").write_text(TEMPLATE)
    return data


SMALL = {"max_steps": 2, "eval_rows": 4, "eval_k": 1, "num_generations": 4, "per_device_train_batch_size": 4,
         "max_completion_length": 12, "learning_rate": 1.0e-4}
"""As small as the other short CPU runs: 2 steps, 4 held-out rows."""
