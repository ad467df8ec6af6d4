"""Data: read rows from files or the hub, check every row, measure prompts, split off a held-out set.

Errors name the file, line or row and column, because a bad row found mid-training costs an hour.
"""

from __future__ import annotations

import csv
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_fast.errors import UserError

FILE_TYPES = (".json", ".jsonl", ".csv", ".parquet")


def read_rows(source: str, split: str = "train") -> list[dict]:
    """Rows from a local JSON/JSONL/CSV/Parquet file, else from the hub (``name`` or ``name:config``)."""
    path = Path(source).expanduser()
    if path.suffix.lower() in FILE_TYPES or path.exists():
        return _read_file(path)
    name, _, config = source.partition(":")
    return read_hub(name, split, config or None)


def _read_file(path: Path) -> list[dict]:
    if not path.is_file():
        raise UserError(f"dataset file {str(path)!r} does not exist", "config key 'dataset'", "check the path")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            return pq.read_table(path).to_pylist()
        except Exception as err:  # pyarrow raises several types for a broken file
            raise UserError(f"cannot read Parquet file: {err}", str(path), "check that it is a Parquet file") from None
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        line = path.read_bytes()[: err.start].count(b"\n") + 1
        raise UserError(f"file is not UTF-8 ({err.reason} at byte {err.start})", f"{path}:{line}",
                        "re-save the file as UTF-8") from None
    if not text.strip():
        raise UserError("dataset file is empty", str(path), "add rows, or point 'dataset' at another file")
    if suffix == ".jsonl":
        return [row for _, row in jsonl_objects(text, path)]
    if suffix == ".csv":
        reader = csv.DictReader(text.splitlines())
        if not reader.fieldnames:
            raise UserError("CSV has no header row", f"{path}:1", "add a header line naming the columns")
        rows = []
        for row in reader:
            if None in row:
                raise UserError(f"row has more fields than the header's {len(reader.fieldnames)}",
                                f"{path}:{reader.line_num}", "quote fields that contain commas")
            rows.append(row)
        if not rows:
            raise UserError("CSV has a header but no rows", str(path), "add rows below the header")
        return rows
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise UserError(f"broken JSON: {err.msg}", f"{path}:{err.lineno}:{err.colno}", "fix the JSON there") from None
    if isinstance(data, dict) and "data" in data:
        data = data["data"]
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise UserError("a JSON dataset must be a list of objects", str(path), "use [{...}, {...}] or JSONL")
    return data


def read_hub(name: str, split: str = "train", config: str | None = None) -> list[dict]:
    """Rows of a hub dataset split (``datasets``), or one clear error when it cannot be had."""
    from datasets import load_dataset

    try:
        return load_dataset(name, config, split=split).to_list()
    except Exception as err:  # offline, unknown name, missing config: datasets raises many types
        raise UserError(
            f"cannot load dataset {name!r} from the hub: {str(err).splitlines()[0][:200]}",
            "config key 'dataset'",
            "check the name and the network; offline, point 'dataset' at a local JSON/JSONL/CSV/Parquet file",
        ) from None


def validate_rows(rows: list[dict], required: tuple[str, ...], origin: str) -> None:
    """Every required column present and non-empty, and prompts in chat format, naming row and column."""
    if not rows:
        raise UserError("the dataset has no rows", origin, "check the file or the recipe's mapper")
    for index, row in enumerate(rows):
        for column in required:
            value = row.get(column)
            if value is None or (isinstance(value, (str, list)) and not value):
                raise UserError(f"column '{column}' is missing or empty", f"{origin}, row {index}",
                                f"give every row a non-empty '{column}', or drop the row")
        prompt = row.get("prompt")
        if not (isinstance(prompt, list) and prompt and all(
            isinstance(m, dict) and m.get("role") in ("system", "user", "assistant")
            and isinstance(m.get("content"), str) for m in prompt
        )):
            raise UserError("prompt is not in chat format", f"{origin}, row {index}, column 'prompt'",
                            'use [{"role": "system"|"user", "content": "..."}]')


