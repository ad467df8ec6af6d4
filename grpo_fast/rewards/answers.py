"""Reading an answer out of a completion's text and normalising it for comparison: XML tags, ``\\boxed{}``,
the final number, "the answer is ...", LaTeX spans; articles, thousands separators, units and fractions. Every
extractor is linear-time on adversarial input: answers longer than ``MAX_ANSWER_CHARS`` are not parsed.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

# Extracted answers longer than this are treated as wrong without parsing: no real answer is that long,
# and capping keeps every extractor and parser linear-time on adversarial input.
MAX_ANSWER_CHARS = 2_000


def extract_tag(text: str, tag: str) -> str | None:
    """Content of the *last* ``<tag>…</tag>`` block, or None. Linear time (no backtracking regex)."""
    close = f"</{tag}>"
    end = text.rfind(close)
    if end < 0:
        return None
    start = text.rfind(f"<{tag}>", 0, end)
    if start < 0:
        return None
    return text[start + len(tag) + 2 : end].strip()


def count_tag(text: str, tag: str) -> int:
    return text.count(f"<{tag}>")


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{…}`` (or ``\\fbox{…}``) with balanced braces, or None."""
    start = max(text.rfind("\\boxed{"), text.rfind("\\fbox{"))
    if start < 0:
        return None
    i = text.index("{", start) + 1
    depth, j = 1, i
    limit = min(len(text), i + MAX_ANSWER_CHARS * 4)
    while j < limit:
        ch = text[j]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[i:j].strip()
        j += 1
    return None


def hedged_boxes(text: str) -> bool:
    """Several different ``\\boxed{}`` answers ("\\boxed{3} or \\boxed{4}"): a hedge that answers nothing (as in TRL);
    one value boxed twice, or a box in a box, is one answer."""
    values, pos = set(), 0
    while (found := _BOX.search(text, pos)) is not None:
        depth, pos = 1, found.end()
        while pos < len(text) and depth:
            depth, pos = depth + {"{": 1, "}": -1}.get(text[pos], 0), pos + 1
        value = text[found.end(): pos - 1].replace(" ", "")
        while (inner := re.fullmatch(r"\\(?:boxed|fbox)\{(.*)\}", value)) is not None:
            value = inner.group(1)
        values.add(value)
    return len(values) > 1


_BOX = re.compile(r"\\(?:boxed|fbox)\{")
_NUMBER_RE = re.compile(r"-?\$?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\$?\d+(?:\.\d+)?(?:/\d+)?%?|-?\.\d+")
_ENUMERATOR = re.compile(r"(?im)^ *(?:[-*] *)?\[? *(?:step +)?\d+[.):] +(?=\S)|\bstep +\d+\b|</?[a-z][\w-]*(?:>|$)")


def last_number(text: str) -> str | None:
    """The last number-looking token (`1,000`, `$`, `%`, `a/b`); list, step and tag numbers (`</step2>`) are not."""
    last = None
    for match in _NUMBER_RE.finditer(_ENUMERATOR.sub(" ", text[-20_000:])):
        last = match.group(0)
    return last


def extract_final_answer(text: str) -> str | None:
    """Final answer of a reasoning completion: ``<answer>`` tag, else last ``\\boxed{}``, else last number."""
    tagged = extract_tag(text, "answer")
    if tagged is not None:
        boxed = last_boxed(tagged)
        return boxed if boxed is not None else tagged
    boxed = last_boxed(text)
    if boxed is not None:
        return "" if hedged_boxes(text) else boxed
    tail = text[-20_000:].replace("\\$", "  ")  # an escaped dollar is a price sign, not a delimiter
    latex, number = next(reversed(list(_LATEX_SPAN.finditer(tail))), None), last_number(text)  # the last ones
    if latex is not None and (number is None or tail.rfind(number) < latex.end()):
        span = next(g for g in latex.groups() if g)  # "so $\\frac{1}{2}$" ends on LaTeX, not on its last digit
        return span.rsplit("=", 1)[-1].strip() or span  # "$3 \\times 4 = 12$": the equation's result
    return number


# Inline maths that is LaTeX (a command, brace or power inside) or plain arithmetic ($3/4$, $17 * 23$: digits and
# an operation, no words), not a price: $...$, \(...\), \[...\]
_ARITHMETIC = r"(?:sqrt|[\d .+\-*/^()=√×÷·!])"
_LATEX_SPAN = re.compile(r"\$([^$\n]{0,200}?[\\{^][^$\n]{0,200}?)\$|\\\((.{1,400}?)\\\)|\\\[(.{1,400}?)\\\]|"
                         rf"\$({_ARITHMETIC}{{0,200}}?[*/(√×÷·!]{_ARITHMETIC}{{0,200}}?)\$")


def extract_answer_or_text(text: str) -> str:
    """Short-answer extraction for QA/string matching: ``<answer>`` tag, else ``\\boxed{}``, else whole text.

    Several ``<answer>`` blocks count as hedging and yield "" (so stuffing candidates earns nothing).
    """
    if text.count("<answer>") > 1:
        return ""
    tagged = extract_tag(text, "answer")
    if tagged is not None:
        return tagged
    boxed = last_boxed(text)
    return boxed if boxed is not None else text.strip()


# ---------------------------------------------------------------------------------------------- normalisation

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")


def normalize_text(text: Any) -> str:
    """Normalise for exact match: case, unicode form, ``$``, thousands separators, punctuation, whitespace."""
    s = unicodedata.normalize("NFKC", "" if text is None else str(text)).lower()
    s = s.replace("$", "").replace("\\text", "").replace("\\mathrm", "")
    s = _THOUSANDS.sub("", s)
    s = "".join(" " if unicodedata.category(ch).startswith("P") and ch != "." else ch for ch in s)
    s = re.sub(r"\.(?!\d)", " ", s)  # keep decimal points, drop sentence dots
    return " ".join(s.split())


def normalize_answer(text: Any) -> str:
    """SQuAD-style normalisation (also drops articles) for fuzzy QA matching."""
    return " ".join(_ARTICLES.sub(" ", normalize_text(text)).split())


_UNIT_TAIL = re.compile(r"^\s*([-+]?[\d.,/]+(?:e[-+]?\d+)?)\s*%?\s*[a-zA-Z°µ/²³ \\{}^]*$")


def parse_number(text: Any) -> float | None:
    """Parse a plain number: ``1,234.5``, ``$12``, ``45%`` (→ 45), ``3/4``, ``-2.5e3``, ``12 cm``; else None.

    Percentages are returned as written (``45%`` → 45.0) because gold columns write them that way.
    """
    if text is None:
        return None
    s = str(text).strip()
    if not s or len(s) > 64:
        return None
    s = s.replace("\\$", "").replace("$", "").replace("\\%", "%").replace("\\!", "").strip()
    s = s.rstrip(".")
    s = s.removeprefix("+")
    match = _UNIT_TAIL.match(s)
    if not match:
        return None
    num = match.group(1)
    if "," in num:
        if not re.fullmatch(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?", num):
            return None
        num = num.replace(",", "")
    try:
        if "/" in num:
            a, b = num.split("/", 1)
            return float(Fraction(int(a), int(b)))
        return float(num)
    except (ValueError, ZeroDivisionError, OverflowError):
        return None


def words(text: str) -> list[str]:
    return text.split()


def ngrams(tokens: Sequence[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
