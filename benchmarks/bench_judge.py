"""The embedded 135M model as an LLM judge, served by vLLM's CPU build or loaded in-process: its self-test
agreement on a recipe's pairs and its seconds per training step (docs/rewards.md "Judged rewards").

    PYTHONPATH=. GRPO_FAST_VLLM_CPU=1 VLLM_CPU_KVCACHE_SPACE=1 .venv-vllm/bin/python benchmarks/bench_judge.py
    PYTHONPATH=. .venv/bin/python benchmarks/bench_judge.py --backend in-process --rows 3

Each backend: the self-test on ``--rows`` rows of QA and summarization (four pairs a row), then a QA run of
``--steps`` steps with the tests' tiny policy (4 completions a step, no evaluation), printing ``judge/seconds``
against TRL's ``step_time`` per step, with the CPU and its load before and after.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from grpo_fast.models import resolve_model_path
from grpo_fast.models.vllm_colocate import vllm_cpu_environment
from grpo_fast.models.vllm_server import local_server
from grpo_fast.recipes import get_recipe
from grpo_fast.rewards.judge_checks import self_test
from grpo_fast.rewards.judged import make_llm_judge_reward
from grpo_fast.run.resolve import resolve_config
from tests.helpers.tiny import tiny_model, tiny_tokenizer

ROOT = Path(__file__).resolve().parent.parent


def machine() -> str:
    name = next((line.split(":", 1)[1].strip() for line in subprocess.run(
        ["lscpu"], capture_output=True, text=True).stdout.splitlines() if line.startswith("Model name")), "?")
    return f"{name}, {os.cpu_count()} cores, load {' '.join(f'{x:.2f}' for x in os.getloadavg())}"


@contextlib.contextmanager
def backend(name: str, work: Path):
    """The judge's settings: an endpoint served here by vLLM's OpenAI server, or none (in-process)."""
    path = resolve_model_path("embedded")
    if name == "in-process":
        yield {"judge_model": "embedded"}
        return
    vllm_cpu_environment()
    with local_server(path, work / "server.log", dtype="float32", lora=False,
                      extra=("--max-model-len", "4096", "--enforce-eager")) as served:
        yield {"endpoint": f"{served.url}/v1", "judge_model": path}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("vllm", "in-process"), default="vllm")
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-judge-"))
    policy = work / "tiny"
    tok = tiny_tokenizer()
    tiny_model(tok).save_pretrained(policy)
    tok.save_pretrained(policy)
    print("machine:", machine(), flush=True)
    with backend(args.backend, work) as where:
        for recipe in ("qa", "summarization"):
            spec = get_recipe(recipe)
            judge = make_llm_judge_reward(rubric=recipe, timeout=900, **where)
            began = time.perf_counter()
            result = self_test(judge, spec.rows(resolve_config(recipe)), spec.gold, n_rows=args.rows)
            print(f"{args.backend} {recipe}: {result.line()}; {judge.stats()['judged']} verdicts in "
                  f"{time.perf_counter() - began:.1f} s", flush=True)
        entry = "{name: llm_judge, rubric: qa, timeout: 900, self_test: 'off', " + ", ".join(
            f"{k}: '{v}'" for k, v in where.items()) + "}"
        run = work / "run"
        subprocess.run([sys.executable, "-m", "grpo_fast", "train", "qa", f"model={policy}", f"max_steps={args.steps}",
                        "max_completion_length=8", "evaluate=false", "learning_rate=0.01", f"run_dir={run}",
                        f"rewards=[fuzzy_match, {entry}]"], check=True, cwd=ROOT)
        steps = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        print(f"{args.backend} judge seconds of step seconds:",
              [(round(m["judge/seconds"], 2), round(m.get("step_time", 0), 2)) for m in steps if "judge/seconds" in m])
    print("machine:", machine())


if __name__ == "__main__":
    main()
