"""News summarization: CNN/DailyMail (``article``/``highlights``) or XSum (``document``/``summary``) rows, graded
by ROUGE-L against the reference plus length, faithfulness and repetition terms (``SUMMARIZATION_REWARDS``).

Every layout maps to ``document`` + ``summary``, the columns the preset reads. CNN/DailyMail highlights are one
sentence per line; they are joined into one paragraph. Offline default: the shipped CNN/DailyMail-style sample.
"""

from __future__ import annotations

from typing import Any

from grpo_fast.recipes import Recipe
from grpo_fast.recipes.common import chat, load, map_rows, text
from grpo_fast.rewards import SUMMARIZATION_REWARDS as PRESET
from grpo_fast.rewards.check import gold_completion

SYSTEM_PROMPT = (
    "Summarize the article in two to four sentences. State only facts found in the article, in your own words, "
    "and do not repeat yourself."
)
SAMPLES = ("cnn_dailymail_sample.jsonl",)
HINT = "'document' + 'summary' (XSum), 'article' + 'highlights' (CNN/DailyMail) or 'text' + 'summary'"


def join_highlights(highlights: str) -> str:
    """CNN/DailyMail highlights, one per line, as one paragraph of sentences."""
    lines = [line.strip() for line in highlights.splitlines() if line.strip()]
    return " ".join(line if line[-1] in ".!?" else line + "." for line in lines)


def map_row(raw: dict) -> dict:
    """CNN/DailyMail, XSum or plain text/summary row -> prompt + ``document`` + ``summary``."""
    document = text(raw, "document", "article", "text")
    summary = join_highlights(text(raw, "summary", "highlights"))
    return {"prompt": chat(SYSTEM_PROMPT, f"Article:\n{document}"), "document": document, "summary": summary}


def rows(cfg: Any) -> list[dict]:
    return map_rows(load(cfg, SAMPLES), map_row, HINT)


RECIPE = Recipe(
    name="summarization",
    description="news summarization (CNN/DailyMail or XSum style): ROUGE-L, length, faithfulness, no repetition",
    rows=rows,
    reward_funcs=lambda: PRESET.funcs,
    reward_weights=PRESET.weights,
    correctness=PRESET.correctness,
    correctness_max=1.0,  # ROUGE-L F1 of the reference against itself
    # 2.0 x rouge_l 1 + 0.3 x relative_length 1 + 0.5 x faithfulness 1 + 0.5 x repetition_penalty 0 (a penalty)
    reward_max=2.8,
    format_reward=None,
    gold=lambda row: gold_completion(row, "summarization"),
    required=("prompt", "document", "summary"),
    # num_generations / per_device_train_batch_size come from the kit (8/8) or the profile: not pinned here.
    defaults={
        "max_completion_length": 256,
        "max_prompt_tokens": 1536,
        "max_seq_length": 2048,
        "learning_rate": 5.0e-6,
        "save_steps": 100,
        "temperature": 1.0,
    },
)
