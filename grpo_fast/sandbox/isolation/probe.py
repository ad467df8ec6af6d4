"""The host probe: the strongest ``Policy`` this host and this user can set up, and which kernel layer holds.

Run once by the pool's start-up (``pool.startup``), in the zygote, before any job exists; its answers are said in
the pool's hello, and ``grpo-fast doctor`` lists them.
"""

from __future__ import annotations

import os

from ..policy import LANDLOCK, OWN_UID, POLICIES, RLIMITS_ONLY, STRONGEST, UID_DROP, USERNS, Policy, weaker_than
from . import cgroups, landlock, mounts, namespaces, userns


def needs_user_namespace(requested: str) -> bool:
    """A normal user's pool enters a user namespace of its own unless the level asked for is one it can have
    without (``landlock+own-uid`` or weaker)."""
    return requested not in POLICIES or weaker_than(OWN_UID.name, requested)


def detect_policy(requested: str) -> Policy:
    """Strongest level this (root or not) process can set up; ``requested`` may only weaken it.

    As a side effect the caller enters a new, empty network namespace when it can: everything it forks from then
    on has no network at all, not even a usable loopback.
    """
    best = RLIMITS_ONLY
    if userns.active:  # a normal user's zygote in its own user namespace (``userns.enter_pool``)
        if namespaces.libc.unshare(namespaces.CLONE_NEWNET) == 0 and namespaces_work():
            return USERNS
    elif os.geteuid() == 0:
        best = LANDLOCK if landlock.abi() >= 1 else UID_DROP  # a container: what the kernel still gives
        if namespaces.libc.unshare(namespaces.CLONE_NEWNET) == 0 and namespaces_work():
            best = STRONGEST
    elif landlock.abi() >= 1:  # a normal user, user namespaces refused: Landlock needs no privilege
        best = OWN_UID
    asked = POLICIES.get(requested)
    if asked is not None and weaker_than(asked.name, best.name) and (
            not asked.uid_drop or os.geteuid() == 0):  # only root can drop to other uids
        return asked
    return best


def namespaces_work() -> bool:
    """A PID namespace and, inside it, a private mount namespace: both made and entered by a throwaway child."""
    pid = os.fork()
    if pid == 0:
        try:
            namespaces.PidNamespaces().before_fork()
            c = os.fork()
            if c == 0:
                try:
                    namespaces.check(namespaces.libc.unshare(namespaces.CLONE_NEWNS), "unshare mount")
                    mounts.enter_private_fs()
                    os._exit(0 if os.getpid() == 1 else 1)
                finally:
                    os._exit(1)
            os._exit(os.waitstatus_to_exitcode(os.waitpid(c, 0)[1]))
        finally:
            os._exit(1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def kernel_layers(policy: Policy, slot_cgroups: cgroups.Cgroups, seccomp_refused: str) -> dict[str, str]:
    """Each isolation layer and whether it holds on this host (``grpo-fast doctor`` lists them)."""
    level = policy.name
    layers = {"namespaces": f"holds ({level})" if policy.namespaces else f"refused: only {level}", "rlimits": "holds"}
    layers.update({f"cgroup {name}": state for name, state in slot_cgroups.describe().items()})
    layers["seccomp"] = f"refused: {seccomp_refused}" if seccomp_refused else "holds (libseccomp)"
    if not layers.get("cgroup memory", "").startswith("holds"):  # isolation.memory: what holds a job's memory instead
        layers["memory watch"] = "holds (per process RLIMIT_AS; the job's processes measured every 20 ms" + \
            ("; no memory files)" if not seccomp_refused else ")")
        if policy.namespaces:  # a job's own IPC namespace, its shmall the job's limit (``memory.refused_where_forked``
            # says whether that write works where the forker runs)
            layers["sysv shm limit"] = "holds (shmall = memory_mb in the job's own IPC namespace)"
        elif policy.seccomp_confines and not seccomp_refused:
            layers["sysv shm limit"] = "holds (SysV IPC denied by the seccomp filter)"
    if policy.landlock:
        layers["landlock"] = f"holds ({landlock.Landlock(landlock.abi(), policy.uid_drop).holds()})"
    elif not policy.namespaces:
        layers["landlock"] = "refused: " + ("not in this kernel" if not landlock.abi() else "the seccomp filter it "
                                            "needs is refused" if seccomp_refused else f"only {level} asked")
    return layers
