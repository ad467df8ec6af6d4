"""Namespaces, uid drop, the job process's fork and what /proc says of processes (the job's view of files is in
``mounts``; the kernel's limits -- rlimits, cgroups, seccomp -- are in ``limits`` and ``cgroups``; which of these a
level uses is its ``Policy``).

Everything here takes *capabilities* away (network, other processes, the user's files, unbounded resources);
nothing restricts the Python language. Weaker levels apply where the OS refuses namespaces or we are not root.
Only the standard library is imported: this module also runs inside the zygote.
"""

from __future__ import annotations

import ctypes
import os
import random
import signal
import threading

from ..policy import Policy
from . import limits, userns

CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWIPC = 0x20000, 0x20000000, 0x40000000, 0x08000000
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_CHILD_SUBREAPER, _PR_SET_NO_NEW_PRIVS = 1, 4, 36, 38
_SIGKILL = int(signal.SIGKILL)  # a plain int: the enum member costs each job's process its attribute look-ups

libc = ctypes.CDLL(None, use_errno=True)
_libc_fork = libc.fork
_libc_fork.restype, _libc_fork.argtypes = ctypes.c_int, []


def check(ret: int, what: str) -> None:
    if ret != 0:
        raise OSError(ctypes.get_errno(), what)


def set_pdeathsig() -> None:
    """Die with the parent (cleared by a uid change, so call it again after one)."""
    libc.prctl(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0)


_no_new_privs = False  # set in this process (inherited from the template): a job's process need not ask again


def set_no_new_privs() -> None:
    """No privilege gained through execve from here on, for this process and everything it forks."""
    global _no_new_privs
    libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    _no_new_privs = True


def set_nondumpable() -> None:
    """No ptrace and no /proc/PID/mem for same-uid processes: protects trusted processes at the weakest level."""
    libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def set_subreaper() -> None:
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def fork_job() -> int:
    """``os.fork()`` for a single-threaded template (``single_threaded``) starting a job's process, without
    CPython's at-fork hooks.

    The hooks (threading's, logging's, random's) cost a fresh child ~0.6 ms of CPU and ~200 copy-on-write page
    faults, most of a bare fork's price; in a process with one thread, which holds no lock, they have nothing to
    repair. What the child must not share with its siblings, the random module's state, is drawn afresh here
    before the fork (the hook would do it in the child, where it costs more).
    """
    random.seed()
    pid = _libc_fork()
    if pid < 0:
        raise OSError(ctypes.get_errno(), "fork")
    return pid


def single_threaded() -> None:
    """What ``fork_job`` needs of its caller, checked once (the forker never starts a thread)."""
    if threading.active_count() != 1:
        raise RuntimeError("fork_job needs a single-threaded process")


class PidNamespaces:
    """Puts each next ``fork()`` of this process into a brand-new PID namespace.

    ``unshare(CLONE_NEWPID)`` works once per process, so we first ``setns`` back to our own namespace; this lets
    one long-lived parent start every program directly, with one fork per program.
    """

    def __init__(self) -> None:
        self._own = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)

    def before_fork(self) -> None:
        check(libc.setns(self._own, CLONE_NEWPID), "setns pid")
        check(libc.unshare(CLONE_NEWPID), "unshare pid")


class SlotNetwork:
    """A network namespace of the slot's own, entered once by the slot's forker, plus a fresh IPC namespace per
    job.

    Each worker slot has its own forker, so concurrent jobs never share a network namespace (no abstract socket,
    no loopback between them). Jobs of one slot follow each other only after every process of the previous one
    is dead (a PID namespace each), and a network namespace keeps no socket without a process; none can change
    its configuration (no capabilities). SysV IPC objects do outlive their processes, so the IPC namespace is
    new for every job. Creating and tearing down a network namespace per job cost ~0.6 ms of CPU.
    """

    def __init__(self) -> None:
        check(libc.unshare(CLONE_NEWNET), "unshare net namespace")

    @staticmethod
    def next_job() -> None:
        check(libc.unshare(CLONE_NEWIPC), "unshare ipc namespace")


def drop_privileges(policy: Policy, uid: int, memory_mb: int, cpu_s: int | None, nproc: int = limits.NPROC) -> None:
    """Rlimits (``limits``), then (when root) no supplementary groups and an unprivileged uid; no_new_privs in
    every case. ``cpu_s=None``: no CPU-time limit (a long-lived judge; its jobs have wall-clock deadlines instead).
    """
    limits.set_rlimits(memory_mb, cpu_s)
    if userns.active:  # one outside uid: a user namespace of the job's own instead (``userns``)
        limits.set_nproc(nproc)
        userns.enter_job()
        if not _no_new_privs:
            set_no_new_privs()
        set_pdeathsig()
        return
    if not policy.same_uid:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
    else:  # RLIMIT_NPROC counts every task (thread) of the uid: leave room for the user's own, and their churn
        nproc += user_tasks(os.getuid()) + limits.NPROC
    limits.set_nproc(nproc)
    if not _no_new_privs:
        set_no_new_privs()
    if not policy.same_uid:
        os.setresuid(uid, uid, uid)
    set_pdeathsig()


def user_tasks(uid: int) -> int:
    """Tasks (threads) of the processes whose real uid is ``uid``: what the kernel counts against RLIMIT_NPROC
    (a non-dumpable process's /proc entry is root's, so its owner would miss the pool's own processes)."""
    count = 0
    for p in os.listdir("/proc"):
        if p.isdigit() and process_uids(p)[0] == uid:
            try:
                count += len(os.listdir(f"/proc/{p}/task"))
            except OSError:
                continue
    return count


def read_proc(path: str) -> bytes:
    """A /proc file whole, read without a buffered text file: the forker reads several per job, and every object
    it makes between two forks is a page copied again after the next."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = chunk = os.read(fd, 1 << 16)
        while chunk:
            chunk = os.read(fd, 1 << 16)
            data += chunk
        return data
    finally:
        os.close(fd)


def process_uids(pid: int | str) -> tuple[int, int]:
    """A process's real and effective uid, from its status ((-1, -1) once it is gone): unlike the owner of its
    /proc entry, also right for a non-dumpable process."""
    try:
        fields = next(line.split() for line in read_proc(f"/proc/{pid}/status").splitlines()
                      if line.startswith(b"Uid:"))
        return int(fields[1]), int(fields[2])
    except (OSError, StopIteration, ValueError, IndexError):
        return -1, -1


def children(pid: int) -> list[int]:
    """The children of every thread of ``pid`` (none once it is gone)."""
    try:
        out = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            out += [int(p) for p in read_proc(f"/proc/{pid}/task/{tid}/children").split()]
        return out
    except OSError:
        return []
