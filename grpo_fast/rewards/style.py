"""Style rewards: reasoning structure, grounding in the given context, repetition, language, faithfulness.

These shape *how* a model answers; keep their weights small next to correctness so they cannot dominate.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from types import SimpleNamespace
from typing import Any

from grpo_fast.rewards.answers import extract_tag, ngrams, normalize_answer, words
from grpo_fast.rewards.base import against_column, bound, completion_texts, factory, prompt_text, reward_meta
from grpo_fast.rewards.base import column as get_column

_STEP_RE = re.compile(
    r"(?im)^\s*(?:step\s*\d+\s*[:.)-]|\d+[.)]\s|[-*•]\s)|\b(?:first|second|third|next|then|finally|therefore|thus)\b[,:]"
)


@reward_meta("style", 0.0, 1.0)
def reasoning_steps_reward(prompts: Any, completions: Any, **kwargs: Any) -> list[float]:
    """min(1, steps / 3): counts 'Step n:', numbered/bulleted lines and transition words in the reasoning.

    Steps must come with substance (≥ 2 words per step on average besides the markers), so a bare list of
    markers ("First, Second, Next,", "Step 1: a") earns nothing while a short real step ("First, we do this.")
    earns its third.
    """
    out = []
    for text in completion_texts(completions):
        body = (extract_tag(text, "reasoning") or extract_tag(text, "think") or text)[:50_000]
        steps = len(_STEP_RE.findall(body))
        if steps and len(words(_STEP_RE.sub(" ", body))) < 2 * steps:
            steps = 0
        out.append(min(1.0, steps / 3))
    return out


_QUOTE_RE = re.compile(r"\"([^\"\n]{3,400})\"|“([^”\n]{3,400})”|«([^»\n]{3,400})»")


@factory
def make_citation_reward(
    column: str = "context",
    source_column: str = "source",
    min_words: int = 3,
    max_words: int = 40,
    name: str = "citation",
) -> Any:
    """Grounding: share of quoted spans (3–40 words) that occur verbatim in the context, or 1.0 if the
    source's name is cited; 0 with no citation. Long quotes earn nothing (pasting is not citing).
    None when the row has neither context nor source.
    """
    cfg = SimpleNamespace(column=column, source_column=source_column, min_words=min_words, max_words=max_words)
    return bound(_citation, cfg, name, "style")


def _citation(cfg: SimpleNamespace, /, prompts: Any = None, completions: Any = None,
              **kwargs: Any) -> list[float | None]:
    texts = completion_texts(completions)
    contexts = get_column(kwargs, cfg.column, len(texts))
    sources = get_column(kwargs, cfg.source_column, len(texts))
    out: list[float | None] = []
    for text, ctx, src in zip(texts, contexts, sources):
        if not ctx and not src:
            out.append(None)
            continue
        ctx_norm = normalize_answer(ctx) if ctx else ""
        quotes = [next(g for g in m if g) for m in _QUOTE_RE.findall(text[:20_000])]
        quotes = [q for q in quotes if cfg.min_words <= len(q.split()) <= cfg.max_words]
        found = sum(1 for q in quotes if ctx_norm and normalize_answer(q) in ctx_norm)
        score = found / len(quotes) if quotes else 0.0
        if src and found == len(quotes) and _cites_source(text, str(src)):
            score = 1.0  # names the source and quotes nothing it does not contain
        out.append(score)
    return out


def _cites_source(text: str, source: str) -> bool:
    source = source.strip()
    if not source or len(source) > 200:
        return False
    return f"[{source}]" in text or f"({source})" in text or f"source: {source}".lower() in text.lower()


@factory
def make_repetition_penalty(
    ngram_size: int = 3, max_penalty: float = -1.0, name: str = "repetition_penalty"
) -> Any:
    """Penalty ∝ share of repeated n-grams: 0 if all unique, ``max_penalty`` for one n-gram repeated.

    Words are split on spaces, and each character of a script written without spaces (Chinese, Japanese, Thai,
    Lao, Khmer, Myanmar, Tibetan) is a word of its own, so a repeated Chinese sentence is penalised too.
    """
    if max_penalty > 0:
        raise ValueError("max_penalty must be <= 0")
    if ngram_size < 1:
        raise ValueError("ngram_size must be >= 1")
    return bound(_repetition, SimpleNamespace(ngram_size=ngram_size, max_penalty=max_penalty), name, "style",
                 max_penalty, 0.0)


_UNSPACED = "\u0e00-\u0eff\u0f00-\u0fff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(f"[{_UNSPACED}]|[^\\s{_UNSPACED}]+")


def repetition_tokens(text: str) -> list[str]:
    """Lowercased words; a character of an unspaced script is one word."""
    return _TOKEN.findall(text[:200_000].lower())[:20_000]


def _repetition(cfg: SimpleNamespace, /, prompts: Any = None, completions: Any = None, **kwargs: Any) -> list[float]:
    out = []
    for text in completion_texts(completions):
        grams = ngrams(repetition_tokens(text), cfg.ngram_size)
        out.append(cfg.max_penalty * (1.0 - len(set(grams)) / len(grams)) if grams else 0.0)
    return out


def char_script(ch: str) -> str | None:
    """Coarse Unicode script of a letter (LATIN, CYRILLIC, CJK, HANGUL, ARABIC…), None for non-letters."""
    if not ch.isalpha():
        return None
    try:
        first = unicodedata.name(ch).split()[0]
    except ValueError:
        return None
    return {"HIRAGANA": "CJK", "KATAKANA": "CJK", "IDEOGRAPHIC": "CJK"}.get(first, first)


def dominant_script(text: str) -> str | None:
    counts = Counter(s for s in map(char_script, text[:20_000]) if s)
    return counts.most_common(1)[0][0] if counts else None


@reward_meta("style", 0.0, 1.0)
def language_consistency_reward(prompts: Any, completions: Any, **kwargs: Any) -> list[float | None]:
    """Share of the completion's letters written in the prompt's dominant script (catches language drift).

    None when the prompt has no letters; 0 for a completion without letters.
    """
    texts = completion_texts(completions)
    prompt_list = list(prompts) if prompts is not None else [None] * len(texts)
    out: list[float | None] = []
    for text, prompt in zip(texts, prompt_list):
        script = dominant_script(prompt_text(prompt))
        if script is None:
            out.append(None)
            continue
        scripts = [s for s in map(char_script, text[:20_000]) if s]
        out.append(sum(1 for s in scripts if s == script) / len(scripts) if scripts else 0.0)
    return out


@factory
def make_faithfulness_reward(
    column: str = "document", ngram_size: int = 3, max_ratio: float = 0.6, name: str = "faithfulness"
) -> Any:
    """Hallucination proxy: share of the summary's n-grams that occur in the source document.

    A "summary" longer than ``max_ratio`` × the document scores 0: copying is not summarising.
    """
    return bound(_faithfulness, SimpleNamespace(column=column, ngram_size=ngram_size, max_ratio=max_ratio), name,
                 "style")


def _faithfulness(cfg: SimpleNamespace, /, prompts: Any = None, completions: Any = None,
                  **kwargs: Any) -> list[float | None]:
    def score(text: str, doc: Any) -> float:
        doc_toks = normalize_answer(doc).split()
        toks = normalize_answer(text[:50_000]).split()
        grams = ngrams(toks, cfg.ngram_size)
        if not grams or len(toks) > cfg.max_ratio * len(doc_toks):
            return 0.0
        source = set(ngrams(doc_toks, cfg.ngram_size))
        return sum(1 for g in grams if g in source) / len(grams)

    return against_column(completions, kwargs, cfg.column, score)


repetition_penalty_reward = make_repetition_penalty()
