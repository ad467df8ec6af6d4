"""A run directory as train() + HealthMonitor + evaluate_run leave it, for the report's tests (page and browser)."""

from __future__ import annotations

import math

from grpo_fast import files

EVIL = '<script>alert("x")</script> & <answer>7</answer>'


def make_run(path, steps: int = 25, finished: bool = True, kl: bool = True):
    """A run directory as train() + HealthMonitor + evaluate_run leave it."""
    path.mkdir(parents=True, exist_ok=True)
    files.write_yaml(path / "config.yaml", {"recipe": "demo", "model": "embedded", "max_steps": steps})
    for step in range(1, steps + 1):
        record = {"step": step, "reward": 0.5 + 0.08 * step + 0.2 * math.sin(step), "reward_std": 0.6 - 0.02 * step,
                  "frac_reward_zero_std": 0.1, "rewards/answer_tags/mean": 0.3 + 0.03 * step,
                  "rewards/sum_correct/mean": 0.2 + 0.05 * step, "entropy": 2.0 - 0.05 * step,
                  "completions/mean_length": 30 - 0.5 * step, "completions/clipped_ratio": 0.1,
                  "loss": 0.01, "grad_norm": 0.4 if step != 3 else None}
        if kl:
            record["kl"] = 0.01 * step
        files.append_jsonl(path / "metrics.jsonl", record)
    files.append_jsonl(path / "samples.jsonl", {"step": 5, "prompt": "What is 3 + 4?", "completion": EVIL,
                                                 "rewards": {"answer_tags": 1.0, "sum_correct": 2.0}})
    files.append_jsonl(path / "health.jsonl", {"step": 12, "kind": "clipped", "message": "70% cut <b>",
                                                "remedy": "raise max_completion_length", "value": 0.7,
                                                "threshold": 0.5, "action": "warn"})
    if finished:
        files.write_json(path / "summary.json", {"steps": steps, "reward_first": 0.6, "reward_last": 2.4})
    return path
