"""Time to accuracy, side by side on one machine: the kit's `grpo-fast train demo` against a plain TRL script
(TRL's default GRPOConfig, the same embedded model, LoRA, data and rewards), or the kit with dynamic sampling on
against off.

Each run saves its adapter every ``--every`` steps; afterwards every checkpoint (and the base model, at 0 s) is
scored greedily on the demo's held-out questions (the judge ``sum_correct``: the reply's first number is the sum).
Both arms start at the same time, so they share the machine's load; the plain arm stops when the kit arm ends, or,
given ``--budget``, after that many seconds of steps (alone once the kit arm is done). The clock is TRL's own
``step_time`` summed over the steps (generation, scoring and the optimiser step; not model loading, checkpoint
saving or this evaluation), the same measure for both arms. The headline: the time the first arm needs to reach the
second arm's final accuracy, over the second arm's whole run (and, beside it, over the second arm's own time to
reach it).

    nice -n 10 .venv/bin/python benchmarks/bench_learning.py --seeds 0            # kit vs plain TRL
    nice -n 10 .venv/bin/python benchmarks/bench_learning.py --compare dynamic_sampling --seeds 0
    nice -n 10 .venv/bin/python benchmarks/bench_learning.py --compare dynamic_sampling --task tool_math --seeds 0

Dynamic sampling's two arms train at once on one core each (``cpu_threads=1``). tool_math runs
recipes/tool_math_short_warmup.yaml whole and is scored by the kit's own end-of-run evaluation (its tool loop on the
held-out questions): two points per arm, the base model and the trained one.

Results: benchmarks/results/learning_<compare>.json (raw points, CPU, load) and a .png of accuracy vs time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results"
TOOL_MATH = ROOT.parent / "recipes" / "tool_math_short_warmup.yaml"
EVAL_TOKENS = 32
"""Greedy tokens per held-out answer: a sum is at most three characters; 32 leaves room for an equation."""


def machine() -> dict:
    """CPU model, cores and load average, recorded with every figure."""
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return {"cpu": cpu, "cores": os.cpu_count(), "load_avg": os.getloadavg(), "python": platform.python_version()}


def kit_run(out: Path, seed: int, every: int, overrides: list[str], recipe: str = "demo") -> subprocess.Popen | None:
    """`grpo-fast train demo` in a fresh interpreter, keeping a checkpoint every ``every`` steps; another recipe
    runs whole, with its own end-of-run evaluation (None: the run is there already, finished)."""
    if finished(out, recipe != "demo" and "evaluate=false" not in overrides):
        return None
    own = ["evaluate=false", f"save_steps={every}", "save_total_limit=1000"] if recipe == "demo" else []
    cmd = [sys.executable, "-m", "grpo_fast", "train", recipe, f"seed={seed}", f"run_dir={out}", *own, *overrides]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def finished(run: Path, evaluated: bool = False) -> bool:
    """A run that is there already, finished: its evaluation written where it has one (summary.json comes
    before the evaluation)."""
    return (run / ("eval.json" if evaluated else "summary.json")).exists()


def grpo_steps(run: Path) -> list[dict]:
    """A kit run's logged GRPO steps (metrics.jsonl; an SFT warm-up's steps log no reward)."""
    from grpo_fast.files import read_jsonl

    return [r for r in read_jsonl(run / "metrics.jsonl") if "reward" in r]


def sampling_totals(run: Path) -> dict:
    """What dynamic sampling did over a run (metrics.jsonl): groups dropped, extra completions, steps that found
    no group with spread, and the mean share of uniform groups TRL logged."""
    rows = grpo_steps(run)
    return {"steps": len(rows),
            "groups_dropped": sum(r.get("dynamic_sampling/groups_dropped", 0) for r in rows),
            "extra_generations": sum(r.get("dynamic_sampling/extra_generations", 0) for r in rows),
            "steps_without_spread": sum(r.get("dynamic_sampling/effective_groups", 1) == 0 for r in rows),
            "frac_reward_zero_std": round(sum(r.get("frac_reward_zero_std", 0) for r in rows) / max(1, len(rows)), 3)}


def end_points(run: Path) -> list[dict]:
    """A whole run's two points: the base model at 0 s and the trained one after the GRPO steps' seconds, from
    the kit's own evaluation (eval.json: tool_math's tool loop on its held-out questions)."""
    evaluated = json.loads((run / "eval.json").read_text())
    steps = grpo_steps(run)
    return [{"step": 0, "seconds": 0.0, "accuracy": evaluated["base"]["accuracy"]},
            {"step": len(steps), "seconds": round(sum(r.get("step_time", 0.0) for r in steps), 1),
             "accuracy": evaluated["trained"]["accuracy"]}]


def plain_run(out: Path, seed: int, every: int, budget: float, until: Path) -> subprocess.Popen | None:
    """A plain TRL script in a fresh interpreter (this file with --plain-run), stopped after ``budget`` seconds of
    training steps or, without a budget, once ``until`` exists (the kit arm's summary: the same wall time)."""
    if list(out.glob("checkpoint-*")):
        return None
    stop = ["--budget", str(budget)] if budget else ["--until", str(until)]
    return subprocess.Popen([sys.executable, __file__, "--plain-run", str(out), "--seed", str(seed), "--every",
                             str(every), *stop],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def finish(*procs: subprocess.Popen | None) -> None:
    for proc in procs:
        if proc is not None and proc.wait() != 0:
            raise SystemExit(f"{' '.join(map(str, proc.args))} failed (exit {proc.returncode})")


def plain_trl(out: Path, seed: int, every: int, budget: float, until: Path | None) -> None:
    """What a user writes from TRL's docs: GRPOConfig's defaults (bf16, learning_rate 1e-6, 256 new tokens, ...),
    with only the output folder, CPU, the reward weights, the seed and checkpointing set; LoRA as the kit's."""
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from grpo_fast.models import resolve_model_path
    from grpo_fast.recipes import demo

    class Budget(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            with (out / "log.jsonl").open("a") as f:  # progress, readable while the arm runs
                f.write(json.dumps({"step": state.global_step, **(logs or {})}) + "\n")

        def on_step_end(self, args, state, control, **kwargs):
            spent = sum(r.get("step_time", 0.0) for r in state.log_history)
            if (budget and spent >= budget) or (until is not None and until.exists()):
                control.should_training_stop = control.should_save = True

    path = resolve_model_path("embedded")
    out.mkdir(parents=True, exist_ok=True)
    args = GRPOConfig(output_dir=str(out), use_cpu=True, report_to="none", logging_steps=1, seed=seed,
                      save_steps=every, max_steps=10_000, reward_weights=list(demo.REWARDS.weights))
    trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(path), args=args,
                          processing_class=AutoTokenizer.from_pretrained(path), reward_funcs=list(demo.REWARDS.funcs),
                          train_dataset=Dataset.from_list(demo.make_rows(seed=seed)),
                          peft_config=LoraConfig(r=16, lora_alpha=32, target_modules="all-linear",
                                                 task_type="CAUSAL_LM"),
                          callbacks=[Budget()])
    trainer.train()


def curve(folder: Path, seed: int) -> list[dict]:
    """(seconds of training steps, held-out accuracy) at the base model and at every checkpoint under ``folder``."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from grpo_fast.models import resolve_model_path
    from grpo_fast.models.completions import generate
    from grpo_fast.recipes import demo

    rows = demo.holdout(SimpleNamespace(eval_rows=103, seed=seed), demo.make_rows(seed=seed))
    path = resolve_model_path("embedded")
    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token

    def accuracy(model) -> float:
        texts = [g[0][0] for g in generate(model, tok, [r["prompt"] for r in rows], max_new_tokens=EVAL_TOKENS)]
        return sum(demo.sum_correct(texts, [r["answer"] for r in rows])) / len(rows)

    points = [{"step": 0, "seconds": 0.0, "accuracy": accuracy(AutoModelForCausalLM.from_pretrained(path))}]
    found = sorted(folder.glob("checkpoint-*"), key=lambda p: int(p.name.rsplit("-", 1)[1]))
    for checkpoint in found:
        log = json.loads((checkpoint / "trainer_state.json").read_text())["log_history"]
        seconds = sum(r.get("step_time", 0.0) for r in log)
        model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(path), str(checkpoint))
        points.append({"step": int(checkpoint.name.rsplit("-", 1)[1]), "seconds": round(seconds, 1),
                       "accuracy": accuracy(model), "kl": _last(log, "kl"), "entropy": _last(log, "entropy")})
    return points


def _last(log: list[dict], key: str) -> float | None:
    return next((r[key] for r in reversed(log) if key in r), None)


def time_to(points: list[dict], target: float) -> float | None:
    """Seconds of training until held-out accuracy first reaches ``target`` (None: never)."""
    return next((p["seconds"] for p in points if p["accuracy"] >= target - 1e-9), None)


def headline(first: list[dict], second: list[dict], curves: bool = True) -> dict:
    """Seconds the first arm needs to reach the second arm's final accuracy, against the second arm's whole run
    (``ratio``, the issue's measure: what the second arm's final model cost) and against the second arm's own
    first arrival at that accuracy (``ratio_to_target``). A second arm that never rose above its start (its final
    accuracy reached at 0 s) has no time to target; its whole run still has a cost."""
    target = second[-1]["accuracy"]
    a, b, whole = time_to(first, target), time_to(second, target), second[-1]["seconds"]
    shorter = min(first[-1]["seconds"], whole)
    return {"target_accuracy": target, "first_s": a, "second_s": b, "second_total_s": whole,
            "ratio": round(a / whole, 3) if a is not None and whole else None,
            "ratio_to_target": round(a / b, 3) if a is not None and b else None,
            "base": [first[0]["accuracy"], second[0]["accuracy"]],
            "final": [first[-1]["accuracy"], second[-1]["accuracy"]],
            # only with checkpoints along the way: an arm scored at its end alone has no accuracy mid-run
            "at_equal_time": [at_time(first, shorter), at_time(second, shorter)] if curves else None,
            "equal_time_s": shorter}


def at_time(points: list[dict], seconds: float) -> float:
    """Held-out accuracy of the last checkpoint within ``seconds`` of training."""
    return [p for p in points if p["seconds"] <= seconds + 1e-6][-1]["accuracy"]


def plot(arms: dict[str, list[list[dict]]], title: str, dest: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for (name, runs), color in zip(arms.items(), ("tab:blue", "tab:orange")):
        for i, points in enumerate(runs):
            ax.plot([p["seconds"] for p in points], [p["accuracy"] for p in points], "o-", color=color,
                    label=name if i == 0 else None, alpha=0.8)
    ax.set(xlabel="seconds of training steps", ylabel="held-out accuracy (greedy)", title=title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(dest, dpi=100)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare", choices=["plain", "dynamic_sampling"], default="plain")
    parser.add_argument("--task", choices=["demo", "tool_math"], default="demo",
                        help="dynamic_sampling only: tool_math runs recipes/tool_math_short_warmup.yaml whole and "
                             "compares its own end-of-run evaluation (two points per arm: base and trained)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--every", type=int, default=10, help="checkpoint (and evaluate) every this many steps")
    parser.add_argument("--steps", type=int, default=0, help="kit arms: max_steps (default: the demo's 60)")
    parser.add_argument("--budget", type=float, default=0.0,
                        help="plain arm: seconds of training steps (default: until the kit arm ends)")
    parser.add_argument("--work", default="runs/bench_learning")
    parser.add_argument("--plain-run", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--until", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.task != "demo" and args.compare != "dynamic_sampling":
        parser.error("--task tool_math goes with --compare dynamic_sampling")
    if args.plain_run:
        plain_trl(Path(args.plain_run), args.seed, args.every, args.budget, Path(args.until) if args.until else None)
        return 0
    names = ("kit (grpo-fast train demo)", "plain TRL (default GRPOConfig)") if args.compare == "plain" else \
        ("dynamic_sampling: true", "dynamic_sampling: false")
    record = {"compare": args.compare, "arms": list(names), "machine_start": machine(), "seeds": {}}
    work = Path(args.work)
    for seed in args.seeds:
        start = time.time()
        steps = [f"max_steps={args.steps}"] if args.steps else []
        if args.compare == "plain":  # both arms at once: the same machine load for each
            first, second = work / f"kit-{seed}", work / f"plain-{seed}"
            finish(kit_run(first, seed, args.every, steps),
                   plain_run(second, seed, args.every, args.budget, first / "summary.json"))
        else:
            first, second = work / f"ds-{args.task}-on-{seed}", work / f"ds-{args.task}-off-{seed}"
            recipe = "demo" if args.task == "demo" else str(TOOL_MATH)
            # both at once, one core each: the same load for both, no threads waiting on a shared core
            finish(kit_run(first, seed, args.every, [*steps, "cpu_threads=1", "dynamic_sampling=true"], recipe),
                   kit_run(second, seed, args.every, [*steps, "cpu_threads=1", "dynamic_sampling=false"], recipe))
        if args.task == "tool_math":
            kit, other = end_points(first), end_points(second)
        else:  # plain TRL keeps its checkpoints in its output_dir itself
            kit = curve(first / "checkpoints", seed)
            other = curve(second if args.compare == "plain" else second / "checkpoints", seed)
        record["seeds"][str(seed)] = {"points": [kit, other],
                                      "headline": headline(kit, other, curves=args.task == "demo"),
                                      "wall_s": round(time.time() - start, 1), "load_avg": os.getloadavg()}
        if args.compare == "dynamic_sampling":
            record["seeds"][str(seed)]["sampling"] = [sampling_totals(first), sampling_totals(second)]
        print(json.dumps({seed: record["seeds"][str(seed)]["headline"]}), flush=True)
    record["machine_end"] = machine()
    RESULTS.mkdir(exist_ok=True)
    dest = RESULTS / f"learning_{args.compare}{'' if args.task == 'demo' else '_' + args.task}.json"
    dest.write_text(json.dumps(record, indent=2))
    plot({n: [s["points"][i] for s in record["seeds"].values()] for i, n in enumerate(names)},
         f"{args.task}, {record['machine_start']['cpu']}", dest.with_suffix(".png"))
    print(f"wrote {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
