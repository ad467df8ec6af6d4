"""Every recipe trained end to end on CPU and measured held-out: math, code, QA and summarization, three seeds.

Each run is `grpo-fast train recipes/<recipe>_cpu.yaml seed=S` in a fresh interpreter (the recipe's CPU
configuration: the embedded SmolLM2-135M, the offline sample, an SFT warm-up on the gold replies, then GRPO), one
run at a time. The kit's own end-of-run evaluation scores the base model and the trained one on the held-out rows
the run never saw (eval.json), with the recipe's own rewards: math accuracy (math-verify) and format, code tests
passed in the sandbox and code block / syntax, QA fuzzy match and citation, summarization ROUGE-L, length and
faithfulness. Recorded per run: those metrics base and trained, wall time, CPU, cores and load at start and end,
the health monitor's warnings replayed on the run, and what the GRPO stage's judge saw on the training rows (its
mean per step and the steps where any completion of any group scored: none means pass@k over every group was 0,
so GRPO had no correct answer to reinforce).

    nice -n 5 .venv/bin/python benchmarks/bench_recipes.py                        # 4 recipes x seeds 0 1 2
    nice -n 5 .venv/bin/python benchmarks/bench_recipes.py --recipes qa --seeds 0  # one run
    .venv/bin/python benchmarks/bench_recipes.py --table                          # the table of the JSON only

Runs already finished under ``--work`` are collected, not run again (stop it and start it again at will). Runs go
seed by seed over all recipes, so a partial result covers every recipe. ``--threads 1`` (default): the machine is
shared; torch's two threads on a core another job holds wait on each other (on this 2-core VM, greedy generation
of 8 answers took 108 s with 2 threads under load 6-10 and 13 s with one).

Results: benchmarks/results/recipes_cpu.json and a markdown table (docs/benchmarks.md "Every recipe on CPU").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml
from bench_learning import RESULTS, finished, grpo_steps, machine
from recipe_noise import intervals, said

CONFIGS = Path(__file__).resolve().parent.parent / "recipes"
RECIPES = ("math", "code", "qa", "summarization")
DEST = RESULTS / "recipes_cpu.json"
MAIN = {"math": "accuracy", "code": "accuracy", "qa": "accuracy", "summarization": "score"}
"""Each recipe's headline, its ``Recipe.metric``: the share of greedy answers at the judge's full score (math-verify
right, every test passed in the sandbox, fuzzy match 1.0), or for summarization the mean ROUGE-L (graded: a
greedy summary never reaches 1.0). Beside it: the judge's mean and pass@1 from one sampled answer a row."""
MAIN_NAME = {"accuracy": "greedy accuracy: share of held-out rows whose one greedy answer gets the judge's full score",
             "score": "mean ROUGE-L of the greedy summaries against the reference (held-out rows)"}
ROOT = Path(__file__).resolve().parent.parent
LABELS = {"accuracy": "greedy accuracy", "pass@1": "pass@1 (sampled)", "pass@4": "pass@4 (4 sampled)",
          "format": "format"}
JUDGE = {"code": "tests passed (mean share)", "qa": "fuzzy match (mean)", "summarization": "ROUGE-L (mean)"}
EXTRA = {"math": ["pass@1", "pass@4"], "code": ["pass@1", "score"], "qa": ["score"], "summarization": []}


def run_one(recipe: str, seed: int, work: Path, threads: int) -> dict:
    """Train one recipe on one seed in a fresh interpreter unless finished already; its record."""
    run = work / f"{recipe}-seed{seed}"
    meta = run.parent / f"{run.name}.bench.json"
    if not (finished(run, evaluated=True) and meta.exists()):
        shutil.rmtree(run, ignore_errors=True)  # an interrupted run: start it again whole
        start, before = time.time(), machine()
        cmd = [sys.executable, "-m", "grpo_fast", "train", str(CONFIGS / f"{recipe}_cpu.yaml"), f"seed={seed}",
               f"run_dir={run}", f"cpu_threads={threads}"]
        with (work / f"{run.name}.log").open("w") as log:
            code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
        meta.write_text(json.dumps({"command": " ".join(cmd[1:]), "provenance": provenance(), "exit_code": code,
                                    "wall_s": round(time.time() - start, 1), "machine_start": before,
                                    "machine_end": machine()}, indent=2))
    return collect(recipe, seed, run, json.loads(meta.read_text()))