def with_system_prompt(rows: list[dict], system: str) -> list[dict]:
    """Rows whose chat prompt has ``system`` as its system turn (replaced where there is one, else added first):
    the ``system_prompt:`` key, the same for training and held-out rows."""
    out = []
    for row in rows:
        prompt = row.get("prompt")
        if isinstance(prompt, list):
            turns = [m for m in prompt if not (isinstance(m, dict) and m.get("role") == "system")]
            row = {**row, "prompt": [{"role": "system", "content": system}, *turns]}
        out.append(row)
    return out


def dedupe(rows: list[dict]) -> tuple[list[dict], int]:
    """Drop rows whose prompt repeats an earlier one; return the rows kept and how many were dropped."""
    seen, kept = set(), []
    for row in rows:
        key = json.dumps(row["prompt"], sort_keys=True)
        if key not in seen:
            seen.add(key)
            kept.append(row)
    return kept, len(rows) - len(kept)


@dataclass
class PromptStats:
    """Prompt lengths in tokens (chat template applied) and what the limit removed."""

    p50: int
    p90: int
    max: int
    dropped: int
    limit: int

    def line(self) -> str:
        return (f"prompt tokens p50 {self.p50}, p90 {self.p90}, max {self.max}; "
                f"{self.dropped} over max_prompt_tokens={self.limit} dropped")


def prompt_lengths(rows: list[dict], tokenizer: Any, tools: list[dict] | None = None,
                   chat_template_kwargs: dict[str, Any] | None = None) -> list[int]:
    """Tokens of each prompt as the model sees it: chat template (with the run's arguments, e.g. its thinking
    mode), generation prompt and the tool list if any."""
    return [len(tokenizer.apply_chat_template(r["prompt"], tools=tools, add_generation_prompt=True, tokenize=True,
                                              return_dict=True, **(chat_template_kwargs or {}))["input_ids"])
            for r in rows]


def filter_long_prompts(rows: list[dict], tokenizer: Any, limit: int, tools: list[dict] | None = None,
                        chat_template_kwargs: dict[str, Any] | None = None) -> tuple[list[dict], PromptStats]:
    """Replace TRL's removed ``max_prompt_length``: drop (not truncate) prompts over the limit, and say so."""
    if not rows:
        return [], PromptStats(0, 0, 0, 0, limit)
    lengths = prompt_lengths(rows, tokenizer, tools, chat_template_kwargs)
    ordered = sorted(lengths)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    kept = [r for r, n in zip(rows, lengths) if n <= limit]
    stats = PromptStats(pick(0.5), pick(0.9), ordered[-1], len(rows) - len(kept), limit)
    if not kept:
        raise UserError(f"every prompt is longer than max_prompt_tokens={limit} (shortest {ordered[0]})",
                        "config key 'max_prompt_tokens'", f"raise it to at least {ordered[0]}")
    return kept, stats


def split_holdout(rows: list[dict], n_eval: int, seed: int) -> tuple[list[dict], list[dict]]:
    """Shuffle with the seed and keep ``n_eval`` rows aside (at most a quarter) for evaluation."""
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    n_eval = min(n_eval, len(rows) // 4)
    held = [rows[i] for i in order[:n_eval]]
    train = [rows[i] for i in order[n_eval:]]
    return train, held


def jsonl_objects(text: str, path: Path, name: str = "JSONL line", example: str = "wrap it as {...}",
                  of: str = "") -> list[tuple[int, dict]]:
    """``(line number, object)`` per non-blank line of a JSONL text; a broken line is a UserError at file:line:column.
    ``name``/``example``/``of`` word the messages for the file's kind (a dataset, a programs file)."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as err:
            raise UserError(f"broken JSON{of}: {err.msg}", f"{path}:{number}:{err.colno}",
                            "fix or delete that line (one JSON object per line)") from None
        if not isinstance(entry, dict):
            raise UserError(f"each {name} must be a JSON object", f"{path}:{number}", example)
        out.append((number, entry))
    return out
