"""User code named in a config: ``file.py:name``, ``pkg.module:name`` or ``pkg.module.name`` -> the object.

Custom rewards and tool environments are given this way; every failure is one UserError that says what to fix.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.util
from pathlib import Path
from typing import Any

from grpo_fast.errors import UserError


def is_reference(name: str) -> bool:
    """Written as ``file.py:name`` or a dotted import path (not a registry name)."""
    return ".py:" in name or "." in name or ":" in name


def load_object(ref: str, what: str = "reward", kind: str = "function") -> Any:
    """Import the module or file ``ref`` names and return its object; ``what`` and ``kind`` (function, class)
    name it in messages."""
    if ".py:" in ref:
        file, name = ref.rsplit(":", 1)
        path = Path(file).expanduser()
        if not path.is_file():
            raise UserError(f"{what} file {str(path)!r} does not exist", fix="check the path (relative to the config "
                            "file that names it)")
        digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:10]
        spec = importlib.util.spec_from_file_location(f"grpo_fast_user_{what}s_{digest}", path)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        try:
            spec.loader.exec_module(module)  # type: ignore[union-attr]
        except Exception as err:
            raise UserError(f"loading {path} raised {type(err).__name__}: {err}", str(path),
                            "fix the file so it imports") from None
    else:
        module_name, _, name = ref.rpartition(":") if ":" in ref else ref.rpartition(".")
        try:
            module = importlib.import_module(module_name)
        except ImportError as err:
            raise UserError(f"cannot import {module_name!r} for {what} {ref!r}: {err}",
                            fix="check the module path and that its package is installed (or use file.py:name)"
                            ) from None
        except Exception as err:  # the user's module raised while importing
            raise UserError(f"importing {module_name!r} raised {type(err).__name__}: {err}",
                            fix="fix the module so it imports") from None
    obj = getattr(module, name, None)
    if obj is None:
        names = [n for n, v in vars(module).items() if callable(v) and not n.startswith("_")]
        close = difflib.get_close_matches(name, names, n=1)
        raise UserError(f"{ref!r}: no {kind} {name!r} there", fix=f"did you mean '{close[0]}'?" if close else
                        f"names there: {', '.join(names) or 'none'}")
    return obj
