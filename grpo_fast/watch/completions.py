"""How the report shows a completion: a thinking model's reasoning folded away, the answer the judge read in view.

Samples (samples.jsonl) and held-out examples (eval.json) of a thinking run carry ``thinking``, ``answer`` and
``thinking_closed`` beside ``completion`` (``rewards.thinking.folded``); others show the completion whole.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any

MARK = {True: "&#10003; right", False: "&#10007; wrong"}
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def escape(value: Any) -> str:
    """HTML-escaped text; control characters (random models emit NUL) shown as \\xNN, never raw."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", "" if value is None else str(value))
    return html.escape(text, quote=True)


def completion_html(record: dict[str, Any]) -> str:
    """The completion of a sample, an example or a reward failure; a thinking run's reasoning in a fold."""
    if "thinking" not in record:
        return f"<pre>{escape(record.get('completion'))}</pre>"
    thinking = str(record.get("thinking") or "")
    state = "" if record.get("thinking_closed", True) else ", never closed: nothing after it was judged"
    answer = str(record.get("answer") or "")
    return (f"<details><summary>thinking ({len(thinking)} characters{state})</summary>"
            f"<pre>{escape(thinking)}</pre></details>"
            + (f"<pre>{escape(answer)}</pre>" if answer else "<p class='muted'>(no answer)</p>"))


def answers_html(evaluation: dict | None, table: Callable[[list[str], list[list[str]]], str]) -> str:
    """Base and trained greedy answers side by side on the same held-out prompts; the system prompt once."""
    if not evaluation:
        return ""
    base = evaluation.get("base", {}).get("examples") or []
    trained = evaluation.get("trained", {}).get("examples") or []
    if not trained:
        return ""
    rows = [[f"<pre>{escape(t.get('prompt'))}</pre>",
             completion_html(b) + MARK.get(b.get("correct"), "") if b else "",
             completion_html(t) + MARK.get(t.get("correct"), "")]
            for b, t in zip(base + [{}] * (len(trained) - len(base)), trained)]
    system = evaluation.get("trained", {}).get("system_prompt")
    intro = f"<p>System prompt of every question:</p><pre>{escape(system)}</pre>" if system else ""
    thinking = f"<p class='muted'>{escape(evaluation['thinking'])}</p>" if evaluation.get("thinking") else ""
    return ("<h2>Base vs trained answers (greedy, held-out)</h2>" + thinking + intro
            + table(["question", "base model", "trained"], rows))
