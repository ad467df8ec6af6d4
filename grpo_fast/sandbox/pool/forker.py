"""Job supervisor ("forker"), one per worker slot: starts the slot's programs and judges in fresh namespaces and
ends them.

Forked from the zygote before any job exists, it never holds a program, a test or anyone's output; it is the clean
template a judge is forked from. Where each slot has a CPU of its own it runs there, so its jobs' processes are born
on that CPU and the slot's set-up, reaping and forking never wait for the other slots' (one forker for all slots
left the slot's CPU idle while it served another: 17-20% of a warm HumanEval batch's wall time). Per job it
receives limits and six descriptors (the program's end of the verdict
channel, its stdout and stderr, the judge's end of the channel, and the judge's line to the zygote), forks the judge
and the program, each straight into new PID, mount, IPC and network namespaces under a uid of its own for this job,
and reports the program's exit. Both are killed at the hard deadline, the program also shortly after the judge
finished with it; with a PID namespace each death takes every process it started along.
"""

from __future__ import annotations

import _signal
import gc
import json
import os
import select
import signal
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any

from ..isolation import cgroups, cleanup, kernel, landlock, limits, memory, namespaces
from ..verdict import judge, pytest_run, scratch
from .warmup import warm_up

STOP_GRACE_S = 0.1  # after the judge is done: time for the program to flush its output and exit by itself
HARD_EXTRA_S = 1.0  # the judge enforces the timeout; this is the backstop
IO_EXTRA_S = 0.05  # a stdin test has no judge: its time limit is enforced here


UID_SPAN = 0xFFFF0  # job uids cycle through this many values per zygote


KERNEL = kernel.Kernel()  # set once by ``main``, before the template forks anything


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


def _candidate(desc: dict[str, Any], fds: list[int], level: str, uid: int, workdir: str,
               site_dirs: list[str]) -> None:
    """The program's process: private filesystem, limits, unprivileged uid, then the runner. Never returns."""
    try:
        signal.set_wakeup_fd(-1)
        _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)  # the C function: signal.signal's enum wrapping costs more
        os.setsid()
        KERNEL.enter()
        workdir = namespaces.private_workdir(level, uid, workdir, kernel.root_view(site_dirs)[0])
        if desc.get("io"):  # stdin: the test's input; fd 3: the program's source
            stdin, out, err, rpc = fds
            places = ((stdin, 0), (out, 1), (err, 2), (rpc, 3))
        else:  # stdin empty; fd 3: the channel to the judge; fd 4: the program and setup code to load
            rpc, out, err, load = fds
            stdin = os.open(os.devnull, os.O_RDONLY)
            places = ((stdin, 0), (out, 1), (err, 2), (rpc, 3), (load, 4))
        for fd, target in places:
            os.dup2(fd, target + 100)  # out of the way first: the descriptors may be numbered 0-4 already
        for _, target in places:
            os.dup2(target + 100, target)
        os.closerange(len(places), 1 << 16)
        os.chdir(workdir)
        namespaces.drop_privileges(level, uid, int(desc["memory_mb"]), int(float(desc["timeout"])) + 2)
        KERNEL.seal(workdir, program=True)
        enter_environment(workdir)
        if desc.get("io"):  # the test's input (a memory file: seekable); otherwise fd 0 is empty
            sys.stdin = open(0, closefd=False)  # noqa: SIM115
        sys.argv = ["solution.py"]
        os.cpu_count = lambda: JOB_CPU_COUNT  # pools sized to fit the process limit
        if not desc.get("packages", True):
            sys.path[:] = [p for p in sys.path if p not in site_dirs]
            for name, mod in list(sys.modules.items()):
                if any(str(getattr(mod, "__file__", "") or "").startswith(d) for d in site_dirs):
                    del sys.modules[name]
        from ..verdict.runner import serve
        from ..verdict.script import run_main

        if desc.get("io"):
            run_main(3, checker=bool(desc.get("check")), cells=bool(desc.get("cells")))
        serve(3, 4)
    finally:
        os._exit(1)


