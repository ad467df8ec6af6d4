"""The pinned GPU wheels' own source, for contract tests: downloaded once with pip, read with zipfile + ast.

    src = PinnedWheel.get("unsloth"); tree = src.ast("unsloth/models/loader.py")

Wheels land in ``$GRPO_FAST_CACHE/wheels`` (default ``~/.cache/grpo_fast/wheels``) through ``pip download
--no-deps`` at the version requirements-gpu.txt pins. Rule when a wheel is missing and cannot be fetched:
skip with the reason on a developer machine, fail under CI (``CI`` set), where PyPI is reachable.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import zipfile
from functools import cache
from pathlib import Path

import pytest

from grpo_fast.doctor import lock_pins
from grpo_fast.models import cache_dir


def wheel_dir() -> Path:
    return cache_dir() / "wheels"


@cache
def _fetch(dist: str, version: str) -> Path:
    folder = wheel_dir()
    stem = dist.replace("-", "_")
    found = sorted(folder.glob(f"{stem}-{version}-*.whl"))
    if found:
        return found[-1]
    folder.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
                           f"{dist}=={version}", "-d", str(folder)], capture_output=True, text=True, timeout=900)
    found = sorted(folder.glob(f"{stem}-{version}-*.whl"))
    if proc.returncode or not found:
        reason = f"cannot download {dist}=={version}: {(proc.stderr.strip().splitlines() or ['?'])[-1][:200]}"
        if os.environ.get("CI"):
            pytest.fail(reason + " (CI has PyPI: contract tests must run there)")
        pytest.skip(reason)
    return found[-1]


class PinnedWheel:
    """One locked distribution's wheel, read in place."""

    def __init__(self, dist: str):
        self.dist = dist
        self.version = lock_pins(gpu=True)[0][dist]
        self.path = _fetch(dist, self.version)
        self.zip = zipfile.ZipFile(self.path)

    @classmethod
    @cache
    def get(cls, dist: str) -> PinnedWheel:
        return cls(dist)

    def text(self, member: str) -> str:
        return self.zip.read(member).decode("utf-8")

    @cache  # noqa: B019 - one parse per file per session
    def ast(self, member: str) -> ast.Module:
        return ast.parse(self.text(member))


def find_def(tree: ast.AST, name: str, cls: str | None = None) -> ast.FunctionDef:
    """The function ``name`` (a method of ``cls`` when given) in ``tree``."""
    scope = tree
    if cls is not None:
        scope = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls)
    for node in ast.walk(scope):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise LookupError(f"{cls + '.' if cls else ''}{name} not found")


def named_params(fn: ast.FunctionDef) -> set[str]:
    """Parameters a keyword argument can bind to by name (not swallowed by **kwargs)."""
    a = fn.args
    return {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]}


def class_fields(tree: ast.AST, cls: str) -> set[str]:
    """Annotated attributes of a (data)class body."""
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls)
    return {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}


def calls_in(fn: ast.AST) -> set[str]:
    """Names of the functions called inside ``fn`` (plain names and attribute names)."""
    out = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            f = node.func
            out.add(f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else "")
    return out
