"""Record the health corpus: real runs on the embedded model, healthy and broken on purpose, logged metrics only.

Each run is ``grpo-fast train`` in a fresh interpreter, from the config written to
``tests/watch/health_corpus/<name>/run.yaml``; its ``metrics.jsonl`` (TRL's per-step log) and a few lines of
its ``summary.json`` are copied next to that config. ``labels.json`` says, for each broken run, the alarm
kinds that should fire (any one of them counts) and the step by which a user would want to know.
``benchmarks/health_eval.py`` replays the corpus through the current monitor.

    .venv/bin/python benchmarks/health_corpus.py                 # every run not recorded yet
    .venv/bin/python benchmarks/health_corpus.py clipped --force # re-record one run
    .venv/bin/python benchmarks/health_corpus.py qa-cpu-seed0 --from runs/bench_recipes/qa-seed0
                                                                 # keep a run trained already (bench_recipes.py)
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "watch" / "health_corpus"
REWARDS = "../../health_rewards.py"
"""tests/watch/health_rewards.py, relative to a run's run.yaml (the kit resolves reward paths from the config)."""

SHORT_RECIPE = {"max_steps": 10, "max_completion_length": 128, "num_generations": 4,
                "per_device_train_batch_size": 4, "evaluate": False}
"""A recipe's short CPU run: one prompt x four completions per step, replies up to 128 tokens."""
BROKEN = {"recipe": "demo", "max_steps": 20, "evaluate": False}
RECIPES = Path(__file__).resolve().parent.parent / "recipes"


def cpu_recipe(recipe: str, seed: int) -> dict:
    """A recipe's CPU configuration (recipes/<recipe>_cpu.yaml) as benchmarks/bench_recipes.py trains it."""
    return {**yaml.safe_load((RECIPES / f"{recipe}_cpu.yaml").read_text()), "seed": seed, "cpu_threads": 1}


RUNS: dict[str, dict] = {
    # healthy: the demo as `make demo` runs it, on three seeds, and each recipe's short CPU run
    "demo-seed0": {"recipe": "demo", "seed": 0},
    "demo-seed1": {"recipe": "demo", "seed": 1},
    "demo-seed2": {"recipe": "demo", "seed": 2},
    "math-short": {"recipe": "math", **SHORT_RECIPE},
    "code-short": {"recipe": "code", **SHORT_RECIPE},
    "qa-short": {"recipe": "qa", **SHORT_RECIPE},
    "summarization-short": {"recipe": "summarization", **SHORT_RECIPE},
    # each recipe's CPU configuration on three seeds, as benchmarks/bench_recipes.py trains and evaluates it
    **{f"{recipe}-cpu-seed{seed}": cpu_recipe(recipe, seed)
       for recipe in ("math", "code", "qa", "summarization") for seed in (0, 1, 2)},
    # broken on purpose, on the demo's questions
    "lr-too-high": {**BROKEN, "learning_rate": 0.05, "beta": 0.04},
    "constant-reward": {**BROKEN, "rewards": [{"name": f"{REWARDS}:constant_half"}]},
    "reward-hacking": {**BROKEN, "max_steps": 30, "rewards": [{"name": f"{REWARDS}:wordy", "weight": 1.0},
                                                              {"name": f"{REWARDS}:product_correct", "weight": 1.0}]},
    "clipped": {**BROKEN, "max_completion_length": 2},
    "greedy-collapse": {**BROKEN, "temperature": 0.05},
    "too-hard": {**BROKEN, "rewards": [{"name": f"{REWARDS}:cubic_answer"}]},
    "flaky-reward": {**BROKEN, "max_reward_failure_rate": 0.5,
                     "rewards": [{"name": "just_the_number", "weight": 0.5},
                                 {"name": f"{REWARDS}:sum_correct_flaky", "weight": 2.0},
                                 {"name": "sum_mentioned", "weight": 0.5}]},
    "no-signal": {**BROKEN, "rewards": [{"name": f"{REWARDS}:always_yes"}]},
    # the embedded model under a thinking template (tests/helpers/thinking_template.py: <think> opened in every prompt)
    # with 3 tokens, fewer than "\n</think>" takes: no completion closes its thinking or reaches an answer
    "thinking-open": {**BROKEN, "max_steps": 8, "model": "thinking-model", "thinking": "on",
                      "max_completion_length": 3},
    "format-hacking": {**BROKEN, "max_steps": 30, "seed": 1,
                       "rewards": [{"name": f"{REWARDS}:sentence_format", "weight": 1.0},
                                   {"name": f"{REWARDS}:product_correct", "weight": 1.0}]},
}


