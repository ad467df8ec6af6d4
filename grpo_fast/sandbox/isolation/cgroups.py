"""A cgroup per worker slot: memory (shared memory and tmpfs included), process count and CPU weight.

Rlimits are per process: memory a program holds through SysV or POSIX shared memory or a tmpfs shows in no
process's address space, and a program with children takes a scheduler share per child. The kernel's own
accounting closes both: each worker slot has a cgroup (v1 or v2, whatever the host mounts) that the slot's job
joins before it runs any of its code, with a memory limit that counts shared memory and tmpfs pages (and no swap),
a process limit, and an equal CPU weight, so a job cannot exceed its memory by any route nor slow a neighbour. A
slot's next job starts only when every process of the previous one is dead, so a slot's cgroup holds one job at a
time. The zygote makes them; a janitor removes them when the pool is gone. Only the standard library is imported.
"""

from __future__ import annotations

import os
import time

from .janitor import after_pool

CONTROLLERS = ("memory", "pids", "cpu")
POOL_PREFIX = "grpo_fast_sbx."  # a pool's cgroup directory: POOL_PREFIX + the zygote's pid, one subdirectory a slot
SLOT_PIDS = 64  # a slot's cgroup: the program's NPROC, its judge, and the short-lived helpers of both
SETTLE_S = 0.5  # the longest a slot's next job waits for the previous job's shared memory to be freed


_V1_FILES = {"memory": ("memory.limit_in_bytes", "memory.max_usage_in_bytes"), "pids": ("pids.max", ""),
             "cpu": ("cpu.shares", "")}
_V2_FILES = {"memory": ("memory.max", "memory.peak"), "pids": ("pids.max", ""), "cpu": ("cpu.weight", "")}


def _own_cgroups() -> dict[str, tuple[str, int]]:
    """For each controller: our cgroup's directory (under the controller's mount) and the hierarchy's version."""
    paths: dict[str, str] = {}
    unified = None
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, names, path = line.rstrip("\n").split(":", 2)
            if names == "":
                unified = path
            for n in names.split(","):
                paths[n] = path
    mounts: dict[str, tuple[str, str, int]] = {}  # controller -> (mount point, mount root, version)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) < 5 or len(tail) < 3:
                continue
            if tail[0] == "cgroup":
                for n in tail[2].split(","):
                    if n in CONTROLLERS:
                        mounts[n] = (fields[4], fields[3], 1)
            elif tail[0] == "cgroup2" and unified is not None:
                try:
                    with open(os.path.join(fields[4], "cgroup.controllers")) as c:
                        available = c.read().split()
                except OSError:
                    available = []
                for n in available:
                    if n in CONTROLLERS and n not in mounts:
                        mounts[n] = (fields[4], fields[3], 2)
    found = {}
    for n, (point, root, version) in mounts.items():
        path = paths.get(n) if version == 1 else unified
        if path is None:
            continue
        rel = path[len(root):] if root != "/" and path.startswith(root) else path
        found[n] = (os.path.normpath(point + "/" + rel.lstrip("/")), version)
    return found


class Cgroups:
    """The pool's cgroups: per controller, a directory for the pool and one per worker slot (made by the zygote,
    removed when the pool is gone). ``refused``: controller -> why it is not used."""

    def __init__(self, slots: int, controllers: tuple[str, ...] = CONTROLLERS) -> None:
        """``controllers``: those worth their cost here (joining each one is a migration of every job process)."""
        self.slots: dict[str, list[str]] = {}
        self.versions: dict[str, int] = {}
        self.pools: list[str] = []
        self.refused: dict[str, str] = {}
        if os.geteuid() != 0:
            self.refused = dict.fromkeys(CONTROLLERS, "not root")
            return
        try:
            own = _own_cgroups()
        except OSError as err:
            own = {}
            self.refused = dict.fromkeys(CONTROLLERS, f"cannot read our cgroups ({err})")
        for name in controllers:
            if name not in own:
                self.refused.setdefault(name, "controller not mounted")
                continue
            base, version = own[name]
            _remove_stale(base)
            pool = os.path.join(base, f"{POOL_PREFIX}{os.getpid()}")
            try:
                os.makedirs(pool, exist_ok=True)
                if version == 2:
                    write_file(os.path.join(base, "cgroup.subtree_control"), f"+{name}")
                    write_file(os.path.join(pool, "cgroup.subtree_control"), f"+{name}")
                dirs = [os.path.join(pool, f"slot{i}") for i in range(slots)]
                for d in dirs:
                    os.makedirs(d, exist_ok=True)
                    if name == "pids":
                        write_file(os.path.join(d, "pids.max"), str(SLOT_PIDS))
            except OSError as err:
                self.refused[name] = f"{pool}: {err.strerror or err}"
                _rmdirs(pool)
                continue
            if pool not in self.pools:
                self.pools.append(pool)
            self.slots[name], self.versions[name] = dirs, version

    def describe(self) -> dict[str, str]:
        """Controller -> ``holds (cgroup vN)`` or ``refused: why``."""
        out = {n: f"holds (cgroup v{self.versions[n]})" for n in self.slots}
        out.update({n: f"refused: {why}" for n, why in self.refused.items()})
        return {n: out[n] for n in CONTROLLERS if n in out}

    def remove(self) -> None:
        for pool in self.pools:
            _rmdirs(pool)


