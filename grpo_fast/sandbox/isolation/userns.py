"""User namespaces: how a normal user (not root) gets the same namespaces, private mounts and minimal root as root.

An unprivileged process may create a user namespace (where the host allows it: most desktop distributions do) and
holds every capability inside it, over the PID, mount, network and IPC namespaces it creates from there. So the
zygote, when it is not root, first enters a user namespace of its own with its one outside uid mapped to 0 (and a
new PID namespace, of which it becomes PID 1, so its forkers can start each job in a PID namespace of its own), and
then builds what it builds as root. One outside uid is all it has, so a job cannot get a uid of its own: each
judge and program instead enters a further user namespace of its own, which owns none of the namespaces it lives
in (its capabilities there are worth nothing: no mount, no network change, no signal across) and counts its own
processes for ``RLIMIT_NPROC``; it then drops every capability. Judges and programs are kept apart by their PID
namespaces, the judge's non-dumpable state and the seccomp filter (no ptrace, no new namespaces).
Only the standard library is imported: this module runs in the zygote.
"""

from __future__ import annotations

import ctypes
import os
import sys

from .cgroups import write_file

CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNS, CLONE_NEWNET = 0x10000000, 0x20000000, 0x20000, 0x40000000
_PR_SET_SECUREBITS, _PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 28, 24, 47, 4
_SECURE_ALL = 0x2F  # NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED... each with its lock: uid 0 never regains a cap
_CAP_LAST = 63
_libc = ctypes.CDLL(None, use_errno=True)

active = False  # this process (the zygote and what it forks) lives in the pool's user namespace


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _map_self(uid: int, gid: int) -> None:
    """Our one outside uid and gid become 0 inside (an unprivileged process may map exactly its own ids)."""
    write_file("/proc/self/setgroups", "deny")
    write_file("/proc/self/uid_map", f"0 {uid} 1")
    write_file("/proc/self/gid_map", f"0 {gid} 1")


def _probe() -> bool:
    """In a throwaway child: a user namespace with PID, mount and network namespaces, /proc and a tmpfs mounted."""
    uid, gid = os.geteuid(), os.getegid()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            if _libc.unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET) == 0:
                _map_self(uid, gid)
                child = os.fork()
                if child == 0:
                    ok = 1
                    try:
                        _libc.mount(b"none", b"/", None, 0x4000 | 0x40000, None)  # MS_REC | MS_PRIVATE
                        ok = _libc.mount(b"proc", b"/proc", b"proc", 0x2 | 0x4, None) != 0 or \
                            _libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0x2 | 0x4, b"size=1m") != 0
                    finally:
                        os._exit(1 if ok else 0)
                code = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def enter_pool() -> str:
    """Called by a zygote that is not root, before anything else: enter a user namespace and a new PID namespace.

    The calling process stays outside as a small waiter (the pid the trainer knows) that ends when the pool does
    and takes the pool along when it is killed (the pool dies with its parent); the zygote goes on in the forked
    child, PID 1 of the new PID namespace. Returns ``""`` on success, else why user namespaces are refused.
    """
    global active
    if not _probe():
        return "user namespaces refused by this host"
    uid, gid = os.geteuid(), os.getegid()
    if _libc.unshare(CLONE_NEWUSER | CLONE_NEWPID) != 0:
        return f"unshare refused ({os.strerror(ctypes.get_errno())})"
    _map_self(uid, gid)
    pid = os.fork()
    if pid != 0:  # the waiter: holds no descriptor of the pool's, so the trainer sees EOF when the zygote ends
        for fd in (0, 1):
            os.close(fd)
        _libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG SIGKILL: the trainer gone, we go, and the pool with us
        _, status = os.waitpid(pid, 0)
        sys.stderr.flush()
        os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
    active = True
    return ""


def enter_job() -> None:
    """A judge's or program's process, after its mounts and before its code: a user namespace of its own (owning
    nothing it lives in), then no capability at all, for good."""
    if _libc.unshare(CLONE_NEWUSER) != 0:
        raise OSError(ctypes.get_errno(), "unshare user namespace")
    drop_capabilities()


def drop_capabilities() -> None:
    """Every capability gone (bounding set, ambient, effective, permitted), and uid 0 may never regain one."""
    _libc.prctl(_PR_SET_SECUREBITS, _SECURE_ALL, 0, 0, 0)
    for cap in range(_CAP_LAST + 1):
        if _libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break  # past the kernel's last capability
    _libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3: two 32-bit words
    data = (_CapData * 2)()
    if _libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")
