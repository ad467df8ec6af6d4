"""Start-up of a pool: what this host allows (the isolation level, each kernel layer, what it refuses), said in
the hello, then the zygote serves.

Run first in the ``python -I -S`` process the client starts; a normal user's zygote enters its user namespace here
(``userns``) before anything else.
"""

from __future__ import annotations

import json
import os
import sys

from ..isolation import cgroups, kernel, landlock, limits, namespaces, userns
from .zygote import Zygote, send

PRELOAD = ("math", "cmath", "random", "string", "re", "itertools", "functools", "collections", "heapq", "bisect",
           "operator", "statistics", "decimal", "fractions", "typing", "copy", "hashlib", "json", "datetime", "time",
           "array", "numbers", "dataclasses", "enum", "abc", "resource", "pickle", "uuid", "ipaddress", "pathlib")


def main(argv: list[str]) -> None:
    """``requested_level workers site_dirs_json``: say hello (the level in force), then serve."""
    requested, workers, site_dirs = argv[0], int(argv[1]), json.loads(argv[2])
    refused_userns = ""
    if os.geteuid() != 0 and requested not in ("uid-drop", "rlimits-only", namespaces.OWN_UID):  # namespaces of our own
        refused_userns = userns.enter_pool()
    namespaces.set_pdeathsig()
    namespaces.set_nondumpable()
    sys.path.extend(d for d in site_dirs if d not in sys.path)
    level = detect_level(requested)
    warnings = [f"a normal user's namespaces: {refused_userns}"] if refused_userns else []
    seccomp, why = limits.seccomp_filter(confine=level in namespaces.LANDLOCKED, same_uid=level == namespaces.OWN_UID)
    why = why or (limits.filters_work(seccomp) if seccomp else "")
    if level in namespaces.LANDLOCKED and why:  # its network and IPC closures are the filter's: not this level
        level = "uid-drop" if level == namespaces.LANDLOCK else "rlimits-only"
    # A CPU of its own per slot (one worker per CPU), which the filter keeps a job from leaving, already holds a
    # job's CPU share: the cpu cgroup (a migration of every judge and program, ~10% of a short job) is for the
    # other cases -- slots sharing CPUs, or unpinned, or no filter.
    own_cpu = len(kernel.job_cpus(workers)) == workers and not why
    controllers = tuple(c for c in cgroups.CONTROLLERS if c != "cpu" or not own_cpu)
    slot_cgroups = cgroups.Cgroups(workers, controllers)  # made by the pool, removed by its janitor when it is gone
    cgroups.start_janitor(slot_cgroups)
    layers = kernel_layers(level, slot_cgroups, why)
    if own_cpu:
        layers["cgroup cpu"] = "holds (not needed: one CPU per slot, pinned, and the seccomp filter keeps it so)"
    warnings += [f"{layer} refused by this host: {state[len('refused: '):]}" for layer, state in layers.items()
                 if state.startswith("refused")]
    if level not in namespaces.SAME_UID:  # unprivileged uids must be able to read the interpreter and its packages
        here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        try:
            namespaces.expose_interpreter([*kernel.root_view(site_dirs)[0], here])
        except OSError as err:
            warnings.append(f"the interpreter may be unreadable by sandboxed programs ({err}); "
                            "only preloaded modules will import")
    for name in PRELOAD:
        try:
            __import__(name)
        except ImportError:
            pass
    from ..verdict import connection, runner  # noqa: F401 - loaded once here, not in every process

    private_root = level in namespaces.NAMESPACED and namespaces.minimal_root_works(*kernel.root_view(site_dirs))
    if level in namespaces.NAMESPACED and not private_root:
        warnings.append("programs can read the host's files (a private root was refused)")
    zygote = Zygote(level, workers, site_dirs, private_root, slot_cgroups, None if why else seccomp)
    send(1, {"level": level, "warnings": warnings, "layers": layers})
    zygote.serve()


def detect_level(requested: str) -> str:
    """Strongest level this (root or not) process can set up; ``requested`` may only weaken it.

    As a side effect the caller enters a new, empty network namespace when it can: everything it forks from then
    on has no network at all, not even a usable loopback.
    """
    order = list(namespaces.LEVELS)
    best = "rlimits-only"
    if userns.active:  # a normal user's zygote in its own user namespace (``userns.enter_pool``)
        if namespaces.libc.unshare(namespaces.CLONE_NEWNET) == 0 and namespaces_work():
            return namespaces.USERNS
    elif os.geteuid() == 0:
        best = namespaces.LANDLOCK if landlock.abi() >= 1 else "uid-drop"  # a container: what the kernel still gives
        if namespaces.libc.unshare(namespaces.CLONE_NEWNET) == 0 and namespaces_work():
            best = namespaces.STRONGEST
    elif landlock.abi() >= 1:  # a normal user, user namespaces refused: Landlock needs no privilege
        best = namespaces.OWN_UID
    if requested in namespaces.LEVELS and order.index(requested) > order.index(best) and (
            requested not in namespaces.UID_DROPPED or os.geteuid() == 0):  # only root can drop to other uids
        return requested
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
                    namespaces.enter_private_fs()
                    os._exit(0 if os.getpid() == 1 else 1)
                finally:
                    os._exit(1)
            os._exit(os.waitstatus_to_exitcode(os.waitpid(c, 0)[1]))
        finally:
            os._exit(1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def kernel_layers(level: str, slot_cgroups: cgroups.Cgroups, seccomp_refused: str) -> dict[str, str]:
    """Each isolation layer and whether it holds on this host (``grpo-fast doctor`` lists them)."""
    strongest = level in namespaces.NAMESPACED
    layers = {"namespaces": f"holds ({level})" if strongest else f"refused: only {level}", "rlimits": "holds"}
    layers.update({f"cgroup {name}": state for name, state in slot_cgroups.describe().items()})
    layers["seccomp"] = f"refused: {seccomp_refused}" if seccomp_refused else "holds (libseccomp)"
    if not layers.get("cgroup memory", "").startswith("holds"):  # sandbox.memory: what holds a job's memory instead
        layers["memory watch"] = "holds (per process RLIMIT_AS; the job's processes measured every 20 ms" + \
            ("; no memory files; SysV shared memory within the limit)" if not seccomp_refused else ")")
    if level in namespaces.LANDLOCKED:
        layers["landlock"] = f"holds ({landlock.Landlock(landlock.abi(), level == namespaces.LANDLOCK).holds()})"
    elif level in ("uid-drop", "rlimits-only"):
        layers["landlock"] = "refused: " + ("not in this kernel" if not landlock.abi() else "the seccomp filter it "
                                            "needs is refused" if seccomp_refused else f"only {level} asked")
    return layers