def _judge(ctl: int, chan: int, level: str, uid: int, site_dirs: list[str], desc: dict[str, Any],
           private_root: bool) -> None:
    """The job's judge, under its own uid; then ``judge.main``. Never returns.

    In the minimal root (read-only, root-owned, an empty /proc) it needs no mounts of its own: it can write
    nowhere and see no process. Elsewhere it gets a private /proc and /tmp like a program. Without namespaces a
    pytest file's judge works in the program's own directory (``scratch.shared_directory``)."""
    try:
        signal.set_wakeup_fd(-1)
        _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)  # the C function: signal.signal's enum wrapping costs more
        os.setsid()
        KERNEL.enter(judge=True)
        shared = scratch.shared_directory(desc, level)
        own = level in namespaces.UID_DROPPED and not shared and level not in namespaces.NAMESPACED
        if level in namespaces.NAMESPACED:  # a fresh /tmp of its own (JOB_WORKDIR): no look for a writable
            # temporary directory in the read-only minimal root, which finds none
            workdir = "/" if private_root and not desc.get("scratch") else \
                namespaces.private_workdir(level, uid, namespaces.JOB_WORKDIR, kernel.root_view(site_dirs)[0])
        else:
            workdir = desc["workdir"] if shared else _tempdir(new=own)
        if own:  # removed with everything else its uid owns when it exits (cleanup)
            os.chown(workdir, uid, uid)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.dup2(ctl, 3)
        os.dup2(chan, 4)
        os.closerange(5, 1 << 16)
        os.chdir(workdir)
        namespaces.drop_privileges(level, uid, JUDGE_MEMORY_MB, int(float(desc["timeout"])) + 5)
        namespaces.set_nondumpable()
        KERNEL.seal(workdir)
        enter_environment(namespaces.JOB_WORKDIR if level in namespaces.NAMESPACED else workdir)
        judge.main(3, 4, shared_workdir=shared)
    finally:
        os._exit(1)


JOB_CPU_COUNT = min(os.cpu_count() or 1, limits.CPU_COUNT)  # read once: in a job's mount namespace it costs a file read
JUDGE_MEMORY_MB = 2048  # the dataset's tests get room; a runaway test fails its own job only
_environment_of = ""  # the working directory that os.environ was last set up for


