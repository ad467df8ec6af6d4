"""The working directory a pytest job's test and program share: ``tmp_path``, and files either side writes.

Judge and program each have a private ``/tmp/work`` (a tmpfs of their own that dies with the job). While a test
uses files (``tmp_path``/``tmpdir`` or file functions), the two are kept in step at each call into the program: the
judge sends the files the test wrote or changed since the last call, the program sends back those it wrote. Only
regular files under the directory cross, as (relative path, bytes), checked on arrival (no absolute path, no
``..``, no link followed, at most ``MAX_FILES`` files and ``MAX_BYTES`` bytes a step), so neither side can reach
outside its own directory. ``solution.py`` (the program's source) never crosses.

Without mount namespaces (a container, a normal user without user namespaces) no path can name a private
directory on both sides, so the judge works in the program's own directory, under the program's uid
(``shared_directory``): nothing needs to cross.
"""

from __future__ import annotations

import os
from typing import Any

from ..policy import Policy

WORKDIR = "/tmp/work"  # mounts.JOB_WORKDIR: the same path on both sides, so absolute paths mean the same file
MAX_FILES = 256
MAX_BYTES = 8 << 20
_SKIP = frozenset({"solution.py"})


def shared_directory(desc: dict[str, Any], policy: Policy) -> bool:
    """A pytest file's judge shares the program's directory and uid (``desc["workdir"]``, made for the program):
    the program gains no reach over its judge (non-dumpable, ptrace filtered, signals scoped by Landlock) beyond
    that directory's files, which it may write at each call anyway. Its files are mode 0600: one uid reads both."""
    return bool(desc.get("scratch")) and not policy.namespaces


class Scratch:
    """One side's view: what it last sent or received, so a step carries only what changed."""

    def __init__(self, root: str = WORKDIR) -> None:
        self.root = root
        self.seen: dict[str, tuple[int, int, int]] = {}

    @staticmethod
    def usable() -> bool:
        return os.getcwd() == WORKDIR and os.access(WORKDIR, os.W_OK)

    def changed(self) -> dict[str, bytes | bool | None]:
        """Files written or changed since the last step (bytes), new directories (True), what was removed (None)."""
        now: dict[str, tuple[int, int, int]] = {}
        out: dict[str, bytes | bool | None] = {}
        total = 0
        for rel, st in _walk(self.root):
            if rel.endswith("/"):  # a directory: only its existence crosses (``tmp_path`` before the file)
                now[rel] = key = (0, 0, st.st_ino)
                if self.seen.get(rel) != key and len(out) < MAX_FILES:
                    out[rel] = True
                continue
            now[rel] = key = (st.st_mtime_ns, st.st_size, st.st_ino)
            if self.seen.get(rel) != key and len(out) < MAX_FILES and total + st.st_size <= MAX_BYTES:
                try:
                    with open(os.path.join(self.root, rel), "rb") as f:
                        out[rel] = f.read(MAX_BYTES - total)
                except OSError:
                    continue
                total += len(out[rel])
        out.update({rel: None for rel in self.seen if rel not in now})
        self.seen = now
        return out

    def apply(self, files: Any) -> None:
        """The other side's changes, each path checked; what is written here is not sent back."""
        if type(files) is not dict or len(files) > MAX_FILES:
            return
        for rel, data in files.items():
            path = _inside(self.root, rel)
            if path is None:
                continue
            try:
                if data is None:
                    (os.rmdir if rel.endswith("/") else os.unlink)(path)
                    self.seen.pop(rel, None)
                elif data is True and rel.endswith("/"):
                    os.makedirs(path, exist_ok=True)
                    self.seen[rel] = (0, 0, os.stat(path, follow_symlinks=False).st_ino)
                elif type(data) is bytes and len(data) <= MAX_BYTES:
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
                    with open(fd, "wb") as f:
                        f.write(data)
                    st = os.stat(path, follow_symlinks=False)
                    self.seen[rel] = (st.st_mtime_ns, st.st_size, st.st_ino)
            except OSError:
                continue


def _inside(root: str, rel: Any) -> str | None:
    """``root/rel`` when ``rel`` is a plain relative path below it, with no link on the way; else None."""
    if type(rel) is not str or not rel or rel.startswith("/") or "\0" in rel or rel in _SKIP:
        return None
    parts = rel.removesuffix("/").split("/")
    if any(p in ("", ".", "..") for p in parts):
        return None
    here = root
    for part in parts:
        here = os.path.join(here, part)
        if os.path.islink(here):
            return None
    return here


def _walk(top: str) -> list[tuple[str, os.stat_result]]:
    found: list[tuple[str, os.stat_result]] = []
    stack = [""]
    while stack and len(found) <= 4 * MAX_FILES:
        rel_dir = stack.pop()
        try:
            entries = list(os.scandir(os.path.join(top, rel_dir)))
        except OSError:
            continue
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if entry.is_dir(follow_symlinks=False):
                stack.append(rel)
                found.append((rel + "/", entry.stat(follow_symlinks=False)))
            elif entry.is_file(follow_symlinks=False) and rel not in _SKIP:
                found.append((rel, entry.stat(follow_symlinks=False)))
    return found
