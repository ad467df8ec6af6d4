"""Host kinds the sandbox must protect, built by the tests themselves on a root CI machine.

* ``as_user``: a normal account (made with ``useradd``), its own home holding secrets, running a command through
  the same uid change as ``setpriv --reuid=U --regid=G --clear-groups``. The kit's interpreter lives under
  ``/root`` (mode 0700) on CI, so the command's own mount namespace shows the interpreter's directories at their
  paths (as a desktop user's own Python is readable by them); nothing else of the host changes. ``userns=False``:
  a host that refuses unprivileged user namespaces (Ubuntu's AppArmor restriction, a hardened sysctl): the same
  filter as the container's refuses them.

* ``in_container``: root as in a stock container (Docker, Colab, Kaggle): the command's own mount namespace with
  the cgroup mounts read-only, Docker's default capabilities only, and a seccomp filter that refuses new
  namespaces and mounts (``unshare``, ``setns``, ``mount``, ``clone`` with a CLONE_NEW* flag, kernel keys...) as
  Docker's default profile does.

Used by tests/sandbox/test_host_kinds.py, and by hand: ``python tests/sandbox/host_kinds.py user -- pytest -q
tests/sandbox/test_hostile_programs.py``
runs a sandbox suite as the normal uid.
"""

from __future__ import annotations

import ctypes
import os
import pwd
import shutil
import site
import subprocess
import sys
import threading
from pathlib import Path

# Imported here, not in the forked child: another thread of the suite may be importing when a background run
# forks (tests/helpers/background.py).
from grpo_fast.sandbox.isolation import mounts as isolation

ROOT = Path(__file__).resolve().parents[2]
USER = "grpo_sbx_user"
TOKEN = "hf_kitTESTtokenNEVERleaves0123456789"
SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nkitTESTkeyNEVERleaves\n-----END OPENSSH PRIVATE KEY-----\n"
_USERADD = threading.Lock()  # a background run may make its account while the suite makes another


def can_make_users() -> str:
    """``""`` when this process can make a normal user and run commands as it, else why not."""
    if os.geteuid() != 0:
        return "needs root (CI) to make a normal user"
    if shutil.which("useradd") is None:
        return "useradd is not installed"
    return ""


def make_user(name: str = USER) -> pwd.struct_passwd:
    """A normal account with a home holding a Hugging Face token and an SSH key (mode 600, its own)."""
    with _USERADD:
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            subprocess.run(["useradd", "-m", "-s", "/bin/sh", name], check=True, capture_output=True)
            entry = pwd.getpwnam(name)
    home = Path(entry.pw_dir)
    for rel, text in ((".cache/huggingface/token", TOKEN), (".ssh/id_rsa", SSH_KEY)):
        path = home / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(0o600)
        for p in (path, path.parent, *([path.parent.parent] if rel.count("/") == 2 else [])):
            os.chown(p, entry.pw_uid, entry.pw_gid)
    os.chown(home, entry.pw_uid, entry.pw_gid)
    return entry


def _reachable_dirs() -> list[str]:
    return [sys.base_prefix, sys.prefix, *site.getsitepackages(), str(ROOT)]


def _become(entry: pwd.struct_passwd, userns: bool = True) -> None:
    """In the child before exec: the interpreter made reachable (own mount namespace), then the user's ids."""
    isolation.expose_interpreter(_reachable_dirs())
    if not userns:
        _docker_seccomp()
    os.setgroups([])
    os.setresgid(entry.pw_gid, entry.pw_gid, entry.pw_gid)
    os.setresuid(entry.pw_uid, entry.pw_uid, entry.pw_uid)


DOCKER_CAPS = (0, 1, 3, 4, 5, 6, 7, 8, 10, 13, 18, 27, 29, 31)  # chown ... setfcap: Docker's default set
DOCKER_DENIED = ("unshare", "setns", "mount", "umount2", "pivot_root", "keyctl", "add_key", "request_key", "bpf",
                 "perf_event_open", "open_by_handle_at", "fsopen", "fsmount", "move_mount", "open_tree")
_CLONE_NEW = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("a", ctypes.c_uint64), ("b", ctypes.c_uint64)]


def _docker_seccomp() -> None:
    """Docker's default profile, as far as namespaces and mounts go: each refused with EPERM."""
    lib = ctypes.CDLL("libseccomp.so.2")
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(_ArgCmp)]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    ctx = lib.seccomp_init(0x7FFF0000)
    deny = 0x00050000 | 1  # EPERM
    rules = [(n, []) for n in DOCKER_DENIED] + [("clone", [_ArgCmp(0, 7, bit, bit)]) for bit in _CLONE_NEW]
    for name, args in rules:
        nr = lib.seccomp_syscall_resolve_name(name.encode())
        if nr >= 0:
            assert lib.seccomp_rule_add_array(ctx, deny, nr, len(args), (_ArgCmp * max(1, len(args)))(*args)) == 0
    assert lib.seccomp_rule_add_array(ctx, 0x00050000 | 38, lib.seccomp_syscall_resolve_name(b"clone3"), 0,
                                      (_ArgCmp * 1)()) == 0  # ENOSYS: the C library falls back to clone
    assert lib.seccomp_load(ctx) == 0


