"""Landlock: where namespaces are refused (root in a stock container; a normal user whose host refuses user
namespaces), the kernel still confines a process's files, TCP and signals without privilege, as an allow-list.

Two layers, stacked (Landlock intersects them):

* the forker's, once (``Landlock.confine_template``), reads only: below the system directories, the interpreter
  and its packages (benchmark data hidden: an allow-list cannot subtract, so a package directory holding it is
  allowed entry by entry), ``/proc``, a few devices, the temporary directories (where the forker makes and cleans
  job directories); on ABI >= 4 no TCP connect or bind; on ABI >= 6 no signal and no abstract unix socket outside
  the domain;
* each job process's own (``Landlock.confine_job``), reads and writes: no temporary directory but its own working
  directory and, for root's jobs, ``/dev/shm`` (where the C library keeps POSIX semaphores; cleaned by uid after
  the job), writes only there and to the devices. Every rule but the working directory's is opened once, by the
  template; a job's process only adds them. A normal user's jobs run as the user's uid: ``/dev/shm`` holds
  the user's own programs' memory and nothing of a job's could be told from theirs, so it stays closed (no
  ``multiprocessing`` locks). The two intersect: what a job reads is what both allow.

Only the standard library is imported: this module runs in the zygote.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence

_SYS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_WRITES_V1 = sum(1 << b for b in range(4, 13))  # remove dir/file, make char/dir/reg/sock/fifo/block/sym
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_NET_ALL = 0b11  # bind_tcp, connect_tcp
_SCOPE_ALL = 0b11  # abstract unix sockets, signals
READ = _EXECUTE | _READ_FILE | _READ_DIR
FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV  # the only rights a file rule may hold
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
_libc = ctypes.CDLL(None, use_errno=True)


class _Attr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def abi() -> int:
    """The kernel's Landlock ABI version; 0 where it has none (or it is disabled)."""
    numbers = _SYS.get(os.uname().machine)
    if numbers is None:
        return 0
    version = _libc.syscall(numbers[0], None, ctypes.c_size_t(0), ctypes.c_uint32(1))  # ..._CREATE_RULESET_VERSION
    return max(0, version)


