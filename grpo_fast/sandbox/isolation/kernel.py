"""The kernel's layers a job's processes enter, gathered once per forker: the slot's cgroups (``cgroups``), the
seccomp filter's job part (``limits``) and, where namespaces are refused, Landlock (``landlock``); None where the
host refused one. Only the standard library is imported: this module runs in the zygote.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from . import cgroups, landlock, limits, mounts

JOB_UMASK = 0o077  # where jobs share the host's directories: no file of a job's is open to another uid


@dataclass
class Kernel:
    """The layers of one slot's jobs."""

    slots: cgroups.SlotLimits | None = None
    seccomp: limits.Seccomp | None = None
    landlock: landlock.Landlock | None = None
    program: limits.Seccomp | None = None  # a program's own filter: where the memory cgroup is refused (``memory``)

    def enter(self, judge: bool = False) -> None:
        """Before anything of the job runs: into the slot's cgroups (the process is still privileged)."""
        if self.slots is not None:
            self.slots.join(judge)

    def confine_files(self, workdir: str) -> None:
        """Once the job's directory is known, before its descriptors are set (whose clean-up closes those of the
        layer's rules, held open by the template): Landlock's job layer (writes below ``workdir`` only) where it
        is in force."""
        if self.landlock is not None:
            os.umask(JOB_UMASK)
            self.landlock.confine_job(workdir)

    def prepare_files(self, workdir: str) -> None:
        """In the forker, for a job directory it keeps (``jobdirs``): Landlock's job layer built once; where that
        fails, each job's process builds its own."""
        if self.landlock is not None:
            try:
                self.landlock.prepare_job(workdir)
            except OSError:
                pass

    def forget_files(self, workdir: str) -> None:
        if self.landlock is not None:
            self.landlock.forget_job(workdir)

    def seal(self, program: bool = False) -> None:
        """After the job's set-up (mounts, uid), before its code: the seccomp filter's job part (a program's own,
        which holds it, where there is one; the template's part, inherited, denies every key call); only where the
        filter is refused a fresh session keyring (its release walks all the host's keys: docs/sandbox.md)."""
        if self.seccomp is not None:
            (self.program if program and self.program is not None else self.seccomp).install()
        else:
            limits.new_session_keyring()


def job_cpus(workers: int) -> list[int]:
    """The CPUs slots are pinned to, one each; none (no pinning) when the pool has fewer workers than CPUs, so
    that a job may use the CPUs nobody else does. A job's judge and program then share their slot's CPU: their
    requests and replies pass on one core, without waking another; its threads and pools run, on that CPU."""
    cpus = sorted(os.sched_getaffinity(0))
    return cpus if workers >= len(cpus) else []


def root_view(site_dirs: list[str]) -> tuple[list[str], list[str]]:
    """What programs keep of the filesystem (the interpreter, its packages) and what is hidden inside that. The
    virtualenv the pool was started from is kept whole (``-S`` leaves ``sys.prefix`` at the base interpreter's):
    a program's ``subprocess.run([sys.executable, ...])`` finds that interpreter, and its ``pyvenv.cfg`` the
    packages."""
    venv = os.path.dirname(os.path.dirname(sys.executable))
    venvs = [venv] if os.path.isfile(os.path.join(venv, "pyvenv.cfg")) else []
    return list(dict.fromkeys([sys.base_prefix, sys.prefix, *venvs, *site_dirs])), [
        os.path.join(d, h) for d in site_dirs for h in mounts.HIDDEN_IN_PACKAGES]
