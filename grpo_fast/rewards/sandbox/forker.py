"""Candidate supervisor ("forker"): starts every program in fresh namespaces and ends it.

Forked from the zygote before any job exists, it never holds a program, a test or anyone's output: per job it
receives limits and three descriptors (the channel to the judge, stdout, stderr), forks the program straight into
a new PID namespace, and reports its exit. A program is killed at its hard deadline, or shortly after the judge
finished with it; with a PID namespace its death takes every process it started along.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from . import isolation

STOP_GRACE_S = 0.1  # after the judge is done: time for the program to flush its output and exit by itself
HARD_EXTRA_S = 1.0  # the judge enforces the timeout; this is the backstop


@dataclass
class _Program:
    id: int
    slot: int
    deadline: float
    workdir: str
    stop_at: float = float("inf")
    timed_out: bool = False


def _candidate(desc: dict[str, Any], fds: list[int], level: str, uid: int, workdir: str,
               site_dirs: list[str]) -> None:
    """The program's process: private filesystem, limits, unprivileged uid, then the runner. Never returns."""
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        workdir = isolation.private_workdir(level, uid, workdir, root_view(site_dirs)[0])
        rpc, out, err = fds
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.dup2(rpc, 3)
        os.closerange(4, 1 << 16)
        os.chdir(workdir)
        isolation.drop_privileges(level, uid, int(desc["memory_mb"]), int(float(desc["timeout"])) + 2)
        os.environ.clear()
        os.environ.update({"PATH": "/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8",
                           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - empty: reading gives "" and input() EOFError
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        sys.argv = ["solution.py"]
        real_cpus = os.cpu_count() or 1
        os.cpu_count = lambda: min(real_cpus, isolation.CPU_COUNT)  # pools sized to fit the process limit
        if not desc.get("packages", True):
            sys.path[:] = [p for p in sys.path if p not in site_dirs]
            for name, mod in list(sys.modules.items()):
                if any(str(getattr(mod, "__file__", "") or "").startswith(d) for d in site_dirs):
                    del sys.modules[name]
        from .runner import serve

        serve(3)
    finally:
        os._exit(1)


def root_view(site_dirs: list[str]) -> tuple[list[str], list[str]]:
    """What programs keep of the filesystem (the interpreter, its packages) and what is hidden inside that."""
    return [sys.base_prefix, sys.prefix, *site_dirs], [os.path.join(d, h) for d in site_dirs
                                                        for h in isolation.HIDDEN_IN_PACKAGES]


def main(jobs: socket.socket, report_fd: int, level: str, uid_base: int, site_dirs: list[str],
         private_root: bool) -> None:
    """Serve ``run``/``stop`` messages from the zygote; write one exit report per program to ``report_fd``."""
    isolation.set_pdeathsig()
    isolation.set_nondumpable()
    pidns = isolation.PidNamespaces() if level == isolation.STRONGEST else None
    if pidns is None:
        isolation.set_subreaper()  # orphans of programs come to us, to be killed
    if private_root:  # programs see the system, the interpreter and its packages; not the user's files or datasets
        isolation.minimal_root(*root_view(site_dirs))
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    report = _PipeWriter(report_fd)
    running: dict[int, _Program] = {}
    by_id: dict[int, int] = {}
    while True:
        now = time.monotonic()
        due = min((min(p.deadline, p.stop_at) for p in running.values()), default=None)
        ready = select.select([jobs, wake_r], [], [], None if due is None else max(0.0, due - now))[0]
        if jobs in ready:
            msg, fds, _flags, _addr = socket.recv_fds(jobs, 1 << 16, 4)
            if not msg:
                for pid in running:
                    os.kill(pid, signal.SIGKILL)
                os._exit(0)
            desc = json.loads(msg)
            if desc["op"] == "run":
                pid = _spawn(desc, fds, level, uid_base, site_dirs, pidns)
                if pid is None:
                    report.send(json.dumps({"id": desc["id"], "returncode": None, "timed_out": False,
                                            "fault": "could not start the program"}).encode())
                else:
                    t = float(desc["timeout"]) + HARD_EXTRA_S
                    running[pid] = _Program(desc["id"], desc["slot"], time.monotonic() + t, desc.get("workdir", ""))
                    by_id[desc["id"]] = pid
            elif desc["op"] == "stop" and desc["id"] in by_id:
                prog = running[by_id[desc["id"]]]
                prog.stop_at = min(prog.stop_at, time.monotonic() + STOP_GRACE_S)
        if wake_r in ready:
            while _drain(wake_r):
                pass
        now = time.monotonic()
        for pid, prog in running.items():
            if now >= prog.deadline or now >= prog.stop_at:
                prog.timed_out = prog.timed_out or now >= prog.deadline
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for pid, status in isolation.reap():
            prog = running.pop(pid, None)
            if prog is None:
                continue  # an adopted orphan
            del by_id[prog.id]
            if level != isolation.STRONGEST:
                isolation.kill_leftovers(level, uid_base + prog.slot, set(running))
                shutil.rmtree(prog.workdir, ignore_errors=True)
            report.send(json.dumps({"id": prog.id, "returncode": os.waitstatus_to_exitcode(status),
                                    "timed_out": prog.timed_out}).encode())


def _spawn(desc: dict[str, Any], fds: list[int], level: str, uid_base: int, site_dirs: list[str],
           pidns: isolation.PidNamespaces | None) -> int | None:
    uid = uid_base + int(desc["slot"])
    try:
        if len(fds) != 3:
            return None
        workdir = ""
        if pidns is None:
            workdir = tempfile.mkdtemp(prefix="grpo_fast_sbx_")
            if level == "uid-drop":
                os.chown(workdir, uid, uid)
            desc["workdir"] = workdir
        for name in desc.get("preload") or ():
            if name in PRELOADABLE and name not in sys.modules:
                try:
                    __import__(name)
                except Exception:  # noqa: BLE001, S110 - only a speed-up
                    pass
        if pidns is not None:
            pidns.before_fork()
        pid = os.fork()
        if pid == 0:
            _candidate(desc, fds, level, uid, workdir, site_dirs)
        return pid
    except OSError:
        return None
    finally:
        for fd in fds:
            os.close(fd)


PRELOADABLE = frozenset({"numpy"})  # heavy imports worth keeping warm once a program asked for them


def _drain(fd: int) -> bool:
    try:
        return bool(os.read(fd, 4096))
    except BlockingIOError:
        return False


class _PipeWriter:
    """Length-prefixed frames on a pipe (the same framing as ``wire.Stream``)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, payload: bytes) -> None:
        data = len(payload).to_bytes(4, "little") + payload
        while data:
            data = data[os.write(self.fd, data):]
