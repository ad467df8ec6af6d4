"""Shared helpers for reward functions: text access, column access, naming, number parsing (the answer
extractors live in ``answers`` and are re-exported here).

Every reward here follows TRL's contract: ``fn(prompts, completions, completion_ids=None, **columns)``
returns one ``float`` (or ``None`` = not applicable) per completion. Completions are plain strings or chat
messages; :func:`completion_text` hides the difference so reward bodies only ever see ``str``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

# the answer extractors, re-exported: rewards import them from here
from grpo_fast.rewards.answers import MAX_ANSWER_CHARS as MAX_ANSWER_CHARS
from grpo_fast.rewards.answers import count_tag as count_tag
from grpo_fast.rewards.answers import extract_answer_or_text as extract_answer_or_text
from grpo_fast.rewards.answers import extract_final_answer as extract_final_answer
from grpo_fast.rewards.answers import extract_tag as extract_tag
from grpo_fast.rewards.answers import hedged_boxes as hedged_boxes
from grpo_fast.rewards.answers import last_boxed as last_boxed
from grpo_fast.rewards.answers import last_number as last_number

RewardFunc = Callable[..., list[float | None]]


# ------------------------------------------------------------------------------------------ naming / registry


def named(fn: Callable, name: str, **attrs: Any) -> Callable:
    """Give a produced reward a stable ``__name__`` (TRL logs rewards by it) plus metadata attributes."""
    fn.__name__ = name
    fn.__qualname__ = name
    for key, value in attrs.items():
        setattr(fn, key, value)
    return fn


class Bound:
    """A factory's reward: a module-level ``score(settings, prompts, completions, **columns)`` and its settings.

    A closure cannot be pickled, and TRL's async trainer and reward worker processes pickle rewards; this object
    can (it holds a module-level function and plain settings). Not a ``functools.partial``: TRL names a partial
    after the function it wraps, and rewards are logged by their own ``__name__``. The settings are bound
    positionally, so no parameter can collide with a dataset column.
    """

    def __init__(self, score: Callable, settings: Any, name: str, kind: str, low: float, high: float):
        self.score, self.settings = score, settings
        self.__name__ = self.__qualname__ = name
        self.reward_kind, self.reward_range = kind, (low, high)

    def __call__(self, /, prompts: Any = None, completions: Any = None, **columns: Any) -> list[float | None]:
        return self.score(self.settings, prompts, completions, **columns)

    def __repr__(self) -> str:
        return f"<reward {self.__name__}>"


def bound(score: Callable, settings: Any, name: str, kind: str, low: float = 0.0, high: float = 1.0) -> Bound:
    """``Bound`` reward ``name`` of ``kind`` scoring in [low, high]."""
    return Bound(score, settings, name, kind, low, high)


def reward_meta(kind: str, low: float = 0.0, high: float = 1.0) -> Callable[[Callable], Callable]:
    """Decorator recording a reward's kind (correctness/format/length/style) and its score range."""

    def deco(fn: Callable) -> Callable:
        fn.reward_kind = kind
        fn.reward_range = (low, high)
        return fn

    return deco


def factory(fn: Callable) -> Callable:
    """Mark a function as a reward *factory* so the registry calls it with parameters instead of scoring."""
    fn.is_reward_factory = True
    return fn


# ---------------------------------------------------------------------------------------------- text access


def content_to_text(content: Any) -> str:
    """Message ``content`` may be a string or a list of typed parts (``{"type": "text", "text": ...}``)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict):
                parts.append(str(part.get("text") or part.get("content") or ""))
            elif isinstance(part, str):
                parts.append(part)
        return "".join(parts)
    return str(content)


def _messages_text(value: Any, keep: Callable[[dict], bool], all_if_none: bool) -> str:
    """A string, one message, or the kept messages of a chat list joined by newlines."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return content_to_text(value.get("content"))
    if isinstance(value, Sequence):
        msgs = [m for m in value if isinstance(m, dict)]
        kept = [m for m in msgs if keep(m)]
        return "\n".join(content_to_text(m.get("content")) for m in (kept or (msgs if all_if_none else [])))
    return str(value)


def completion_text(completion: Any) -> str:
    """Text of one completion: a plain string, or the assistant messages of a chat completion joined."""
    return _messages_text(completion, lambda m: m.get("role", "assistant") == "assistant", all_if_none=True)


def transcript(completion: Any) -> str:
    """A completion as a reader should see it (samples, reports): with its tool calls and the tools' replies
    in brackets when it is a tool conversation, else ``completion_text``."""
    if isinstance(completion, str) or not isinstance(completion, Sequence):
        return completion_text(completion)
    messages = [m for m in completion if isinstance(m, dict)]
    if not any(m.get("tool_calls") or m.get("role") == "tool" for m in messages):
        return completion_text(completion)
    lines = []
    for m in messages:
        for call in m.get("tool_calls") or []:
            fn = call.get("function", call)
            arguments = fn.get("arguments")
            shown = (", ".join(f"{k}={v!r}" for k, v in arguments.items()) if isinstance(arguments, dict)
                     else repr(arguments))
            lines.append(f"[call {fn.get('name')}({shown})]")
        if m.get("role") == "tool":
            lines.append(f"[{m.get('name', 'tool')} -> {content_to_text(m.get('content')).strip()[:300]}]")
        elif text := content_to_text(m.get("content")).strip():
            lines.append(text)
    return "\n".join(lines)


