"""Grounded question answering: SQuAD-style reading comprehension and a custom CSV knowledge base (``QA_REWARDS``).

SQuAD rows (``question``, ``context``, ``answers: {text: [...]}``, ``title``) and knowledge-base rows
(``question``, ``answer``, ``source`` and/or ``context``) map to one shape: a prompt that shows the source and
context, every acceptable answer in ``answer`` (a list; fuzzy match takes the best), and ``context``/``source``
for the citation reward. Offline default: the shipped knowledge-base CSV plus the SQuAD-style sample.
"""

from __future__ import annotations

import re

from grpo_fast.config import RunConfig
from grpo_fast.recipes import Recipe
from grpo_fast.recipes.common import Missing, chat, load, map_rows, need, text
from grpo_fast.rewards import QA_REWARDS as PRESET
from grpo_fast.rewards.check import answer_probes

SYSTEM_PROMPT = (
    "Answer the question using the source and context given. Support the answer with a short quote from the "
    'context in double quotes, or cite the source in square brackets like [handbook]. Then give the final answer, '
    "as short as possible, inside <answer></answer> tags."
)
SAMPLES = ("kb_sample.csv", "squad_sample.jsonl")
HINT = "'question', 'answer' (or SQuAD 'answers'), and 'context' and/or 'source'"


def gold_answers(raw: dict) -> list[str] | None:
    """Acceptable answers: SQuAD's ``answers.text`` list, else ``answer`` (text or list). None: unanswerable."""
    if "answers" in raw and raw["answers"] is not None:
        answers = raw["answers"]
        texts = answers.get("text") if isinstance(answers, dict) else answers
        if not isinstance(texts, list):
            raise Missing(["answers"], "must be {text: [...]} or a list of answers")
        texts = [str(t).strip() for t in texts if str(t).strip()]
        return list(dict.fromkeys(texts)) or None  # SQuAD v2: no answer -> skip the row
    answer = need(raw, "answer", "answers")
    answers = answer if isinstance(answer, list) else [answer]
    return [str(a).strip() for a in answers if str(a).strip()] or None


def map_row(raw: dict) -> dict | None:
    """SQuAD or knowledge-base row -> prompt + ``answer`` list + ``context`` + ``source``; None skips it."""
    question = text(raw, "question")
    answers = gold_answers(raw)
    context = str(raw.get("context") or "").strip()
    source = str(raw.get("source") or raw.get("title") or "").strip()
    if not context and not source:
        raise Missing(["context", "source"], "missing (the answer needs something to cite)",
                      "add a 'context' column with the passage, or a 'source' column naming the document")
    if answers is None:
        return None
    # "Document:", not "Source:": the citation reward accepts "source: <name>", so an echoed prompt would cite.
    parts = [f"Document: {source}" if source else "", f"Context: {context}" if context else "", f"Question: {question}"]
    user = "\n".join(p for p in parts if p)
    return {"prompt": chat(SYSTEM_PROMPT, user), "answer": answers, "context": context, "source": source}


def rows(cfg: RunConfig) -> list[dict]:
    return [r for r in map_rows(load(cfg, SAMPLES), map_row, HINT) if r is not None]


def first_answer(row: dict) -> str:
    answers = row.get("answer")
    if isinstance(answers, (list, tuple)):
        return str(answers[0]) if answers else ""
    return "" if answers is None else str(answers)


def quote_for(context: str, answer: str) -> str:
    """A 3-40 word sentence of the context, preferably one containing the answer."""
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", context) if s.strip()]
    good = [s for s in sentences if 3 <= len(s.split()) <= 40]
    with_answer = [s for s in good if answer and answer.lower() in s.lower()]
    pick = (with_answer or good or [" ".join(context.split()[:12])])[0]
    return pick.replace('"', "'")


def gold(row: dict) -> str | None:
    """A quote from the context, the source cited, and the answer in tags, as the system prompt asks."""
    answer = first_answer(row)
    if not answer:
        return None
    parts = []
    if row.get("context"):
        parts.append(f'The context says "{quote_for(str(row["context"]), answer)}"')
    if row.get("source"):
        parts.append(f"[{row['source']}]")
    return (" ".join(parts) + f"\n<answer>{answer}</answer>").strip()


RECIPE = Recipe(
    name="qa",
    description="grounded QA (SQuAD style or a CSV knowledge base): fuzzy answer match, citation, short replies",
    system_prompt=SYSTEM_PROMPT,
    rows=rows,
    rewards=PRESET,
    gold=gold,
    probes=tuple(answer_probes(first_answer, gold,
                               hedge="{answer} or maybe {wrong} or perhaps none of these or all of them")),
    required=("prompt", "answer"),
    # Only what the task needs: learning rate, group size, batch and checkpoints come from the kit or profile.
    defaults={
        "max_completion_length": 256,
        "max_seq_length": 1024,
    },
)
