"""The isolation levels as data: one frozen ``Policy`` per level, whose fields are the layers it puts around every
job's processes (as nsjail's ``config.proto`` names a jail's), and the threats each layer closes.

Code asks a policy's fields (``policy.namespaces``, ``policy.uid_drop``), never a level's name; what a level leaves
open is derived from its fields (``Policy.leaves_open``), and which layers close a threat is one lookup
(``STOPPED_BY["network"]``). Imports nothing: the bottom of the sandbox's stack.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class Policy:
    """One isolation level. Layers a host may still refuse (cgroups, the seccomp filter) are asked at every level
    and said in the pool's hello; the fields here are what the level itself gives."""

    name: str
    summary: str  # what holds, in the words ``LEVELS`` and ``grpo-fast doctor`` say
    namespaces: bool  # new PID, mount, IPC and network namespaces per job: private /proc, /tmp, minimal root
    user_namespace: bool  # the pool in a normal user's user namespace: one outside uid, every job in its own
    uid_drop: bool  # an unprivileged uid per job process (root only); its leftovers are removed by that uid
    landlock: bool  # Landlock's layers where namespaces are refused: reads of the system only, writes in the job's
    seccomp_confines: bool  # the filter's confining part: no network socket, no SysV IPC or message queue
    without_seccomp: str = ""  # the level taken instead where the filter this one needs is refused
    rlimits: bool = True  # memory, CPU time, processes, files: at every level
    cgroups: bool = True  # a cgroup per worker slot, asked at every level (the host may refuse it)

    @property
    def same_uid(self) -> bool:
        """Every job process runs as the user's own uid, outside any user namespace of its own."""
        return not self.namespaces and not self.uid_drop

    @property
    def shares_host_dirs(self) -> bool:
        """Jobs work in the host's temporary directories (no private /tmp): clean-up after each is the forker's."""
        return not self.namespaces

    def leaves_open(self) -> list[str]:
        """What a program can still reach at this level, in the words a user checks against."""
        return [t.said for t in THREATS if t.open_at(self)]


@dataclass(frozen=True)
class Threat:
    """A thing a program could reach, how it is said where it stays open, and the layers that close it.

    ``when``/``unless``: the policy fields that must (not) hold for this wording; a subject said differently at
    different levels has a row per wording, all with the same ``stopped_by``."""

    subject: str
    said: str
    stopped_by: tuple[str, ...]  # Policy fields: any one of them holding closes it
    when: tuple[str, ...] = ()
    unless: tuple[str, ...] = ()

    def open_at(self, policy: Policy) -> bool:
        def holds(name: str) -> bool:
            return bool(getattr(policy, name))

        return not any(map(holds, self.stopped_by)) and all(map(holds, self.when)) and not any(map(holds, self.unless))


_LANDLOCK_NAMES = "not the contents of any file outside the system and packages"
THREATS = (  # ordered as they are said
    Threat("process list", "processes: the host's process list and command lines readable in /proc (a secret passed "
           "as an argument, e.g. --hub-token, is readable; not their memory or environment)", ("namespaces",),
           when=("landlock", "uid_drop")),
    Threat("process list", "processes: your process list and command lines readable in /proc (a secret passed as an "
           "argument is readable; not their memory or environment)", ("namespaces",), when=("landlock",),
           unless=("uid_drop",)),
    Threat("file names", f"host file names: visible, /dev/shm's included ({_LANDLOCK_NAMES})", ("namespaces",),
           when=("landlock", "uid_drop")),
    Threat("file names", f"host file names: visible ({_LANDLOCK_NAMES})", ("namespaces",), when=("landlock",),
           unless=("uid_drop",)),
    Threat("multiprocessing", "multiprocessing: unavailable (/dev/shm is your own programs' and stays closed)",
           ("namespaces", "uid_drop"), when=("landlock",)),
    Threat("process limit", "processes: your uid's process limit is shared by the jobs running at once (one job's "
           "many processes can keep the next from starting one)", ("namespaces", "uid_drop"), when=("landlock",)),
    Threat("files", "host files: the world-readable ones readable", ("namespaces", "landlock"), when=("uid_drop",)),
    Threat("files", "your files: readable and writable", ("namespaces", "landlock"), unless=("uid_drop",)),
    Threat("network", "network: open", ("namespaces", "seccomp_confines")),
    Threat("signals", "your processes: can be signalled", ("namespaces", "landlock", "uid_drop")),
    Threat("leftovers", "leftovers: /tmp, /dev/shm and message queues shared between jobs", ("namespaces", "landlock"),
           when=("uid_drop",)),
    Threat("leftovers", "leftovers: /tmp shared between jobs", ("namespaces", "landlock"), unless=("uid_drop",)),
)
STOPPED_BY = {t.subject: t.stopped_by for t in THREATS}  # "which layer stops network access?": STOPPED_BY["network"]