def pool_slots(zygote_pid: int, controller: str = "memory") -> list[str]:
    """The slot directories of the pool whose zygote is ``zygote_pid``, for one controller (measurements, tests)."""
    own = _own_cgroups().get(controller)
    pool = os.path.join(own[0], f"{POOL_PREFIX}{zygote_pid}") if own else ""
    if not pool or not os.path.isdir(pool):
        return []
    return sorted(os.path.join(pool, e) for e in os.listdir(pool) if os.path.isdir(os.path.join(pool, e)))


def _shmem(stat: int) -> int:
    """Bytes of shared memory and tmpfs charged to a cgroup, from its ``memory.stat``."""
    for line in os.pread(stat, 1 << 16, 0).split(b"\n"):
        if line.startswith(b"shmem "):
            return int(line[6:])
    return 0


def write_file(path: str, text: str) -> None:
    """One write to a kernel file (a cgroup or /proc control file): no buffering, no truncation, no creation."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _rmdirs(pool: str) -> bool:
    """Remove a pool's slot directories and the pool's own (cgroups go with ``rmdir`` once they are empty)."""
    try:
        for entry in os.listdir(pool):
            if os.path.isdir(os.path.join(pool, entry)):
                os.rmdir(os.path.join(pool, entry))
        os.rmdir(pool)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def _remove_stale(base: str) -> None:
    """Directories of pools whose zygote is gone (killed before its janitor could run)."""
    try:
        entries = os.listdir(base)
    except OSError:
        return
    for entry in entries:
        if entry.startswith(POOL_PREFIX) and entry[len(POOL_PREFIX):].isdigit():
            try:
                os.kill(int(entry[len(POOL_PREFIX):]), 0)
            except ProcessLookupError:
                _rmdirs(os.path.join(base, entry))
            except OSError:
                pass


def start_janitor(cgroups: Cgroups) -> None:
    """A small process that outlives the pool and removes its cgroups once every process of it is gone (the
    trainer ends a pool by killing it: the pool cannot clean up after itself)."""
    if not cgroups.pools:
        return

    def remove() -> None:
        for _ in range(200):  # the last processes of the pool may take a moment to leave their cgroups
            if all([_rmdirs(p) for p in cgroups.pools]):
                break
            time.sleep(0.05)

    after_pool(remove)


class SlotLimits:
    """A slot's forker's side: descriptors onto its slot's cgroup files, opened before it leaves the host's
    filesystem. ``join`` puts the calling process (a job's, still privileged) into the slot's cgroups;
    ``prepare`` sets the slot's memory limit for its next job and resets its peak."""

    def __init__(self, cgroups: Cgroups, slot: int, controllers: tuple[str, ...] = CONTROLLERS) -> None:
        self.procs = [os.open(os.path.join(cgroups.slots[c][slot], "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC)
                      for c in controllers if c in cgroups.slots]
        self.judge_procs = [os.open(os.path.join(cgroups.slots["cpu"][slot], "cgroup.procs"),
                                    os.O_WRONLY | os.O_CLOEXEC)] if "cpu" in cgroups.slots else []  # CPU weight only
        self.memory: tuple[int, ...] = ()  # limit, swap limit, peak, stat descriptors (-1: the file is missing)
        self.limit_mb = 1 << 40  # unlimited when made
        self.version = version = cgroups.versions.get("memory", 0)
        if version:
            d = cgroups.slots["memory"][slot]
            limit, peak = (_V1_FILES if version == 1 else _V2_FILES)["memory"]
            swap = os.path.join(d, "memory.memsw.limit_in_bytes" if version == 1 else "memory.swap.max")
            self.memory = (os.open(os.path.join(d, limit), os.O_WRONLY | os.O_CLOEXEC),
                           os.open(swap, os.O_WRONLY | os.O_CLOEXEC) if os.path.exists(swap) else -1,
                           os.open(os.path.join(d, peak), os.O_RDWR | os.O_CLOEXEC)
                           if os.path.exists(os.path.join(d, peak)) else -1,
                           os.open(os.path.join(d, "memory.stat"), os.O_RDONLY | os.O_CLOEXEC))

    def prepare(self, memory_mb: int) -> None:
        """Before the slot's next job: its memory limit (all its processes, shared memory and tmpfs included;
        no swap), its peak reset. Raises OSError where the kernel refuses."""
        if not self.memory:
            return
        limit, swap, peak, stat = self.memory
        self._settle(stat)
        if self.limit_mb != memory_mb:
            value = str(memory_mb << 20).encode()
            if self.version == 1:  # memory+swap must stay >= memory: lowering, the memory limit goes first
                order = [(limit, value), (swap, value)]
                if memory_mb > self.limit_mb:
                    order.reverse()
            else:
                order = [(limit, value), (swap, b"0")]
            for fd, text in order:
                if fd >= 0:
                    os.pwrite(fd, text, 0)
            self.limit_mb = memory_mb
        if peak >= 0:
            try:
                os.pwrite(peak, b"0", 0)
            except OSError:  # an older kernel's memory.peak cannot be reset: the figure is then the slot's
                pass

    @staticmethod
    def _settle(stat: int) -> None:
        """Wait (at most ``SETTLE_S``) until the previous job's shared memory is freed: the kernel frees a dead
        IPC namespace's segments and a tmpfs in deferred work, and pages no reclaim can take would otherwise
        count against the next job, which an honest job could not survive."""
        deadline = time.monotonic() + SETTLE_S
        while _shmem(stat) > 0 and time.monotonic() < deadline:
            time.sleep(0.001)

    def join(self, judge: bool = False) -> None:
        """This process (and all it will start) into the slot's cgroups: pid 0 means the writer itself."""
        for fd in self.judge_procs if judge else self.procs:
            os.pwrite(fd, b"0", 0)
