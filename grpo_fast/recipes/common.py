"""Shared pieces of the task recipes: load raw rows (offline sample, local file or hub) and map them with errors
that name the file, the line or row and the missing column, because a mapper that fails mid-run wastes it.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_fast import data
from grpo_fast.config import RunConfig
from grpo_fast.errors import UserError

SAMPLES = Path(__file__).resolve().parent.parent / "samples"

# Hub datasets that need a config name or have no train split; ``name:config`` in ``dataset`` overrides.
HUB_DEFAULTS: dict[str, dict[str, str]] = {
    "openai/gsm8k": {"config": "main"},
    "gsm8k": {"config": "main"},
    "abisee/cnn_dailymail": {"config": "3.0.0"},
    "cnn_dailymail": {"config": "3.0.0"},
    "google-research-datasets/mbpp": {"config": "full"},
    "mbpp": {"config": "full"},
    "openai/openai_humaneval": {"split": "test"},
    "openai_humaneval": {"split": "test"},
    "HuggingFaceH4/MATH-500": {"split": "test"},
}


class Missing(Exception):
    """Raised by a row mapper: none of ``columns`` holds a usable value (turned into a located UserError)."""

    def __init__(self, columns: Iterable[str], problem: str = "missing", fix: str | None = None):
        self.columns = tuple(columns)
        self.problem = problem
        self.fix = fix
        super().__init__(f"{'/'.join(self.columns)} {problem}")


@dataclass
class Source:
    """Raw rows and where they came from, so a mapping error can point at a file line or a hub row."""

    label: str
    rows: list[dict]
    path: Path | None = None

    def where(self, index: int) -> str:
        """``file:line (row n)`` for JSONL/CSV files, ``origin, row n`` otherwise (n counts data rows from 1)."""
        lines = _row_lines(self.path) if self.path is not None else None
        if lines and index < len(lines):
            return f"{self.path}:{lines[index]} (row {index + 1})"
        return f"{self.label}, row {index + 1}"


def _row_lines(path: Path) -> list[int] | None:
    """Line number where each data row starts, for JSONL and CSV (quoted fields may span lines)."""
    suffix = path.suffix.lower()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if suffix == ".jsonl":
        return [n for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if suffix == ".csv":
        reader = csv.reader(text.splitlines())
        starts, previous_end = [], 0
        for _ in reader:
            starts.append(previous_end + 1)
            previous_end = reader.line_num
        return starts[1:]  # the header is not a data row
    return None


def sample(name: str) -> Path:
    """A file shipped in ``grpo_fast/samples`` (package data)."""
    return SAMPLES / name


def hub_target(name: str, split: str, split_set: bool) -> tuple[str, str, str | None]:
    """``(name, split, config)`` for a hub id: ``name:config`` wins, else the table of known datasets."""
    config = None
    if ":" in name:
        name, config = name.split(":", 1)
    known = HUB_DEFAULTS.get(name, {})
    config = config or known.get("config")
    if not split_set and "split" in known:
        split = known["split"]
    return name, split, config


def load(cfg: RunConfig, samples: Iterable[str]) -> list[Source]:
    """Raw rows: ``cfg.dataset`` (local file or hub id) when set, else the recipe's offline sample files."""
    if cfg.dataset is None:
        return [Source(f"sample {name}", data.read_rows(str(sample(name))), sample(name)) for name in samples]
    path = Path(cfg.dataset).expanduser()
    if path.suffix.lower() in data.FILE_TYPES or path.exists():
        return [Source(str(path), data.read_rows(str(path)), path)]
    name, split, config = hub_target(cfg.dataset, cfg.dataset_split, cfg.set_by_user("dataset_split"))
    label = f"hub dataset {name}" + (f" ({config})" if config else "") + f" split {split}"
    return [Source(label, data.read_hub(name, split, config))]


def map_rows(sources: list[Source], mapper: Callable[[dict], dict], hint: str) -> list[dict]:
    """Apply ``mapper`` to every raw row; a ``Missing`` becomes a UserError naming file, line/row and column."""
    out = []
    for source in sources:
        for index, raw in enumerate(source.rows):
            try:
                out.append(mapper(raw))
            except Missing as err:
                found = ", ".join(map(str, raw)) or "none"
                names = " or ".join(f"'{c}'" for c in err.columns)
                kind = f"{source.path.suffix.lstrip('.').upper()} {source.path.name}: " if source.path else ""
                fix = err.fix or f"rename the column, or map your data to {hint}"
                if "prompt" in raw and "prompt" not in err.columns:
                    fix = ("this is TRL-format data (a 'prompt' column): train on it as it is with recipe: trl, "
                           "every other column reaching your rewards (docs/recipes.md, 'Your own task')")
                raise UserError(f"{kind}column {names} {err.problem}; columns found: {found}", source.where(index),
                                fix) from None
    return out


def need(raw: dict, *columns: str) -> Any:
    """The value of the first of ``columns`` that is present and non-empty, else ``Missing``."""
    for column in columns:
        value = raw.get(column)
        if value is not None and not (isinstance(value, (str, list, dict)) and not value):
            return value
    raise Missing(columns)


def text(raw: dict, *columns: str) -> str:
    """``need`` for a text column: strings and numbers are accepted, stripped."""
    value = need(raw, *columns)
    if isinstance(value, (list, dict)):
        raise Missing(columns[:1], f"must be text, got {type(value).__name__}")
    return str(value).strip()


def chat(system: str, user: str, shots: Iterable[tuple[str, str]] = ()) -> list[dict[str, str]]:
    """A chat prompt: system prompt, optional few-shot (user, assistant) pairs, then the user turn."""
    messages = [{"role": "system", "content": system}]
    for question, answer in shots:
        messages += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    return messages + [{"role": "user", "content": user}]
