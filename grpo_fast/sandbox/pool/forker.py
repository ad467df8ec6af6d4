"""Job supervisor ("forker"), one per worker slot: starts the slot's programs and judges in fresh namespaces and
ends them.

Forked from the zygote before any job exists, it never holds a program, a test or anyone's output; it is the clean
template a judge is forked from (``template.set_up`` makes it once: the slot's kernel layers, namespaces, minimal
root and Landlock as the ``Policy`` says). ``Slot.serve`` then takes the jobs: per job it receives limits and six
descriptors (the program's end of the verdict channel, its stdout and stderr, the judge's end of the channel, and
the judge's line to the zygote), forks the judge and the program (each contained by ``contain``'s steps), and
reports the program's exit. Both are killed at the hard deadline, the program also shortly after the judge finished
with it; with a PID namespace each death takes every process it started along.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..isolation import cgroups, cleanup, limits, memory, namespaces
from ..policy import Policy
from ..verdict import pytest_run, scratch
from .contain import Job, run_judge, run_program
from .template import UID_SPAN, Template, set_up
from .warmup import readable

# after the judge is done: time for the program to flush its output and exit by itself
STOP_GRACE_S = 0.1
HARD_EXTRA_S = 1.0  # the judge enforces the timeout; this is the backstop
IO_EXTRA_S = 0.05  # a stdin test has no judge: its time limit is enforced here
# heavy imports worth keeping warm once a program asked for them
PRELOADABLE = frozenset({"numpy"})


@dataclass
class _Program:
    id: int
    uid: int
    deadline: float
    workdir: str
    judge: int  # the job's judge: the exit report waits until it is gone too
    memory_mb: int = 0
    stop_at: float = float("inf")
    timed_out: bool = False
    left: list[str] = field(default_factory=list)  # what clean-up after the job could not remove


def main(jobs: socket.socket, report_fd: int, policy: Policy, uid_bases: tuple[int, int], site_dirs: list[str],
         private_root: bool, slot: int, cpu: int | None, slot_cgroups: cgroups.Cgroups,
         seccomp: limits.Filters | None, limit_shm: bool, dirs_prefix: str = "") -> None:
    """Serve slot ``slot``'s ``run``/``stop`` messages from the zygote; write one exit report per program to
    ``report_fd`` (shared by the slots' forkers: a report is one write, far below the size a pipe keeps whole).
    ``cpu``: the slot's own CPU, or None. ``slot_cgroups`` and ``seccomp`` (the compiled filter's two parts): the
    kernel layers the zygote found to hold; ``limit_shm``: whether each job's IPC namespace gets its shmall;
    ``dirs_prefix``: how the names of the jobs' directories start where jobs share the host's (``jobdirs``)."""
    template = set_up(policy, uid_bases, site_dirs, private_root, slot, cpu, slot_cgroups, seccomp, limit_shm,
                      dirs_prefix)
    Slot(template, jobs, report_fd).serve()


class Slot:
    """The serving loop: jobs in from the zygote, processes forked, deadlines and memory enforced, exits reported."""

    def __init__(self, template: Template, jobs: socket.socket, report_fd: int) -> None:
        self.t = template
        self.jobs = jobs
        self.report = _PipeWriter(report_fd)
        self.running: dict[int, _Program] = {}
        # judge pid -> its uid, hard deadline, program's pid, and the directories released once it is gone (its
        # own; its program's, where the program ended first: a pytest file's judge may work there)
        self.judges: dict[int, tuple[int, float, int, list[str]]] = {}
        self.by_id: dict[int, int] = {}
        # judge pid -> its program's exit report, sent once the judge is gone
        self.waiting: dict[int, dict] = {}
        self.wake_r, wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(wake_w, False)
        signal.signal(signal.SIGCHLD, _woken)
        signal.set_wakeup_fd(wake_w)

    def serve(self) -> None:
        watch = self.t.watch
        while True:
            now = time.monotonic()
            due = min([*(min(p.deadline, p.stop_at) for p in self.running.values()),
                       *(j[1] for j in self.judges.values()),
                       *([watch.next_at] if watch is not None and self.running else [])], default=None)
            watched = [watch.fd] if watch is not None and watch.fd >= 0 and self.running else []
            ready = readable([self.jobs.fileno(), self.wake_r, *watched], None if due is None else max(0.0, due - now))
            if watched and watched[0] in ready:
                watch.woken()  # type: ignore[union-attr]
            if self.jobs.fileno() in ready:
                self.receive()
            if self.wake_r in ready:
                while _drain(self.wake_r):
                    pass
            self.enforce(time.monotonic())
            self.reap()

    def receive(self) -> None:
        msg, fds, _flags, _addr = socket.recv_fds(self.jobs, 1 << 16, 8)
        if not msg:  # the zygote is gone: so are its jobs
            for pid in [*self.running, *self.judges]:
                os.kill(pid, signal.SIGKILL)
            self.t.care.forker_ending([*self.running, *self.judges])
            os._exit(0)
        desc = json.loads(msg)
        if desc["op"] == "run":
            self.start(desc, fds)
        elif desc["op"] == "stop" and desc["id"] in self.by_id:
            prog = self.running[self.by_id[desc["id"]]]
            prog.stop_at = min(prog.stop_at, time.monotonic() + STOP_GRACE_S)

    def start(self, desc: dict, fds: list[int]) -> None:
        """Fork a job's program and (unless it is a stdin test) its judge; report at once if either cannot start."""
        t = self.t
        # the first pytest file: pytest warm from here on
        if desc.get("pytest") and pytest_run.preload():
            gc.collect(1)
            gc.freeze()
        # the kernel moved us (CPU offline, cpuset)
        if t.cpu is not None and os.sched_getaffinity(0) != {t.cpu}:
            # the job's processes must be born on the slot's CPU, or none
            os.sched_setaffinity(0, {t.cpu})
        off = int(desc["uid"]) % UID_SPAN
        uid, judge_uid = (t.uid_bases[0] + off, t.uid_bases[1] + off) if not t.policy.user_namespace else (0, 0)
        # one directory for both: one uid (its files are 0600)
        if scratch.shared_directory(desc, t.policy):
            judge_uid = uid
        # first: the previous job's IPC namespace (its shared memory) goes
        unlimited = ""
        if t.networks is not None:
            t.networks.next_job()
            if t.limit_shm:  # said to hold at the pool's start: a job it fails for does not run
                unlimited = memory.limit_ipc_namespace(int(desc["memory_mb"]))
        if t.layers.slots is not None:
            try:
                t.layers.slots.prepare(int(desc["memory_mb"]))
            except OSError:
                pass  # e.g. cached pages above a lower limit: the slot keeps its previous one
        judge: int | None
        pid = judge = None
        if unlimited or len(fds) != (4 if desc.get("io") else 6):
            for fd in fds:
                os.close(fd)
        elif desc.get("io"):  # a stdin test: the program alone; its output is judged by the zygote
            pid = self.fork(fds, self.program_job(desc, fds, uid))
            judge = 0
        else:
            pid, judge = self.spawn_pair(desc, fds, uid, judge_uid)
        if pid is None or judge is None:
            for victim in (v for v in (pid, judge) if v is not None):
                _kill(victim)
            t.care.never_started(desc.get("workdir", ""), desc.get("judge_workdir", ""))
            self.report.send(json.dumps({"id": desc["id"], "returncode": None, "timed_out": False,
                                         "fault": f"the job's SysV shared-memory limit failed ({unlimited})"
                                         if unlimited else "could not start the program or its judge"}).encode())
            return
        deadline = time.monotonic() + float(desc["timeout"]) + (IO_EXTRA_S if desc.get("io") else HARD_EXTRA_S)
        if judge:
            self.judges[judge] = (judge_uid, deadline, pid, [desc.get("judge_workdir", "")])
        self.running[pid] = _Program(desc["id"], uid, deadline, desc.get("workdir", ""), judge, int(desc["memory_mb"]))
        self.by_id[desc["id"]] = pid

    def spawn_pair(self, desc: dict, fds: list[int], uid: int, judge_uid: int) -> tuple[int | None, int | None]:
        """The program, then its judge (the program's start is the longer one, the judge's first read waits), both
        made ready before either is forked: what this process writes between two forks is copied again after the
        second, so the two forks come back to back. Every descriptor of ``fds`` is closed here."""
        program = self.program_job(desc, fds[:4], uid)
        judge = self.judge_job(desc, fds[4:], judge_uid)
        if judge is None:  # its own descriptors are closed
            for fd in fds[:4]:
                os.close(fd)
            return None, None
        pid = self.fork(fds[:4], program)
        if pid is None:
            for fd in fds[4:]:
                os.close(fd)
            return None, None
        return pid, self.fork(fds[4:], judge)

    def program_job(self, desc: dict, fds: list[int], uid: int) -> Callable[[], object]:
        """The program's process, ready to fork: its directory taken, the heavy imports it asked for warm."""
        t = self.t
        workdir = t.care.program_dir(desc, uid if t.policy.uid_drop else None)
        for name in desc.get("preload") or ():
            if name in PRELOADABLE and name not in sys.modules:
                try:
                    __import__(name)
                except Exception:  # noqa: BLE001, S110 - only a speed-up
                    pass
        job = Job(desc, fds, t.policy, uid, workdir, t.site_dirs, t.layers)
        return lambda: run_program(job)

    def judge_job(self, desc: dict, fds: list[int], uid: int) -> Callable[[], object] | None:
        """The judge's process, ready to fork; None (``fds`` closed) where its directory cannot be made."""
        t = self.t
        workdir = ""
        # a directory of its own under its own uid, removed with everything else its uid owns when it exits
        if t.care.dirs is not None and t.policy.uid_drop and not scratch.shared_directory(desc, t.policy):
            try:
                workdir = desc["judge_workdir"] = t.care.dirs.take(uid)
            except OSError:
                for fd in fds:
                    os.close(fd)
                return None
        job = Job(desc, fds, t.policy, uid, workdir, t.site_dirs, t.layers, t.private_root)
        return lambda: run_judge(job)

    def fork(self, fds: list[int], child: Callable[[], object]) -> int | None:
        """Fork ``child`` (it never returns) into a new PID namespace; this side's copies of ``fds`` are closed."""
        try:
            if self.t.pidns is not None:
                self.t.pidns.before_fork()
            pid = namespaces.fork_job()
            if pid == 0:
                child()
            return pid
        except OSError:
            return None
        finally:
            for fd in fds:
                os.close(fd)

    def enforce(self, now: float) -> None:
        """Kill what is over its memory limit (as a cgroup's OOM killer would) or past its deadline."""
        t = self.t
        if t.watch is not None and self.running and now >= t.watch.next_at:  # measured at most every POLL_S
            orphans = [] if t.pidns is not None else [p for p in namespaces.children(os.getpid())
                                                      if p not in self.running and p not in self.judges]
            # which adopted orphans are a job's
            job_uid = os.getuid() if t.policy.same_uid else None
            limits_by_pid = {p: (None if t.pidns is not None else job_uid or prog.uid, prog.memory_mb << 20)
                             for p, prog in self.running.items()}
            for pid in t.watch.over(limits_by_pid, orphans, now):
                _kill(pid)
        for pid, prog in self.running.items():
            if now >= prog.deadline or now >= prog.stop_at:
                prog.timed_out = prog.timed_out or now >= prog.deadline
                _kill(pid)
        for pid, (_, deadline, _, _) in self.judges.items():
            if now >= deadline:
                _kill(pid)

    def reap(self) -> None:
        """Collect exits: a judge's lets its program stop and releases the report; a program's is reported."""
        policy = self.t.policy
        exits = cleanup.reap()
        while exits:
            pid, status = exits.pop(0)
            if pid in self.judges:
                judge_uid, _, program, dirs = self.judges.pop(pid)
                # its verdict is out: the program has a moment to finish, then stops
                if program in self.running:
                    self.running[program].stop_at = min(self.running[program].stop_at,
                                                        time.monotonic() + STOP_GRACE_S)
                left, more = self.t.care.after_exit(judge_uid, dirs, set(self.running) | set(self.judges))
                exits += more
                if pid in self.waiting:
                    done = self.waiting.pop(pid)
                    self.report.send(json.dumps({**done, "left": done.get("left", []) + left}).encode())
                elif program in self.running:
                    self.running[program].left += left
                continue
            prog = self.running.pop(pid, None)
            if prog is None:
                continue  # an adopted orphan
            del self.by_id[prog.id]
            judged = prog.judge in self.judges  # still running: the directory waits for it
            if judged and policy.shares_host_dirs:
                self.judges[prog.judge][3].append(prog.workdir)
            left, more = self.t.care.after_exit(prog.uid, [] if judged else [prog.workdir],
                                                set(self.running) | set(self.judges))
            exits += more
            prog.left += left
            if self.t.layers.seccomp is None and policy.uid_drop:  # nothing kept it from keys
                if self.t.pidns is not None:
                    self.t.pidns.before_fork()
                limits.clear_user_keys(prog.uid)
            done = {"id": prog.id, "returncode": os.waitstatus_to_exitcode(status), "timed_out": prog.timed_out,
                    **({"left": prog.left} if prog.left else {})}
            if prog.judge in self.judges:
                self.waiting[prog.judge] = done
            else:
                self.report.send(json.dumps(done).encode())


def _woken(*_: object) -> None:
    """SIGCHLD's handler (the wake-up descriptor wakes the loop); module-level, so that a job's process that sets
    SIGCHLD back to its default frees no function of the template's (each freed object a page copied)."""


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


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
