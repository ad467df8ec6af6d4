"""The pinned GPU wheels' own source, for contract tests: downloaded once with pip, read with zipfile + ast.

    src = PinnedWheel.get("unsloth"); tree = src.ast("unsloth/models/loader.py")
    meta = RemoteWheel("torch", "2.13.0").text(RemoteWheel("torch", "2.13.0").metadata_path)

Wheels land in ``$GRPO_FAST_CACHE/wheels`` (default ``~/.cache/grpo_fast/wheels``) through ``pip download
--no-deps`` at the version requirements-gpu.txt pins. ``RemoteWheel`` reads single members of a wheel on PyPI
with HTTP range requests (zipfile over a seekable reader), for wheels of which a test needs a few small files
(torch's 528 MB wheel for its METADATA); each member read is kept in ``wheels/members``. Rule when a wheel is
missing and cannot be fetched: skip with the reason on a developer machine, fail under CI (``CI`` set), where
PyPI is reachable.
"""

from __future__ import annotations

import ast
import io
import json
import os
import subprocess
import sys
import tempfile
import urllib.request
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
        _unreachable(f"cannot download {dist}=={version}: {(proc.stderr.strip().splitlines() or ['?'])[-1][:200]}")
    return found[-1]


class PinnedWheel:
    """One locked distribution's wheel, read in place."""

    def __init__(self, dist: str, version: str | None = None):
        self.dist = dist
        self.version = version or lock_pins(gpu=True)[0][dist]
        self.path = _fetch(dist, self.version)
        self.zip = zipfile.ZipFile(self.path)

    @classmethod
    @cache
    def get(cls, dist: str, version: str | None = None) -> PinnedWheel:
        return cls(dist, version)

    @property
    def names(self) -> list[str]:
        return self.zip.namelist()

    def read(self, member: str) -> bytes:
        return self.zip.read(member)

    def text(self, member: str) -> str:
        return self.zip.read(member).decode("utf-8")

    @cache  # noqa: B019 - one parse per file per session
    def ast(self, member: str) -> ast.Module:
        return ast.parse(self.text(member))


LOCK_FILES = ("requirements-gpu.txt", "requirements-gpu-cu12.txt")
_RESOLVING: dict[str, tuple[subprocess.Popen, tempfile.TemporaryDirectory]] = {}


