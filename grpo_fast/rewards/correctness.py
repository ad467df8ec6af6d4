"""Correctness rewards: does the completion's answer match the gold column?

Plain rewards read the ``answer`` column; factories (``make_*``) take ``column=`` and tolerances so parameters
never collide with dataset columns passed as keyword arguments by TRL.
"""

from __future__ import annotations

import functools
import json
import math
import re
from types import SimpleNamespace
from typing import Any

from rapidfuzz import fuzz

from grpo_fast.rewards.answers import (
    MAX_ANSWER_CHARS,
    extract_answer_or_text,
    extract_final_answer,
    extract_tag,
    last_boxed,
    last_number,
    normalize_answer,
    normalize_text,
    parse_number,
)
from grpo_fast.rewards.base import against_column, blank, bound, factory

# ---------------------------------------------------------------------------------------------- exact match


@factory
def make_exact_match_reward(column: str = "answer", name: str = "exact_match") -> Any:
    """Exact match after normalisation (case, whitespace, punctuation, thousands separators, ``$``)."""
    return bound(_exact_match, column, name, "correctness")


def _exact_match(column: str, /, prompts: Any = None, completions: Any = None,
        **kwargs: Any) -> list[float | None]:
    def score(text: str, gold: Any) -> float:
        return 1.0 if normalize_text(extract_answer_or_text(text)) == normalize_text(gold) else 0.0

    return against_column(completions, kwargs, column, score, answers=True)


# ---------------------------------------------------------------------------------------------- fuzzy match


@factory
def make_fuzzy_match_reward(column: str = "answer", min_score: float = 0.0, name: str = "fuzzy_match") -> Any:
    """Similarity in [0, 1] of the extracted answer to the gold (rapidfuzz ratio on normalised text).

    A full ratio, not a partial one: a completion that pastes the whole context must not score as an answer.
    Scores below ``min_score`` become 0 so near-misses do not earn a gradient toward noise.
    """
    return bound(_fuzzy_match, SimpleNamespace(column=column, min_score=min_score), name, "correctness")


def _fuzzy_match(cfg: SimpleNamespace, /, prompts: Any = None, completions: Any = None,
        **kwargs: Any) -> list[float | None]:
    def score(text: str, gold: Any) -> float:
        raw = extract_answer_or_text(text)[: MAX_ANSWER_CHARS * 4]
        pred = normalize_answer(raw)
        refs = gold if isinstance(gold, (list, tuple)) else [gold]  # SQuAD: several acceptable answers
        best = max((_similarity(raw, pred, r) for r in refs if not blank(r)), default=0.0)
        return best if best >= cfg.min_score else 0.0

    return against_column(completions, kwargs, cfg.column, score, answers=True)


def _similarity(raw: str, pred: str, ref: Any) -> float:
    """Fuzzy ratio; but a numeric gold needs the same number (1890 is not 75% of 1889)."""
    gold_num = parse_number(ref)
    if gold_num is not None:
        p = parse_number(raw)
        if p is None:
            p = parse_number(last_number(raw)) if len(raw.split()) <= 12 else None
        return 1.0 if p is not None and math.isclose(p, gold_num, rel_tol=1e-9, abs_tol=1e-12) else 0.0
    return fuzz.ratio(pred, normalize_answer(ref)) / 100.0


# ---------------------------------------------------------------------------------------------- numeric match


@factory
def make_numeric_match_reward(
    column: str = "answer", rel_tol: float = 1e-6, abs_tol: float = 1e-9, name: str = "numeric_match"
) -> Any:
    """1.0 when the final number equals the gold within tolerance (fractions, %, commas, units handled);
    None when the gold is not a number."""
    return bound(_numeric_match, SimpleNamespace(column=column, rel_tol=rel_tol, abs_tol=abs_tol), name,
                 "correctness")


def _numeric_match(cfg: SimpleNamespace, /, prompts: Any = None, completions: Any = None,
        **kwargs: Any) -> list[float | None]:
    def score(text: str, gold: Any) -> float | None:
        g = parse_number(_gsm8k_gold(gold))
        if g is None:
            return None
        p = parse_number(extract_final_answer(text))
        return 1.0 if p is not None and math.isclose(p, g, rel_tol=cfg.rel_tol, abs_tol=cfg.abs_tol) else 0.0

    return against_column(completions, kwargs, cfg.column, score, answers=True)


def _gsm8k_gold(gold: Any) -> Any:
    """GSM8K gold columns sometimes keep the worked solution: take what follows ``####``."""
    if isinstance(gold, str) and "####" in gold:
        return gold.rsplit("####", 1)[1].strip()
    return gold


# ------------------------------------------------------------------------------------------ multiple choice

_CHOICE_PATTERNS = [
    re.compile(r"(?:answer|choice|option)\s*(?:is|:)?\s*\(?\*{0,2}([A-J])\b\)?", re.IGNORECASE),
    re.compile(r"^\s*\(?([A-J])[\).:]?\s*$", re.IGNORECASE),
    re.compile(r"^\s*\(?([A-J])[\).:]\s"),
]


_HEDGE = re.compile(r"\b[A-J]\)?\s*(?:or|and|/|,)\s*\(?[A-J]\b")


