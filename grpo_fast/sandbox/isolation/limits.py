"""Kernel limits of a job's processes: rlimits, a seccomp filter, and no kernel key left behind (the cgroups that
hold a job's processes together are in ``cgroups``).

The seccomp filter denies what no test program needs: new namespaces, mounts, kernel keys, tracing, bpf, perf
events, userfaultfd, io_uring, changing CPU affinity. It is compiled once by libseccomp in the template, in two
parts (``Filters``): one the job supervisor installs on itself, one each job's process adds after its set-up.
Where the host refuses it the pool says so once and the other layers still hold. Only the standard library is
imported: this module runs in the zygote.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
from typing import NamedTuple

NPROC = 16  # processes + threads of one program (a pool of 4 workers with their helper threads fits)
CPU_COUNT = 4  # what os.cpu_count() reports inside a program, so default-sized pools stay within NPROC
STACK_BYTES = 256 << 20  # deep (legal) recursion through C frames, e.g. functools.lru_cache
FSIZE_BYTES = 16 << 20
NOFILE = 64

_SYS_KEYCTL = {"x86_64": 250, "aarch64": 219}
_KEYCTL_JOIN_SESSION_KEYRING, _KEYCTL_CLEAR = 1, 7
_KEY_SPEC_USER_KEYRING, _KEY_SPEC_USER_SESSION_KEYRING = -4, -5
_MACHINE = os.uname().machine
_libc = ctypes.CDLL(None, use_errno=True)


# -- rlimits and keys ------------------------------------------------------------------------------------------
def _limit(which: int, value: int) -> None:
    hard = resource.getrlimit(which)[1]
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(which, (value, value))


def set_rlimits(memory_mb: int, cpu_s: int | None) -> None:
    """Per-process limits: address space, CPU seconds (None: none), files, descriptors, no core, a deep stack."""
    limits = [(resource.RLIMIT_AS, memory_mb << 20), (resource.RLIMIT_CORE, 0),
              (resource.RLIMIT_FSIZE, FSIZE_BYTES), (resource.RLIMIT_NOFILE, NOFILE)]
    if cpu_s is not None:
        limits.append((resource.RLIMIT_CPU, cpu_s))
    for which, value in limits:
        _limit(which, value)
    soft, hard = resource.getrlimit(resource.RLIMIT_STACK)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or hard >= STACK_BYTES):
        resource.setrlimit(resource.RLIMIT_STACK, (STACK_BYTES, hard))


def set_nproc(nproc: int) -> None:
    _limit(resource.RLIMIT_NPROC, nproc)


def new_session_keyring() -> None:
    """A fresh, empty session keyring: keys a job adds are not found by the next job (best effort)."""
    number = _SYS_KEYCTL.get(_MACHINE)
    if number is not None:
        _libc.syscall(number, _KEYCTL_JOIN_SESSION_KEYRING, None, 0, 0, 0)


def clear_user_keys(uid: int) -> None:
    """Remove the keys a finished job left in its uid's user keyrings (where the seccomp filter, which keeps a
    job from adding any, is refused): a short child under that uid clears them. Best effort, never raises."""
    number = _SYS_KEYCTL.get(_MACHINE)
    if number is None:
        return
    pid = _libc.fork()  # without CPython's at-fork hooks: the child only calls into the kernel (namespaces.fork_job)
    if pid < 0:
        return
    if pid == 0:
        try:
            os.setresuid(uid, uid, uid)
            for ring in (_KEY_SPEC_USER_KEYRING, _KEY_SPEC_USER_SESSION_KEYRING):
                _libc.syscall(number, _KEYCTL_CLEAR, ring, 0, 0, 0)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


# -- seccomp ---------------------------------------------------------------------------------------------------
_DENIED = ("unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen",
           "fsconfig", "fsmount", "fspick", "mount_setattr", "keyctl", "add_key", "request_key", "ptrace",
           "process_vm_readv", "process_vm_writev", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup",
           "io_uring_enter", "io_uring_register", "sched_setaffinity", "kexec_load", "kexec_file_load",
           "init_module", "finit_module", "delete_module", "swapon", "swapoff", "acct", "quotactl",
           "open_by_handle_at", "lookup_dcookie")
_CLONE_NEW = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)  # NS..NET
_SCMP_ACT_ALLOW = 0x7FFF0000
_SCMP_CMP_NE, _SCMP_CMP_EQ, _SCMP_CMP_MASKED_EQ = 1, 4, 7
_SOL_SOCKET, _SO_BUFFERS = 1, (7, 8, 32, 33)  # SO_SNDBUF, SO_RCVBUF, SO_SNDBUFFORCE, SO_RCVBUFFORCE
_AF_UNIX = 1
# Where namespaces are refused (``landlock``): no IPC object or queue outlives a job or reaches another, no network
# socket, no address a unix socket could reach on the host, no file of the job's that another uid can open.
_CONFINED = ("connect", "bind", "sendmsg", "sendmmsg", "shmget", "shmat", "shmctl", "semget", "semop",
             "semtimedop", "semctl", "msgget", "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend",
             "mq_timedreceive", "mq_notify", "mq_getsetattr",
             # an ACL (system.posix_acl_access) opens a file to other uids as chmod would; 463 is setxattrat (Linux
             # 6.13), which older libseccomp cannot name
             "setxattr", "lsetxattr", "fsetxattr", 463)
_MODE_ARG = {"chmod": 1, "fchmod": 1, "fchmodat": 2, "fchmodat2": 2}
_GROUP_OTHER_BITS = (0o40, 0o20, 0o10, 0o4, 0o2, 0o1)
# Calls that change another process's limits or scheduling: only the caller's own (a same-uid job could set the
# trainer's CPU-time limit to 1 s, or every forker's process limit to 0). (call, argument, the value meaning "self")
_SELF_ONLY = (("prlimit64", 0, 0), ("setpriority", 0, 0), ("setpriority", 1, 0), ("sched_setscheduler", 0, 0),
              ("sched_setparam", 0, 0), ("sched_setattr", 0, 0), ("ioprio_set", 0, 1), ("ioprio_set", 1, 0))
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
LIBSECCOMP = "libseccomp.so.2"


def _errno_action(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class Filters(NamedTuple):
    """The filter in two parts, both compiled once: ``template``, installed once by the job supervisor (which
    never makes those calls) and inherited by every judge and program, and ``job``, the calls the supervisor's
    per-job set-up still makes, installed by each job's process once it is set up. A filter's first install in a
    process costs ~0.2 ms of CPU (BPF translation, the JIT, the syscall cache); a second, short one ~0.03 ms."""

    template: bytes
    job: bytes
    # where the memory cgroup is refused, what a program installs instead of ``job``: the job part and no memory file
    # it could fill unmapped (one filter, one install: each filter also runs on every later call)
    program: bytes = b""


SETUP_CALLS = ("unshare", "setns", "mount", "sched_setaffinity")  # the job part: a slot's forker uses these


def _confined(deny: int, same_uid: bool) -> list[tuple[int, str, list[_ArgCmp]]]:
    """The job part's extra rules where namespaces are refused: sockets only of AF_UNIX, never connected or bound
    to an address, no SysV IPC or message queue, no file mode or umask that opens a file to other uids. As the
    user's own uid (``same_uid``) no mode or owner change at all: Landlock does not cover ``chmod``, and every file
    of the user's would be the job's to change (``chmod 0777 ~/.ssh/id_rsa``, ``chmod 0`` on their virtualenv)."""
    rules = [(deny, name, []) for name in _CONFINED]
    rules += [(deny, name, [_ArgCmp(0, _SCMP_CMP_NE, _AF_UNIX, 0)]) for name in ("socket", "socketpair")]
    rules.append((deny, "sendto", [_ArgCmp(4, _SCMP_CMP_NE, 0, 0)]))  # a destination address: a host socket
    rules += [(deny, name, [_ArgCmp(arg, _SCMP_CMP_MASKED_EQ, bit, bit)]) for name, arg in _MODE_ARG.items()
              for bit in _GROUP_OTHER_BITS]
    rules += [(deny, "umask", [_ArgCmp(0, _SCMP_CMP_MASKED_EQ, bit, 0)]) for bit in _GROUP_OTHER_BITS]
    if same_uid:  # an open file descriptor is no narrower: a job reads the user's own virtualenv
        rules += [(deny, name, []) for name in ("chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown",
                                                "lchown", "fchownat")]
    return rules


def seccomp_filter(confine: bool = False, same_uid: bool = False) -> tuple[Filters | None, str]:
    """The filter as two BPF programs, compiled by libseccomp (``(None, why)`` where it is missing or fails).

    Every listed call fails with EPERM; ``clone`` with any CLONE_NEW* flag too; ``clone3`` (whose flags a filter
    cannot read) with ENOSYS, so the C library falls back to ``clone`` for threads and processes. ``confine``
    (namespaces refused): the job part also holds ``_confined``'s rules."""
    try:  # by its soname: ctypes.util.find_library would bring subprocess and shutil into every job's template
        lib = ctypes.CDLL(LIBSECCOMP, use_errno=True)
    except OSError:
        return None, f"libseccomp is not installed ({LIBSECCOMP})"
    try:
        lib.seccomp_init.restype = ctypes.c_void_p
        lib.seccomp_init.argtypes = [ctypes.c_uint32]
        lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                               ctypes.POINTER(_ArgCmp)]
        lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.seccomp_release.argtypes = [ctypes.c_void_p]
        lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    except (OSError, AttributeError) as err:
        return None, f"libseccomp unusable ({err})"
    deny = _errno_action(errno.EPERM)
    rules: list[tuple[int, str, list[_ArgCmp]]] = [(deny, n, []) for n in _DENIED]
    rules += [(deny, "clone", [_ArgCmp(0, _SCMP_CMP_MASKED_EQ, bit, bit)]) for bit in _CLONE_NEW]
    rules.append((_errno_action(errno.ENOSYS), "clone3", []))
    rules += [(deny, name, [_ArgCmp(arg, _SCMP_CMP_NE, own, 0)]) for name, arg, own in _SELF_ONLY]
    parts = []
    job = [r for r in rules if r[1] in SETUP_CALLS] + (_confined(deny, same_uid) if confine else [])
    for part in ([r for r in rules if r[1] not in SETUP_CALLS], job):
        prog, why = _compile(lib, part)
        if prog is None:
            return None, why
        parts.append(prog)
    # socket buffers are kernel memory no watch sees (a few sockets raised to 16 MiB hold gigabytes): default only
    buffers = [(deny, "setsockopt", [_ArgCmp(1, _SCMP_CMP_EQ, _SOL_SOCKET, 0), _ArgCmp(2, _SCMP_CMP_EQ, opt, 0)])
               for opt in _SO_BUFFERS]
    prog, why = _compile(lib, [*job, (deny, "memfd_create", []), *buffers])
    return Filters(*parts, program=prog or b""), ""


