"""Reward self-test: gold completions must earn full correctness; degenerate and hacking probes must not.

Run before training (``grpo-fast rewards check <preset|recipe|config>``): a reward that cannot recognise the
reference answer, or that pays for an empty string, an echo of the prompt or stuffed tags, wastes a run.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table

from grpo_fast.rewards.answers import parse_number
from grpo_fast.rewards.base import prompt_text, score_rows, user_text
from grpo_fast.rewards.presets import RewardSet

Gold = Callable[[dict[str, Any]], "str | None"]
# (name, applies_to, builder(row) -> completion or None); applies_to: all | content | correctness | other.
# "content" probes have a plausible length, so length rewards (they only measure length) are exempt from them.
Probe = tuple[str, str, Gold]


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
    name: str
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
        return "\n".join(out + [f"reward check [{self.name}]: {verdict}"])

    def __str__(self) -> str:
        return self.table()

    def print(self) -> None:
        """Print as a rich table (``table()`` is the plain one)."""
        table = Table(title=f"reward check [{self.name}]")
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


# ---------------------------------------------------------------------------------------------- probes


def wrong_answer(ans: str) -> str:
    """A plausible wrong answer of the same shape: a number one off, or unrelated text."""
    num = parse_number(ans)
    if num is not None:
        return str(int(num) + 1 if num == int(num) else num + 1)
    if any(c in ans for c in "\\^{}"):
        return f"{ans}+1"
    return "an unrelated answer about zebras"


GENERIC_PROBES: list[Probe] = [
    ("empty", "all", lambda row: ""),
    ("whitespace", "all", lambda row: "  \n\t \n "),
    ("echo_prompt", "content", lambda row: prompt_text(row.get("prompt"))),
    ("echo_question", "content", lambda row: user_text(row.get("prompt"))),
    ("extremely_long", "all", lambda row: "and then the answer is clearly this " * 1500),
]


def answer_probes(answer: Callable[[dict[str, Any]], str], gold: Gold,
                  hedge: str = "{wrong}, {answer}, {wrong2}") -> list[Probe]:
    """Probes for tasks with one short answer per row: tag stuffing, hedged answers (``hedge`` fills in the gold
    and wrong answers), a wrong answer in the gold's layout, and the bare answer without the layout."""

    def stuffed(row: dict[str, Any]) -> str:
        ans = answer(row) or "42"
        block = "<reasoning>\n</reasoning>\n<think></think>\n" + "".join(
            f"<answer>\n{a}\n</answer>\n" for a in (wrong_answer(ans), ans, wrong_answer(ans), ans))
        return block * 5

    def replaced(row: dict[str, Any], by: str) -> str | None:
        ans, full = answer(row), gold(row) or ""
        return full.replace(ans, by) if ans and ans in full else None

    def several(row: dict[str, Any]) -> str | None:
        ans = answer(row)
        w = wrong_answer(ans)
        return replaced(row, hedge.format(answer=ans, wrong=w, wrong2=wrong_answer(w))) if ans else None

    return [
        ("tag_stuffing", "all", stuffed),
        ("several_answers", "correctness", several),
        ("wrong_answer", "correctness", lambda row: replaced(row, wrong_answer(answer(row)))),
        ("answer_no_reasoning", "other", lambda row: answer(row) or None),
    ]


# ---------------------------------------------------------------------------------------------- runner


def _raised(err: Exception) -> str:
    return f"raised {type(err).__name__}: {err}"[:200]


def _name(fn: Any) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


def run_check(rewards: RewardSet, rows: Sequence[dict[str, Any]], *, gold: Gold, probes: Sequence[Probe] = (),
              checks: Sequence[Callable[[RewardSet], list[CheckLine]]] = (), threshold: float = 0.5,
              max_rows: int = 8, no_gold: str | None = None, unchecked: str | None = None) -> CheckReport:
    """Check a reward set on dataset rows: (a) ``gold`` completions earn the correctness reward's maximum;
    (b) no probe (the generic ones, then the task's ``probes``) scores above ``threshold`` x a reward's maximum
    (penalties, maximum <= 0, are skipped); (c) the task's own ``checks`` (e.g. honest programs for code).

    Data without any reference fails (a) unless ``no_gold`` says what stands in for the references (a check in
    ``checks`` that shows a right answer earning full marks, e.g. the user's own programs). ``unchecked``: why the
    training run's gold self-test could not check the judge, said in place of the generic note."""
    rows = [dict(r) for r in list(rows)[:max_rows]]
    if not rows:
        raise ValueError("run_check needs at least one dataset row")
    funcs, names = rewards.funcs, rewards.names
    report = CheckReport(name=rewards.name, rewards=names, correctness=[rewards.correctness], threshold=threshold)
    if rewards.correctness not in names:
        report.lines.append(CheckLine("gold", rewards.correctness, None, None, False, "correctness reward not in list"))
    _check_gold(report, funcs, names, rows, gold, no_gold, unchecked)
    _check_probes(report, funcs, names, rows, [*GENERIC_PROBES, *probes], threshold)
    for check in checks:
        report.lines.extend(check(rewards))
    return report