REFUSED_LAYER_THREATS = {  # a kernel layer the host refused (the hello's ``layers``), and what that leaves open
    "cgroup memory": "memory: the job's total is measured every 20 ms, not held by the kernel (a burst can pass "
                     "memory_mb for that long; a normal user's private /tmp adds up to 96 MiB; the working "
                     "directory's files and kernel buffers at their default sizes are not counted)",
    "memory watch": "memory: only each process's own RLIMIT_AS holds (a job's processes together, its shared memory "
                    "and files are not measured)",
    "sysv shm limit": "memory: SysV shared memory a program detaches is not counted against memory_mb (up to the "
                      "host's shmall)",
    "seccomp": "kernel calls: unfiltered (ptrace, new namespaces, kernel keys, io_uring)",
    "cgroup cpu": "CPU: a job with many processes can slow the job beside it (slots share CPUs)",
}
UNSCOPED_SIGNALS = "processes: can be signalled (this kernel's Landlock does not scope signals)"  # Landlock ABI < 6

STRONGEST = Policy(
    "namespaces+uid-drop", "new PID, mount and network namespaces; private /proc and /tmp; unprivileged uid",
    namespaces=True, user_namespace=False, uid_drop=True, landlock=False, seccomp_confines=False)
USERNS = Policy(
    "namespaces+userns", "as a normal user: a user namespace with new PID, mount and network namespaces; private "
    "/proc and /tmp; no capabilities", namespaces=True, user_namespace=True, uid_drop=False, landlock=False,
    seccomp_confines=False)
LANDLOCK = Policy(
    "landlock+uid-drop", "root without namespaces (a container): an unprivileged uid per job, Landlock (files, TCP, "
    "signals), seccomp (no network socket, no IPC), clean-up by uid", namespaces=False, user_namespace=False,
    uid_drop=True, landlock=True, seccomp_confines=True, without_seccomp="uid-drop")
OWN_UID = Policy(
    "landlock+own-uid", "as a normal user where user namespaces are refused: Landlock (files, TCP, signals), "
    "seccomp (no network socket, no IPC), rlimits; runs as YOUR uid", namespaces=False, user_namespace=False,
    uid_drop=False, landlock=True, seccomp_confines=True, without_seccomp="rlimits-only")
UID_DROP = Policy(
    "uid-drop", "separate process as an unprivileged uid, rlimits, killed by uid; network NOT blocked",
    namespaces=False, user_namespace=False, uid_drop=True, landlock=False, seccomp_confines=False)
RLIMITS_ONLY = Policy(
    "rlimits-only", "separate process with rlimits, killed via subreaper; runs as YOUR uid, network NOT blocked",
    namespaces=False, user_namespace=False, uid_drop=False, landlock=False, seccomp_confines=False)

POLICIES = {p.name: p for p in (STRONGEST, USERNS, LANDLOCK, OWN_UID, UID_DROP, RLIMITS_ONLY)}  # strongest first
LEVELS = {name: p.summary for name, p in POLICIES.items()}
LAYERS = tuple(f.name for f in fields(Policy) if f.type in ("bool", bool))  # the fields that are layers


def weaker_than(level: str, minimum: str) -> bool:
    """``level`` isolates less than ``minimum`` (``POLICIES`` is ordered strongest first)."""
    order = list(POLICIES)
    return order.index(level) > order.index(minimum)


def remaining_threats(level: str, layers: dict[str, str]) -> list[str]:
    """The concrete threats a level and its refused layers leave (``your files: readable``, ``network: open``),
    said at the start of every run that scores code, in its report and by ``grpo-fast doctor``."""
    found = POLICIES[level].leaves_open() if level in POLICIES else []
    if "landlock" in layers and "signals" not in str(layers["landlock"]):  # Landlock's scopes need ABI >= 6
        found.append(UNSCOPED_SIGNALS)
    found += [why for layer, why in REFUSED_LAYER_THREATS.items()
              if str(layers.get(layer, "holds")).startswith("refused")]
    return found
