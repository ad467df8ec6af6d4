"""The package is a one-way stack: the import graph (imports inside functions included) has no cycle, and no
module imports a higher layer. The layer order is the README's layout, lowest first."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "grpo_fast"


def readme_layers() -> list[list[str]]:
    """The README's layout, lowest layer first: each line of its ``grpo_fast/`` block names a layer's modules
    (``errors.py, files.py, entry.py   the ground floor ...``) before its description."""
    text = (ROOT / "README.md").read_text()
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    layers = []
    for line in block.splitlines():
        if not line.startswith("  ") or line.startswith("   "):
            continue
        names = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
        layers.append([n.strip().removesuffix(".py").removesuffix("/") for n in names.split(",")])
    return layers


LAYERS = readme_layers()
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Every kit module this file imports, at the top or inside a function."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target.startswith("grpo_fast") and target != name:
                found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imported(name, path, known) for name, path in known.items()}


def layer(name: str) -> int:
    parts = name.split(".")
    return RANK["__init__" if len(parts) == 1 else parts[1]]


def test_every_module_has_a_layer():
    assert [n for n in modules() if n != "grpo_fast" and n.split(".")[1] not in RANK] == []


def test_no_module_imports_a_higher_layer():
    upward = sorted(f"{a} -> {b}" for a, targets in graph().items() for b in targets if layer(b) > layer(a))
    assert upward == []


def test_the_import_graph_has_no_cycle():
    edges = graph()
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [node, nxt] if nxt in stack else [node, nxt])
            elif nxt not in state:
                visit(nxt, [*stack, node])
        state[node] = 2

    for name in sorted(edges):
        if name not in state:
            visit(name, [])
    assert cycles == []


@pytest.mark.parametrize("name", ["grpo_fast.sandbox"])
def test_the_sandbox_imports_nothing_of_the_kit(name):
    """The zygote loads the sandbox on its own, without the rest of grpo_fast."""
    outside = {b for a, bs in graph().items() if a.startswith(name) for b in bs if not b.startswith(name)}
    assert outside == set()
