"""Reward throughput per preset, and preset reward time as a share of one CPU GRPO step on the tiny model.

    .venv/bin/python benchmarks/bench_rewards.py [--n 10000] [--code-n 200] [--no-step]

Goal: rewards cost <= 2% of a training step, so they never become the bottleneck.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "helpers"))

import grpo_fast.rewards as R  # noqa: E402
from grpo_fast.rewards.check import SAMPLE_ROWS, gold_completion  # noqa: E402

_FILLER = "we add the numbers and then check the result carefully before answering".split()


def _noise(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_FILLER) for _ in range(n))


def synthetic(kind: str, n: int, seed: int = 0) -> tuple[list, dict]:
    """``n`` completions (gold, wrong, malformed and rambling mixed) with their dataset columns."""
    rng = random.Random(seed)
    rows = SAMPLE_ROWS[kind]
    completions, columns = [], {}
    for i in range(n):
        row = rows[i % len(rows)]
        gold = gold_completion(row, kind) or ""
        r = rng.random()
        if r < 0.4:
            text = gold
        elif r < 0.6:
            text = gold.replace(str(row.get("answer", "@@")), str(rng.randint(0, 999)))
        elif r < 0.8:
            text = _noise(rng, rng.randint(5, 200))
        else:
            text = f"<reasoning>\n{_noise(rng, 40)}\n</reasoning>\n<answer>\n{rng.randint(0, 99)}\n</answer>"
        completions.append([{"role": "assistant", "content": text}])
        for key, value in row.items():
            columns.setdefault(key, []).append(value)
    prompts = columns.pop("prompt")
    return prompts, {"completions": completions, **columns}


def run_preset(preset: R.RewardPreset, prompts: list, batch: dict) -> float:
    ids = [[0] * 50 for _ in batch["completions"]]
    start = time.perf_counter()
    for fn in preset.funcs:
        fn(prompts=prompts, completion_ids=ids, trainer_state=None, **batch)
    return time.perf_counter() - start


def throughput(n: int, code_n: int) -> None:
    print(f"{'preset':<18} {'completions':>11} {'seconds':>8} {'completions/s':>14}")
    for preset in (
        R.MATH_REASONING_REWARDS,
        R.CODE_GENERATION_REWARDS,
        R.SUMMARIZATION_REWARDS,
        R.QA_REWARDS,
    ):
        count = code_n if preset.kind == "code" else n
        prompts, batch = synthetic(preset.kind, count)
        run_preset(preset, prompts[:8], {k: v[:8] for k, v in batch.items()})  # warm up workers / sandboxes
        secs = run_preset(preset, prompts, batch)
        print(f"{preset.name:<18} {count:>11} {secs:>8.2f} {count / secs:>14,.0f}")


def step_share() -> None:
    from tiny import tiny_grpo_trainer, tiny_tokenizer

    tok = tiny_tokenizer()
    print(
        f"\n{'preset':<18} {'step s':>7} {'reward s':>9} {'share':>7}  (tiny model, CPU, 4 completions/step)"
    )
    for preset in (
        R.MATH_REASONING_REWARDS,
        R.CODE_GENERATION_REWARDS,
        R.SUMMARIZATION_REWARDS,
        R.QA_REWARDS,
    ):
        rows = (SAMPLE_ROWS[preset.kind] * 4)[:4]
        with tempfile.TemporaryDirectory() as tmp:
            trainer = tiny_grpo_trainer(tok, preset.funcs, preset.weights, rows * 3, tmp, max_steps=3)
            trainer.train()
        steps = [h["step_time"] for h in trainer.state.log_history if "step_time" in h][1:]  # skip warm-up
        step = sum(steps) / len(steps)
        prompts, batch = synthetic(preset.kind, 4, seed=1)
        reps = 20
        reward = sum(run_preset(preset, prompts, batch) for _ in range(reps)) / reps
        print(f"{preset.name:<18} {step:>7.3f} {reward:>9.4f} {100 * reward / step:>6.2f}%")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--code-n", type=int, default=10_000)
    parser.add_argument("--no-step", action="store_true")
    args = parser.parse_args()
    throughput(args.n, args.code_n)
    if not args.no_step:
        step_share()


if __name__ == "__main__":
    main()
