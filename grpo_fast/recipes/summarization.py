"""News summarization: CNN/DailyMail (``article``/``highlights``) or XSum (``document``/``summary``) rows, graded
by ROUGE-L against the reference plus length, faithfulness and repetition terms (``SUMMARIZATION_REWARDS``).

Every layout maps to ``document`` + ``summary``, the columns the preset reads. CNN/DailyMail highlights are one
sentence per line; they are joined into one paragraph. Offline default: the shipped CNN/DailyMail-style sample.
"""

from __future__ import annotations

from grpo_fast.config import RunConfig
from grpo_fast.recipes import Recipe
from grpo_fast.recipes.common import chat, load, map_rows, text
from grpo_fast.rewards import SUMMARIZATION_REWARDS as PRESET

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


def rows(cfg: RunConfig) -> list[dict]:
    return map_rows(load(cfg, SAMPLES), map_row, HINT)


RECIPE = Recipe(
    name="summarization",
    description="news summarization (CNN/DailyMail or XSum style): ROUGE-L, length, faithfulness, no repetition",
    system_prompt=SYSTEM_PROMPT,
    rows=rows,
    rewards=PRESET,
    gold=lambda row: str(row["summary"]) if row.get("summary") else None,
    probes=(("wrong_answer", "correctness",
             lambda row: "This text talks about zebras crossing a river at dawn while a band plays jazz."),),
    metric="score",  # ROUGE-L is graded: a greedy summary never reaches 1.0, its mean is the measure
    required=("prompt", "document", "summary"),
    # Only what the task needs: learning rate, group size, batch and checkpoints come from the kit or profile.
    defaults={
        "max_completion_length": 256,
        "max_prompt_tokens": 1536,
        "max_seq_length": 2048,
    },
)
