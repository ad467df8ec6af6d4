"""The README stays a three-minute read (<= 160 lines) and every relative link in README.md and docs/*.md lands:
the file exists and its #anchor names a heading there (GitHub's slugs)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```[\w-]*\n.*?^```[ \t]*$", re.S | re.M)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation removed, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    for line in FENCE.sub("", page.read_text(encoding="utf-8")).splitlines():
        if line.startswith("#"):
            base = slug(line.lstrip("#"))
            name, n = base, 0
            while name in found:
                n += 1
                name = f"{base}-{n}"
            found.add(name)
    return found


def links(page: Path) -> list[str]:
    return [m.group(1) for m in LINK.finditer(FENCE.sub("", page.read_text(encoding="utf-8")))
            if not re.match(r"[a-z]+:", m.group(1))]


def test_slug_matches_github():
    assert slug("Measured on an NVIDIA H200 (2026-12-04)") == "measured-on-an-nvidia-h200-2026-12-04"
    assert slug("The demo (`make demo`)") == "the-demo-make-demo"
    assert slug("The `tool_math` recipe") == "the-tool_math-recipe"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    broken = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.name}")
    assert not broken, f"{page.name}: " + "; ".join(broken)


def test_readme_is_short():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 160