def extract_choice(text: str) -> str | None:
    """The chosen letter: ``<answer>``/``\\boxed{}`` content, else 'answer is X', else a lone letter."""
    inner = extract_tag(text, "answer")
    if inner is None:
        inner = last_boxed(text)
    candidates = [inner] if inner is not None else [text[-2_000:]]
    for cand in candidates:
        cand = cand.strip()
        if _HEDGE.search(cand):
            return None
        for pattern in _CHOICE_PATTERNS:
            matches = pattern.findall(cand)
            if matches:
                letters = {m.upper() for m in matches}
                return matches[-1].upper() if len(letters) == 1 else None  # several letters = hedging
    return None


@factory
def make_multiple_choice_reward(column: str = "answer", name: str = "multiple_choice") -> Any:
    """1.0 when the chosen letter equals the gold letter (gold may be 'B', '(B)', or an index 1 → 'B')."""
    return bound(_multiple_choice, column, name, "correctness")


def _multiple_choice(column: str, /, prompts: Any = None, completions: Any = None,
        **kwargs: Any) -> list[float | None]:
    def score(text: str, gold: Any) -> float | None:
        g = _gold_letter(gold)
        return None if g is None else (1.0 if extract_choice(text) == g else 0.0)

    return against_column(completions, kwargs, column, score, answers=True)


def _gold_letter(gold: Any) -> str | None:
    if isinstance(gold, bool) or gold is None:
        return None
    if isinstance(gold, int):
        return "ABCDEFGHIJ"[gold] if 0 <= gold < 10 else None
    m = re.fullmatch(r"\s*\(?([A-Ja-j])\)?\.?\s*", str(gold))
    return m.group(1).upper() if m else None


# ---------------------------------------------------------------------------------------------- JSON field


def extract_json(text: str) -> Any:
    """The JSON value in a completion: whole text, else a ```json fence, else outermost ``{…}``; or raise."""
    stripped = text.strip()
    candidates = [stripped]
    fence = re.search(r"```(?:json)?\s*\n(.*?)```", stripped, re.DOTALL)
    if fence:
        candidates.append(fence.group(1))
    start, end = stripped.find("{"), stripped.rfind("}")
    if 0 <= start < end:
        candidates.append(stripped[start : end + 1])
    for cand in candidates:
        try:
            return json.loads(cand)
        except (json.JSONDecodeError, RecursionError):
            continue
    raise ValueError("no JSON found")


def _get_path(obj: Any, path: str) -> Any:
    for key in path.split(".") if path else []:
        if isinstance(obj, dict) and key in obj:
            obj = obj[key]
        elif isinstance(obj, list) and key.isdigit() and int(key) < len(obj):
            obj = obj[int(key)]
        else:
            raise KeyError(path)
    return obj


@factory
def make_json_field_match_reward(field: str, column: str = "answer", name: str | None = None) -> Any:
    """1.0 when JSON field ``field`` (dotted path) in the completion equals the gold (normalised compare)."""
    return bound(_json_field_match, SimpleNamespace(field=field, column=column), name or f"json_field_match_{field}",
                 "correctness")


def _json_field_match(cfg: SimpleNamespace, /, prompts: Any = None, completions: Any = None,
        **kwargs: Any) -> list[float | None]:
    def score(text: str, gold: Any) -> float:
        try:
            value = _get_path(extract_json(text), cfg.field)
        except (ValueError, KeyError):
            return 0.0
        return 1.0 if _json_equal(value, gold) else 0.0

    return against_column(completions, kwargs, cfg.column, score, answers=True)


def _json_equal(value: Any, gold: Any) -> bool:
    if value == gold:
        return True
    a, b = parse_number(value) if not isinstance(value, (dict, list)) else None, parse_number(gold)
    if a is not None and b is not None:
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return normalize_text(json.dumps(value) if isinstance(value, (dict, list)) else value) == normalize_text(
        gold
    )


exact_match_reward = make_exact_match_reward()
fuzzy_match_reward = make_fuzzy_match_reward()
numeric_match_reward = make_numeric_match_reward()
multiple_choice_reward = make_multiple_choice_reward()


# ---------------------------------------------------------------------------------------------- ROUGE


@factory
def make_rouge_reward(column: str = "summary", kind: str = "rougeL", name: str | None = None) -> Any:
    """ROUGE F1 (rouge-score, stemmed) of the completion against the reference summary column."""
    return bound(_rouge, SimpleNamespace(column=column, kind=kind), name or f"rouge_{kind[5:].lower()}",
                 "correctness")


@functools.cache
def _rouge_scorer(kind: str) -> Any:
    """rouge-score loads when a summarization run scores, not when the presets are defined."""
    from rouge_score import rouge_scorer


    return rouge_scorer.RougeScorer([kind], use_stemmer=True)


def _rouge(cfg: SimpleNamespace, /, prompts: Any = None, completions: Any = None,
        **kwargs: Any) -> list[float | None]:
    def score(text: str, ref: Any) -> float:
        return float(_rouge_scorer(cfg.kind).score(str(ref), text[:50_000])[cfg.kind].fmeasure) if text.strip() else 0.0

    return against_column(completions, kwargs, cfg.column, score, answers=True)
