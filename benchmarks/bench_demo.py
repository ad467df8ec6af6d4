"""Does the demo teach, for more than one seed? Runs `grpo-fast train demo seed=S` as `make demo` does, per seed.

For each seed: held-out greedy accuracy and format compliance of the base model and the trained adapter (from
the run's eval.json, written by the kit's own evaluation), training wall time (summary.json), the rest of the
command (loading, checks, evaluation, report) and the machine's load average. Then mean and minimum of the
accuracy rise; the goal is +0.30 for the minimum. Results go to a JSON file that `demo_readme.py` reads.

    .venv/bin/python benchmarks/bench_demo.py [--seeds 1 2 3] [--out runs/bench_demo.json] [--machine TEXT] [k=v ...]

``--machine`` describes the machine in words for docs/benchmarks.md (e.g. "Intel Xeon, Sapphire Rapids class, AMX,
2 vCPU, KVM"); the CPU class as torch sees it, any instruction-set limits (ONEDNN_MAX_CPU_ISA,
ATEN_CPU_CAPABILITY) and the speed-ups the run chose are recorded beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

GOAL = 0.30


def run_seed(seed: int, root: Path, overrides: list[str]) -> dict:
    """One `grpo-fast train demo` in a subprocess (a fresh interpreter, as a user runs it); its figures."""
    run_dir = root / f"demo-seed{seed}"
    load_before = os.getloadavg()[0]
    start = time.time()
    proc = subprocess.run([sys.executable, "-m", "grpo_fast", "train", "demo", f"seed={seed}", f"run_dir={run_dir}",
                           *overrides], capture_output=True, text=True)
    wall = time.time() - start
    if proc.returncode != 0:
        raise SystemExit(f"seed {seed} failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    summary = json.loads((run_dir / "summary.json").read_text())
    evaluation = json.loads((run_dir / "eval.json").read_text())
    base, trained = evaluation["base"], evaluation["trained"]
    return {
        "seed": seed, "run_dir": str(run_dir), "rows": trained["rows"],
        "base_accuracy": base["accuracy"], "trained_accuracy": trained["accuracy"],
        "rise": trained["accuracy"] - base["accuracy"],
        "base_format": base["format"], "trained_format": trained["format"],
        "steps": summary["steps"], "train_s": summary["wall_s"], "command_s": wall,
        "other_s": wall - summary["wall_s"], "load_before": load_before, "load_after": os.getloadavg()[0],
        "cpu_choices": summary.get("cpu_choices"),
    }


def machine(described: str | None) -> dict:
    """The machine the figures belong to: words, CPU class as torch sees it, instruction-set limits, cores."""
    from grpo_fast.models.cpu_choice import cpu_class

    limits = " ".join(f"{k}={os.environ[k]}" for k in ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY") if k in os.environ)
    return {"described": described, "cpu": cpu_class().label, "limits": limits, "cpus": os.cpu_count()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--out", default="runs/bench_demo.json")
    parser.add_argument("--root", default="runs/bench_demo", help="where the seeds' run directories go")
    parser.add_argument("--machine", help="the machine in words, for docs/benchmarks.md")
    parser.add_argument("overrides", nargs="*", help="key=value passed to every run")
    args = parser.parse_args()
    root = Path(args.root)
    results = []
    for seed in args.seeds:
        r = run_seed(seed, root, args.overrides)
        results.append(r)
        print(f"seed {seed}: accuracy {r['base_accuracy']:.3f} -> {r['trained_accuracy']:.3f} ({r['rise']:+.3f}) "
              f"on {r['rows']} held-out; format {r['base_format']:.2f} -> {r['trained_format']:.2f}; "
              f"train {r['train_s']:.0f} s ({r['steps']} steps), rest {r['other_s']:.0f} s, "
              f"command {r['command_s']:.0f} s; load {r['load_before']:.1f} -> {r['load_after']:.1f}", flush=True)
    rises = [r["rise"] for r in results]
    commands = [r["command_s"] for r in results]
    print(f"\naccuracy rise: mean {statistics.mean(rises):+.3f}, min {min(rises):+.3f} (goal: min >= +{GOAL:.2f}: "
          f"{'met' if min(rises) >= GOAL else 'NOT met'})")
    print(f"command wall time: mean {statistics.mean(commands):.0f} s, max {max(commands):.0f} s (goal <= 600 s); "
          f"format after training: min {min(r['trained_format'] for r in results):.2f} (goal >= 0.80)")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"results": results, "overrides": args.overrides, "cpus": os.cpu_count(),
                               "machine": machine(args.machine),
                               "finished": time.strftime("%Y-%m-%d %H:%M")}, indent=2))
    print(f"results: {out}")


if __name__ == "__main__":
    main()
