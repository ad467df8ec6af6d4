"""Clean-up by uid where jobs share the host's directories (no mount or IPC namespace: a container): after every
job, whatever its uid left in the world-writable directories and every SysV IPC object it owns are removed, so no
job sees another's leftovers (a completion planting answers for the next one of its group). Each job has a uid of
its own, so what that uid owns is exactly what the job left. A forker's ``Leftovers`` looks only at the names
created in those directories since the pool started (inotify), not at every entry of the host's ``/tmp`` twice a
job. Without a PID namespace a job's leftover processes are killed here too: those of its uid among the forker's
descendants (the forker is every job process's subreaper: none lives elsewhere), or, as the user's own uid, the
trees below the forker's adopted orphans. Only the standard library is imported.
"""

from __future__ import annotations

import ctypes
import os
import signal
import struct
import time
from collections.abc import Callable, Iterable, Iterator
from stat import S_ISDIR
from typing import NamedTuple

from ..policy import Policy
from . import namespaces

SHARED_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue")
# a name made there (file, directory, link, socket, rename) raises an inotify event; a POSIX queue (mq_open) may
# not: /dev/mqueue is scanned at every clean-up
WATCHED_DIRS = ("/tmp", "/var/tmp", "/dev/shm")
_IN_CREATE, _IN_MOVED_TO, _IN_Q_OVERFLOW, _IN_IGNORED = 0x100, 0x80, 0x4000, 0x8000
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (then the name, NUL-padded)
_IPC_RMID = 0
_IPC = (("shm", "shmctl", 1), ("sem", "semctl", 1), ("msg", "msgctl", 1))  # /proc/sysvipc file, call, id column
_libc = ctypes.CDLL(None, use_errno=True)
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# directories held open at once while a tree is emptied; a deeper one is first moved up to the tree's top
_DEPTH = 64


class Cleaned(NamedTuple):
    """What a clean-up removed, and what it found but could not remove (with why): only what is gone is
    ``removed``."""

    removed: list[str]
    left: list[str]


def remove_owned(uid: int, dirs: tuple[str, ...] = SHARED_DIRS, ipc: bool = True) -> Cleaned:
    """Remove every entry of ``dirs`` owned by ``uid`` (a directory with all it holds), and (``ipc``) its IPC objects.
    Never raises: what could not be removed is in ``left``, for the caller to report."""
    removed: list[str] = []
    left: list[str] = []
    for entry in owned_entries(dirs, lambda owner: owner == uid):
        try:
            _remove_entry(entry.path, entry.is_dir(follow_symlinks=False), removed, left)
        except OSError:
            continue  # gone meanwhile (its owner's process removed it)
    objects = remove_ipc(uid) if ipc else Cleaned([], [])
    return Cleaned(removed + objects.removed, left + objects.left)


def owned_entries(dirs: Iterable[str], owned: Callable[[int], bool]) -> Iterator[os.DirEntry]:
    """The entries of ``dirs`` whose owner's uid ``owned`` accepts (not followed if links); an unreadable directory,
    or an entry gone meanwhile (its owner's process removed it), is passed over."""
    for top in list(dirs):
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        for entry in entries:
            try:
                if owned(entry.stat(follow_symlinks=False).st_uid):
                    yield entry
            except OSError:
                continue


def _remove_entry(path: str, is_dir: bool, removed: list[str], left: list[str]) -> None:
    why = remove_tree(path) if is_dir else _unlink(path)
    if why:
        left.append(f"{path} ({why})")
    else:
        removed.append(path)


