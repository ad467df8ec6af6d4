"""Clean-up by uid where jobs share the host's directories (no mount or IPC namespace: a container): after every
job, whatever its uid left in the world-writable directories and every SysV IPC object it owns are removed, so no
job sees another's leftovers (a completion planting answers for the next one of its group). Each job has a uid of
its own, so what that uid owns is exactly what the job left. Without a PID namespace a job's leftover processes
are killed here too: by uid, or, as the user's own uid, as the trees below the forker's adopted orphans. Only the
standard library is imported.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import time
from typing import NamedTuple

from ..policy import Policy
from . import namespaces

SHARED_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue")
_IPC_RMID = 0
_IPC = (("shm", "shmctl", 1), ("sem", "semctl", 1), ("msg", "msgctl", 1))  # /proc/sysvipc file, call, id column
_libc = ctypes.CDLL(None, use_errno=True)


class Cleaned(NamedTuple):
    """What a clean-up removed, and what it found but could not remove (with why): only what is gone is
    ``removed``."""

    removed: list[str]
    left: list[str]


def remove_owned(uid: int, dirs: tuple[str, ...] = SHARED_DIRS) -> Cleaned:
    """Remove every entry of ``dirs`` owned by ``uid`` (a directory with all it holds), and its IPC objects.
    Never raises: what could not be removed is in ``left``, for the caller to report."""
    removed, left = [], []
    for top in dirs:
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                why = remove_tree(entry.path) if entry.is_dir(follow_symlinks=False) else _unlink(entry.path)
            except OSError:
                continue  # gone meanwhile (its owner's process removed it)
            if why:
                left.append(f"{entry.path} ({why})")
            else:
                removed.append(entry.path)
    ipc = remove_ipc(uid)
    return Cleaned(removed + ipc.removed, left + ipc.left)


def remove_tree(path: str) -> str:
    """Remove a directory with all it holds, as much of it as can go: ``""`` once it is gone, else why not."""
    errors: list[str] = []
    shutil.rmtree(path, onerror=lambda _f, _p, exc: errors.append(getattr(exc[1], "strerror", "") or str(exc[1])))
    return (errors[0] if errors else "still there") if os.path.lexists(path) else ""


def _unlink(path: str) -> str:
    try:
        os.unlink(path)
    except FileNotFoundError:
        return ""
    except OSError as err:
        return err.strerror or str(err)
    return ""


def _owned_ipc(uid: int) -> list[tuple[str, str, int]]:
    """(kind, call, id) of every SysV object owned (or created) by ``uid``."""
    found: list[tuple[str, str, int]] = []
    for kind, call, column in _IPC:
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                header, *rows = f.read().splitlines()
        except OSError:
            continue
        names = header.split()
        for row in rows:
            fields = dict(zip(names, row.split()))
            if str(uid) in (fields.get("uid"), fields.get("cuid")):
                found.append((kind, call, int(row.split()[column])))
    return found


def remove_ipc(uid: int) -> Cleaned:
    """SysV shared memory, semaphores and message queues owned (or created) by ``uid``: removed by a short child
    under that uid (root in a container lacks CAP_SYS_ADMIN, which removing another uid's object takes); looked
    for again afterwards, so that only what is gone counts as removed."""
    found = _owned_ipc(uid)
    if not found:
        return Cleaned([], [])
    pid = _libc.fork()  # without CPython's at-fork hooks: the child only calls into the kernel
    if pid == 0:
        try:
            os.setresuid(uid, uid, uid)
            for _, call, ident in found:
                getattr(_libc, call)(ident, _IPC_RMID, None)
        finally:
            os._exit(0)
    if pid > 0:
        os.waitpid(pid, 0)
    still = {(kind, ident) for kind, _, ident in _owned_ipc(uid)}
    return Cleaned([f"{kind} {ident}" for kind, _, ident in found if (kind, ident) not in still],
                   [f"{kind} {ident} (still there)" for kind, _, ident in found if (kind, ident) in still])


def kill_leftovers(policy: Policy, uid: int, keep: set[int]) -> list[tuple[int, int]]:
    """Without a PID namespace: kill the uid's processes (uid-drop) or our adopted orphans and all below them (as
    the user's uid) until none remain. ``keep``: our children that are other jobs' processes, still running.
    Returns the children reaped meanwhile (other jobs' exits among them: the caller must still see those)."""
    me = os.getpid()
    reaped: list[tuple[int, int]] = []
    for _ in range(200):
        if policy.same_uid:  # no uid of the job's own: the trees below our adopted orphans
            found = _stopped_trees([p for p in namespaces.children(me) if p not in keep])
        else:
            found = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me and int(p) not in keep
                     and namespaces.process_uids(p)[1] == uid]
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        reaped += reap()
        if not found:
            return reaped
        time.sleep(0.001)
    return reaped


def _stopped_trees(roots: list[int]) -> list[int]:
    """Every process below ``roots`` (included), each stopped before its children are read: a stopped process
    forks no more, so killing them one by one cannot race a fork bomb refilling the process limit. Walked again
    until a walk finds no new process (a fork in flight when its parent stopped)."""
    seen: set[int] = set()
    while True:
        todo, new = list(roots), False
        while todo:
            pid = todo.pop()
            if pid not in seen:
                seen.add(pid)
                new = True
                try:
                    os.kill(pid, signal.SIGSTOP)
                except OSError:
                    continue
            todo += namespaces.children(pid)
        if not new:
            return sorted(seen)


def reap() -> list[tuple[int, int]]:
    """Collect every exited child without blocking: ``(pid, wait status)`` pairs."""
    done = []
    try:
        while True:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if not pid:
                break
            done.append((pid, status))
    except ChildProcessError:
        pass
    return done