def completion_texts(completions: Sequence[Any] | None) -> list[str]:
    return [completion_text(c) for c in (completions or [])]


def prompt_text(prompt: Any) -> str:
    """Text of a prompt: a string, or the non-assistant messages of a chat prompt joined by newlines."""
    return _messages_text(prompt, lambda m: m.get("role") != "assistant", all_if_none=False)


def user_text(prompt: Any) -> str:
    """The last user message of a chat prompt (the question itself, without the system prompt)."""
    if isinstance(prompt, Sequence) and not isinstance(prompt, str):
        users = [m for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
        if users:
            return content_to_text(users[-1].get("content"))
    return prompt_text(prompt)


def column(kwargs: dict[str, Any], name: str, n: int) -> list[Any]:
    """A dataset column as a list of length ``n`` (all ``None`` when the column is absent)."""
    values = kwargs.get(name)
    if values is None:
        return [None] * n
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        return [values] * n
    values = list(values)
    if len(values) != n:
        raise ValueError(f"column {name!r} has {len(values)} values for {n} completions")
    return values


def as_completion(text: str | list[dict], prompt: Any) -> Any:
    """A completion in the shape TRL gives rewards for this prompt: chat messages for a chat prompt, else text.
    A list of messages (a tool conversation's assistant and tool turns) is already that shape."""
    if isinstance(text, list):
        return text
    return [{"role": "assistant", "content": text}] if isinstance(prompt, list) else text


def score_rows(fn: RewardFunc, rows: Sequence[dict[str, Any]], texts: Sequence[str | list[dict]]
               ) -> list[float | None]:
    """Score completion ``texts`` for dataset ``rows`` the way TRL calls a reward: prompts, completions (chat or
    plain, as the prompt is), completion_ids, and every other column as a keyword argument."""
    rows = list(rows)
    keys = sorted(set().union(*(r.keys() for r in rows)) - {"prompt", "completion"}) if rows else []
    columns: dict[str, Any] = {k: [r.get(k) for r in rows] for k in keys}
    columns.update(trainer_state=None, log_extra=lambda *a, **k: None, log_metric=lambda *a, **k: None)
    prompts = [r.get("prompt") for r in rows]
    completions = [as_completion(t, p) for t, p in zip(texts, prompts)]
    ids = [list(range(len(completion_text(t).split()))) for t in texts]
    scores = list(fn(prompts=prompts, completions=completions, completion_ids=ids, **columns))
    if len(scores) != len(texts):
        raise ValueError(f"returned {len(scores)} scores for {len(texts)} completions")
    return scores


def blank(value: Any) -> bool:
    """A dataset cell with nothing in it (None or whitespace): the row has no reference for the reward."""
    return value is None or (isinstance(value, str) and not value.strip())


def against_column(completions: Any, kwargs: dict[str, Any], name: str,
                   score: Callable[[str, Any], float | None], answers: bool = False) -> list[float | None]:
    """``score(text, reference)`` for each completion and its row's ``name`` column; a blank reference makes
    the row not applicable (None), which TRL skips. ``answers``: score what follows the thinking
    (``answer_texts``), as every correctness reward does."""
    texts = answer_texts(completions) if answers else completion_texts(completions)
    return [None if blank(ref) else score(t, ref) for t, ref in zip(texts, column(kwargs, name, len(texts)))]


# ---------------------------------------------------------------------------------------------- thinking

THINK_TAGS = ("<think>", "</think>")
"""The tags a thinking model wraps its reasoning in (Qwen3, DeepSeek-R1, SmolLM3); ``thinking_tags`` changes them."""


def after_thinking(text: str, tags: Sequence[str] = THINK_TAGS, opened: bool = False) -> str:
    """The part of a completion a correctness reward judges: what follows the last closing tag.

    Thinking left open -- the opening tag without a close (or after the last close), or no close at all when the
    chat template opened the tag in the prompt (``opened``) -- gives "": the model has not answered yet, so
    nothing it weighed while thinking can score (the commonest failure of a thinking model cut at
    max_completion_length). A completion with no tags at all, from a model that does not think, is judged whole.
    """
    start, close = tags
    end = text.rfind(close)
    if end >= 0:
        rest = text[end + len(close):]
        return "" if start in rest else rest  # thinking opened again and left open
    return "" if opened or start in text else text


def answer_texts(completions: Sequence[Any] | None, tags: Sequence[str] = THINK_TAGS,
                 opened: bool = False) -> list[str]:
    """``after_thinking`` of each completion's text."""
    return [after_thinking(completion_text(c), tags, opened) for c in (completions or [])]


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