def _compile(lib: ctypes.CDLL, rules: list[tuple[int, str | int, list[_ArgCmp]]]) -> tuple[bytes | None, str]:
    ctx = lib.seccomp_init(_SCMP_ACT_ALLOW)
    if not ctx:
        return None, "seccomp_init failed"
    try:
        for action, syscall, args in rules:
            nr = syscall if isinstance(syscall, int) else lib.seccomp_syscall_resolve_name(syscall.encode())
            if nr < 0:  # not a call of this architecture (an older kernel's headers): nothing to deny
                continue
            array = (_ArgCmp * max(1, len(args)))(*args)
            if lib.seccomp_rule_add_array(ctx, action, nr, len(args), array) != 0:
                return None, f"libseccomp refused the rule for {syscall}"
        fd = os.memfd_create("seccomp", os.MFD_CLOEXEC)
        try:
            if lib.seccomp_export_bpf(ctx, fd) != 0:
                return None, "libseccomp could not export the filter"
            os.lseek(fd, 0, os.SEEK_SET)
            prog = b""
            while chunk := os.read(fd, 1 << 16):
                prog += chunk
        finally:
            os.close(fd)
    finally:
        lib.seccomp_release(ctx)
    if not prog or len(prog) % 8:
        return None, "libseccomp exported an empty filter"
    return prog, ""


