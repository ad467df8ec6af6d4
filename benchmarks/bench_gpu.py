"""GPU benchmark: the same small GRPO run with the Unsloth and transformers backends (vLLM on/off), side by side.

    python benchmarks/bench_gpu.py [--model PATH_OR_ID] [--steps 5] [--completion 128]

Prints step time, generation tokens/s and peak GPU memory per configuration, and ratios against the
transformers baseline. Offline by default: a randomly initialised Qwen2.5-0.5B (its real config, typed in
below) saved to a temp folder; speed and memory do not depend on the weight values. Generation is forced to
a fixed length (``min_new_tokens`` for transformers, ``min_tokens`` for vLLM), so every configuration generates
the same number of tokens; tokens/s counts the completions each optimizer step really generates.
Each configuration runs in its own process (Unsloth patches transformers on import; vLLM holds memory).
On a machine without CUDA it prints "no CUDA: nothing to measure" and exits 0.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QWEN25_05B = {  # Qwen/Qwen2.5-0.5B-Instruct config.json, the fields that set the shapes
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864,
    "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936,
    "max_position_embeddings": 32768, "rope_theta": 1000000.0, "rms_norm_eps": 1e-06, "tie_word_embeddings": True,
    "hidden_act": "silu", "bos_token_id": 151643, "eos_token_id": 151645, "torch_dtype": "bfloat16",
}


def random_model_config(tok) -> object:
    """Qwen2.5-0.5B's shapes with the benchmark tokenizer's special ids."""
    from transformers import Qwen2Config

    config = Qwen2Config(**{k: v for k, v in QWEN25_05B.items() if k not in ("architectures", "model_type")})
    config.pad_token_id, config.eos_token_id, config.bos_token_id = (tok.pad_token_id, tok.eos_token_id,
                                                                     tok.bos_token_id)
    return config


def build_random_model(folder: Path) -> Path:
    """A random-weight Qwen2.5-0.5B with a working tokenizer (the tests' byte-level BPE, padded vocab)."""
    import torch
    from transformers import AutoModelForCausalLM

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "helpers"))
    from tiny import tiny_tokenizer

    tok = tiny_tokenizer()
    config = random_model_config(tok)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.save_pretrained(folder)
    tok.model_max_length = 4096
    tok.save_pretrained(folder)
    return folder


def configurations() -> list[dict]:
    have_unsloth = importlib.util.find_spec("unsloth") is not None
    have_vllm = importlib.util.find_spec("vllm") is not None
    out = [{"name": "transformers", "backend": "transformers", "use_vllm": False}]
    if have_unsloth:
        out.append({"name": "unsloth", "backend": "unsloth", "use_vllm": False})
        if have_vllm:
            out.append({"name": "unsloth+vllm", "backend": "unsloth", "use_vllm": True})
    return out


def fixed_length_kwargs(use_vllm: bool, tokens: int) -> dict:
    """Generation arguments that force ``tokens`` new tokens: vLLM's SamplingParams calls it ``min_tokens``,
    transformers' generate ``min_new_tokens`` (TRL hands generation_kwargs to whichever generates)."""
    return {"min_tokens": tokens} if use_vllm else {"min_new_tokens": tokens}


def step_figures(metrics: list[dict], completions_per_step: int) -> dict:
    """Steady-state step time (TRL's ``step_time``, the first step dropped: warm-up) and generated tokens/s
    from the measured completion lengths and the completions each optimizer step really generates."""
    steady = metrics[1:] or metrics
    step_s = sum(m["step_time"] for m in steady) / len(steady)
    tokens = sum(m["completions/mean_length"] * completions_per_step for m in steady) / len(steady)
    return {"step_s": step_s, "gen_tokens_per_step": tokens, "gen_tok_s": tokens / step_s}


def worker(spec: dict) -> dict:
    """One configuration, in this process: train ``steps`` steps, time them, read peak memory."""
    import torch

    from grpo_fast.run.resolve import resolve_config
    from grpo_fast.train import train

    overrides = {
        "model": spec["model"], "backend": spec["backend"], "use_vllm": spec["use_vllm"], "max_steps": spec["steps"],
        "max_completion_length": spec["completion"], "num_generations": spec.get("generations", 8),
        "per_device_train_batch_size": spec.get("generations", 8), "logging_steps": 1, "save_strategy": "no",
        "evaluate": False, "eval_rows": 0, "run_dir": spec["run_dir"],
        "generation_kwargs": fixed_length_kwargs(spec["use_vllm"], spec["completion"]),
        **({"vllm_gpu_memory_utilization": 0.4} if spec["use_vllm"] else {}),
    }
    cfg = resolve_config("demo", overrides)
    per_step = cfg.args.per_device_train_batch_size * cfg.args.gradient_accumulation_steps
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    result = train(cfg, force=True)  # random weights: the reward gold self-test is beside the point here
    metrics = [json.loads(line) for line in (Path(result.path) / "metrics.jsonl").read_text().splitlines()]
    return {"name": spec["name"], **step_figures(metrics, per_step), "completions_per_step": per_step,
            "peak_gb": torch.cuda.max_memory_allocated() / 2**30 if cuda else None}


def table(rows: list[dict]) -> str:
    base = next((r for r in rows if r["name"] == "transformers" and "error" not in r), None)
    lines = [f"{'config':<16}{'step s':>9}{'gen tok/s':>11}{'peak GiB':>10}{'speed x':>9}{'memory x':>10}"]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['name']:<16} failed: {r['error']}")
            continue
        speed = base["step_s"] / r["step_s"] if base else float("nan")
        mem = r["peak_gb"] / base["peak_gb"] if base else float("nan")
        lines.append(f"{r['name']:<16}{r['step_s']:>9.2f}{r['gen_tok_s']:>11.0f}{r['peak_gb']:>10.2f}"
                     f"{speed:>9.2f}{mem:>10.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="model path or hub id (default: random Qwen2.5-0.5B)")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--completion", type=int, default=128, help="tokens generated per completion")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print("RESULT " + json.dumps(worker(json.loads(args.worker))), flush=True)
        return 0
    import torch

    if not torch.cuda.is_available():
        print("no CUDA: nothing to measure")
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-gpu-") as tmp:
        model = args.model or str(build_random_model(Path(tmp) / "qwen2.5-0.5b-random"))
        rows = []
        for conf in configurations():
            spec = {**conf, "model": model, "steps": args.steps, "completion": args.completion,
                    "run_dir": str(Path(tmp) / f"run-{conf['name']}")}
            start = time.time()
            proc = subprocess.run([sys.executable, __file__, "--worker", json.dumps(spec)], capture_output=True,
                                  text=True, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
            found = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
            if proc.returncode or not found:
                tail = (proc.stderr.strip().splitlines() or ["?"])[-1][:150]
                rows.append({"name": conf["name"], "error": tail})
            else:
                rows.append(json.loads(found[-1][7:]))
            print(f"{conf['name']}: {time.time() - start:.0f} s", file=sys.stderr, flush=True)
    print(f"GRPO, {args.steps} steps, 8 completions per prompt x {args.completion} tokens, "
          f"GPU {torch.cuda.get_device_name(0)}")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
