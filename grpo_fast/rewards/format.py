"""Format rewards: is the completion shaped the way the trainer asked (tags, JSON, code)?

Tag rewards insist on each tag appearing exactly once, so stuffing tags earns nothing.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from types import SimpleNamespace
from typing import Any

import jsonschema

from grpo_fast.rewards.base import bound, completion_texts, factory, reward_meta
from grpo_fast.rewards.base import column as get_column
from grpo_fast.rewards.correctness import extract_json

_STRICT_XML = re.compile(
    r"\A<reasoning>\n(?:(?!</?reasoning>|</?answer>).)+?\n</reasoning>\n<answer>\n"
    r"(?:(?!</?reasoning>|</?answer>).)+?\n</answer>\n?\Z",
    re.DOTALL,
)
_SOFT_XML = re.compile(r"<reasoning>(.+?)</reasoning>\s*<answer>(.+?)</answer>", re.DOTALL)
_THINK_FIRST = re.compile(r"\A\s*<think>(.*?)</think>(.*)\Z", re.DOTALL)
_THINK_ANSWER = re.compile(r"\A\s*<think>(.+?)</think>\s*<answer>(.+?)</answer>\s*\Z", re.DOTALL)
_FENCE = re.compile(r"```[ \t]*([\w+#.-]*)[ \t]*\n(.*?)```", re.DOTALL)


def _tags_once(text: str, *tags: str) -> bool:
    return all(text.count(f"<{t}>") == 1 and text.count(f"</{t}>") == 1 for t in tags)


def _real(content: str) -> bool:
    """Tag content that says something: not empty and not a placeholder like '...' copied from the prompt."""
    return bool(content.strip().strip(".…").strip())


def _tag_pair(text: str, pattern: re.Pattern, first: str, second: str) -> float:
    """1.0 when ``pattern`` finds the two tags, each exactly once, both with real content."""
    m = pattern.search(text) if _tags_once(text, first, second) else None
    return 1.0 if m and _real(m.group(1)) and _real(m.group(2)) else 0.0


@reward_meta("format", 0.0, 1.0)
def strict_xml_format_reward(prompts: Any, completions: Any, **kwargs: Any) -> list[float]:
    """1.0 for exactly ``<reasoning>\\n…\\n</reasoning>\\n<answer>\\n…\\n</answer>`` and nothing else."""
    return [1.0 if _STRICT_XML.match(t) else 0.0 for t in completion_texts(completions)]


@reward_meta("format", 0.0, 1.0)
def soft_xml_format_reward(prompts: Any, completions: Any, **kwargs: Any) -> list[float]:
    """1.0 for ``<reasoning>…</reasoning>`` then ``<answer>…</answer>`` (any whitespace), each tag once."""
    return [_tag_pair(t, _SOFT_XML, "reasoning", "answer") for t in completion_texts(completions)]


def count_xml(text: str) -> float:
    """Incremental XML credit: 0.25 per well-placed tag, minus 0.001 per character after ``</answer>``."""
    score = 0.0
    if text.count("<reasoning>\n") == 1:
        score += 0.25
    if text.count("\n</reasoning>\n") == 1:
        score += 0.25
    if text.count("\n<answer>\n") == 1:
        score += 0.25
    if text.count("\n</answer>") == 1:
        score += 0.25
        score -= 0.001 * len(text.split("\n</answer>")[-1].strip())
    return max(score, -1.0)


@reward_meta("format", -1.0, 1.0)
def xml_count_reward(prompts: Any, completions: Any, **kwargs: Any) -> list[float]:
    """Partial credit per tag so the model learns the format gradually (from the original GRPO recipe)."""
    return [count_xml(t) for t in completion_texts(completions)]


@reward_meta("format", 0.0, 1.0)
def think_answer_format_reward(prompts: Any, completions: Any, **kwargs: Any) -> list[float]:
    """1.0 for ``<think>…</think><answer>…</answer>`` (R1 style), each tag once, nothing around it.

    An empty think block scores 0: this reward exists to teach reasoning before answering, and an empty block
    is how a model skips the reasoning and keeps the reward. (A template that opens ``<think>`` in the prompt
    is seen with its tag put back: ``rewards.thinking``.)
    """
    return [_tag_pair(t, _THINK_ANSWER, "think", "answer") for t in completion_texts(completions)]


@reward_meta("format", 0.0, 1.0)
def think_format_reward(prompts: Any, completions: Any, **kwargs: Any) -> list[float]:
    """1.0 for a completion that opens with one ``<think>…</think>`` block (real content) and then answers.

    TRL's ``think_format_reward`` with two differences: the thinking must say something (an empty block is how a
    model skips the reasoning and keeps the reward), and an answer must follow it (a completion that only thinks
    has not answered). A template that opens ``<think>`` in the prompt gets the tag put back (``rewards.thinking``).
    """
    out = []
    for t in completion_texts(completions):
        m = _THINK_FIRST.match(t) if _tags_once(t, "think") else None
        out.append(1.0 if m and _real(m.group(1)) and m.group(2).strip() else 0.0)
    return out


@reward_meta("format", 0.0, 1.0)
def json_valid_reward(prompts: Any, completions: Any, **kwargs: Any) -> list[float]:
    """1.0 when the whole completion (or its single fenced block) parses as a JSON object or array."""
    out = []
    for t in completion_texts(completions):
        body = t.strip()
        fences = _FENCE.findall(body)
        if len(fences) == 1 and body.startswith("```") and body.endswith("```"):
            body = fences[0][1].strip()
        try:
            value = json.loads(body)
            out.append(1.0 if isinstance(value, (dict, list)) else 0.0)
        except (json.JSONDecodeError, RecursionError):
            out.append(0.0)
    return out


@factory
def make_json_schema_reward(
    schema: dict | None = None, column: str = "schema", name: str = "json_schema"
) -> Any:
    """1.0 when the completion's JSON validates against ``schema`` (or the per-row ``column``)."""
    fixed = json.dumps(schema, sort_keys=True) if schema is not None else None
    if fixed is not None:
        _validator(fixed)  # a bad schema fails here, when the run is set up
    return bound(_json_schema, SimpleNamespace(schema=fixed, column=column), name, "format")


