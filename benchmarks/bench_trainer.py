"""Kit trainer vs a plain TRL GRPOTrainer script: same model, config, data and seed, on CPU, alternating.

Prints the median per-step time of each and the ratio kit/plain (goal <= 1.02). Step times are TRL's own
``step_time`` metric; the first step of each run (warm-up) is dropped.

    .venv/bin/python benchmarks/bench_trainer.py [--rounds 3] [--steps 4] [--model embedded]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

SETTINGS = ["max_completion_length=16", "per_device_train_batch_size=8", "num_generations=4", "save_strategy=no",
            "evaluate=false"]


def kit_run(target_model: str, steps: int) -> list[float]:
    """The kit's own path: resolve_config -> train (checks, loader, callbacks, artifacts)."""
    from grpo_fast.resolve import resolve_config
    from grpo_fast.train import train

    with tempfile.TemporaryDirectory() as tmp:
        cfg = resolve_config("demo", [f"model={target_model}", f"max_steps={steps}", f"run_dir={tmp}/run", *SETTINGS])
        train(cfg)
        from pathlib import Path

        from grpo_fast.rundir import read_jsonl

        return [m["step_time"] for m in read_jsonl(Path(tmp) / "run" / "metrics.jsonl")][1:]


def plain_run(target_model: str, steps: int) -> list[float]:
    """What a user writes with TRL alone: same rows, rewards, LoRA and GRPOConfig values."""
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from grpo_fast.models import resolve_model_path
    from grpo_fast.prepare import prepare
    from grpo_fast.recipes import demo
    from grpo_fast.resolve import resolve_config

    cfg = resolve_config("demo", [f"model={target_model}", f"max_steps={steps}", *SETTINGS])
    rows = prepare(cfg).train_rows  # the same rows the kit trains on
    path = resolve_model_path(target_model)
    with tempfile.TemporaryDirectory() as tmp:
        args = GRPOConfig(output_dir=tmp, seed=cfg.seed, reward_weights=demo.RECIPE.reward_weights, **cfg.grpo)
        trainer = GRPOTrainer(
            model=AutoModelForCausalLM.from_pretrained(path), processing_class=AutoTokenizer.from_pretrained(path),
            reward_funcs=[demo.answer_tags, demo.sum_correct], args=args, train_dataset=Dataset.from_list(rows),
            peft_config=LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM"),
        )
        trainer.train()
        return [h["step_time"] for h in trainer.state.log_history if "step_time" in h][1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--model", default="embedded")
    args = parser.parse_args()
    kit, plain = [], []
    start = time.time()
    for round_ in range(args.rounds):
        order = [("plain", plain_run, plain), ("kit", kit_run, kit)]
        if round_ % 2:
            order.reverse()
        for name, fn, sink in order:
            times = fn(args.model, args.steps)
            sink.extend(times)
            print(f"round {round_ + 1} {name:5s}: step times {[round(t, 2) for t in times]}", flush=True)
    k, p = statistics.median(kit), statistics.median(plain)
    print(f"\nmedian s/step: kit {k:.3f}  plain TRL {p:.3f}  ratio kit/plain {k / p:.3f} (goal <= 1.02)")
    print(f"{len(kit)} kit steps, {len(plain)} plain steps, {time.time() - start:.0f} s in all")


if __name__ == "__main__":
    main()
