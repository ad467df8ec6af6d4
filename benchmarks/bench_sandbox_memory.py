"""Peak memory of one job by every route we know, against the job's limit: heap, SysV shared memory, memfd
(POSIX-style shared memory), tmpfs files (/tmp, /dev/shm, /var/tmp), and forked children.

Run: ``python benchmarks/bench_sandbox_memory.py [--limit 128] [--factor 3]``. Each route's program aims at
``factor`` times the limit; the table shows what it held at once (its own count, printed as it went), the peak of
its slot's cgroup (the kernel's accounting: shared memory and tmpfs pages included), and how it ended. One worker,
so every job runs in slot 0 and the peak read after it is that job's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

from sandbox.memory_routes import MEMORY_ROUTES, held_and_peak, memory_job  # noqa: E402

from grpo_fast.sandbox import Sandbox  # noqa: E402
from grpo_fast.sandbox.isolation.cgroups import pool_slots  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--limit", type=int, default=128, help="the job's memory_mb")
    ap.add_argument("--factor", type=int, default=3, help="each route aims at this many times the limit")
    args = ap.parse_args()
    cpu = subprocess.run("lscpu | grep 'Model name'", shell=True, capture_output=True, text=True).stdout.strip()
    print(f"{cpu or 'CPU unknown'}; load {os.getloadavg()[0]:.1f}; limit {args.limit} MiB, "
          f"each route aims at {args.factor * args.limit} MiB")
    box = Sandbox(workers=1)
    try:
        box.run_many([memory_job("heap", args.limit, 16)])  # warm, and the slot's cgroup exists
        if not pool_slots(box.pid):
            print("no memory cgroup on this host: only rlimits hold (see `grpo-fast doctor`)")
        print(f"{'route':<10} {'held at once':>13} {'cgroup peak':>12} {'<= limit':>9}  ended")
        worst = 0
        for route in MEMORY_ROUTES:
            held, peak, why = held_and_peak(box, memory_job(route, args.limit, args.factor * args.limit))
            ok = peak is not None and peak <= args.limit and held <= args.limit
            worst = max(worst, peak or 0, held)
            print(f"{route:<10} {held:>9} MiB {str(peak) + ' MiB':>12} {'yes' if ok else 'NO':>9}  "
                  f"{why or 'finished'}")
        print(f"largest figure: {worst} MiB of {args.limit} MiB")
    finally:
        box.close()


if __name__ == "__main__":
    main()