class Leftovers:
    """``remove_owned`` for one forker's jobs, at the cost of what changed: in the directories inotify watches it
    looks at the entries that may be a job's (those a job uid owned at the start, and every name made since), not
    at every entry of the host's /tmp (hundreds on a busy host: most of a container job's clean-up). Where inotify
    is refused, a directory is scanned whole at every clean-up; after a queue overflow, once, for every job uid."""

    def __init__(self, is_job_uid: Callable[[int], bool], dirs: tuple[str, ...] = SHARED_DIRS,
                 watch: tuple[str, ...] = WATCHED_DIRS, ipc: bool = True) -> None:
        """``dirs``: where jobs may leave entries; ``watch``: those of them inotify covers fully; ``ipc``: whether
        jobs may make SysV IPC objects (not where the filter's confining part denies every such call)."""
        self.is_job_uid = is_job_uid
        self.ipc = ipc
        self.watched: dict[int, str] = {}  # watch descriptor -> directory
        self.names: set[str] = set()  # paths that may hold a job's entry
        self.fd = _libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd >= 0:
            for top in (d for d in dirs if d in watch and os.path.isdir(d)):
                wd = _libc.inotify_add_watch(self.fd, top.encode(), _IN_CREATE | _IN_MOVED_TO)
                if wd >= 0:
                    self.watched[wd] = top
        self.scanned = tuple(d for d in dirs if d not in self.watched.values())  # whole, at every clean-up
        self._collect(self.watched.values())  # after the watches: nothing made in between is missed

    def _collect(self, dirs: Iterable[str]) -> None:
        """Every entry of ``dirs`` that a job uid owns becomes a name to look at."""
        self.names.update(entry.path for entry in owned_entries(dirs, self.is_job_uid))

    def _drain(self) -> None:
        """The names made since the last clean-up; a full look where the kernel's queue overflowed."""
        overflow = False
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            at = 0
            while at + _EVENT.size <= len(data):
                wd, mask, _, length = _EVENT.unpack_from(data, at)
                name = data[at + _EVENT.size:at + _EVENT.size + length].split(b"\0", 1)[0]
                at += _EVENT.size + length
                overflow = overflow or bool(mask & _IN_Q_OVERFLOW)
                if mask & _IN_IGNORED and wd in self.watched:  # the directory went (unmounted): scanned from now on
                    self.scanned += (self.watched.pop(wd),)
                elif name and wd in self.watched:
                    self.names.add(os.path.join(self.watched[wd], os.fsdecode(name)))
        if overflow:
            self._collect(self.watched.values())

    def remove_owned(self, uid: int) -> Cleaned:
        """As the module's ``remove_owned``: ``uid``'s entries and IPC objects removed, what stays said."""
        if self.fd < 0:
            return remove_owned(uid, self.scanned, self.ipc)
        self._drain()
        removed: list[str] = []
        left: list[str] = []
        for path in sorted(self.names):
            try:
                st = os.lstat(path)
            except OSError:
                self.names.discard(path)  # gone
                continue
            if st.st_uid == uid:
                _remove_entry(path, S_ISDIR(st.st_mode), removed, left)
                if not os.path.lexists(path):
                    self.names.discard(path)
            elif not self.is_job_uid(st.st_uid):
                self.names.discard(path)  # the host's: no job made it
        rest = remove_owned(uid, self.scanned, self.ipc)
        return Cleaned(removed + rest.removed, left + rest.left)


def remove_tree(path: str) -> str:
    """Remove a directory with all it holds (never a link's target), up to the first entry that cannot go:
    ``""`` once it is gone, else why not."""
    why = ""
    try:
        fd = os.open(path, _DIR)
    except FileNotFoundError:
        return ""
    except OSError as err:
        return err.strerror or str(err)
    try:
        empty_tree(fd)
        os.rmdir(path)
    except FileNotFoundError:
        pass
    except OSError as err:
        why = err.strerror or str(err)
    finally:
        os.close(fd)
    return (why or "still there") if os.path.lexists(path) else ""


def empty_tree(top: int) -> None:
    """Everything below the directory open as ``top`` removed, links never followed, however deep a job nested its
    directories (shutil.rmtree recurses: a RecursionError past ~1000 levels would kill the forker) and however many
    it made (each directory is read once). Raises OSError at the first entry that cannot go."""
    frames: list[tuple[int, str, list[str]]] = [(top, "", _unlink_files(top))]  # descriptor, name, subdirectories
    try:
        while True:
            fd, name, subdirs = frames[-1]
            if subdirs and len(frames) > _DEPTH:  # held open: at most _DEPTH; the rest of the subtree moves up
                moved = f".grpo_fast_deep_{os.urandom(8).hex()}"
                os.rename(subdirs.pop(), moved, src_dir_fd=fd, dst_dir_fd=top)
                frames[0][2].append(moved)
            elif subdirs:
                sub = subdirs.pop()
                below = os.open(sub, _DIR, dir_fd=fd)
                frames.append((below, sub, []))
                frames[-1][2].extend(_unlink_files(below))
            elif len(frames) > 1:
                frames.pop()
                os.close(fd)
                os.rmdir(name, dir_fd=frames[-1][0])
            else:
                return
    finally:
        for fd, _, _ in frames[1:]:
            os.close(fd)


def _unlink_files(fd: int) -> list[str]:
    """Every entry of the directory open as ``fd`` that is not a directory unlinked; its subdirectories' names."""
    subdirs = []
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                subdirs.append(entry.name)
            else:
                os.unlink(entry.name, dir_fd=fd)
    return subdirs


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
            header, *rows = namespaces.read_proc(f"/proc/sysvipc/{kind}").decode().splitlines()
        except (OSError, ValueError):
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
        else:  # the uid's processes below the forker, their subreaper (not every process of the host's /proc)
            found = [p for p in _tree([p for p in namespaces.children(me) if p not in keep])
                     if namespaces.process_uids(p)[1] == uid]
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


def _tree(roots: list[int]) -> list[int]:
    """``roots`` and every process below them, as found now (a fork in flight shows at the next walk)."""
    seen: set[int] = set()
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.add(pid)
            todo += namespaces.children(pid)
    return sorted(seen)


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
