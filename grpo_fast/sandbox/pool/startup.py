"""Start-up of a pool: what this host allows (the isolation level, each kernel layer, what it refuses), said in
the hello, then the zygote serves.

Run first in the ``python -I -S`` process the client starts; a normal user's zygote enters its user namespace here
(``userns``) before anything else.
"""

from __future__ import annotations

import json
import os
import sys

from ..isolation import cgroups, kernel, limits, memory, mounts, namespaces, probe, userns
from ..policy import POLICIES
from ..verdict import connection, runner  # noqa: F401 - loaded once here, not in every process
from . import template
from .zygote import Zygote, send

# Loaded before any job, so that a program's import of them costs it nothing: the common ones, most of which the
# pool's own code loads anyway.
PRELOAD = ("math", "random", "string", "re", "itertools", "functools", "collections", "heapq", "bisect", "operator",
           "decimal", "fractions", "typing", "copy", "json", "datetime", "time", "array", "numbers", "dataclasses",
           "enum", "abc", "resource", "uuid", "ipaddress", "pathlib")
# Loaded only where a job's uid cannot read the standard library (there, nothing else imports). Each brings shared
# libraries of its own (hashlib: OpenSSL's libcrypto), which every fork and every exit of every judge and program
# then pays for: without them a short job costs ~6% less CPU (docs/sandbox.md, "Host kinds"). Where the library is
# readable, the rare program that imports one loads it itself.
PRELOAD_WHERE_UNREADABLE = ("cmath", "statistics", "hashlib", "pickle")


PROBE_UID = 0x3FFFFFF0  # below every job uid (``zygote``), owned by no one: the probe reads as a job would


def main(argv: list[str]) -> None:
    """``requested_level workers site_dirs_json``: say hello (the level in force), then serve."""
    requested, workers, site_dirs = argv[0], int(argv[1]), json.loads(argv[2])
    refused_userns = ""
    if os.geteuid() != 0 and probe.needs_user_namespace(requested):  # namespaces of our own
        refused_userns = userns.enter_pool()
    namespaces.set_pdeathsig()
    namespaces.set_nondumpable()
    sys.path.extend(d for d in site_dirs if d not in sys.path)
    policy = probe.detect_policy(requested)
    warnings = [f"a normal user's namespaces: {refused_userns}"] if refused_userns else []
    seccomp, why = limits.seccomp_filter(confine=policy.seccomp_confines, same_uid=policy.same_uid)
    why = why or (limits.filters_work(seccomp) if seccomp else "")
    if policy.without_seccomp and why:  # its network and IPC closures are the filter's: not this level
        policy = POLICIES[policy.without_seccomp]
    # A CPU of its own per slot (one worker per CPU), which the filter keeps a job from leaving, already holds a
    # job's CPU share: the cpu cgroup (a migration of every judge and program, ~10% of a short job) is for the
    # other cases -- slots sharing CPUs, or unpinned, or no filter.
    own_cpu = len(kernel.job_cpus(workers)) == workers and not why
    controllers = tuple(c for c in cgroups.CONTROLLERS if c != "cpu" or not own_cpu)
    slot_cgroups = cgroups.Cgroups(workers, controllers)  # made by the pool, removed by its janitor when it is gone
    cgroups.start_janitor(slot_cgroups)
    imports_refused = ""
    if not policy.same_uid:  # unprivileged uids must be able to read the interpreter and its packages
        here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        needed = [*kernel.root_view(site_dirs)[0], os.path.dirname(os.__file__), here]
        try:
            mounts.expose_interpreter(needed)
        except OSError:
            pass  # mounts refused (a container): whether a job's uid can read them anyway is tried next
        unreadable = mounts.unreadable_to(PROBE_UID, needed) if policy.uid_drop else ""  # else: the user's
        if unreadable:
            imports_refused = f"a job's uid cannot read {unreadable}: only the modules loaded before the job import"
            warnings.append(imports_refused)
    for name in (*PRELOAD, *(PRELOAD_WHERE_UNREADABLE if imports_refused else ())):
        try:
            __import__(name)
        except ImportError:
            pass
    private_root = policy.namespaces and mounts.minimal_root_works(*kernel.root_view(site_dirs))
    if policy.namespaces and not private_root:
        warnings.append("programs can read the host's files (a private root was refused)")
    layers = probe.kernel_layers(policy, slot_cgroups, why)
    if own_cpu:
        layers["cgroup cpu"] = "holds (not needed: one CPU per slot, pinned, and the seccomp filter keeps it so)"
    if "memory watch" in layers:  # tried where the forker will run it: its root, a job's IPC namespace
        root = kernel.root_view(site_dirs)
        refused = memory.refused_where_forked(lambda: mounts.minimal_root(*root) if private_root else None,
                                              policy.namespaces)
        layers.update({layer: f"refused: {reason}" for layer, reason in refused.items()})
    warnings += [f"{layer} refused by this host: {state[len('refused: '):]}" for layer, state in layers.items()
                 if state.startswith("refused")]
    zygote = Zygote(policy, workers, site_dirs, private_root, slot_cgroups, None if why else seccomp,
                    layers.get("sysv shm limit", "").startswith("holds") and policy.namespaces)
    own_uids = [[base, base + template.UID_SPAN] for base in zygote.uid_bases] if policy.uid_drop else []
    send(1, {"level": policy.name, "warnings": warnings, "layers": layers, "imports_refused": imports_refused,
             "uids": own_uids})
    zygote.serve()
