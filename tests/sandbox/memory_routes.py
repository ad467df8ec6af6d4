"""Programs that try to hold more memory than their job's limit, one per route the kernel accounts differently: the
heap, SysV and POSIX-style (memfd) shared memory, tmpfs files, children, and orphans (double-forked out of the job's
tree, adopted by the forker). Each prints, as it goes, how much it holds at once; ``held_and_peak`` reads that and
the slot's cgroup peak. Used by tests/sandbox/test_hostile_protocols_and_limits.py and
benchmarks/bench_sandbox_memory.py."""

from __future__ import annotations

import os
import textwrap

from grpo_fast.sandbox import Sandbox, make_io_job
from grpo_fast.sandbox.isolation.cgroups import pool_slots

S = textwrap.dedent


def memory_job(route: str, memory_mb: int, target_mb: int) -> dict:
    """A program that tries to hold ``target_mb`` through ``route``, printing how much it holds as it goes."""
    return make_io_job(MEMORY_ROUTES[route].replace("TARGET", str(target_mb)), [""], ["done"], 20, memory_mb)


MEMORY_ROUTES = {  # TARGET: MiB to aim at
    "sysv-shm": S("""
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.shmat.restype = ctypes.c_void_p
        for i in range(TARGET // 16):
            sid = libc.shmget(0, 16 << 20, 0o1600)
            addr = libc.shmat(sid, None, 0)
            ctypes.memset(addr, 1, 16 << 20)
            libc.shmdt(ctypes.c_void_p(addr))
            print((i + 1) * 16, flush=True)
        print("done")
        """),
    "memfd": S("""
        import os
        held = []
        for i in range(TARGET // 8):
            fd = os.memfd_create("x")
            os.write(fd, b"x" * (8 << 20))
            held.append(fd)
            print((i + 1) * 8, flush=True)
        print("done")
        """),
    "tmpfs": S("""
        held = []
        for d in ("/tmp", "/dev/shm", "/var/tmp"):
            for i in range(64):
                try:
                    with open(f"{d}/f{i}", "wb") as f:
                        f.write(b"x" * (4 << 20))
                except OSError:
                    break
                held.append(4)
                print(sum(held), flush=True)
        print("done")
        """),
    "children": S("""
        import os, time
        alive = []
        for i in range(TARGET // 64):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                block = b"x" * (64 << 20)  # written: every page is the child's own
                os.write(w, b"1")
                time.sleep(5)
                os._exit(0)
            os.close(w)
            alive.append(pid)
            os.read(r, 1)
            alive = [p for p in alive if os.waitpid(p, os.WNOHANG) == (0, 0)]  # the kernel may have killed some
            print(64 * len(alive), flush=True)  # held by children alive at once
        print("done")
        """),
    "orphans": S("""
        import os, select, time
        alive = []  # a pipe per holder: its end reads EOF once the holder is gone
        for i in range(TARGET // 64):
            r, w = os.pipe()
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:  # the holder: its parent exits, the forker adopts it (out of the job's tree)
                    block = b"x" * (64 << 20)
                    os.write(w, b"1")
                    time.sleep(5)
                    os._exit(0)
                os._exit(0)
            os.close(w)
            os.wait()
            os.read(r, 1)
            alive.append(r)
            time.sleep(0.2)  # the memory watch looks every 20 ms
            alive = [f for f in alive if not select.select([f], [], [], 0)[0]]
            print(64 * len(alive), flush=True)  # held by orphans alive at once
        print("done")
        """),
    "heap": S("""
        blocks = []
        for i in range(TARGET // 16):
            blocks.append(b"x" * (16 << 20))
            print((i + 1) * 16, flush=True)
        print("done")
        """),
}


def held_and_peak(box: Sandbox, job: dict) -> tuple[int, int | None, str]:
    (res,) = box.run_many([job])
    held = max([int(x) for x in res.stdout.split() if x.isdigit()] or [0])
    slots = pool_slots(box.pid)
    peak = None
    if slots and os.path.exists(os.path.join(slots[0], "memory.max_usage_in_bytes")):
        with open(os.path.join(slots[0], "memory.max_usage_in_bytes")) as f:
            peak = int(f.read()) >> 20
    return held, peak, res.failures[0] if res.failures else ""


