"""Programs of your own for ``grpo-fast rewards check``: the gold self-test for data without reference solutions.

LiveCodeBench, open-r1 Codeforces and many users' own sets publish tests but no solutions, so the recipe's gold
check has nothing to run and cannot show that the reward pays a right program and refuses a wrong one. A programs
file fills that gap: JSONL, one program per line for a dataset row named by ``row`` (1-based, the count the kit's
messages use) or ``id`` (the row's id column), with the score the correctness reward must give it::

    {"id": "abc999_a", "program": "print(7)", "expect": 0.0}
    {"row": 2, "program": "class Solution: ..."}          # no expect: full marks

``--programs FILE`` names it; without the flag, ``<dataset>.programs.jsonl`` beside a local dataset file is used.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from grpo_fast.config import RunConfig
from grpo_fast.data import jsonl_objects
from grpo_fast.errors import UserError
from grpo_fast.recipes import Recipe
from grpo_fast.rewards import RewardSet
from grpo_fast.rewards.base import score_rows
from grpo_fast.rewards.check import CheckLine

KEYS = ("row", "id", "program", "expect")
ID_COLUMNS = ("id", "question_id", "task_id", "problem_id", "name")
"""Where upstream sets keep a row's id: open-r1 Codeforces ``id``, LiveCodeBench and KodCode ``question_id``,
MBPP and HumanEval ``task_id``, APPS and PrimeIntellect ``problem_id``, CodeContests ``name``."""
SUFFIX = ".programs.jsonl"
TOLERANCE = 1e-4  # a share of tests written to four decimals (2 of 3 passed: 0.6667) matches


@dataclass(frozen=True)
class Program:
    """One line of a programs file, resolved to the dataset row it is judged on."""

    where: str  # file:line
    index: int  # 0-based row of the mapped dataset
    label: str  # "row 2" or "id 'abc999_a'"
    code: str
    expect: float


@dataclass(frozen=True)
class OwnPrograms:
    """A programs file read against a dataset: what ``rewards check`` scores besides the dataset's references."""

    path: Path
    found_beside: bool  # picked up beside the dataset file, not named by --programs
    programs: tuple[Program, ...]
    rows: tuple[dict, ...]  # the mapped row each program is judged on, in the same order
    scale: tuple[float, float]  # the correctness reward's range: (wrong, full marks)

    @property
    def full(self) -> float:
        return self.scale[1]

    @property
    def right(self) -> int:
        """Programs that must earn full marks: with one or more, they stand in for missing references."""
        return sum(abs(p.expect - self.full) <= TOLERANCE for p in self.programs)

    def summary(self) -> str:
        how = "found beside the dataset" if self.found_beside else "--programs"
        return (f"programs: {self.path} ({how}): {self.right} expected at full marks, "
                f"{len(self.programs) - self.right} below")

    def check(self, rewards: RewardSet) -> list[CheckLine]:
        """One line per expected score: the program furthest from it, and every one that missed it."""
        name = rewards.correctness
        try:
            scores = score_rows(rewards.judge, list(self.rows), [fence(p.code) for p in self.programs])
        except Exception as err:  # noqa: BLE001 - a crashing reward is a check failure, not a crash
            return [CheckLine("programs", name, None, None, False, f"raised {type(err).__name__}: {err}"[:200])]
        lines = []
        for expect in sorted({p.expect for p in self.programs}, reverse=True):
            group = [(p, s) for p, s in zip(self.programs, scores) if p.expect == expect]
            far = max(group, key=lambda ps: 1.0 if ps[1] is None else abs(ps[1] - expect))[1]
            missed = [f"{p.label} ({p.where}) scored {'None' if s is None else f'{s:.4f}'}" for p, s in group
                      if s is None or abs(s - expect) > TOLERANCE]
            kind = "right" if expect == self.full else "wrong" if expect == self.scale[0] else "partial"
            note = ("missed: " + "; ".join(missed[:3]) + (" ..." if len(missed) > 3 else "")) if missed else \
                f"{len(group)} {kind} program(s)"
            lines.append(CheckLine("programs", name, far, expect, not missed, note))
        return lines


def fence(program: str) -> str:
    """The completion a program is scored as: the code in a python block, as a model is asked to write it."""
    return f"Here is the solution.\n```python\n{program}\n```"


def beside(dataset: str | None) -> Path | None:
    """``<stem>.programs.jsonl`` next to a local dataset file, if there is one."""
    if not dataset:
        return None
    path = Path(dataset).expanduser()
    sidecar = path.with_name(path.stem + SUFFIX)
    return sidecar if path.is_file() and sidecar.is_file() else None