GOLD_SAMPLE = 1000  # rows whose references the gold self-test runs; above it, a seeded random sample of this size


UNPARSABLE = "unparsable gold (the judge gives None)"


@dataclass
class GoldAudit:
    """Every row's reference (or a stated random sample) scored by the correctness reward: what fails and why."""

    total: int  # rows with a reference
    checked: list[int]  # indices (in the rows given) whose reference was scored
    failures: list[tuple[int, str]]  # (index, why) per reference below full marks
    reward: str = ""

    @property
    def sampled(self) -> bool:
        return len(self.checked) < self.total

    @property
    def mostly_failing(self) -> bool:
        """More than half the references checked fail: the reward or the data is broken, not a few rows."""
        return bool(self.checked) and 2 * len(self.failures) > len(self.checked)

    def reasons(self, top: int = 5) -> list[tuple[str, int]]:
        return Counter(_reason(why) for _, why in self.failures).most_common(top)

    @property
    def outside_design(self) -> int:
        """Failing references whose failure is outside the sandbox's design: honest code cannot reach full credit."""
        return sum("outside design" in why for _, why in self.failures)

    def summary(self, dropped: bool = False) -> str:
        """What the self-test found, in a few lines: the count, the top reasons, the rows (dropped or failing)."""
        scope = (f"a random sample of {len(self.checked)} of {self.total} rows" if self.sampled
                 else f"all {self.total} rows")
        if not self.total:
            return f"gold self-test: not checked: no row has a reference for '{self.reward}' to score"
        if not self.failures:
            return f"gold self-test ({scope}): every reference gets full '{self.reward}'"
        lines = [f"gold self-test ({scope}): {len(self.failures)} of {len(self.checked)} reference solutions do "
                 f"not get full '{self.reward}'"]
        unread = sum(UNPARSABLE in why for _, why in self.failures)
        if unread:
            lines.append(f"{unread} row(s) have a gold answer the judge cannot parse (None: TRL skips them, nothing is "
                         "learnt from them); fix the gold column")
        if self.outside_design:
            lines.append(f"{self.outside_design} row(s) cannot reach full credit for an honest solution (a test "
                         "outside the sandbox's design, docs/sandbox.md)")
        lines.append("top reasons: " + "; ".join(f"{n} x {why}" for why, n in self.reasons()))
        rows = ", ".join(str(i) for i, _ in self.failures[:40]) + (" ..." if len(self.failures) > 40 else "")
        lines.append(("dropped rows (not trained on): " if dropped else "failing rows: ") + rows)
        lines.extend(f"  {why}" for _, why in self.failures[:5])
        return "\n".join(lines)


def _reason(why: str) -> str:
    """The reason part of a failure line, without the row and the completion."""
    return why.split(" | ", 1)[1] if " | " in why else why


def audit_gold(rewards: RewardSet, rows: Sequence[dict[str, Any]], gold: Gold, sample: int | None = GOLD_SAMPLE,
               seed: int = 0) -> GoldAudit:
    """The pre-training self-test: each row's gold completion must earn the judge's full score.

    Every row with a gold (some datasets publish no reference for a row), or a seeded random ``sample`` of them
    when there are more; the audit says which. Each failure says why (the sandbox's reason for a code row)."""

    rows = list(rows)
    have = [i for i, r in enumerate(rows) if gold(r)]
    checked = sorted(random.Random(seed).sample(have, sample)) if sample is not None and len(have) > sample else have
    texts = [gold(rows[i]) or "" for i in checked]
    judge = rewards.judge
    scores = score_rows(judge, [rows[i] for i in checked], texts) if checked else []
    details = getattr(judge, "last_details", None)
    details = details if isinstance(details, list) and len(details) == len(checked) else [None] * len(checked)
    best = rewards.correctness_max
    failures = []
    for index, text, score, detail in zip(checked, texts, scores, details):
        if score is None or score < best - 1e-9:
            why = (detail or {}).get("why") or (UNPARSABLE if score is None else f"scored {score} (< {best:g})")
            asked, given = user_text(rows[index].get("prompt"))[:40], _code_or_text(text)[:40]
            failures.append((index, f"row {index}: {asked!r}, reference {given!r} | {why}"))
    return GoldAudit(len(have), checked, failures, rewards.correctness)


