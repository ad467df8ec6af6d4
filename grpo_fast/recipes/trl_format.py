"""TRL-format data as it is (``recipe: trl``): rows that already hold a ``prompt`` (text or chat messages) and
the columns their rewards read, as TRL's ``GRPOTrainer`` takes them; no mapper to write.

A text prompt becomes the user turn of a chat prompt, so one rendering path (the chat template, or the one given by
``chat_template:``) serves prompt-length filtering, training, evaluation and ``chat``; ``system_prompt:`` adds or
replaces the system turn. Every other column reaches the rewards unchanged, as in TRL. The gold reply is a
``gold`` or ``completion`` column when the data has one; else the bare reference (``answer``) is tried, and a judge
that wants a layout around it is reported, not refused (prepare).
"""

from __future__ import annotations

from typing import Any

from grpo_fast.recipes import Recipe
from grpo_fast.recipes.common import Missing, load, map_rows
from grpo_fast.rewards.base import content_to_text
from grpo_fast.rewards.check import answer_probes
from grpo_fast.rewards.correctness import make_exact_match_reward
from grpo_fast.rewards.presets import RewardSet

SAMPLES = ("trl_sample.jsonl",)
HINT = 'TRL\'s format: {"prompt": "text" or [{"role": "user", "content": "..."}], ...the columns your rewards read}'
GOLD_COLUMNS = ("gold", "completion")
REFERENCE_COLUMNS = ("answer", "solution", "reference")
ROLES = ("system", "user", "assistant")


def as_messages(prompt: Any) -> list[dict[str, str]]:
    """A TRL prompt as chat messages: text becomes the user turn; messages are checked and kept."""
    if isinstance(prompt, str) and prompt.strip():
        return [{"role": "user", "content": prompt}]
    if isinstance(prompt, list) and prompt and all(
            isinstance(m, dict) and m.get("role") in ROLES and isinstance(m.get("content"), str) for m in prompt):
        return [{"role": m["role"], "content": m["content"]} for m in prompt]
    if prompt is None or prompt == "" or prompt == []:
        raise Missing(["prompt"])
    raise Missing(["prompt"], f"must be text or a list of {{role, content}} messages, got {type(prompt).__name__}",
                  'write "prompt": "..." or "prompt": [{"role": "user", "content": "..."}]')


def map_row(raw: dict) -> dict:
    """The row as TRL would train on it: its prompt as messages, every other column kept for the rewards."""
    return {**raw, "prompt": as_messages(raw.get("prompt"))}


def rows(cfg: Any) -> list[dict]:
    return map_rows(load(cfg, SAMPLES), map_row, HINT)


def gold(row: dict) -> str | None:
    """A full reply the data gives (``gold``/``completion``: text, or messages ending in the assistant's)."""
    for column in GOLD_COLUMNS:
        value = row.get(column)
        if isinstance(value, list) and value and isinstance(value[-1], dict):
            value = content_to_text(value[-1].get("content"))
        if isinstance(value, (str, int, float)) and str(value).strip():
            return str(value)
    return None


def reference(row: dict) -> str | None:
    """The bare reference answer (``answer``/``solution``/``reference``), tried when there is no gold reply."""
    value = next((row[c] for c in REFERENCE_COLUMNS if row.get(c) not in (None, "")), None)
    return None if value is None or isinstance(value, (list, dict)) else str(value).strip()


def gold_or_reference(row: dict) -> str | None:
    return gold(row) or reference(row)


answer_match = make_exact_match_reward(column="answer", name="answer_match")
REWARDS = RewardSet("trl", ((answer_match, 1.0),), correctness="answer_match")
PROBES = tuple(answer_probes(lambda row: reference(row) or "", gold_or_reference))

RECIPE = Recipe(
    name="trl",
    description="TRL-format data as it is: a prompt column (text or messages), every other column to the rewards",
    system_prompt="",
    rows=rows,
    rewards=REWARDS,
    gold=gold,
    reference=reference,
    probes=PROBES,
    required=("prompt",),
)
