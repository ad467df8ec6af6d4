"""Kit trainer vs plain TRL GRPOTrainer scripts on CPU: same model, LoRA, data, batch, completion length and seed.

Two comparisons, each in alternating rounds, median of TRL's own per-step ``step_time`` (first step of each run,
the warm-up, dropped):

- ``overhead``: the kit path vs a plain script with the *same* GRPOConfig values (goal: ratio <= 1.02).
- ``profile``: the kit's ``cpu`` profile vs a plain script with TRL's *default* GRPOConfig (on CPU that is
  bf16 autocast everywhere and gradient checkpointing on). Goal: ratio <= 0.7. Kit runs that add the profile's
  settings one at a time say what each setting bought.
- ``choices``: each CPU speed-up of the ``cpu`` profile on this machine: on vs off vs ``auto`` (the others left at
  the profile's ``auto``), printing the CPU class and what ``auto`` chose. A speed-up's three runs go back to back
  in each round, their order rotated round by round, so they meet the same load; each is read as its per-step
  best (for each step, its fastest round; then the mean over steps: same seed, same completions, so what differs
  between rounds of one step is the machine's noise) and as the median of all its steps. Goal: ``auto`` within
  5% of the better fixed choice. Where ``auto`` chose what one fixed choice forces they run the same code, and the
  ratio says how well the figure resolves 5% on this machine. ``--speedups`` limits it to some speed-ups;
  ``--threads N`` pins ``cpu_threads`` while the others are compared (``auto`` samples the free cores at each
  run's start, so on a shared machine runs would differ in threads, not only in the setting compared). To try
  an AVX2-only CPU on a newer one: ``ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2``.

Both sides use the demo's learning rate (a learning rate is not a speed setting, but it changes how long the
completions get, so it must match).

    .venv/bin/python benchmarks/bench_trainer.py [--compare overhead profile choices] [--rounds 3] [--steps 5]
        [--speedups cpu_autocast_training shared_prefill merged_generation cpu_threads] [--threads N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

SHAPE = ["max_completion_length=16", "per_device_train_batch_size=8", "num_generations=8"]
COMMON = [*SHAPE, "save_strategy=no", "evaluate=false", "health=false"]
# Kit runs for the profile comparison: from TRL's defaults to the kit's cpu profile, one setting at a time.
OFF = ["cpu_threads=null", "cpu_autocast_training=false", "shared_prefill=false", "merged_generation=false"]
LADDER = [
    ("kit with TRL's defaults", ["bf16=true", "gradient_checkpointing=true", *OFF]),
    ("+ gradient_checkpointing=false", ["bf16=true", *OFF]),
    ("+ bf16 autocast for training only", OFF[:1] + OFF[2:]),
    ("+ shared_prefill (generation + training forward)", ["cpu_threads=null", "merged_generation=false"]),
    ("+ merged_generation", ["cpu_threads=null"]),
    ("+ cpu_threads=auto (= cpu profile)", []),
]


# (key, its "on" value, its "off" value) for the choices comparison
SPEEDUPS = (("cpu_autocast_training", "true", "false"), ("shared_prefill", "true", "false"),
            ("merged_generation", "true", "false"), ("cpu_threads", str(os.cpu_count() or 1), "1"))
AUTO_GOAL = 1.05


def kit_run(model: str, steps: int, extra: list[str]) -> list[float]:
    """The kit's own path: resolve_config -> train (checks, loader, callbacks, speed-ups, artifacts)."""
    from grpo_fast.files import read_jsonl
    from grpo_fast.run.resolve import resolve_config
    from grpo_fast.train import train

    with tempfile.TemporaryDirectory() as tmp:
        cfg = resolve_config("demo", [f"model={model}", f"max_steps={steps}", f"run_dir={tmp}/run", "profile=cpu",
                                      *COMMON, *extra])
        train(cfg)
        return [m["step_time"] for m in read_jsonl(Path(tmp) / "run" / "metrics.jsonl")][1:]