def enter_environment(workdir: str) -> None:
    """A job's environment: no variable of the trainer's, numeric libraries on one thread. Where every job's
    working directory is the same (the strongest level), the template sets it once and a job's process has
    nothing left to do (clearing and refilling ``os.environ`` in a fresh process costs ~0.4 ms)."""
    global _environment_of
    if _environment_of != workdir:
        os.environ.clear()
        os.environ.update({"PATH": "/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8",
                           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
        _environment_of = workdir
        if "tempfile" in sys.modules:  # the forker's own (the host's /tmp) is not the job's: found again from TMPDIR
            sys.modules["tempfile"].tempdir = None


def main(jobs: socket.socket, report_fd: int, level: str, uid_bases: tuple[int, int], site_dirs: list[str],
         private_root: bool, slot: int, cpu: int | None, slot_cgroups: cgroups.Cgroups,
         seccomp: limits.Filters | None) -> None:
    """Serve slot ``slot``'s ``run``/``stop`` messages from the zygote; write one exit report per program to
    ``report_fd`` (shared by the slots' forkers: a report is one write, far below the size a pipe keeps whole).
    ``cpu``: the slot's own CPU, or None. ``slot_cgroups`` and ``seccomp`` (the compiled filter's two parts): the
    kernel layers the zygote found to hold."""
    global KERNEL
    if cpu is not None:  # every process of the slot's jobs is born here; the filter keeps them here
        os.sched_setaffinity(0, {cpu})  # refused (the CPU went offline): this forker dies, the pool restarts
    KERNEL = kernel.Kernel(cgroups.SlotLimits(slot_cgroups, slot) if slot_cgroups.slots else None,  # before the
                           limits.Seccomp(seccomp.job) if seccomp else None)  # root is left
    namespaces.set_pdeathsig()
    namespaces.set_nondumpable()
    namespaces.set_no_new_privs()  # never execs: inherited by every judge and program, which then need not set it
    pidns = namespaces.PidNamespaces() if level in namespaces.NAMESPACED else None
    networks = namespaces.SlotNetwork() if pidns is not None else None
    if pidns is None:
        namespaces.set_subreaper()  # orphans of programs come to us, to be killed
    if private_root:  # programs see the system, the interpreter and its packages; not the user's files or datasets
        namespaces.minimal_root(*kernel.root_view(site_dirs))
    watch = None
    if "memory" not in slot_cgroups.slots:  # the kernel's per-job memory limit is refused: ``memory`` instead
        watch = memory.Watch(shared_shm=level in namespaces.UID_DROPPED and pidns is None)  # not the user's own
        KERNEL.program = limits.Seccomp(seccomp.program) if seccomp and seccomp.program else None
    if level in namespaces.LANDLOCKED:  # reads of what a program needs, for every job (each adds its own layer)
        KERNEL.landlock = landlock.Landlock(landlock.abi(), shm=level == namespaces.LANDLOCK)
        keep, hide = kernel.root_view(site_dirs)
        KERNEL.landlock.confine_template([*namespaces.SYSTEM_DIRS, *keep], hide,
                                         list(dict.fromkeys([*cleanup.SHARED_DIRS, _tempdir()])))
    if seccomp:  # the part this process never needs, once for every job (its jobs add the rest when set up)
        limits.Seccomp(seccomp.template).install()
    if level in namespaces.NAMESPACED:  # every job runs in the same working directory: its environment is set here
        enter_environment(namespaces.JOB_WORKDIR)
    for stream in (sys.stdout, sys.stderr):  # a program writes through these (on its own pipes): empty from here on
        stream.flush()
    warm_up()  # our channel code specialised once, on built-in data, rather than in every job's process
    namespaces.single_threaded()
    gc.collect(1)  # the warm-up's garbage is young: no need to walk the whole heap
    gc.freeze()  # what every job's process inherits: the collector never walks it, so fork's pages stay shared
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    report = _PipeWriter(report_fd)
    running: dict[int, _Program] = {}
    judges: dict[int, tuple[int, float, int]] = {}  # judge pid -> its uid, hard deadline and program's pid
    by_id: dict[int, int] = {}
    waiting: dict[int, bytes] = {}  # judge pid -> its program's exit report, sent once the judge is gone too
    while True:
        now = time.monotonic()
        due = min([*(min(p.deadline, p.stop_at) for p in running.values()), *(j[1] for j in judges.values()),
                   *([watch.next_at] if watch is not None and running else [])], default=None)
        watched = [watch.fd] if watch is not None and watch.fd >= 0 and running else []
        ready = select.select([jobs, wake_r, *watched], [], [], None if due is None else max(0.0, due - now))[0]
        if watched and watched[0] in ready:
            watch.woken()
        if jobs in ready:
            msg, fds, _flags, _addr = socket.recv_fds(jobs, 1 << 16, 8)
            if not msg:
                for pid in [*running, *judges]:
                    os.kill(pid, signal.SIGKILL)
                os._exit(0)
            desc = json.loads(msg)
            if desc["op"] == "run":
                if desc.get("scratch") and pytest_run.preload():  # the first pytest file: pytest warm from here on
                    gc.collect(1)
                    gc.freeze()
                if cpu is not None and os.sched_getaffinity(0) != {cpu}:  # the kernel moved us (CPU offline, cpuset)
                    os.sched_setaffinity(0, {cpu})  # the job's processes must be born on the slot's CPU, or none
                off = int(desc["uid"]) % UID_SPAN
                uid, judge_uid = (uid_bases[0] + off, uid_bases[1] + off) if level != namespaces.USERNS else (0, 0)
                if scratch.shared_directory(desc, level):  # one directory for both: one uid (its files are 0600)
                    judge_uid = uid
                if networks is not None:  # first: the previous job's IPC namespace (its shared memory) goes
                    networks.next_job()
                    if watch is not None:
                        memory.limit_ipc_namespace(int(desc["memory_mb"]))
                if KERNEL.slots is not None:
                    try:
                        KERNEL.slots.prepare(int(desc["memory_mb"]))
                    except OSError:  # e.g. cached pages above a lower limit: the slot keeps its previous one
                        pass
                if desc.get("io"):  # a stdin test: the program alone; its output is judged by the zygote
                    pid = _spawn(desc, fds, level, uid, site_dirs, pidns) if len(fds) == 4 else None
                    judge = 0
                else:  # the program first: its start (mounts) is the longer one, the judge's first read waits
                    pid = _spawn(desc, fds[:4], level, uid, site_dirs, pidns) if len(fds) == 6 else None
                    judge = _spawn_judge(desc, fds[4:], level, judge_uid, site_dirs, pidns, private_root) \
                        if pid is not None else None
                if pid is None or judge is None:
                    for victim in (v for v in (pid, judge) if v is not None):
                        _kill(victim)
                    _rmtree(desc.get("workdir", ""))  # the program's directory, where one was made ("": none)
                    for fd in (fds[4:] if len(fds) == 6 else fds) if pid is None else ():  # those not yet closed
                        os.close(fd)
                    pid = None
                    report.send(json.dumps({"id": desc["id"], "returncode": None, "timed_out": False,
                                            "fault": "could not start the program or its judge"}).encode())
                else:
                    t = time.monotonic() + float(desc["timeout"]) + (IO_EXTRA_S if desc.get("io") else HARD_EXTRA_S)
                    if judge:
                        judges[judge] = (judge_uid, t, pid)
                    running[pid] = _Program(desc["id"], uid, t, desc.get("workdir", ""), judge, int(desc["memory_mb"]))
                    by_id[desc["id"]] = pid
            elif desc["op"] == "stop" and desc["id"] in by_id:
                prog = running[by_id[desc["id"]]]
                prog.stop_at = min(prog.stop_at, time.monotonic() + STOP_GRACE_S)
        if wake_r in ready:
            while _drain(wake_r):
                pass
        now = time.monotonic()
        if watch is not None:  # over its memory limit: killed, as a cgroup's OOM killer would
            orphans = [] if pidns is not None else [p for p in namespaces.children(os.getpid())
                                                    if p not in running and p not in judges]
            job_uid = os.getuid() if level in namespaces.SAME_UID else None  # which adopted orphans are a job's
            for pid in watch.over({p: (None if pidns is not None else job_uid or prog.uid, prog.memory_mb << 20)
                                   for p, prog in running.items()}, orphans, now):
                _kill(pid)
        for pid, prog in running.items():
            if now >= prog.deadline or now >= prog.stop_at:
                prog.timed_out = prog.timed_out or now >= prog.deadline
                _kill(pid)
        for pid, (_, deadline, _) in judges.items():
            if now >= deadline:
                _kill(pid)
        exits = cleanup.reap()
        while exits:
            pid, status = exits.pop(0)
            if pid in judges:
                judge_uid, _, program = judges.pop(pid)
                if program in running:  # its verdict is out: the program has a moment to finish, then is stopped
                    running[program].stop_at = min(running[program].stop_at, time.monotonic() + STOP_GRACE_S)
                if level not in namespaces.NAMESPACED:
                    exits += cleanup.kill_leftovers(level, judge_uid, set(running) | set(judges))
                    if level in namespaces.UID_DROPPED:
                        cleanup.remove_owned(judge_uid)
                if pid in waiting:
                    report.send(waiting.pop(pid))
                continue
            prog = running.pop(pid, None)
            if prog is None:
                continue  # an adopted orphan
            del by_id[prog.id]
            if level not in namespaces.NAMESPACED:
                exits += cleanup.kill_leftovers(level, prog.uid, set(running) | set(judges))
                _rmtree(prog.workdir)
                if level in namespaces.UID_DROPPED:  # its files, IPC objects and queues: none reaches the next job
                    cleanup.remove_owned(prog.uid)
            if KERNEL.seccomp is None and level in namespaces.UID_DROPPED:  # nothing kept it from keys
                if pidns is not None:
                    pidns.before_fork()
                limits.clear_user_keys(prog.uid)
            done = json.dumps({"id": prog.id, "returncode": os.waitstatus_to_exitcode(status),
                               "timed_out": prog.timed_out}).encode()
            if prog.judge in judges:
                waiting[prog.judge] = done
            else:
                report.send(done)


def _spawn_judge(desc: dict[str, Any], fds: list[int], level: str, uid: int, site_dirs: list[str],
                 pidns: namespaces.PidNamespaces | None, private_root: bool) -> int | None:
    return _fork(pidns, fds, lambda: _judge(fds[1], fds[0], level, uid, site_dirs, desc, private_root))


def _spawn(desc: dict[str, Any], fds: list[int], level: str, uid: int, site_dirs: list[str],
           pidns: namespaces.PidNamespaces | None) -> int | None:
    workdir = ""
    try:
        if pidns is None:
            workdir = _tempdir(new=True)
            if level in namespaces.UID_DROPPED:
                os.chown(workdir, uid, uid)
            desc["workdir"] = workdir
    except OSError:
        workdir = ""
    for name in desc.get("preload") or ():
        if name in PRELOADABLE and name not in sys.modules:
            try:
                __import__(name)
            except Exception:  # noqa: BLE001, S110 - only a speed-up
                pass
    ok = len(fds) == 4
    return _fork(pidns, fds, lambda: _candidate(desc, fds, level, uid, workdir, site_dirs) if ok else os._exit(1))


def _fork(pidns: namespaces.PidNamespaces | None, fds: list[int], child: Any) -> int | None:
    """Fork ``child`` (it never returns) into a new PID namespace; this side's copies of ``fds`` are closed."""
    try:
        if pidns is not None:
            pidns.before_fork()
        pid = namespaces.fork_job()
        if pid == 0:
            child()
        return pid
    except OSError:
        return None
    finally:
        for fd in fds:
            os.close(fd)


def _tempdir(new: bool = False) -> str:
    """The host's temporary directory, or a new directory in it (the weaker levels only). ``tempfile`` and
    ``shutil`` are imported where needed: the template stays smaller, and every fork and exit costs less."""
    import tempfile

    return tempfile.mkdtemp(prefix="grpo_fast_sbx_") if new else tempfile.gettempdir()


def _rmtree(path: str) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


PRELOADABLE = frozenset({"numpy"})  # heavy imports worth keeping warm once a program asked for them


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
