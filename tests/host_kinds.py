"""Host kinds the sandbox must protect, built by the tests themselves on a root CI machine.

* ``as_user``: a normal account (made with ``useradd``), its own home holding secrets, running a command through
  the same uid change as ``setpriv --reuid=U --regid=G --clear-groups``. The kit's interpreter lives under
  ``/root`` (mode 0700) on CI, so the command's own mount namespace shows the interpreter's directories at their
  paths (as a desktop user's own Python is readable by them); nothing else of the host changes.

Used by tests/test_sandbox_hosts.py, and by hand: ``python tests/host_kinds.py user -- pytest -q tests/test_sandbox.py``
runs a sandbox suite as the normal uid.
"""

from __future__ import annotations

import os
import pwd
import shutil
import site
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
USER = "grpo_sbx_user"
TOKEN = "hf_kitTESTtokenNEVERleaves0123456789"
SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nkitTESTkeyNEVERleaves\n-----END OPENSSH PRIVATE KEY-----\n"


def can_make_users() -> str:
    """``""`` when this process can make a normal user and run commands as it, else why not."""
    if os.geteuid() != 0:
        return "needs root (CI) to make a normal user"
    if shutil.which("useradd") is None:
        return "useradd is not installed"
    return ""


def make_user(name: str = USER) -> pwd.struct_passwd:
    """A normal account with a home holding a Hugging Face token and an SSH key (mode 600, its own)."""
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


def _become(entry: pwd.struct_passwd) -> None:
    """In the child before exec: the interpreter made reachable (own mount namespace), then the user's ids."""
    from grpo_fast.sandbox import isolation

    isolation.expose_interpreter(_reachable_dirs())
    os.setgroups([])
    os.setresgid(entry.pw_gid, entry.pw_gid, entry.pw_gid)
    os.setresuid(entry.pw_uid, entry.pw_uid, entry.pw_uid)


def as_user(argv: list[str], entry: pwd.struct_passwd, timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    """Run ``argv`` as the normal user ``entry`` (its home, no group, its uid: what ``setpriv`` does)."""
    env = {"PATH": "/usr/bin:/bin", "HOME": entry.pw_dir, "USER": entry.pw_name, "LANG": "C.UTF-8",
           "PYTHONPATH": str(ROOT), **kw.pop("env", {})}
    return subprocess.run(argv, env=env, cwd=str(ROOT), preexec_fn=lambda: _become(entry), timeout=timeout,
                          capture_output=True, text=True, **kw)


if __name__ == "__main__":
    if sys.argv[1:2] != ["user"] or "--" not in sys.argv:
        raise SystemExit("usage: host_kinds.py user -- COMMAND...")
    cmd = sys.argv[sys.argv.index("--") + 1:]
    if cmd and cmd[0] in ("python", "pytest"):
        cmd = [sys.executable, *(["-m", "pytest", "-p", "no:cacheprovider"] if cmd[0] == "pytest" else []), *cmd[1:]]
    entry = make_user()
    proc = subprocess.run(cmd, env={"PATH": "/usr/bin:/bin", "HOME": entry.pw_dir, "LANG": "C.UTF-8",
                                    "PYTHONPATH": str(ROOT)}, cwd=str(ROOT), preexec_fn=lambda: _become(entry))
    raise SystemExit(proc.returncode)