def own_programs(recipe: Recipe, cfg: RunConfig, rewards: RewardSet, path: str | None) -> OwnPrograms | None:
    """The programs file for ``rewards check``: ``path`` (``--programs``), else one beside the dataset, else None."""
    found = beside(cfg.dataset) if path is None and recipe.sources is not None else None
    if path is None and found is None:
        return None
    file = found or Path(path).expanduser()
    if recipe.sources is None:
        raise UserError(f"recipe {recipe.name!r} has no programs to check: its completions are not programs",
                        f"--programs {file}", "use --programs with the code recipe (or a YAML file that uses it)")
    lines = read_lines(file)
    raws = [raw for source in recipe.sources(cfg) for raw in source.rows]
    rows = recipe.rows(cfg)
    if len(rows) != len(raws):
        raise RuntimeError(f"recipe {recipe.name}: {len(rows)} mapped rows for {len(raws)} dataset rows")
    low, full = (float(x) for x in getattr(rewards.judge, "reward_range", (0.0, 1.0)))
    programs = tuple(resolve(entry, where, raws, (low, full)) for where, entry in lines)
    return OwnPrograms(file, found is not None, programs, tuple(rows[p.index] for p in programs), (low, full))


def read_lines(path: Path) -> list[tuple[str, dict]]:
    """``(file:line, object)`` per non-blank line; a missing file or a broken line is a located UserError."""
    if not path.is_file():
        raise UserError(f"programs file {str(path)!r} does not exist", "--programs",
                        "check the path (a JSONL file: one {\"row\" or \"id\", \"program\"} object per line)")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        line = path.read_bytes()[: err.start].count(b"\n") + 1
        raise UserError(f"programs file is not UTF-8 ({err.reason})", f"{path}:{line}", "re-save it as UTF-8") \
            from None
    out = [(f"{path}:{number}", entry) for number, entry in jsonl_objects(
        text, path, "line of a programs file", 'write {"row": 1, "program": "..."}', " in programs file")]
    if not out:
        raise UserError("programs file has no programs", str(path), 'add lines like {"row": 1, "program": "..."}')
    return out


def resolve(entry: dict, where: str, raws: Sequence[dict], scale: tuple[float, float]) -> Program:
    """Check one line's keys and find its dataset row."""
    for key in entry:
        if key not in KEYS:
            close = difflib.get_close_matches(str(key), KEYS, n=1)
            raise UserError(f"unknown key {key!r} in programs file", where,
                            (f"did you mean {close[0]!r}? " if close else "") + f"keys: {', '.join(KEYS)}")
    code = entry.get("program")
    if not isinstance(code, str) or not code.strip():
        raise UserError("'program' is missing or not a non-empty string", where,
                        'give the program\'s source as one JSON string ("program": "print(1)\\n")')
    if ("row" in entry) == ("id" in entry):
        raise UserError("give the dataset row as 'row' (1-based number) or 'id', exactly one of them", where,
                        f"e.g. \"row\": 1, or \"id\" matched against the rows' {'/'.join(ID_COLUMNS)} column")
    index, label = find_row(entry, where, raws)
    return Program(where, index, label, code, expectation(entry, where, scale))


def find_row(entry: dict, where: str, raws: Sequence[dict]) -> tuple[int, str]:
    """``(0-based index, label)`` of the row an entry names by ``row`` number or ``id``."""
    if "row" in entry:
        row = entry["row"]
        if isinstance(row, bool) or not isinstance(row, int) or not 1 <= row <= len(raws):
            raise UserError(f"row {row!r} is not a row of the dataset", where,
                            f"rows are numbered 1 to {len(raws)}, as in the dataset file")
        return row - 1, f"row {row}"
    wanted = str(entry["id"])
    ids = [row_id(raw) for raw in raws]
    hits = [i for i, found in enumerate(ids) if found == wanted]
    if len(hits) == 1:
        return hits[0], f"id {wanted!r}"
    if hits:
        raise UserError(f"id {wanted!r} names {len(hits)} dataset rows ({', '.join(str(i + 1) for i in hits[:5])})",
                        where, "name the row by its number instead: \"row\": N")
    known = [i for i in ids if i is not None]
    close = difflib.get_close_matches(wanted, known, n=1)
    fix = (f"did you mean {close[0]!r}? " if close else "") + (
        f"ids in the dataset: {', '.join(map(repr, known[:5]))}{' ...' if len(known) > 5 else ''}" if known else
        f"the rows have no {'/'.join(ID_COLUMNS)} column: name the row by number instead (\"row\": N)")
    raise UserError(f"no dataset row has id {wanted!r}", where, fix)


def row_id(raw: dict) -> str | None:
    """A raw row's id: its first id column that holds a value."""
    value = next((raw[c] for c in ID_COLUMNS if raw.get(c) not in (None, "")), None)
    return None if value is None else str(value)


def expectation(entry: dict, where: str, scale: tuple[float, float]) -> float:
    """``expect``: the correctness score the program must get (default: full marks)."""
    low, high = scale
    expect = entry.get("expect", high)
    if isinstance(expect, bool) or not isinstance(expect, (int, float)) or not low <= expect <= high:
        raise UserError(f"'expect' must be a number from {low:g} to {high:g}, got {expect!r}", where,
                        f"{high:g} (the default) for a right program, {low:g} for a wrong one, or the share of "
                        "tests it passes")
    return float(expect)
