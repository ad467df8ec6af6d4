"""Stdin/stdout rows: the code reward's sandbox vs a plain runner that starts one subprocess per test, same workers.

50 problems x 10 tests (correct programs of the kinds models write: parsing, sorting, arithmetic, strings). Rounds
alternate (plain, ours) so machine noise hits both; the ratio is median(ours) / median(plain). The plain runner
has no isolation at all: it is the floor a sandbox must be compared against.

Run: ``PYTHONPATH=. python benchmarks/bench_stdio.py [--rounds 3] [--workers N]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from grpo_fast import sandbox as sb  # noqa: E402
from grpo_fast.sandbox.verdict.stdio import same_output  # noqa: E402

PROGRAMS = [
    ("import sys\nxs = list(map(int, sys.stdin.read().split()))\nprint(sum(xs[1:]))", lambda xs: sum(xs)),
    ("n = int(input())\nprint(*sorted(map(int, input().split())))", lambda xs: " ".join(map(str, sorted(xs)))),
    ("n = int(input())\na = list(map(int, input().split()))\nprint(max(a) - min(a))", lambda xs: max(xs) - min(xs)),
    ("input()\nprint(len(set(input().split())))", lambda xs: len(set(xs))),
    ("input()\na = list(map(int, input().split()))\nprint('%.6f' % (sum(a) / len(a)))",
     lambda xs: "%.6f" % (sum(xs) / len(xs))),
]


def problems(n: int, tests: int) -> list[tuple[str, list[str], list[str]]]:
    out = []
    for p in range(n):
        source, answer = PROGRAMS[p % len(PROGRAMS)]
        inputs, outputs = [], []
        for t in range(tests):
            xs = [(p * 31 + t * 17 + k * 7) % 1000 - 300 for k in range(20 + t)]
            inputs.append(f"{len(xs)}\n{' '.join(map(str, xs))}\n")
            outputs.append(f"{answer(xs)}\n")
        out.append((source, inputs, outputs))
    return out


def plain(rows: list[tuple[str, list[str], list[str]]], workers: int) -> tuple[float, int]:
    def one(case: tuple[str, str, str]) -> bool:
        source, given, expected = case
        res = subprocess.run([sys.executable, "-c", source], input=given.encode(), capture_output=True, timeout=10)
        return res.returncode == 0 and same_output(res.stdout.decode(), expected)

    cases = [(s, i, o) for s, ins, outs in rows for i, o in zip(ins, outs)]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as ex:
        ok = sum(ex.map(one, cases))
    return time.perf_counter() - t0, ok


def ours(rows: list[tuple[str, list[str], list[str]]], box: sb.Sandbox) -> tuple[float, int]:
    t0 = time.perf_counter()
    res = box.run_many([sb.make_io_job(s, i, o, timeout=10) for s, i, o in rows])
    return time.perf_counter() - t0, sum(sum(r.passed) for r in res)


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--problems", type=int, default=50)
    ap.add_argument("--tests", type=int, default=10)
    a = ap.parse_args()
    rows = problems(a.problems, a.tests)
    total = a.problems * a.tests
    box = sb.Sandbox(workers=a.workers)
    box.level()
    t_plain, t_ours = [], []
    for r in range(a.rounds):
        tp, okp = plain(rows, a.workers)
        to, oko = ours(rows, box)
        t_plain.append(tp)
        t_ours.append(to)
        print(f"round {r}: plain {tp:.2f}s ({okp}/{total} passed) | ours {to:.2f}s ({oko}/{total})", flush=True)
    box.close()
    mp, mo = statistics.median(t_plain), statistics.median(t_ours)
    print(f"cpu: {cpu_name()} ({os.cpu_count()} cores), load {os.getloadavg()[0]:.1f}; "
          f"level={sb.isolation_level()} workers={a.workers} tests={total}")
    print(f"median wall: plain {mp:.2f}s ({1000 * mp / total:.1f} ms/test), ours {mo:.2f}s "
          f"({1000 * mo / total:.1f} ms/test)")
    print(f"ratio ours/plain: {mo / mp:.3f} (goal <= 0.5)")


if __name__ == "__main__":
    main()
