"""Files the kit writes and reads: each write atomic, so a crash never leaves a complete-looking file.

The ground floor (the standard library, ``errors`` and PyYAML only): the run directory (``rundir``), the reward
guard's failure log and the checkpoints all write through these helpers.
"""

from __future__ import annotations

import json
import os
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write to a temporary file beside ``path`` and rename it into place (mode 0644, as a plain write)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, data: Any) -> None:
    atomic_write(path, json.dumps(data, indent=2, default=str) + "\n")


def write_yaml(path: Path, data: Any) -> None:
    atomic_write(path, yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


def read_yaml(path: Path) -> dict:
    return yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}


def read_json(path: Path) -> Any | None:
    """A JSON file's content, or None when it is missing or torn."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def write_jsonl(path: Path, records: list[dict]) -> None:
    atomic_write(path, "".join(json.dumps(r, default=str) + "\n" for r in records))


def append_jsonl(path: Path, record: dict) -> None:
    """One complete line per call; a reader skips a torn last line (see ``read_jsonl``)."""
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(record, default=str) + "\n")
        handle.flush()


def read_jsonl(path: Path) -> list[dict]:
    rows = []
    if not path.exists():
        return rows
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line torn by a crash
    return rows


def installed_versions(names: list[str] | tuple[str, ...]) -> dict[str, str]:
    """Installed versions of ``names``; packages that are not installed are left out."""
    found = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found