def plain_run(model: str, steps: int, same_config: bool, extra: tuple[str, ...] = ()) -> list[float]:
    """What a user writes with TRL alone: the same rows, rewards and LoRA; GRPOConfig the kit's or TRL's defaults."""
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from grpo_fast.models import resolve_model_path
    from grpo_fast.recipes import demo
    from grpo_fast.run.prepare import prepare
    from grpo_fast.run.resolve import resolve_config

    cfg = resolve_config("demo", [f"model={model}", f"max_steps={steps}", "profile=cpu", *COMMON, *extra])
    rows = prepare(cfg).train_rows  # the same rows the kit trains on
    path = resolve_model_path(model)
    with tempfile.TemporaryDirectory() as tmp:
        if same_config:
            settings = dict(cfg.grpo)
        else:  # TRL's defaults; use_cpu because TRL's default bf16 refuses to start on CPU without it
            g = cfg.grpo
            settings = {"use_cpu": True, "max_steps": steps, "learning_rate": g["learning_rate"],
                        "per_device_train_batch_size": g["per_device_train_batch_size"],
                        "num_generations": g["num_generations"], "max_completion_length": g["max_completion_length"],
                        "logging_steps": 1, "save_strategy": "no", "report_to": "none"}
        args = GRPOConfig(output_dir=tmp, seed=cfg.seed, reward_weights=demo.REWARDS.weights, **settings)
        trainer = GRPOTrainer(
            model=AutoModelForCausalLM.from_pretrained(path), processing_class=AutoTokenizer.from_pretrained(path),
            reward_funcs=demo.REWARDS.funcs, args=args, train_dataset=Dataset.from_list(rows),
            peft_config=LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM"),
        )
        trainer.train()
        return [h["step_time"] for h in trainer.state.log_history if "step_time" in h][1:]


def alternate(runs: list[tuple[str, object]], rounds: int) -> dict[str, list[float]]:
    """Run every entry once per round, rotating the order each round; collect step times by name."""
    import torch

    threads = torch.get_num_threads()  # cpu_threads=auto changes it process-wide: every run starts from the same
    times: dict[str, list[float]] = {name: [] for name, _ in runs}
    for round_ in range(rounds):
        shift = round_ % len(runs)
        for name, fn in runs[shift:] + runs[:shift]:
            torch.set_num_threads(threads)
            got = fn()
            times[name].extend(got)
            print(f"round {round_ + 1} {name}: step times {[round(t, 2) for t in got]} "
                  f"(load {os.getloadavg()[0]:.1f})", flush=True)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare", nargs="+", choices=["overhead", "profile", "choices"],
                        default=["overhead", "profile", "choices"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--speedups", nargs="+", choices=[key for key, _, _ in SPEEDUPS],
                        default=[key for key, _, _ in SPEEDUPS], help="the speed-ups --compare choices runs")
    parser.add_argument("--threads", type=int, default=None,
                        help="--compare choices: cpu_threads for the runs comparing the other speed-ups (default: "
                             "the profile's auto)")
    args = parser.parse_args()
    start = time.time()
    lines = []
    if "overhead" in args.compare:
        same = tuple(LADDER[0][1])  # the kit's speed-ups off: both sides run one GRPOConfig
        t = alternate([("plain (same config)", lambda: plain_run(args.model, args.steps, True, same)),
                       ("kit", lambda: kit_run(args.model, args.steps, list(same)))], args.rounds)
        k, p = statistics.median(t["kit"]), statistics.median(t["plain (same config)"])
        lines.append(f"overhead: median s/step kit {k:.3f}  plain TRL, same config {p:.3f}  ratio {k / p:.3f} "
                     "(goal <= 1.02)")
    if "profile" in args.compare:
        runs = [("plain TRL default GRPOConfig", lambda: plain_run(args.model, args.steps, False))]
        runs += [(name, lambda extra=extra: kit_run(args.model, args.steps, extra)) for name, extra in LADDER]
        t = alternate(runs, args.rounds)
        plain = statistics.median(t["plain TRL default GRPOConfig"])
        lines.append(f"profile: median s/step plain TRL default GRPOConfig {plain:.3f}")
        previous = None
        for name, _ in LADDER:
            m = statistics.median(t[name])
            bought = f", {m - previous:+.3f} s/step for this setting" if previous is not None else ""
            lines.append(f"  {name:50s} {m:.3f} s/step  ratio to plain default {m / plain:.3f}{bought}")
            previous = m
        lines.append(f"profile: kit cpu profile / plain TRL default = {previous / plain:.3f} (goal <= 0.7); "
                     f"{os.cpu_count()} cores")
    if "choices" in args.compare:
        lines += compare_choices(args.model, args.steps, args.rounds, args.speedups, args.threads)
    print("\n" + "\n".join(lines))
    print(f"{args.rounds} rounds x {args.steps} steps, {time.time() - start:.0f} s in all, "
          f"load average now {os.getloadavg()[0]:.1f}")


