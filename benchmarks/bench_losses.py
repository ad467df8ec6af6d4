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

A probe first trains every variant for ``--probe`` GRPO steps and groups those whose updates coincide (equal
gradient norm and reward at every step); one variant per group is then measured, for all of its members.

Results: benchmarks/results/losses_<task>.json (raw, CPU, load); docs/training.md has the table.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import subprocess
import sys
from pathlib import Path

import yaml
from bench_learning import RESULTS, TOOL_MATH, curve, finish, finished, grpo_steps, kit_run, machine

ROOT = Path(__file__).resolve().parent
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
    """Name -> overrides: each loss type (luspo with the sequence-level ratio TRL asks for), GSPO, and cispo with
    the epsilon_high TRL's documentation recommends for it (5.0; its default, epsilon's 0.2, caps the weight)."""
    found = {name: [f"loss_type={name}"] + (["importance_sampling_level=sequence"] if name == "luspo" else [])
             for name in loss_types()}
    found["gspo"] = ["loss_type=grpo", "importance_sampling_level=sequence"]
    found["cispo_eps5"] = ["loss_type=cispo", "epsilon_high=5.0"]
    return {k: v for k, v in found.items() if not only or k in only}


def run_folder(work: Path, task: str, name: str, seed: int | None = None) -> Path:
    """Where a variant's run lives under ``work``: its probe (``seed`` None) or its measured run on ``seed``."""
    if seed is None:
        return work / f"probe-{task}-{name}"
    return work / (f"{name}-{seed}" if task == "demo" else f"tool_math-{name}-{seed}")


def probe_run(task: str, work: Path, name: str, extra: list[str], steps: int) -> subprocess.Popen | None:
    """``name``'s first ``steps`` GRPO steps, seed 0: the demo, or tool_math after its warm-up (the same for
    every variant) with the GRPO stage cut to ``steps``."""
    folder = run_folder(work, task, name)
    if task == "demo":
        return kit_run(folder, 0, steps, [*extra, f"max_steps={steps}"])
    recipe = yaml.safe_load(TOOL_MATH.read_text())
    recipe["stages"][-1]["max_steps"] = steps
    short = work / f"probe-tool_math-{steps}steps.yaml"
    work.mkdir(parents=True, exist_ok=True)
    short.write_text(yaml.safe_dump(recipe))
    return kit_run(folder, 0, steps, ["evaluate=false", *extra], str(short))


def same_updates(task: str, work: Path, overrides: dict[str, list[str]], steps: int, parallel: int) -> list[list[str]]:
    """Variants grouped by their first ``steps`` GRPO updates: equal gradient norms and rewards at every step mean
    equal gradients, so a group is trained once and its result stands for every member. On-policy (one
    optimisation pass per generation) the importance ratio is exactly 1 and several losses coincide."""
    names = list(overrides)
    for i in range(0, len(names), parallel):
        finish(*[probe_run(task, work, n, overrides[n], steps) for n in names[i:i + parallel]])
    groups: list[tuple[list[tuple[float, float]], list[str]]] = []
    for name in names:
        trace = [(r["grad_norm"], r["reward"]) for r in grpo_steps(run_folder(work, task, name))]
        if len(trace) != steps:
            raise SystemExit(f"probe of {name}: {len(trace)} GRPO steps logged, expected {steps}")
        match = next((g for g in groups if all(math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-7)
                                              for x, y in zip(trace, g[0]) for a, b in zip(x, y))), None)
        if match:
            match[1].append(name)
        else:
            groups.append((trace, [name]))
    return [members for _, members in groups]


def tail(log: list[dict], key: str) -> float | None:
    values = [r[key] for r in log if key in r][-TAIL:]
    return round(statistics.fmean(values), 4) if values else None


def demo_cell(work: Path, seed: int, overrides: dict[str, list[str]], steps: int, every: int, parallel: int) -> dict:
    """Every variant on one seed, ``parallel`` at a time; accuracy at the shortest variant's seconds of steps."""
    runs, names = {}, list(overrides)
    for i in range(0, len(names), parallel):
        pair = names[i:i + parallel]
        finish(*[kit_run(run_folder(work, "demo", n, seed), seed, every, [*overrides[n], f"max_steps={steps}"])
                 for n in pair])
    for name in names:
        folder = run_folder(work, "demo", name, seed)
        log = json.loads((folder / "checkpoints" / f"checkpoint-{steps}" / "trainer_state.json").read_text())
        runs[name] = {"points": curve(folder / "checkpoints", seed), "kl": tail(log["log_history"], "kl"),
                      "entropy": tail(log["log_history"], "entropy"),
                      "wall_s": json.loads((folder / "summary.json").read_text()).get("wall_s")}
    budget = min(r["points"][-1]["seconds"] for r in runs.values())
    for run in runs.values():
        within = [p for p in run["points"] if p["seconds"] <= budget + 1e-6]
        run["budget_s"], run["accuracy"] = budget, within[-1]["accuracy"]
        run["final_accuracy"] = run["points"][-1]["accuracy"]  # equal steps: the same work whatever the load
    return runs


