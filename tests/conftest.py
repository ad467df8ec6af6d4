"""Shared fixtures: a tiny model saved as a normal HF folder, so tests load it through the user's path."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "helpers"))  # shared helpers: tiny models, pinned wheels, ...
sys.path.insert(0, str(Path(__file__).parent / "sandbox"))  # the sandbox suites' helper modules and corpora
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import background  # noqa: E402
import pinned  # noqa: E402
from tiny import save_tiny_model  # noqa: E402


def pytest_collection_finish(session: pytest.Session) -> None:
    """Where the run selected a PyPI test, pip's dry runs of the two GPU locks start now, in the background; and
    the whole-process runs that the selected tests' modules list in ``BACKGROUND`` (tests/helpers/background.py)."""
    if session.config.option.collectonly:
        return
    if any(item.get_closest_marker("network") for item in session.items):
        for name in pinned.LOCK_FILES:
            pinned.start_resolving(name)
    for item in session.items:
        run = background_run(item)
        if run is not None:
            background.start(item.originalname, run)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests that wait for a background run go last: their runs then overlap the rest of the suite."""
    items.sort(key=lambda item: background_run(item) is not None)  # stable: the order is kept otherwise


def background_run(item: pytest.Item):
    """The whole-process run that ``item``'s module lists for it in ``BACKGROUND``, if any."""
    module = getattr(item, "module", None)
    return getattr(module, "BACKGROUND", {}).get(getattr(item, "originalname", ""))


def pytest_sessionfinish(session: pytest.Session) -> None:
    pinned.stop_resolving()
    background.stop()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A random 2-layer Llama and its tokenizer in a folder, as `model: <path>` expects."""
    return save_tiny_model(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture
def in_tmp(tmp_path, monkeypatch) -> Path:
    """Run in a fresh working directory so default run dirs (runs/...) land in tmp."""
    monkeypatch.chdir(tmp_path)
    return tmp_path