def provenance() -> dict:
    """The code a run starts on: the commit checked out and whether tracked files differ from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    return {"reconstructed": False, "code_commit": git("rev-parse", "HEAD") or None,
            "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
            "how": "git rev-parse HEAD and git status when the run started (bench_recipes.py)"}


def collect(recipe: str, seed: int, run: Path, meta: dict) -> dict:
    """The record of one finished run: its commit, its resolved config (the run directory's config.yaml), held-out
    metrics base and trained with per-row scores and intervals, the judge during GRPO, health."""
    record = {"recipe": recipe, "seed": seed, "run_dir": str(run), **meta}
    if (run / "config.yaml").exists():
        record["config"] = yaml.safe_load((run / "config.yaml").read_text())
        record["config_source"] = "the run directory's config.yaml, as the run resolved and wrote it"
    if not finished(run, evaluated=True):
        return {**record, "error": f"no eval.json (exit {meta['exit_code']}; see {run}.log)"}
    evaluated = json.loads((run / "eval.json").read_text())
    keep = ("rows", "accuracy", "score", "format", "pass@1", f"pass@{evaluated['base']['k']}", "mean_length",
            "clipped", "rewards", "per_row")
    record.update({side: {k: evaluated[side].get(k) for k in keep} for side in ("base", "trained")})
    record["main"] = MAIN[recipe]
    record["main_name"] = MAIN_NAME[MAIN[recipe]]
    record["intervals"] = intervals(record, interval_metrics(record))
    record["judge"] = judge_during_grpo(recipe, run)
    record["health"] = health_warnings(run)
    return record


def interval_metrics(record: dict) -> list[str]:
    """The held-out figures that get an interval: the headline, greedy accuracy, the judge's mean, pass@1/pass@k."""
    found = ["accuracy", "score", *sorted(k for k in record["base"] if k.startswith("pass@"))]
    return [record["main"], *(m for m in found if m != record["main"])]


def judge_during_grpo(recipe: str, run: Path) -> dict:
    """What the correctness judge gave the GRPO stage's completions on the training rows, step by step: its mean,
    and how many steps had any completion scored above 0 (0 steps: pass@k over every group was 0)."""
    from grpo_fast.recipes import get_recipe

    name = get_recipe(recipe).rewards.correctness
    steps = grpo_steps(run)
    means = [s.get(f"rewards/{name}/mean") for s in steps]
    scored = [m for m in means if m is not None]
    return {"reward": name, "steps": len(steps), "mean_per_step": [round(m, 4) for m in scored],
            "steps_with_any_score": sum(m > 0 for m in scored),
            "frac_reward_zero_std": round(sum(s.get("frac_reward_zero_std", 0) for s in steps) / max(1, len(steps)),
                                          3)}


def health_warnings(run: Path) -> list[str]:
    """The health monitor replayed on the run: the kinds it warns of (notes left out)."""
    from grpo_fast import health

    return sorted({e.kind for e in health(run).warnings})


def cell(record: dict, metric: str) -> str:
    """``base → trained`` for one metric (a reward's mean when ``metric`` names one)."""
    def value(side: str) -> float | None:
        data = record[side]
        return data.get(metric) if metric in data else (data.get("rewards") or {}).get(metric)

    a, b = value("base"), value("trained")
    return "–" if a is None or b is None else f"{a:.2f} → {b:.2f}"


def band(record: dict, metric: str) -> str:
    """The 95% intervals of ``metric``, base / trained (``unavailable`` where the run kept no per-row scores)."""
    entry = record.get("intervals", {}).get(metric) or {}
    a, b = entry.get("base"), entry.get("trained")
    if a is None or b is None:
        return "unavailable (no per-row scores)"
    return f"[{a[0]:.2f}, {a[1]:.2f}] / [{b[0]:.2f}, {b[1]:.2f}]"


def commit(record: dict) -> str:
    """The code commit, short; ``(reconstructed)`` for runs whose commit was read back from git history."""
    given = record.get("provenance") or {}
    sha = (given.get("code_commit") or "?")[:7]
    return f"{sha}{'+dirty' if given.get('dirty') else ''}{' (reconstructed)' if given.get('reconstructed') else ''}"


def shown(recipe: str) -> list[str]:
    """The metrics the table shows for a recipe: the headline first, then format and each non-judge reward."""
    from grpo_fast.recipes import get_recipe

    rewards = get_recipe(recipe).rewards
    others = [fn.__name__ for fn, _ in rewards.rewards if fn.__name__ != rewards.correctness]
    return [MAIN[recipe], *EXTRA[recipe], *others]


def table(records: list[dict]) -> str:
    """One markdown table per recipe: seeds as rows, base → trained per metric, the judge in GRPO, time, load."""
    out = []
    for recipe in RECIPES:
        mine = [r for r in records if r["recipe"] == recipe]
        if not mine:
            continue
        metrics = shown(recipe)
        labels = [JUDGE.get(recipe, m) if m == "score" else LABELS.get(m, m) for m in metrics]
        head = ["seed", f"{labels[0]} (change, verdict)", "95% interval base / trained", *labels[1:],
                "GRPO steps judge > 0", "wall", "load (start/end)", "health warnings", "commit"]
        out += [f"**{recipe}** (`recipes/{recipe}_cpu.yaml`)", "", "| " + " | ".join(head) + " |",
                "|" + " --- |" * len(head)]
        for r in sorted(mine, key=lambda r: r["seed"]):
            if "error" in r:
                out.append(f"| {r['seed']} | {r['error']} |" + " |" * (len(head) - 2))
                continue
            judge = r["judge"]
            load = f"{r['machine_start']['load_avg'][0]:.1f} / {r['machine_end']['load_avg'][0]:.1f}"
            out.append("| " + " | ".join([str(r["seed"]), said(r, metrics[0]), band(r, metrics[0]),
                                          *(cell(r, m) for m in metrics[1:]),
                                          f"{judge['steps_with_any_score']} of {judge['steps']}",
                                          f"{r['wall_s'] / 60:.1f} min", load,
                                          ", ".join(r["health"]) or "none", commit(r)]) + " |")
        out.append("")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipes", nargs="+", choices=RECIPES, default=list(RECIPES))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=1, help="cpu_threads of each run (see above)")
    parser.add_argument("--work", default="runs/bench_recipes")
    parser.add_argument("--table", action="store_true", help="print the table of the results file and stop")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(DEST.read_text())["runs"]))
        return 0
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    before = json.loads(DEST.read_text()) if DEST.exists() else {}
    kept, notes = before.get("runs", []), before.get("notes", [])  # notes: what happened to runs, by hand
    for seed in args.seeds:
        for recipe in args.recipes:
            record = run_one(recipe, seed, work, args.threads)
            kept = [r for r in kept if (r["recipe"], r["seed"]) != (recipe, seed)] + [record]
            RESULTS.mkdir(exist_ok=True)
            DEST.write_text(json.dumps({"about": __doc__.splitlines()[0], "machine": machine(),
                                        "nice": os.nice(0), "notes": notes, "runs": kept}, indent=2))
            print(f"{recipe} seed {seed}: {record.get('error') or said(record, MAIN[recipe])} "
                  f"({record['wall_s']:.0f} s)", flush=True)
    print(table(kept))
    return 0


if __name__ == "__main__":
    sys.exit(main())