def tool_math_cell(work: Path, seed: int, overrides: dict[str, list[str]]) -> dict:
    """Every variant on one seed through the kit, with its own end-of-run evaluation (base vs trained)."""
    runs = {}
    for name, extra in overrides.items():
        folder = run_folder(work, "tool_math", name, seed)
        finish(kit_run(folder, seed, 0, extra, str(TOOL_MATH)))  # a run finished earlier is read, not repeated
        metrics = grpo_steps(folder)
        evaluated = json.loads((folder / "eval.json").read_text())
        runs[name] = {"accuracy": evaluated["trained"]["accuracy"], "base_accuracy": evaluated["base"]["accuracy"],
                      "wall_s": json.loads((folder / "summary.json").read_text()).get("wall_s"),
                      "seconds_of_steps": round(sum(r.get("step_time", 0.0) for r in metrics), 1),
                      "kl": tail(metrics, "kl"), "entropy": tail(metrics, "entropy")}
    return runs


def table(record: dict) -> str:
    """The docs' table: one row per group of variants with the same updates, accuracy per seed and its mean."""
    rows = ["| variants (same updates) | held-out accuracy per seed | mean | seconds of steps | entropy | KL |",
            "|---|---|---|---|---|---|"]
    groups = record.get("groups") or [[name] for name in record["variants"]]
    for members in groups:
        runs = [cell[members[0]] for cell in record["seeds"].values() if members[0] in cell]
        if not runs:
            continue
        acc = [r["accuracy"] for r in runs]
        secs = [r.get("budget_s") or r.get("seconds_of_steps") for r in runs]
        rows.append(f"| {', '.join(f'`{m}`' for m in members)} | {' / '.join(f'{a:.3f}' for a in acc)} | "
                    f"{statistics.fmean(acc):.3f} | {' / '.join(f'{s:.0f}' for s in secs if s)} | "
                    f"{statistics.fmean(r['entropy'] for r in runs if r['entropy'] is not None):.3f} | "
                    f"{'-' if all(r['kl'] is None for r in runs) else statistics.fmean(r['kl'] or 0 for r in runs)} |")
    if record.get("partial_seeds"):
        partial = record["partial_seeds"]
        rows.append(f"\nSeed{'s' * (len(partial) > 1)} {', '.join(map(str, partial))} stopped part way: not every "
                    "group ran.")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=["demo", "tool_math"], default="demo")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--only", nargs="+", help="variants to run (default: all): loss types and gspo")
    parser.add_argument("--steps", type=int, default=60, help="demo: steps per run (the recipe's 60)")
    parser.add_argument("--every", type=int, default=10, help="demo: checkpoint every this many steps")
    parser.add_argument("--parallel", type=int, default=2, help="demo: variants trained at once (same load)")
    parser.add_argument("--probe", type=int, default=3,
                        help="first train every variant this many GRPO steps and measure once per group of "
                             "variants whose updates coincide (0: measure every variant)")
    parser.add_argument("--work", default="runs/bench_losses")
    parser.add_argument("--table", help="print the docs' table from this results JSON, and stop")
    parser.add_argument("--collect", action="store_true",
                        help="train nothing: write the results from the runs already finished under --work (a "
                             "benchmark stopped part way); a seed holds the groups whose runs are done")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(Path(args.table).read_text())))
        return 0
    chosen = variants(args.only)
    record = {"task": args.task, "variants": chosen, "machine_start": machine(), "seeds": {}}
    if args.collect:
        record["collected_from_finished_runs"] = True
        unfinished = [n for n in chosen if args.probe and not finished(run_folder(Path(args.work), args.task, n))]
        if unfinished:
            raise SystemExit(f"--collect: the probes of {', '.join(unfinished)} are not finished")
    if args.probe:
        record["groups"] = same_updates(args.task, Path(args.work), chosen, args.probe, args.parallel)
        print(json.dumps({"same updates for the first steps": record["groups"]}), flush=True)
        chosen = {members[0]: chosen[members[0]] for members in record["groups"]}
    RESULTS.mkdir(exist_ok=True)
    suffix = "" if not args.only else "_" + "_".join(args.only)
    suffix += f"_{args.steps}steps" if args.task == "demo" else ""
    dest = RESULTS / f"losses_{args.task}{suffix}.json"
    for seed in args.seeds:
        work = Path(args.work)
        done = {n: v for n, v in chosen.items()
                if not args.collect or finished(run_folder(work, args.task, n, seed), args.task != "demo")}
        if not done:
            continue
        if len(done) < len(chosen):  # a seed stopped part way: its groups are fewer, a demo's budget other
            record.setdefault("partial_seeds", []).append(seed)
        cell = demo_cell(work, seed, done, args.steps, args.every, args.parallel) if args.task == "demo" else \
            tool_math_cell(work, seed, done)
        record["seeds"][str(seed)] = cell
        print(json.dumps({seed: {k: (v["accuracy"], v["wall_s"]) for k, v in cell.items()}}), flush=True)
        record["machine_end"] = machine()
        dest.write_text(json.dumps(record, indent=2))  # after every seed: a stopped run keeps what it measured
    print(table(record))
    print(f"wrote {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
