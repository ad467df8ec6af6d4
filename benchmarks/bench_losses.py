"""Which loss learns most per minute? Each of TRL's GRPO loss types (read from the installed GRPOConfig) plus GSPO
(loss_type grpo with importance_sampling_level sequence), on the demo and on tool_math with its short warm-up,
several seeds, at the same wall-clock budget.

demo: every variant trains ``--steps`` steps with a checkpoint every ``--every``; the budget is the shortest
variant's seconds of training steps (TRL's ``step_time`` summed), and each variant is scored greedily on the
held-out questions at its last checkpoint within that budget (bench_learning's curve). tool_math: the kit's own
end-of-run evaluation (the tool loop) after the recipe's steps (recipes/tool_math_short_warmup.yaml): equal
steps, wall time recorded beside it. Per variant: held-out accuracy, wall, the last steps' mean KL (logged only
with beta > 0) and token entropy.

    nice -n 10 .venv/bin/python benchmarks/bench_losses.py --task demo --seeds 0 1 2
    nice -n 10 .venv/bin/python benchmarks/bench_losses.py --task tool_math --seeds 0 --only dapo grpo

Results: benchmarks/results/losses_<task>.json (raw, CPU, load); docs/training.md has the table.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_learning import RESULTS, curve, finish, kit_run, machine

ROOT = Path(__file__).resolve().parent
TOOL_MATH = ROOT.parent / "recipes" / "tool_math_short_warmup.yaml"
TAIL = 5
"""Steps at the end of a run whose KL and entropy are averaged."""


def loss_types() -> list[str]:
    """The loss types the installed TRL accepts, from GRPOConfig's own field documentation."""
    from trl import GRPOConfig

    help_text = GRPOConfig.__dataclass_fields__["loss_type"].metadata["help"]
    listed = re.search(r"Supported values are (.*?)\.\s", help_text)
    if not listed:
        raise SystemExit("cannot read loss_type's values from this TRL's GRPOConfig help; pass --only")
    return re.findall(r"'(\w+)'", listed.group(1))


def variants(only: list[str] | None) -> dict[str, list[str]]:
    """Name -> overrides: each loss type (luspo with the sequence-level ratio TRL asks for) and GSPO."""
    found = {name: [f"loss_type={name}"] + (["importance_sampling_level=sequence"] if name == "luspo" else [])
             for name in loss_types()}
    found["gspo"] = ["loss_type=grpo", "importance_sampling_level=sequence"]
    return {k: v for k, v in found.items() if not only or k in only}


def tail(log: list[dict], key: str) -> float | None:
    values = [r[key] for r in log if key in r][-TAIL:]
    return round(statistics.fmean(values), 4) if values else None


def demo_cell(work: Path, seed: int, overrides: dict[str, list[str]], steps: int, every: int, parallel: int) -> dict:
    """Every variant on one seed, ``parallel`` at a time; accuracy at the shortest variant's seconds of steps."""
    runs, names = {}, list(overrides)
    for i in range(0, len(names), parallel):
        pair = names[i:i + parallel]
        finish(*[kit_run(work / f"{n}-{seed}", seed, every, [*overrides[n], f"max_steps={steps}"]) for n in pair])
    for name in names:
        folder = work / f"{name}-{seed}"
        log = json.loads((folder / "checkpoints" / f"checkpoint-{steps}" / "trainer_state.json").read_text())
        runs[name] = {"points": curve(folder / "checkpoints", seed), "kl": tail(log["log_history"], "kl"),
                      "entropy": tail(log["log_history"], "entropy"),
                      "wall_s": json.loads((folder / "summary.json").read_text()).get("wall_s")}
    budget = min(r["points"][-1]["seconds"] for r in runs.values())
    for run in runs.values():
        within = [p for p in run["points"] if p["seconds"] <= budget + 1e-6]
        run["budget_s"], run["accuracy"] = budget, within[-1]["accuracy"]
    return runs


def tool_math_cell(work: Path, seed: int, overrides: dict[str, list[str]]) -> dict:
    """Every variant on one seed through the kit, with its own end-of-run evaluation (base vs trained)."""
    runs = {}
    for name, extra in overrides.items():
        folder = work / f"tool_math-{name}-{seed}"
        start = time.time()
        subprocess.run([sys.executable, "-m", "grpo_fast", "train", str(TOOL_MATH), f"seed={seed}",
                        f"run_dir={folder}", *extra], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        metrics = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines() if line.strip()]
        evaluated = json.loads((folder / "eval.json").read_text())
        runs[name] = {"accuracy": evaluated["trained"]["accuracy"], "base_accuracy": evaluated["base"]["accuracy"],
                      "wall_s": round(time.time() - start, 1), "kl": tail(metrics, "kl"),
                      "entropy": tail(metrics, "entropy")}
    return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=["demo", "tool_math"], default="demo")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--only", nargs="+", help="variants to run (default: all): loss types and gspo")
    parser.add_argument("--steps", type=int, default=60, help="demo: steps per run (the recipe's 60)")
    parser.add_argument("--every", type=int, default=10, help="demo: checkpoint every this many steps")
    parser.add_argument("--parallel", type=int, default=2, help="demo: variants trained at once (same load)")
    parser.add_argument("--work", default="runs/bench_losses")
    args = parser.parse_args()
    chosen = variants(args.only)
    record = {"task": args.task, "variants": chosen, "machine_start": machine(), "seeds": {}}
    for seed in args.seeds:
        work = Path(args.work)
        cell = demo_cell(work, seed, chosen, args.steps, args.every, args.parallel) if args.task == "demo" else \
            tool_math_cell(work, seed, chosen)
        record["seeds"][str(seed)] = cell
        print(json.dumps({seed: {k: (v["accuracy"], v["wall_s"]) for k, v in cell.items()}}), flush=True)
    record["machine_end"] = machine()
    RESULTS.mkdir(exist_ok=True)
    suffix = "" if not args.only else "_" + "_".join(args.only)
    suffix += f"_{args.steps}steps" if args.task == "demo" else ""
    dest = RESULTS / f"losses_{args.task}{suffix}.json"
    dest.write_text(json.dumps(record, indent=2))
    print(f"wrote {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
