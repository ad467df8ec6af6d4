"""A slot's template: the process every judge and program of the slot is forked from, set up once by its forker
before any job exists -- the slot's CPU, its kernel layers, namespaces, minimal root and Landlock as the ``Policy``
says, the jobs' environment, its own code warm and its heap frozen. ``forker.Slot`` then serves from it.
"""

from __future__ import annotations

import gc
import os
import sys
from dataclasses import dataclass

from ..isolation import cgroups, cleanup, jobdirs, kernel, landlock, limits, memory, mounts, namespaces
from ..policy import Policy
from .aftercare import Aftercare
from .contain import enter_environment, tempdir
from .warmup import warm_up

UID_SPAN = 0xFFFF0  # job uids cycle through this many values per zygote


@dataclass
class Template:
    """What ``set_up`` leaves for serving: the slot's policy and layers, shared by every job's process."""

    policy: Policy
    uid_bases: tuple[int, int]
    site_dirs: list[str]
    private_root: bool
    cpu: int | None  # the slot's own CPU, or None
    layers: kernel.Kernel
    pidns: namespaces.PidNamespaces | None  # each job's processes in a PID namespace of their own
    networks: namespaces.SlotNetwork | None
    watch: memory.Watch | None  # a job's memory, where the memory cgroup is refused
    limit_shm: bool  # each job's IPC namespace gets the job's shmall (found to work at the pool's start)
    care: Aftercare  # the clean-up after each job's process: its directories and leftovers, where they are kept


def set_up(policy: Policy, uid_bases: tuple[int, int], site_dirs: list[str], private_root: bool, slot: int,
           cpu: int | None, slot_cgroups: cgroups.Cgroups, seccomp: limits.Filters | None,
           limit_shm: bool = False, dirs_prefix: str = "") -> Template:
    """The template every job's process is forked from: its layers set once, its code warm, its heap frozen."""
    # every process of the slot's jobs is born here; the filter keeps them here
    if cpu is not None:
        # refused (the CPU went offline): this forker dies, the pool restarts
        os.sched_setaffinity(0, {cpu})
    # the slot's cgroups are found before the root is left
    layers = kernel.Kernel(cgroups.SlotLimits(slot_cgroups, slot) if slot_cgroups.slots else None,
                           limits.Seccomp(seccomp.job) if seccomp else None)
    namespaces.set_pdeathsig()
    namespaces.set_nondumpable()
    # never execs: inherited by every judge and program, which then need not set it
    namespaces.set_no_new_privs()
    pidns = namespaces.PidNamespaces() if policy.namespaces else None
    networks = namespaces.SlotNetwork() if pidns is not None else None
    if pidns is None:
        namespaces.set_subreaper()  # orphans of programs come to us, to be killed
    # programs see the system, the interpreter and its packages; not the user's files or datasets
    if private_root:
        mounts.minimal_root(*kernel.root_view(site_dirs))
    watch = None
    # the kernel's per-job memory limit is refused: ``memory`` instead
    if "memory" not in slot_cgroups.slots:
        # /dev/shm is not the user's own
        watch = memory.Watch(shared_shm=policy.uid_drop and pidns is None)
        layers.program = limits.Seccomp(seccomp.program) if seccomp and seccomp.program else None
    # watched from before the first job (and before Landlock's layer: its reads only)
    # where the job part of the filter denies SysV IPC and POSIX queues (and Landlock /dev/mqueue), no job made any
    confined = seccomp is not None and policy.seccomp_confines and policy.landlock
    leftovers = cleanup.Leftovers(lambda u: any(0 <= u - b < UID_SPAN for b in uid_bases),
                                  dirs=tuple(d for d in cleanup.SHARED_DIRS if d != "/dev/mqueue" or not confined),
                                  ipc=not confined) if policy.shares_host_dirs and policy.uid_drop else None
    if policy.landlock:  # reads of what a program needs, for every job (each adds its own layer)
        layers.landlock = landlock.Landlock(landlock.abi(), shm=policy.uid_drop)
        keep, hide = kernel.root_view(site_dirs)
        layers.landlock.confine_template([*mounts.SYSTEM_DIRS, *keep], hide,
                                         list(dict.fromkeys([*cleanup.SHARED_DIRS, tempdir()])))
    # the part this process never needs, once for every job (its jobs add the rest when set up)
    if seccomp:
        limits.Seccomp(seccomp.template).install()
    # every job runs in the same working directory (or in a new one in the same place): its environment is set
    # here (the host's temporary directory found before Landlock's layer, where it is one)
    enter_environment(mounts.JOB_WORKDIR if policy.namespaces else tempdir())
    # a program writes through these (on its own pipes): empty from here on
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    # our channel code specialised once, on built-in data, rather than in every job's process
    warm_up()
    namespaces.single_threaded()
    gc.collect(1)  # the warm-up's garbage is young: no need to walk the whole heap
    # what every job's process inherits: the collector never walks it, so fork's pages stay shared
    gc.freeze()
    dirs = jobdirs.JobDirs(tempdir(), dirs_prefix or f"{jobdirs.PREFIX}{os.getpid()}_", layers.prepare_files,
                           layers.forget_files) if pidns is None else None
    return Template(policy, uid_bases, site_dirs, private_root, cpu, layers, pidns, networks, watch,
                    limit_shm and watch is not None and networks is not None, Aftercare(policy, dirs, leftovers))
