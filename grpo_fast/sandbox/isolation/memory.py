"""A job's memory where the host refuses cgroups (a normal user, a container): the kernel's per-process limit
(``RLIMIT_AS``) holds one process, and these hold the rest of the routes to the job's ``memory_mb``:

* shared memory a program detaches (held by no process): SysV denied by the filter in a container; in a job's own
  IPC namespace its ``shmall`` is the job's limit (``limit_ipc_namespace``);
* memory files (``memfd``) written but never mapped: ``memfd_create`` is denied to programs (``limits``);
* everything mapped or resident, across the job's processes (a parent and its children each up to RLIMIT_AS), and
  what its uid holds in ``/dev/shm`` (a container's shared one): measured by the job's forker every
  ``POLL_S`` while the job runs (``Watch``); a job over its limit is killed, like a cgroup's OOM kill.

Only the standard library is imported: this module runs in the zygote.
"""

from __future__ import annotations

import ctypes
import json
import os
from collections.abc import Callable

from . import namespaces

POLL_S = 0.02
SHMALL = "/proc/sys/kernel/shmall"
_PAGE = os.sysconf("SC_PAGE_SIZE")


def limit_ipc_namespace(memory_mb: int) -> str:
    """In a job's fresh IPC namespace (the forker's own, until the next job): SysV shared memory at most the job's
    limit, in pages. Returns ``""`` once set, else why not: the job must not run as if it held."""
    try:
        with open(SHMALL, "w") as f:
            f.write(str((memory_mb << 20) // _PAGE))
    except OSError as err:
        return f"writing {SHMALL}: {err.strerror or err}"
    return ""


def refused_where_forked(enter_root: Callable[[], object], ipc_namespaces: bool) -> dict[str, str]:
    """Whether this module's layers hold where the forker will run them, tried rather than assumed: a throwaway
    child enters the forker's root (``enter_root``), reads its own ``statm`` as the watch does and, with
    ``ipc_namespaces``, sets ``shmall`` in a fresh IPC namespace. Returns each refused layer with its reason."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        refused = {}
        try:
            os.close(r)
            enter_root()
            if not _resident(os.getpid()):
                refused["memory watch"] = "the forker cannot read its processes' memory (no /proc/<pid>/statm)"
            if ipc_namespaces:
                if namespaces.libc.unshare(namespaces.CLONE_NEWIPC) != 0:
                    refused["sysv shm limit"] = "a job's own IPC namespace was refused"
                elif why := limit_ipc_namespace(1):
                    refused["sysv shm limit"] = why
        except BaseException as err:  # noqa: BLE001 - the child must report, whatever went wrong
            refused["memory watch"] = f"its probe failed: {err!r}"
        finally:
            os.write(w, json.dumps(refused).encode())
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    return json.loads(data) if data else {"memory watch": "its probe died"}


def _resident(pid: int) -> int:
    try:
        return int(namespaces.read_proc(f"/proc/{pid}/statm").split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


def job_bytes(root: int, uid: int | None, orphans: list[int], shm_dir: str | None) -> int:
    """Resident bytes of ``root`` and its descendants, of ``orphans`` (adopted by the forker) owned by ``uid``, and
    of the files ``uid`` owns in ``shm_dir``."""
    seen, todo = set(), [root, *(p for p in orphans if uid is not None and namespaces.process_uids(p)[0] == uid)]
    total = 0
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += _resident(pid)
        todo += namespaces.children(pid)
    if shm_dir and uid is not None:
        total += _owned_bytes(shm_dir, uid)
    return total


def _owned_bytes(top: str, uid: int) -> int:
    """The blocks of every entry below ``top`` that ``uid`` owns (subdirectories hold memory too; links are not
    followed), each looked at once: measured every ``POLL_S``, so without ``os.walk``'s lists and joined paths."""
    total, folders = 0, [top]
    while folders:
        try:
            with os.scandir(folders.pop()) as entries:
                for entry in entries:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if st.st_uid == uid:
                        total += st.st_blocks * 512
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(entry.path)
        except OSError:
            continue
    return total


class Watch:
    """The forker's watch over its running programs' memory (only where the memory cgroup is refused). Where
    ``/dev/shm`` is the host's, a write there wakes the watch at once (inotify; ``fd`` for the forker's select):
    a file grows far faster than the poll comes round."""

    def __init__(self, shared_shm: bool) -> None:
        self.shm_dir = "/dev/shm" if shared_shm else None
        self.next_at = 0.0
        self.fd = -1
        if shared_shm:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
            if fd >= 0 and libc.inotify_add_watch(fd, b"/dev/shm", 0x2 | 0x100) >= 0:  # IN_MODIFY | IN_CREATE
                self.fd = fd
            elif fd >= 0:
                os.close(fd)

    def woken(self) -> None:
        """Something was written in ``/dev/shm``: measure at the next look."""
        try:
            while os.read(self.fd, 1 << 16):
                pass
        except BlockingIOError:
            pass
        self.next_at = 0.0

    def over(self, programs: dict[int, tuple[int | None, int]], orphans: list[int], now: float) -> list[int]:
        """Programs (pid -> (uid or None, limit in bytes)) over their limit; measured at most every ``POLL_S``."""
        if now < self.next_at or not programs:
            return []
        self.next_at = now + POLL_S
        return [pid for pid, (uid, limit) in programs.items()
                if job_bytes(pid, uid, orphans, self.shm_dir) > limit]
