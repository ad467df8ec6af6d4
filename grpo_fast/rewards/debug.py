"""Reward debugging: score a few samples and show what each reward actually saw (answer, code, tags)."""

from __future__ import annotations

from typing import Any

from grpo_fast.rewards.answers import extract_final_answer, extract_tag
from grpo_fast.rewards.base import RewardFunc, completion_text
from grpo_fast.rewards.code import extract_code

_TAGS = ("reasoning", "think", "answer")


def describe_completion(text: str) -> dict[str, Any]:
    """What the extractors find in one completion."""

    code = extract_code(text)
    return {
        "answer": extract_final_answer(text),
        "answer_tag": extract_tag(text, "answer"),
        "code": None if code is None else (code if len(code) < 120 else code[:117] + "..."),
        "tags": {t: text.count(f"<{t}>") for t in _TAGS if f"<{t}>" in text},
        "chars": len(text),
    }


def _as_rows(samples: Any, columns: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for i, sample in enumerate(samples):
        row = dict(sample) if isinstance(sample, dict) else {"completion": sample}
        for key, values in columns.items():
            row.setdefault(key, values[i] if isinstance(values, list) else values)
        rows.append(row)
    return rows


def debug_reward(fn: RewardFunc, samples: Any, *, show: bool = True, **columns: Any) -> list[float | None]:
    """Score ``samples`` with ``fn`` and print one line per sample with the extracted pieces.

    ``samples`` are completions (str or chat) or dict rows with ``completion``, optional ``prompt`` and gold
    columns; extra ``columns`` (``answer=[...]``) fill missing keys. Returns the scores.
    """
    rows = _as_rows(samples, columns)
    keys = sorted({k for r in rows for k in r} - {"completion", "prompt"})
    kwargs = {k: [r.get(k) for r in rows] for k in keys}
    prompts = [r.get("prompt", "") for r in rows]
    scores = fn(prompts=prompts, completions=[r["completion"] for r in rows], **kwargs)
    if show:
        name = getattr(fn, "__name__", type(fn).__name__)
        print(f"== {name} on {len(rows)} samples")
        for i, (row, score) in enumerate(zip(rows, scores)):
            text = completion_text(row["completion"])
            info = describe_completion(text)
            gold = {k: row.get(k) for k in keys}
            preview = text.replace("\n", "\\n")
            preview = preview if len(preview) <= 80 else preview[:77] + "..."
            shown = "None" if score is None else f"{score:.3f}"
            print(f"[{i}] score={shown} extracted={info['answer']!r} tags={info['tags']} gold={gold}")
            if info["code"]:
                print(f"     code={info['code']!r}")
            print(f"     completion={preview!r}")
    return scores