def _contain(expose: bool = True) -> None:
    """In the child before exec: a container's view of this host (see the module's docstring). ``expose=False``:
    the interpreter stays where this host keeps it (under /root on CI: a container whose Python its jobs' uids
    cannot read)."""
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.unshare(0x20000) == 0  # CLONE_NEWNS
    isolation.mount("none", "/", None, 0x4000 | 0x40000, None)  # MS_REC | MS_PRIVATE
    if expose:
        isolation.expose_interpreter(_reachable_dirs())
    _read_only_cgroups()
    _docker_seccomp()
    for cap in range(64):
        if cap not in DOCKER_CAPS and libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            break


def _read_only_cgroups() -> None:
    """In this process's own private mount namespace: every cgroup mount read-only (the kit cannot make its own)."""
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    for point in sorted(p for p in points if p == "/sys/fs/cgroup" or p.startswith("/sys/fs/cgroup/")):
        isolation.mount("none", point, None, 0x20 | 0x1000 | 0x1, None)  # MS_REMOUNT | MS_BIND | MS_RDONLY


def _cgroups_refused() -> None:
    assert ctypes.CDLL(None, use_errno=True).unshare(0x20000) == 0  # CLONE_NEWNS
    isolation.mount("none", "/", None, 0x4000 | 0x40000, None)  # MS_REC | MS_PRIVATE
    _read_only_cgroups()


def without_cgroups(argv: list[str], timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    """Run ``argv`` as root on this host with its cgroups read-only (a host whose cgroup tree is not delegated to
    the kit): namespaces still allowed, so the forker runs jobs in its minimal root and its memory watch."""
    env = {"PATH": "/usr/bin:/bin", "HOME": container_home(), "LANG": "C.UTF-8", "PYTHONPATH": str(ROOT),
           **kw.pop("env", {})}
    return subprocess.run(argv, env=env, cwd=str(ROOT), preexec_fn=_cgroups_refused, timeout=timeout,
                          capture_output=True, text=True, **kw)


def container_home() -> str:
    """The container user's (root's) home: a Hugging Face token and an SSH key, mode 600, in a 0700 directory."""
    home = Path("/var/lib/grpo_sbx_container_home")
    for rel, text in ((".cache/huggingface/token", TOKEN), (".ssh/id_rsa", SSH_KEY)):
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(text)
        (home / rel).chmod(0o600)
    home.chmod(0o700)
    return str(home)


def in_container(argv: list[str], timeout: float = 600, expose: bool = True, **kw) -> subprocess.CompletedProcess:
    """Run ``argv`` as root in a container-like view of this host (``_contain``)."""
    env = {"PATH": "/usr/bin:/bin", "HOME": container_home(), "LANG": "C.UTF-8", "PYTHONPATH": str(ROOT),
           **kw.pop("env", {})}
    return subprocess.run(argv, env=env, cwd=str(ROOT), preexec_fn=lambda: _contain(expose), timeout=timeout,
                          capture_output=kw.pop("capture", True), text=True, **kw)


def as_user(argv: list[str], entry: pwd.struct_passwd, timeout: float = 600, userns: bool = True,
            **kw) -> subprocess.CompletedProcess:
    """Run ``argv`` as the normal user ``entry`` (its home, no group, its uid: what ``setpriv`` does); ``userns``:
    whether the host lets it make user namespaces."""
    env = {"PATH": "/usr/bin:/bin", "HOME": entry.pw_dir, "USER": entry.pw_name, "LANG": "C.UTF-8",
           "PYTHONPATH": str(ROOT), **kw.pop("env", {})}
    return subprocess.run(argv, env=env, cwd=str(ROOT), preexec_fn=lambda: _become(entry, userns), timeout=timeout,
                          capture_output=kw.pop("capture", True), text=True, **kw)


if __name__ == "__main__":
    if sys.argv[1:2] not in (["user"], ["user-no-userns"], ["container"]) or "--" not in sys.argv:
        raise SystemExit("usage: host_kinds.py user|user-no-userns|container -- COMMAND...")
    cmd = sys.argv[sys.argv.index("--") + 1:]
    if cmd and cmd[0] in ("python", "pytest"):
        cmd = [sys.executable, *(["-m", "pytest", "-p", "no:cacheprovider"] if cmd[0] == "pytest" else []), *cmd[1:]]
    if sys.argv[1].startswith("user"):
        entry = make_user()
        home, become = entry.pw_dir, (lambda: _become(entry, sys.argv[1] == "user"))
    else:
        home, become = container_home(), _contain
    proc = subprocess.run(cmd, env={"PATH": "/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8",
                                    "PYTHONPATH": str(ROOT)}, cwd=str(ROOT), preexec_fn=become)
    raise SystemExit(proc.returncode)