class Seccomp:
    """A compiled filter, ready to be installed by each forked job process with one ``prctl``."""

    def __init__(self, prog: bytes) -> None:
        self._buf = ctypes.create_string_buffer(prog, len(prog))
        self._fprog = _Fprog(len(prog) // 8, ctypes.addressof(self._buf))
        self._args = (ctypes.c_int(_PR_SET_SECCOMP), ctypes.c_ulong(_SECCOMP_MODE_FILTER),
                      ctypes.c_void_p(ctypes.addressof(self._fprog)), ctypes.c_ulong(0), ctypes.c_ulong(0))

    def install(self) -> None:
        """For this process and everything it starts; needs ``no_new_privs`` (set by the template)."""
        if _libc.prctl(*self._args) != 0:  # typed arguments: a bare Python int would pass the address truncated
            raise OSError(ctypes.get_errno(), "seccomp filter refused")


def filters_work(filters: Filters) -> str:
    """Install both parts in a throwaway child: ``""`` when they load and each denies, else why not."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            _libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS: what lets a process without privilege install it
            Seccomp(filters.template).install()
            Seccomp(filters.job).install()
            code = 2
            new_user = _libc.unshare(0x10000000) != 0 and ctypes.get_errno() == errno.EPERM  # the job part
            number = _SYS_KEYCTL.get(_MACHINE)  # the template part
            keys = number is None or (_libc.syscall(number, 0, ctypes.c_long(-3), 0) == -1
                                      and ctypes.get_errno() == errno.EPERM)
            code = 0 if new_user and keys else 2
        finally:
            os._exit(code)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return "" if code == 0 else ("the kernel refused the filter" if code == 1 else "the filter did not deny")