def start_resolving(name: str) -> None:
    """Start pip's dry run of a lock in the background. Each one waits on PyPI for half a minute: the suite starts
    both at collection (tests/conftest.py), so they overlap each other and the tests before theirs."""
    if name in _RESOLVING:
        return
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {"PIP_CONFIG_FILE": os.devnull}
    tmp = tempfile.TemporaryDirectory()
    report = Path(tmp.name) / "report.json"
    proc = subprocess.Popen([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "-q",
                             "-r", str(root / name), "--report", str(report)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    _RESOLVING[name] = proc, tmp


def stop_resolving() -> None:
    """End the dry runs no test waited for (a run that selected only some of the network tests)."""
    for proc, tmp in _RESOLVING.values():
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        tmp.cleanup()


@cache
def resolve_gpu_set(name: str = "requirements-gpu.txt") -> list[dict]:
    """``pip install --dry-run --report`` of requirements-gpu.txt (or another lock, ``name``) against PyPI alone,
    as a GPU user's pip sees it: no
    local config (a machine's find-links folder holds torch's CPU build, 2.13.0+cpu, which would otherwise satisfy
    the GPU set's torch==2.13.0). The report's ``install`` list: every package with its metadata. Once a session,
    started in the background by ``start_resolving`` where the suite selected a network test."""
    start_resolving(name)
    proc, tmp = _RESOLVING[name]
    with tmp:
        _, stderr = proc.communicate(timeout=1800)
        if proc.returncode and ("Network is unreachable" in stderr or "Max retries" in stderr):
            _unreachable(f"PyPI unreachable for pip's dry run of {name}")
        assert proc.returncode == 0, stderr[-3000:]
        return json.loads((Path(tmp.name) / "report.json").read_text())["install"]


def _unreachable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(reason + " (CI has PyPI: these tests must run there)")
    pytest.skip(reason)


class _RangeReader(io.RawIOBase):
    """A remote file as a seekable stream: each read is one HTTP range request."""

    def __init__(self, url: str, size: int):
        self.url, self.size, self.pos = url, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = offset if whence == 0 else self.pos + offset if whence == 1 else self.size + offset
        return self.pos

    def readinto(self, buffer) -> int:
        if self.pos >= self.size:
            return 0
        end = min(self.pos + len(buffer), self.size) - 1
        request = urllib.request.Request(self.url, headers={"Range": f"bytes={self.pos}-{end}"})
        with urllib.request.urlopen(request, timeout=120) as reply:
            if reply.status != 206:  # a server that ignores ranges would hand back the whole file from byte 0
                raise OSError(f"{self.url}: HTTP {reply.status} to a range request")
            data = reply.read()
        buffer[: len(data)] = data
        self.pos += len(data)
        return len(data)


def _is_linux_x86_64(filename: str) -> bool:
    platforms = filename[:-4].split("-")[-1].split(".")
    return platforms == ["any"] or any(p.startswith("manylinux") and p.endswith("x86_64") or p == "linux_x86_64"
                                       for p in platforms)


@cache
def linux_wheel(dist: str, version: str) -> dict:
    """PyPI's file entry (simple JSON API) for the manylinux x86_64 (or pure) wheel of ``dist==version``; kept on
    disk once found, so a cached audit asks PyPI nothing. LookupError where PyPI has no such wheel (sdist only);
    offline, the test skips (fails under CI)."""
    kept = wheel_dir() / "members" / "entries" / f"{dist}-{version}.json"
    if kept.is_file():
        return json.loads(kept.read_text())
    request = urllib.request.Request(f"https://pypi.org/simple/{dist}/",
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as reply:
            files = json.load(reply)["files"]
    except OSError as err:
        _unreachable(f"cannot reach PyPI for {dist}=={version}: {err}")
    stem = dist.replace("-", "_").lower()
    tags = f"cp{sys.version_info.major}{sys.version_info.minor}"
    ranked = [(tags in f["filename"] or "abi3" in f["filename"] or "none" in f["filename"], f["filename"], f)
              for f in files if f["filename"].lower().startswith(f"{stem}-{version}-")
              and f["filename"].endswith(".whl") and _is_linux_x86_64(f["filename"])]
    if not ranked:
        raise LookupError(f"no Linux x86_64 wheel of {dist}=={version} on PyPI")
    entry = max(ranked, key=lambda r: (r[0], r[1]))[2]
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_text(json.dumps(entry))
    return entry


class RemoteWheel:
    """One wheel on PyPI read member by member (range requests); members read once are kept on disk."""

    def __init__(self, dist: str, version: str):
        self.dist, self.version = dist, version
        entry = linux_wheel(dist, version)
        self.filename, self._entry = entry["filename"], entry
        self.folder = wheel_dir() / "members" / self.filename
        names = self.folder / ".names.json"
        self._zip: zipfile.ZipFile | None = None
        if names.is_file():
            self.names = json.loads(names.read_text())
        else:
            self.names = self._open().namelist()
            self.folder.mkdir(parents=True, exist_ok=True)
            names.write_text(json.dumps(self.names))
        self.metadata_path = next(n for n in self.names if n.endswith(".dist-info/METADATA") and n.count("/") == 1)

    def read(self, member: str) -> bytes:
        if member.startswith("/") or ".." in member.split("/") or member not in self.names:
            raise KeyError(f"{member!r} is not a member of {self.filename}")  # and never a path outside the cache
        kept = self.folder / member
        if kept.is_file():
            return kept.read_bytes()
        data = self._open().read(member)
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_bytes(data)
        return data

    def text(self, member: str) -> str:
        return self.read(member).decode("utf-8")

    def _open(self) -> zipfile.ZipFile:
        if self._zip is None:
            reader = _RangeReader(self._entry["url"], self._entry["size"])
            self._zip = zipfile.ZipFile(io.BufferedReader(reader, 1 << 16))
        return self._zip


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