@functools.lru_cache(maxsize=256)
def _validator(schema: str) -> Any:
    return jsonschema.Draft202012Validator(json.loads(schema))


def _json_schema(cfg: SimpleNamespace, /, prompts: Any = None, completions: Any = None,
                 **kwargs: Any) -> list[float | None]:
    texts = completion_texts(completions)
    schemas = [cfg.schema] * len(texts) if cfg.schema is not None else get_column(kwargs, cfg.column, len(texts))
    out: list[float | None] = []
    for text, row_schema in zip(texts, schemas):
        if row_schema is None:
            out.append(None)
            continue
        validator = _validator(row_schema if isinstance(row_schema, str) else json.dumps(row_schema, sort_keys=True))
        try:
            value = extract_json(text)
        except ValueError:
            out.append(0.0)
            continue
        out.append(1.0 if validator.is_valid(value) else 0.0)
    return out


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """``(language, body)`` of each fenced code block."""
    return [(lang.lower(), body) for lang, body in _FENCE.findall(text[:200_000])]


_PY_LANGS = ("", "python", "py", "python3")


def _substantive(tree: ast.Module) -> bool:
    """True when the code does something: not only ``pass``, ``...`` or bare constants."""
    return any(
        not isinstance(node, ast.Pass)
        and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
        for node in tree.body
    )


def _parse(src: str | None) -> ast.Module | None:
    try:
        return ast.parse(src) if src and len(src) < 200_000 else None
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


# Fence tags models write for a language (lowercase); any other language is its own name only.
_LANG_TAGS = {"python": _PY_LANGS[1:], "javascript": ("javascript", "js"), "typescript": ("typescript", "ts"),
              "cpp": ("cpp", "c++", "cxx"), "csharp": ("csharp", "cs", "c#"), "bash": ("bash", "sh", "shell"),
              "rust": ("rust", "rs"), "go": ("go", "golang")}


@factory
def make_code_block_reward(language: str = "python", bare: bool | None = None, name: str | None = None) -> Any:
    """1.0 for one to three fenced ``language`` blocks with real content (more = stuffing).

    ``bare`` (a fence with no language) counts by default for Python only, because the code judge
    (``code_execution``) runs an untagged block as Python: the format reward agrees with what the judge reads,
    so it never pulls against correctness. For another language no judge reads a bare fence as that language.
    """
    lang = language.strip().lower()
    tags = _LANG_TAGS.get(lang, (lang,)) + (("",) if (lang == "python" if bare is None else bare) else ())
    default = lang == "python" and bare is None
    return bound(_code_block, tags, name or ("code_block_reward" if default else f"code_block_{lang}"), "format")


def _code_block(tags: tuple[str, ...], /, prompts: Any = None, completions: Any = None, **kwargs: Any) -> list[float]:
    out = []
    for t in completion_texts(completions):
        blocks = [b for lang, b in fenced_blocks(t) if lang in tags]
        real = [b for b in blocks if b.strip() and b.strip() not in ("pass", "...")]
        out.append(1.0 if real and len(blocks) <= 3 else 0.0)
    return out


code_block_reward = make_code_block_reward()


def _python_source(text: str) -> str | None:
    blocks = [b for lang, b in fenced_blocks(text) if lang in _PY_LANGS]
    if blocks:
        return blocks[-1] if len(blocks) <= 3 else None
    return text if text.strip() else None


@reward_meta("format", 0.0, 1.0)
def python_syntax_reward(prompts: Any, completions: Any, **kwargs: Any) -> list[float]:
    """1.0 when the (last fenced, else whole) code parses with ``ast`` and does something beyond ``pass``."""
    out = []
    for t in completion_texts(completions):
        tree = _parse(_python_source(t))
        out.append(1.0 if tree is not None and _substantive(tree) else 0.0)
    return out
