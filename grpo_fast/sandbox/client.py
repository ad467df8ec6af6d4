"""Trainer side: the ``Sandbox`` client of one zygote, job building and the results.

The zygote is a fresh ``python -I -S`` with a scrubbed environment that loads this package under a private name,
without the rest of grpo_fast; jobs and results are 4-byte length + JSON frames on its stdin and stdout.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import select
import site
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .policy import LEVELS, STRONGEST, remaining_threats
from .verdict.stdio import COMPARE_MODES

log = logging.getLogger("grpo_fast.sandbox")

# The package without its __init__ (which loads this client, and with it logging and subprocess): every job's
# process is a fork of what the zygote holds, and its size is paid at each fork and exit.
_BOOT = """import sys, types
pkg = types.ModuleType("grpo_fast_sandbox")
pkg.__path__ = [sys.argv[1]]
sys.modules["grpo_fast_sandbox"] = pkg
from grpo_fast_sandbox.pool import startup
startup.main(sys.argv[2:])
"""


@dataclass
class SandboxResult:
    """Outcome of one program. ``passed`` holds the judge's per-test verdicts; ``failures`` says why each failed."""

    status: str  # "ok" | "error" (the program raised) | "exited" | "killed" (its process ended) | "timeout"
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    wall_s: float = 0.0
    passed: list[bool] = field(default_factory=list)
    n_tests: int = 0
    error: str = ""
    failures: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)  # what clean-up after the job could not remove (logged too)

    @property
    def outside_design(self) -> int:
        """Failed tests in which the judge kept a plain value from a program object (``Money(150) == 1.5``): an
        honest class may fail there, so such rows are counted and reported, never silently zero."""
        return sum(isinstance(f, str) and f.startswith("outside design") for f in self.failures)

    @property
    def fraction(self) -> float:
        """Share of tests passed. Tests after a crash or a hang count as failed; no verdict at all scores 0."""
        if not self.n_tests or len(self.passed) != self.n_tests:
            return 0.0
        return sum(p is True for p in self.passed) / self.n_tests


def make_job(source: str, tests: Sequence[str] | None = None, setup: str = "", timeout: float = 5.0,
             memory_mb: int = 1024, *, entry_point: str | None = None, trusted: str = "",
             packages: bool = True) -> dict[str, Any]:
    """One job for ``Sandbox.run_many``.

    ``setup`` runs on both sides (the judge's and the program's). ``trusted`` is the dataset's own code (e.g. a
    HumanEval prompt with the helpers its tests call) run only in the judge, in the tests' namespace, so a program
    cannot redefine what the tests rely on; ``entry_point`` is left to the program, and may be named like a
    builtin. ``packages=False`` hides site-packages from the program.
    """
    return {"source": source, "tests": [t for t in tests or [] if isinstance(t, str)], "setup": setup or "",
            "timeout": float(timeout), "memory_mb": int(memory_mb), "expose": [entry_point] if entry_point else [],
            "trusted": trusted or "", "packages": bool(packages)}


def make_io_job(source: str, inputs: Sequence[str], outputs: Sequence[str], timeout: float = 2.0,
                memory_mb: int = 1024, *, compare: str = "tokens", abs_tol: float = 1e-6, rel_tol: float = 1e-6,
                all_or_nothing: bool = False, packages: bool = True, checker: str = "") -> dict[str, Any]:
    """One stdin/stdout job: the program runs as ``__main__`` once per test, with ``inputs[i]`` on stdin; its stdout
    is compared with ``outputs[i]`` outside its process (``stdio.same_output``), or judged by ``checker`` (a
    dataset's Python checker, run sandboxed: ``checker.py input.txt output.txt answer.txt``, exit 0 accepts).
    ``timeout`` is per test."""
    if compare not in COMPARE_MODES:
        raise ValueError(f"compare must be one of {COMPARE_MODES}, not {compare!r}")
    if len(inputs) != len(outputs):
        raise ValueError(f"{len(inputs)} inputs but {len(outputs)} outputs")
    return {"kind": "io", "source": source, "inputs": [str(x) for x in inputs], "outputs": [str(x) for x in outputs],
            "timeout": float(timeout), "memory_mb": int(memory_mb), "compare": compare, "abs_tol": float(abs_tol),
            "rel_tol": float(rel_tol), "all_or_nothing": bool(all_or_nothing), "packages": bool(packages),
            "checker": checker or ""}