def record(name: str, root: Path, trained: Path | None = None) -> None:
    """Train one corpus run for real and keep its logged metrics; ``trained``: a run of exactly this config that
    finished already (its metrics are kept as they are, nothing is trained again)."""
    folder = CORPUS / name
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "run.yaml"
    settings = dict(RUNS[name])
    if settings.get("model") == "thinking-model":
        sys.path.insert(0, str(CORPUS.parent.parent / "helpers"))
        from thinking_template import thinking_model_dir

        shutil.rmtree(root / "thinking-model", ignore_errors=True)
        settings["model"] = str(thinking_model_dir(root / "thinking-model"))  # relative to where it records
    config.write_text(yaml.safe_dump(settings, sort_keys=False))
    run_dir = trained or root / name
    start = time.time()
    if trained is None:
        shutil.rmtree(run_dir, ignore_errors=True)
        # --force: the broken runs' rewards fail the gold self-test on purpose (that is what they are)
        force = ["--force"] if "rewards" in RUNS[name] else []
        proc = subprocess.run([sys.executable, "-m", "grpo_fast", "train", str(config), f"run_dir={run_dir}", *force],
                              capture_output=True, text=True)
        output, code = proc.stdout + proc.stderr, proc.returncode
    else:
        log, meta = (run_dir.parent / f"{run_dir.name}{suffix}" for suffix in (".log", ".bench.json"))
        output = log.read_text() if log.exists() else ""  # bench_recipes.py's log and record of the run
        code = json.loads(meta.read_text())["exit_code"] if meta.exists() else None
    (folder / "train.log").write_text(_health_lines(output))
    metrics = run_dir / "metrics.jsonl"
    if not metrics.exists():
        print(f"{name}: no metrics.jsonl (exit {code}):\n{output[-3000:]}", flush=True)
        return
    shutil.copy(metrics, folder / "metrics.jsonl")
    summary = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").exists() else {}
    kept = {k: summary.get(k) for k in ("steps", "wall_s", "stopped_by", "error") if k in summary}
    (folder / "summary.json").write_text(json.dumps({**kept, "exit_code": code,
                                                     "command_s": round(time.time() - start, 1)}, indent=2))
    print(f"{name}: exit {code}, {time.time() - start:.0f} s, "
          f"{sum(1 for _ in metrics.open())} logged steps", flush=True)


def _health_lines(output: str) -> str:
    """What the run printed that matters here: its last lines (errors, stops), not the progress bar."""
    lines = [line for line in output.replace("\r", "\n").splitlines() if line.strip() and "it/s]" not in line
             and "s/it]" not in line]
    return "\n".join(lines[-40:]) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"runs to record (default: all not recorded): {', '.join(RUNS)}")
    parser.add_argument("--force", action="store_true", help="re-record runs already in the corpus")
    parser.add_argument("--root", default="runs/health_corpus", help="where the full run directories go")
    parser.add_argument("--from", dest="trained", type=Path,
                        help="one run name: keep this finished run directory of its config instead of training it")
    args = parser.parse_args()
    if args.trained and len(args.names) != 1:
        raise SystemExit("--from keeps one run: name it")
    unknown = [n for n in args.names if n not in RUNS]
    if unknown:
        raise SystemExit(f"unknown run(s) {unknown}; known: {', '.join(RUNS)}")
    for name in args.names or list(RUNS):
        if (CORPUS / name / "metrics.jsonl").exists() and not args.force:
            print(f"{name}: recorded already (--force to redo)")
            continue
        record(name, Path(args.root), args.trained)


if __name__ == "__main__":
    main()
