"""Where a key was set: key paths as errors print them, the file:line behind each, and unknown-key advice.

Kept apart from the schema so that every error, from any layer of the config, names a key the same way.
"""

from __future__ import annotations

import difflib

from grpo_fast.errors import UserError

Path_ = tuple[str | int, ...]


def path_text(path: Path_) -> str:
    """``("stages", 1, "max_steps")`` -> ``stages[1].max_steps``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def locate(source: dict[str, str], path: str) -> str | None:
    """Where the value at ``path`` (or its nearest enclosing key) was set."""
    while path:
        if path in source:
            return source[path]
        cut = max(path.rfind("."), path.rfind("["))
        path = path[:cut] if cut > 0 else ""
    return None


def key_label(path: Path_, source: dict[str, str]) -> str:
    """``key 'stages[1].max_steps' (file:line)``: a key as errors name it."""
    text = path_text(path)
    loc = locate(source, text)
    return f"key '{text}'" + (f" ({loc})" if loc else "")


# Kit keys that became another name, with what to write instead.
RENAMED_KEYS = {
    "gpu_memory_utilization": "vllm_gpu_memory_utilization (TRL's name; the kit hands the same value to Unsloth's "
                              "vLLM)",
}


def unknown_key(key: str, known: list[str], where: str) -> UserError:
    """An unknown key, with the closest known one (or where to look them all up)."""
    if key in RENAMED_KEYS:
        return UserError(f"'{key}' was renamed", where, f"write {RENAMED_KEYS[key]}")
    close = difflib.get_close_matches(key, known, n=1)
    fix = f"did you mean '{close[0]}'?" if close else "see `grpo-fast train --help-config` for every key"
    return UserError(f"unknown config key '{key}': neither a grpo_fast key nor a GRPOConfig field", where, fix)
