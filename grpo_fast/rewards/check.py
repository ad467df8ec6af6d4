"""Reward self-test: gold completions must earn full correctness; degenerate and hacking probes must not.

Run before training (``grpo-fast rewards check <preset|recipe|config>``): a reward that cannot recognise the
reference answer, or that pays for an empty string, an echo of the prompt or stuffed tags, wastes a run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from grpo_fast.rewards.base import RewardFunc, parse_number, prompt_text, user_text

KINDS = ("math", "code", "qa", "summarization")
_CODE_COLUMNS = ("canonical_solution", "code", "solution", "reference_solution")
_REASONING = (
    "Step 1: First, I restate what the question asks and list the given quantities.\n"
    "Step 2: Then, I set up the computation that connects the given values to the unknown.\n"
    "Step 3: Finally, I carry out the computation carefully and check the result."
)


@dataclass
class CheckLine:
    check: str  # "gold" or a probe name
    reward: str
    score: float | None  # worst score over rows (min for gold, max for probes)
    limit: float | None  # the score the check compares with
    ok: bool
    note: str = ""


@dataclass
class CheckReport:
    kind: str
    rewards: list[str]
    correctness: list[str]
    threshold: float
    lines: list[CheckLine] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(line.ok for line in self.lines)

    @property
    def failures(self) -> list[CheckLine]:
        return [line for line in self.lines if not line.ok]

    def table(self) -> str:
        """Plain-text table, one line per (check, reward)."""
        head = ("check", "reward", "score", "limit", "status")
        rows = [head] + [
            (
                ln.check,
                ln.reward,
                _fmt(ln.score),
                _fmt(ln.limit),
                f"{'ok' if ln.ok else 'FAIL'} {ln.note}".strip(),
            )
            for ln in self.lines
        ]
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        out = [" | ".join(c.ljust(w) for c, w in zip(r[:4], widths)) + " | " + r[4] for r in rows]
        out.insert(1, "-" * len(out[0]))
        verdict = "OK" if self.ok else f"FAILED ({len(self.failures)} problem(s))"
        return "\n".join(out + [f"reward check [{self.kind}]: {verdict}"])

    def __str__(self) -> str:
        return self.table()

    def print(self) -> None:
        """Print with rich when available, else the plain table."""
        try:
            from rich.console import Console
            from rich.table import Table
        except ImportError:
            print(self.table())
            return
        table = Table(title=f"reward check [{self.kind}]")
        for col in ("check", "reward", "score", "limit", "status"):
            table.add_column(col)
        for ln in self.lines:
            status = "[green]ok[/green]" if ln.ok else "[red]FAIL[/red]"
            table.add_row(ln.check, ln.reward, _fmt(ln.score), _fmt(ln.limit), f"{status} {ln.note}".strip())
        console = Console()
        console.print(table)
        verdict = "[green]OK[/green]" if self.ok else f"[red]FAILED ({len(self.failures)} problem(s))[/red]"
        console.print(verdict)


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


# ------------------------------------------------------------------------------------------- kinds and golds


def infer_kind(rows: Sequence[dict[str, Any]]) -> str:
    keys = set().union(*(r.keys() for r in rows)) if rows else set()
    if keys & {"tests", "test", "test_list"}:
        return "code"
    if "summary" in keys and "document" in keys:
        return "summarization"
    if keys & {"context", "source"}:
        return "qa"
    return "math"


def _gold_answer(row: dict[str, Any]) -> str:
    ans = row.get("answer")
    if isinstance(ans, (list, tuple)):
        ans = ans[0] if ans else ""
    return "" if ans is None else str(ans)


def _quote_for(context: str, answer: str) -> str:
    """A 3–40 word sentence of the context, preferably one containing the answer."""
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", context) if s.strip()]
    good = [s for s in sentences if 3 <= len(s.split()) <= 40]
    with_answer = [s for s in good if answer and answer.lower() in s.lower()]
    pick = (with_answer or good or [" ".join(context.split()[:12])])[0]
    return pick.replace('"', "'")


def gold_completion(row: dict[str, Any], kind: str) -> str | None:
    """The reference completion a perfect policy would write for ``row``; None if the row has no reference."""
    if kind == "math":
        ans = _gold_answer(row)
        return f"<reasoning>\n{_REASONING}\n</reasoning>\n<answer>\n{ans}\n</answer>" if ans else None
    if kind == "code":
        code = next((row[c] for c in _CODE_COLUMNS if isinstance(row.get(c), str) and row[c].strip()), None)
        return f"Here is the solution.\n```python\n{code}\n```" if code else None
    if kind == "qa":
        ans = _gold_answer(row)
        if not ans:
            return None
        parts = []
        if row.get("context"):
            parts.append(f'The context says "{_quote_for(str(row["context"]), ans)}"')
        if row.get("source"):
            parts.append(f"[{row['source']}]")
        return (" ".join(parts) + f"\n<answer>{ans}</answer>").strip()
    if kind == "summarization":
        return str(row["summary"]) if row.get("summary") else None
    raise ValueError(f"unknown kind {kind!r}; use one of {KINDS}")


def _wrong_answer(ans: str) -> str:
    num = parse_number(ans)
    if num is not None:
        return str(int(num) + 1 if num == int(num) else num + 1)
    if any(c in ans for c in "\\^{}"):
        return f"{ans}+1"
    return "an unrelated answer about zebras"


# ---------------------------------------------------------------------------------------------- probes

# (name, applies_to, builder(row, kind) -> completion or None); applies_to: all|content|correctness|other.
# "content" probes have a plausible length, so length rewards (they only measure length) are exempt.
Probe = tuple[str, str, Callable[[dict[str, Any], str], "str | None"]]


def _stuffed(row: dict[str, Any], kind: str) -> str:
    if kind == "code":
        return "```python\npass\n```\n" * 20
    ans = _gold_answer(row) or "42"
    wrong = _wrong_answer(ans)
    block = "<reasoning>\n</reasoning>\n<think></think>\n" + "".join(
        f"<answer>\n{a}\n</answer>\n" for a in (wrong, ans, wrong, ans)
    )
    return block * 5


def _several(row: dict[str, Any], kind: str) -> str | None:
    ans = _gold_answer(row)
    if kind == "math" and ans:
        w = _wrong_answer(ans)
        return f"<reasoning>\n{_REASONING}\n</reasoning>\n<answer>\n{w}, {ans}, {_wrong_answer(w)}\n</answer>"
    if kind == "qa" and ans:
        return f"<answer>{ans} or maybe {_wrong_answer(ans)} or perhaps none of these or all of them</answer>"
    return None


def _no_reasoning(row: dict[str, Any], kind: str) -> str | None:
    return _gold_answer(row) or None if kind in ("math", "qa") else None


def _wrong(row: dict[str, Any], kind: str) -> str | None:
    if kind == "code":
        return "```python\ndef solution(*args, **kwargs):\n    return None\n```"
    if kind == "summarization":
        return "This text talks about zebras crossing a river at dawn while a band plays jazz."
    ans = _gold_answer(row)
    if not ans:
        return None
    gold = gold_completion(row, kind) or ""
    return gold.replace(ans, _wrong_answer(ans)) if ans in gold else None


def _code_only(kind: str, code: str) -> str | None:
    return f"```python\n{code}\n```" if kind == "code" else None


PROBES: list[Probe] = [
    ("empty", "all", lambda row, kind: ""),
    ("whitespace", "all", lambda row, kind: "  \n\t \n "),
    ("echo_prompt", "content", lambda row, kind: prompt_text(row.get("prompt"))),
    ("echo_question", "content", lambda row, kind: user_text(row.get("prompt"))),
    ("tag_stuffing", "all", _stuffed),
    ("extremely_long", "all", lambda row, kind: "and then the answer is clearly this " * 1500),
    ("several_answers", "correctness", _several),
    ("wrong_answer", "correctness", _wrong),
    ("answer_no_reasoning", "other", _no_reasoning),
    ("early_exit", "correctness", lambda row, kind: _code_only(kind, "import sys; sys.exit(0)")),
    ("os_exit", "correctness", lambda row, kind: _code_only(kind, "import os; os._exit(0)")),
]


# ---------------------------------------------------------------------------------------------- runner


def _raised(err: Exception) -> str:
    return f"raised {type(err).__name__}: {err}"[:200]


def _name(fn: Any) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


def _as_completion(text: str, prompt: Any) -> Any:
    conversational = isinstance(prompt, list)
    return [{"role": "assistant", "content": text}] if conversational else text


def _call(fn: RewardFunc, rows: list[dict[str, Any]], texts: list[str]) -> list[float | None]:
    keys = sorted(set().union(*(r.keys() for r in rows)) - {"prompt", "completion"})
    kwargs: dict[str, Any] = {k: [r.get(k) for r in rows] for k in keys}
    kwargs.update(trainer_state=None, log_extra=lambda *a, **k: None, log_metric=lambda *a, **k: None)
    prompts = [r.get("prompt") for r in rows]
    completions = [_as_completion(t, p) for t, p in zip(texts, prompts)]
    ids = [list(range(len(t.split()))) for t in texts]
    scores = list(fn(prompts=prompts, completions=completions, completion_ids=ids, **kwargs))
    if len(scores) != len(texts):
        raise ValueError(f"returned {len(scores)} scores for {len(texts)} completions")
    return scores


def run_check(
    reward_funcs: Any,
    rows: Sequence[dict[str, Any]],
    *,
    correctness: list[str] | str | None = None,
    threshold: float = 0.5,
    kind: str | None = None,
    max_rows: int = 8,
) -> CheckReport:
    """Check rewards on dataset rows: (a) gold completions earn each correctness reward's maximum;
    (b) no probe scores above ``threshold`` × a reward's maximum. Penalties (maximum ≤ 0) are skipped in (b).

    ``reward_funcs`` is a list of rewards or a ``RewardPreset`` (which supplies ``correctness`` and ``kind``).
    ``correctness`` names rewards by ``__name__``; default: those marked ``reward_kind == "correctness"``.
    """
    from grpo_fast.rewards.presets import RewardPreset

    if isinstance(reward_funcs, RewardPreset):
        correctness = correctness if correctness is not None else reward_funcs.correctness
        kind = kind or reward_funcs.kind
        reward_funcs = reward_funcs.funcs
    funcs = list(reward_funcs) if isinstance(reward_funcs, (list, tuple)) else [reward_funcs]
    rows = [dict(r) for r in list(rows)[:max_rows]]
    if not rows:
        raise ValueError("run_check needs at least one dataset row")
    kind = kind or infer_kind(rows)
    names = [_name(f) for f in funcs]
    if correctness is None:
        correct = [n for f, n in zip(funcs, names) if getattr(f, "reward_kind", None) == "correctness"]
    else:
        correct = [correctness] if isinstance(correctness, str) else list(correctness)
    report = CheckReport(kind=kind, rewards=names, correctness=correct, threshold=threshold)
    for missing in sorted(set(correct) - set(names)):
        report.lines.append(CheckLine("gold", missing, None, None, False, "correctness reward not in list"))

    _check_gold(report, funcs, names, rows, kind)
    _check_probes(report, funcs, names, rows, kind, threshold)
    return report


def _check_gold(report: CheckReport, funcs: list, names: list[str], rows: list[dict], kind: str) -> None:
    golds = [(r, gold_completion(r, kind)) for r in rows]
    golds = [(r, g) for r, g in golds if g is not None]
    if not golds:
        report.lines.append(CheckLine("gold", "-", None, None, False, f"no row has a {kind} reference"))
        return
    for fn, name in zip(funcs, names):
        if name not in report.correctness:
            continue
        high = getattr(fn, "reward_range", (0.0, 1.0))[1]
        try:
            scores = _call(fn, [r for r, _ in golds], [g for _, g in golds])
        except Exception as err:  # noqa: BLE001 - a crashing reward is a check failure, not a crash
            report.lines.append(CheckLine("gold", name, None, high, False, _raised(err)))
            continue
        nones = sum(s is None for s in scores)
        valid = [s for s in scores if s is not None]
        worst = min(valid) if valid else None
        ok = nones == 0 and worst is not None and worst >= high - 1e-6
        note = f"{nones} row(s) not applicable" if nones else ("" if ok else "gold answer not recognised")
        report.lines.append(CheckLine("gold", name, worst, high, ok, note))


def _check_probes(
    report: CheckReport, funcs: list, names: list[str], rows: list[dict], kind: str, threshold: float
) -> None:
    for probe, applies, build in PROBES:
        built = [(r, build(r, kind)) for r in rows]
        built = [(r, t) for r, t in built if t is not None]
        if not built:
            continue
        for fn, name in zip(funcs, names):
            is_correct = name in report.correctness
            if (applies == "correctness" and not is_correct) or (applies == "other" and is_correct):
                continue
            if applies == "content" and getattr(fn, "reward_kind", None) == "length":
                continue
            high = getattr(fn, "reward_range", (0.0, 1.0))[1]
            if high <= 0:
                continue  # a pure penalty cannot be gamed upward
            try:
                scores = _call(fn, [r for r, _ in built], [t for _, t in built])
            except Exception as err:  # noqa: BLE001
                report.lines.append(CheckLine(probe, name, None, None, False, _raised(err)))
                continue
            valid = [s for s in scores if s is not None]
            worst = max(valid) if valid else None
            limit = threshold * high
            ok = worst is None or worst <= limit
            report.lines.append(CheckLine(probe, name, worst, limit, ok, "" if ok else "probe scores high"))


# ---------------------------------------------------------------------------------------------- sample rows

_SYS = "Answer in the format <reasoning>...</reasoning><answer>...</answer>."
_DOC = (
    "The city council met on Monday to discuss the new riverside park. Residents asked for more trees, "
    "benches and a playground. The mayor promised funding in next year's budget. Construction is planned "
    "to start in spring and the park should open by the end of the year. Critics worried about the cost, "
    "but most speakers supported the plan. The council will vote on the final design next month."
)
_CTX = "The Eiffel Tower was completed in 1889. It was designed by the engineering firm of Gustave Eiffel."


def _chat(user: str, system: str | None = None) -> list[dict[str, str]]:
    return ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]


SAMPLE_ROWS: dict[str, list[dict[str, Any]]] = {
    "math": [
        {
            "prompt": _chat(
                "Natalia sold clips to 48 friends in April, and half as many in May. How many in all?", _SYS
            ),
            "answer": "72",
        },
        {"prompt": _chat("Simplify the ratio of six to twelve.", _SYS), "answer": "\\frac{1}{2}"},
        {
            "prompt": _chat("Solve for x: x squared equals one. Give the solution set.", _SYS),
            "answer": "\\{-1, 1\\}",
        },
    ],
    "code": [
        {
            "prompt": _chat("Write a Python function add(a, b) that returns the sum of a and b."),
            "tests": ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"],
            "code": "def add(a, b):\n    return a + b",
        },
        {
            "prompt": _chat("Write a Python function is_even(n) that says whether n is even."),
            "tests": ["assert is_even(2)", "assert not is_even(3)"],
            "code": "def is_even(n):\n    return n % 2 == 0",
        },
    ],
    "qa": [
        {
            "prompt": _chat(f"Context: {_CTX}\nQuestion: When was the Eiffel Tower completed?"),
            "answer": "1889",
            "context": _CTX,
            "source": "encyclopedia",
        },
        {
            "prompt": _chat(f"Context: {_CTX}\nQuestion: Whose firm designed the Eiffel Tower?"),
            "answer": "Gustave Eiffel",
            "context": _CTX,
            "source": "encyclopedia",
        },
    ],
    "summarization": [
        {
            "prompt": _chat(f"Summarize the document.\n\n{_DOC}"),
            "document": _DOC,
            "summary": "The council discussed a riverside park; the mayor promised funds; it opens this year",
        },
    ],
}


def check_preset(preset: Any, rows: Sequence[dict[str, Any]] | None = None, **kwargs: Any) -> CheckReport:
    """``run_check`` for a ``RewardPreset`` (or its name) on ``rows`` (default: built-in rows of its kind)."""
    from grpo_fast.rewards.presets import get_preset

    if isinstance(preset, str):
        preset = get_preset(preset)
    return run_check(preset, rows if rows is not None else SAMPLE_ROWS[preset.kind], **kwargs)