class Landlock:
    """The rights this kernel's ABI knows, and the two layers' rule sets."""

    def __init__(self, version: int, shm: bool = True) -> None:
        self.version = version
        self.extra = ("/dev/shm",) if shm else ()  # where a job may write besides its own directory
        self.writes = _WRITE_FILE | _WRITES_V1 | (_REFER if version >= 2 else 0) | (_TRUNCATE if version >= 3 else 0)
        self.fs = READ | self.writes | (_IOCTL_DEV if version >= 5 else 0)
        self.net = _NET_ALL if version >= 4 else 0
        self.scoped = _SCOPE_ALL if version >= 6 else 0
        self.job_reads: list[tuple[str, int]] = []
        self.job_rules: list[_PathBeneath] = []  # every rule of a job's layer but its directory's, built once
        self.prepared: dict[str, int] = {}  # job directory -> its job layer's ruleset, built by the forker

    def holds(self) -> str:
        """What the layers hold on this ABI (the doctor's line)."""
        parts = ["files: reads of what a program needs, writes in its own directory" +
                 (" and /dev/shm" if self.extra else "")]
        parts.append("TCP connect/bind: denied" if self.net else "TCP: not covered (ABI < 4): the seccomp filter")
        if self.scoped:
            parts.append("signals and abstract sockets: the job's own")
        return f"ABI {self.version}; " + "; ".join(parts)

    def _restrict(self, fs: int, rules: Sequence[tuple[str, int]], net: int = 0, scoped: int = 0,
                  built: Sequence[_PathBeneath] = ()) -> None:
        """A layer of ``rules`` (paths opened here) and ``built`` ones (``_held``: descriptors opened once)."""
        ruleset = self._ruleset(fs, rules, net, scoped, built)
        try:
            _enforce(ruleset)
        finally:
            os.close(ruleset)

    def _ruleset(self, fs: int, rules: Sequence[tuple[str, int]], net: int = 0, scoped: int = 0,
                 built: Sequence[_PathBeneath] = ()) -> int:
        """The descriptor of a ruleset of ``rules`` and ``built`` ones, not yet enforced."""
        create, add, _ = _SYS[os.uname().machine]
        attr = _Attr(fs, net, scoped)
        size = 24 if self.version >= 6 else 16 if self.version >= 4 else 8
        ruleset = _libc.syscall(create, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
        if ruleset < 0:
            raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
        try:
            for rule in built:
                if _libc.syscall(add, ruleset, 1, ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
                    raise OSError(ctypes.get_errno(), "landlock_add_rule")
            for rule, fd in _held(rules, fs):
                try:
                    if _libc.syscall(add, ruleset, 1, ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
                        raise OSError(ctypes.get_errno(), "landlock_add_rule")
                finally:
                    os.close(fd)
        except BaseException:
            os.close(ruleset)
            raise
        return ruleset

    def confine_template(self, readable: Sequence[str], hidden: Sequence[str], temporary: Sequence[str]) -> None:
        """The forker's layer, reads only (it still writes job directories and cleans up): below ``readable`` but
        ``hidden``, ``/proc``, the devices, and the ``temporary`` directories it cleans; TCP and scopes as the
        ABI allows. Also notes, for each job's layer, every other place a job may read (``confine_job``)."""
        rules = _allowed_reads(readable, hidden)
        rules += [(p, READ) for p in ("/proc", "/sys/devices/system/cpu", *DEVICES, *temporary)]
        self.job_reads = job_reads(readable, hidden, temporary)
        # opened once, here: a job's process adds them as they are (~40 paths opened and closed, each
        # process, cost ~0.5 ms); the descriptors stay open in the template, the job's own closes them
        fixed = [*self.job_reads, *((p, READ | self.writes) for p in self.extra),
                 *((d, READ | _WRITE_FILE) for d in DEVICES)]
        self.job_rules = [rule for rule, _ in _held(fixed, READ | self.writes)]
        self._restrict(READ, rules, self.net, self.scoped)

    def confine_job(self, workdir: str) -> None:
        """A job process's own layer: reads as the template's but no temporary directory other than ``workdir``
        (and ``extra``), writes only below those (and to the devices). The descriptors of the rules built by
        ``confine_template`` must still be open (the job's process closes them after this)."""
        ruleset = self.prepared.get(workdir)
        if ruleset is not None:
            _enforce(ruleset)
        else:
            self._restrict(READ | self.writes, [(workdir, READ | self.writes)], self.net, self.scoped, self.job_rules)

    def prepare_job(self, workdir: str) -> None:
        """In the forker, once per job directory (reused from job to job: ``jobdirs``): the job layer's ruleset
        built whole, so that a job's process only enforces it (building it costs ~0.15 ms in each). Its descriptor
        stays open here; a job's process closes it with the others before any of its code runs."""
        if workdir not in self.prepared:
            self.prepared[workdir] = self._ruleset(READ | self.writes, [(workdir, READ | self.writes)], self.net,
                                                   self.scoped, self.job_rules)

    def forget_job(self, workdir: str) -> None:
        """``workdir`` is gone: its ruleset too."""
        ruleset = self.prepared.pop(workdir, None)
        if ruleset is not None:
            os.close(ruleset)


# landlock_restrict_self's number and its flags, made once: each job's process only calls it (every object it
# makes or reads is a page copied from the template)
_RESTRICT = _SYS.get(os.uname().machine, (-1, -1, -1))[2]  # -1: no such call (ENOSYS), never another call
_NO_FLAGS = ctypes.c_uint32(0)


def _enforce(ruleset: int) -> None:
    if _libc.syscall(_RESTRICT, ruleset, _NO_FLAGS) != 0:  # needs no_new_privs
        raise OSError(ctypes.get_errno(), "landlock_restrict_self")


def _held(rules: Sequence[tuple[str, int]], fs: int) -> list[tuple[_PathBeneath, int]]:
    """Each rule's path opened (``O_PATH``) with the rights it may hold (a file's only those of a file, all within
    ``fs``), paths not on this host left out; the caller closes the descriptors."""
    out = []
    for path, rights in rules:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue  # not on this host
        if not os.path.isdir(path):
            rights &= FILE_RIGHTS
        out.append((_PathBeneath(rights & fs, fd), fd))
    return out


def job_reads(readable: Sequence[str], hidden: Sequence[str], temporary: Sequence[str]) -> list[tuple[str, int]]:
    """What a job's layer lets it read (the template's layer narrows it further): everything outside the temporary
    directories, and below them only the interpreter and packages that live there, ``hidden`` subtracted (the
    template's layer reads all of the temporary directories, so only this layer can keep a virtualenv's benchmark
    data, e.g. a checkout under /tmp, out of sight)."""
    reads = [p for p in _entries("/") if p not in ("/var", "/tmp") and p not in temporary]
    reads += [p for p in _entries("/var") if p not in temporary]
    inside = [p for p in readable if any(p.startswith(t.rstrip("/") + "/") for t in temporary)]
    return [(p, READ) for p in reads] + _allowed_reads(inside, hidden)


def _entries(top: str) -> list[str]:
    try:
        return [os.path.join(top, e) for e in sorted(os.listdir(top))]
    except OSError:
        return []


def _allowed_reads(readable: Sequence[str], hidden: Sequence[str]) -> list[tuple[str, int]]:
    """Rules reading ``readable`` directories, each replaced, where a ``hidden`` path lies below it, by its other
    entries (down to the hidden path's parent): an allow-list cannot subtract. The directories so split keep
    ``READ_DIR`` over their whole hierarchy, names only: a fresh interpreter lists site-packages to import from it
    (the hidden files' names are visible, their contents are not)."""
    out: list[tuple[str, int]] = []
    for top in readable:
        inside = [h for h in hidden if h.startswith(top.rstrip("/") + "/") and os.path.exists(h)]
        out += _without(top, inside) if inside else [(top, READ)]
    return out


def _without(top: str, hidden: list[str]) -> list[tuple[str, int]]:
    if top in hidden:
        return []
    if not any(h.startswith(top + "/") for h in hidden):
        return [(top, READ)]
    try:
        entries = [os.path.join(top, e) for e in os.listdir(top)]
    except OSError:
        return []
    out = [(top, _READ_DIR)]
    for path in entries:
        if os.path.islink(path):  # a rule follows the link: a virtualenv's lib64 -> lib would open the hidden data
            real = os.path.realpath(path)
            out += _without(real, hidden) if any(h == real or h.startswith(real + "/") for h in hidden) else \
                [(path, READ)]
        else:
            out += _without(path, hidden) if os.path.isdir(path) else [(path, READ)]
    return out