def make_cells_job(cells: Sequence[str], timeout: float = 5.0, memory_mb: int = 512, *,
                   packages: bool = True) -> dict[str, Any]:
    """A tool session's call: ``cells`` (the episode's earlier cells, then the new one) run in one fresh process,
    the earlier ones quietly; the result's ``stdout``/``stderr`` are the new cell's (``runner.run_cells``)."""
    return {**make_io_job(json.dumps([str(c) for c in cells]), [""], [""], timeout, memory_mb, packages=packages),
            "cells": True}


def _site_dirs() -> list[str]:
    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]


class Sandbox:
    """Client of one zygote. Thread-safe; calls are serialised, programs inside a call run in parallel."""

    def __init__(self, workers: int | None = None, level: str | None = None):
        self.workers = max(1, workers or os.cpu_count() or 1)
        self.requested = level or os.environ.get("GRPO_FAST_SANDBOX_LEVEL", "auto")
        self._proc: subprocess.Popen[bytes] | None = None
        self._level = ""
        self._layers: dict[str, str] = {}
        self._imports_refused = ""  # why a job's imports of modules not loaded before it fail here, if they do
        self._uids: list[tuple[int, int]] = []
        self._lock = threading.Lock()
        self._next = 0

    def _ensure(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
               "MKL_NUM_THREADS": "1"}
        args = [sys.executable, "-I", "-S", "-c", _BOOT, os.path.dirname(os.path.abspath(__file__)), self.requested,
                str(self.workers), json.dumps(_site_dirs())]
        self._proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True,
                                      cwd="/")
        hello = self._read(self._proc, time.monotonic() + 30)
        if hello is None:
            raise RuntimeError("sandbox zygote failed to start")
        self._level = hello["level"]
        self._layers = dict(hello.get("layers") or {})
        self._imports_refused = str(hello.get("imports_refused") or "")
        self._uids = [(int(low), int(high)) for low, high in hello.get("uids") or ()]
        for warning in hello.get("warnings") or ():
            log.warning("code sandbox: %s", warning)
        if self._level != STRONGEST.name:
            log.warning("code sandbox running at reduced isolation %r: %s", self._level, LEVELS[self._level])
        return self._proc

    def threats(self) -> list[str]:
        """What a generated program can still reach on this host (``remaining_threats``); empty: none known."""
        with self._lock:
            self._ensure()
            return remaining_threats(self._level, self._layers)

    @staticmethod
    def _read(proc: subprocess.Popen[bytes], deadline: float) -> dict[str, Any] | None:
        fd = proc.stdout.fileno()  # type: ignore[union-attr]
        buf = b""
        need = 4
        poller = select.poll()  # not select(): a trainer may hold more than 1024 descriptors
        poller.register(fd, select.POLLIN)
        while len(buf) < need:
            left = deadline - time.monotonic()
            if left <= 0 or not poller.poll(left * 1000):
                return None
            chunk = os.read(fd, need - len(buf))
            if not chunk:
                return None
            buf += chunk
            if need == 4 and len(buf) == 4:
                need = 4 + struct.unpack("<I", buf)[0]
        return json.loads(buf[4:])

    @property
    def pid(self) -> int:
        """Process id of the zygote (started if needed)."""
        with self._lock:
            return self._ensure().pid

    def level(self) -> str:
        with self._lock:
            self._ensure()
            return self._level

    def layers(self) -> dict[str, str]:
        """Each isolation layer (namespaces, rlimits, cgroup memory/pids/cpu, seccomp): ``holds ...`` or
        ``refused: why`` on this host."""
        with self._lock:
            self._ensure()
            return dict(self._layers)

    def uid_ranges(self) -> list[tuple[int, int]]:
        """The host uids ``[low, high)`` this pool's judges and programs run as, where it drops each job to uids of
        its own (root); empty where every job runs as your uid. A process of these uids outlives no job."""
        with self._lock:
            self._ensure()
            return list(self._uids)

    def close(self) -> None:
        with self._lock:
            if self._proc is not None:
                self._proc.kill()
                self._proc.wait()
                self._proc = None

    def run_many(self, jobs: Sequence[dict[str, Any]]) -> list[SandboxResult]:
        """Run jobs (see ``make_job``) in parallel; results in input order."""
        with self._lock:
            proc = self._ensure()
            ids = {}
            frames = []
            for i, job in enumerate(jobs):
                self._next += 1
                ids[self._next] = i
                frames.append({**job, "id": self._next})
            data = b"".join(struct.pack("<I", len(d)) + d for d in (json.dumps(f).encode() for f in frames))

            def feed() -> None:
                try:
                    proc.stdin.write(data)  # type: ignore[union-attr]
                    proc.stdin.flush()  # type: ignore[union-attr]
                except (BrokenPipeError, ValueError):
                    pass

            writer = threading.Thread(target=feed, daemon=True)
            writer.start()
            longest = max((float(j["timeout"]) * max(1, len(j.get("inputs") or ())) for j in jobs), default=0.0)
            deadline = time.monotonic() + (longest + 6) * (len(jobs) // self.workers + 1) + 10
            out: list[SandboxResult | None] = [None] * len(jobs)
            for _ in jobs:
                res = self._read(proc, deadline)
                if res is None:  # zygote died or hung: never leave the caller waiting
                    proc.kill()
                    proc.wait()
                    self._proc = None
                    break
                idx = ids.pop(res.pop("id"))
                if self._imports_refused and "ModuleNotFoundError" in res["error"]:  # the sandbox's doing, not the
                    res["error"] += f" (refused by the sandbox: {self._imports_refused})"  # program's
                if res.get("left"):  # a later job may see it: never quiet
                    log.warning("code sandbox: clean-up after a job could not remove: %s", "; ".join(res["left"]))
                out[idx] = SandboxResult(**res)
            writer.join(timeout=1)
            return [r or SandboxResult(status="exited", error="sandbox lost") for r in out]


_default: Sandbox | None = None


def default_sandbox() -> Sandbox:
    global _default
    if _default is None:
        _default = Sandbox()
        atexit.register(_default.close)
    return _default


def isolation_level() -> str:
    """Isolation level in force on this machine (see ``LEVELS`` for what each one means)."""
    return default_sandbox().level()


def describe_isolation() -> str:
    level = isolation_level()
    return f"{level}: {LEVELS[level]}"


def run_program(source: str, *, tests: Sequence[str] | None = None, setup: str = "", timeout: float = 5.0,
                memory_mb: int = 1024, sandbox: Sandbox | None = None) -> SandboxResult:
    """Run ``source`` (after ``setup``) as a module, then each test string against it."""
    return run_many([source], tests=[tests], setups=[setup], timeout=timeout, memory_mb=memory_mb,
                    sandbox=sandbox)[0]


def run_many(sources: Sequence[str], *, tests: Sequence[Sequence[str] | None] | None = None,
             setups: Sequence[str] | None = None, timeout: float = 5.0, memory_mb: int = 1024,
             sandbox: Sandbox | None = None) -> list[SandboxResult]:
    """Run many programs in parallel (pool sized to the cores); one result per source, in order."""
    tests = tests or [None] * len(sources)
    setups = setups or [""] * len(sources)
    jobs = [make_job(s, t, su, timeout, memory_mb) for s, t, su in zip(sources, tests, setups)]
    return (sandbox or default_sandbox()).run_many(jobs)