def per_step_best(runs: list[list[float]]) -> float:
    """Mean over steps of each step's fastest run: a step's content (same seed, same completions) is the same in
    every round, so its fastest round is the one other jobs disturbed least."""
    steps = min(len(r) for r in runs)
    return statistics.mean(min(r[i] for r in runs) for i in range(steps))


def compare_choices(model: str, steps: int, rounds: int, keys: list[str] | None = None,
                    pinned_threads: int | None = None) -> list[str]:
    """On vs off vs auto for each CPU speed-up, the three back to back in each round; lines for the summary.
    ``pinned_threads``: cpu_threads for the runs of the other speed-ups."""
    import torch

    from grpo_fast.models.cpu_choice import choose, cpu_class
    from grpo_fast.run.resolve import resolve_config

    cls = cpu_class()
    auto = {c.key: c for c in choose(resolve_config("demo", ["profile=cpu", *COMMON]), cls=cls)}
    print(f"CPU: {cls.label} ({cls.why}); {os.cpu_count()} cores; "
          f"ONEDNN_MAX_CPU_ISA={os.environ.get('ONEDNN_MAX_CPU_ISA', '-')} "
          f"ATEN_CPU_CAPABILITY={os.environ.get('ATEN_CPU_CAPABILITY', '-')}; load {load()}", flush=True)
    speedups = [s for s in SPEEDUPS if keys is None or s[0] in keys]
    threads = torch.get_num_threads()  # cpu_threads=auto changes it process-wide: every run starts from the same
    runs: dict[str, list[list[float]]] = {}
    loads: dict[str, list[float]] = {}
    for round_ in range(rounds):
        for key, on, off in speedups:
            values = [on, off, "auto"]
            for value in values[round_ % 3:] + values[:round_ % 3]:
                name = f"{key}={value}"
                pin = [f"cpu_threads={pinned_threads}"] if pinned_threads and key != "cpu_threads" else []
                torch.set_num_threads(threads)
                loads.setdefault(key, []).append(os.getloadavg()[0])
                got = kit_run(model, steps, [name, *pin])
                loads[key].append(os.getloadavg()[0])
                runs.setdefault(name, []).append(got)
                print(f"round {round_ + 1} {name}: step times {[round(t, 2) for t in got]} "
                      f"({torch.get_num_threads()} threads; load {load()})", flush=True)
    lines = [f"choices on {cls.label}: s/step as per-step best / median of {rounds} rounds x {steps - 1} steps "
             f"(goal: auto <= {AUTO_GOAL:.2f}x the better fixed choice)"]
    for key, on, off in speedups:
        best = {v: per_step_best(runs[f"{key}={v}"]) for v in (on, off, "auto")}
        median = {v: statistics.median(t for r in runs[f"{key}={v}"] for t in r) for v in (on, off, "auto")}
        ratio = best["auto"] / min(best[on], best[off])
        ratio_median = median["auto"] / min(median[on], median[off])
        chosen = auto.get(key)
        same = ""
        if chosen is not None and str(chosen.value).lower() in (on, off):
            same = f"; auto = {str(chosen.value).lower()} here (same code: their gap is the machine's noise)"
        cells = "  ".join(f"{label}({v}) {best[v]:.3f} / {median[v]:.3f}"
                          for label, v in (("on", on), ("off", off), ("auto", "auto")))
        lines.append(f"  {key:22s} {cells}  auto/better {ratio:.3f} (median {ratio_median:.3f}) "
                     f"{'ok' if ratio <= AUTO_GOAL else 'NOT within goal'}; load {min(loads[key]):.1f}-"
                     f"{max(loads[key]):.1f}{same}")
        lines.append(f"    [{chosen.line() if chosen else 'auto'}]")
    return lines


def load() -> str:
    """/proc/loadavg's three averages (1, 5, 15 minutes): how busy the shared machine was."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