def _code_or_text(text: str) -> str:
    """A reference's first line of substance: its code when fenced, so the row can be told from its neighbours."""
    body = text.split("```", 2)[1].split("\n", 1)[-1] if text.count("```") >= 2 else text
    return body.strip()


def failing_gold(rewards: RewardSet, rows: Sequence[dict[str, Any]], gold: Gold,
                 limit: int | None = GOLD_SAMPLE) -> tuple[int, list[tuple[int, str]]]:
    """``audit_gold`` as (rows checked, ``(index in rows, why)`` per failure)."""
    audit = audit_gold(rewards, rows, gold, limit)
    return len(audit.checked), audit.failures


def gold_failures(rewards: RewardSet, rows: Sequence[dict[str, Any]], gold: Gold,
                  limit: int | None = GOLD_SAMPLE) -> tuple[int, list[str]]:
    """``failing_gold`` as (rows checked, one line per failure)."""
    checked, failures = failing_gold(rewards, rows, gold, limit)
    return checked, [why for _, why in failures]


def audit_line(audit: GoldAudit) -> CheckLine:
    """The audit as a line of the check's report: never ``ok`` while a reference fails."""
    ok = not audit.failures
    share = 1 - len(audit.failures) / len(audit.checked) if audit.checked else None
    note = "" if ok else (f"{len(audit.failures)} of {len(audit.checked)} references fail: "
                          + "; ".join(f"{n} x {why[:60]}" for why, n in audit.reasons(3)))
    return CheckLine("gold_all_rows", audit.reward, share, 1.0, ok, note)


def _check_gold(report: CheckReport, funcs: list, names: list[str], rows: list[dict], gold: Gold,
                no_gold: str | None, unchecked: str | None) -> None:
    golds = [(r, gold(r)) for r in rows]
    golds = [(r, g) for r, g in golds if g is not None]
    if not golds:
        why = unchecked or "no row has a reference answer"
        note = f"{why}; {no_gold}" if no_gold else why
        report.lines.append(CheckLine("gold", "-", None, None, no_gold is not None, note))
        return
    for fn, name in zip(funcs, names):
        if name not in report.correctness:
            continue
        high = getattr(fn, "reward_range", (0.0, 1.0))[1]
        try:
            scores = score_rows(fn, [r for r, _ in golds], [g for _, g in golds])
        except Exception as err:  # noqa: BLE001 - a crashing reward is a check failure, not a crash
            report.lines.append(CheckLine("gold", name, None, high, False, _raised(err)))
            continue
        nones = sum(s is None for s in scores)
        valid = [s for s in scores if s is not None]
        worst = min(valid) if valid else None
        ok = nones == 0 and worst is not None and worst >= high - 1e-6
        note = f"{nones} row(s) not applicable" if nones else ("" if ok else "gold answer not recognised")
        report.lines.append(CheckLine("gold", name, worst, high, ok, note))


def _check_probes(report: CheckReport, funcs: list, names: list[str], rows: list[dict], probes: Sequence[Probe],
                  threshold: float) -> None:
    for probe, applies, build in probes:
        built = [(r, build(r)) for r in rows]
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
                scores = score_rows(fn, [r for r, _ in built], [t for _, t in built])
            except Exception as err:  # noqa: BLE001
                report.lines.append(CheckLine(probe, name, None, None, False, _raised(err)))
                continue
            valid = [s for s in scores if s is not None]
            worst = max(valid) if valid else None
            limit = threshold * high
            ok = worst is None or worst <= limit
            report.lines.append(CheckLine(probe, name, worst, limit, ok, "" if ok else "probe scores high"))
