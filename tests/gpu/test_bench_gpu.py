"""benchmarks/bench_gpu.py's worker, run for real on CPU with the transformers backend (defect 3)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_gpu.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_gpu", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_worker_measures_step_time_and_the_tokens_really_generated(tiny_model_dir, tmp_path):
    bench = _bench()
    row = bench.worker({"name": "transformers", "backend": "transformers", "use_vllm": False, "steps": 2,
                        "completion": 6, "generations": 4, "model": str(tiny_model_dir),
                        "run_dir": str(tmp_path / "run")})
    assert row["completions_per_step"] == 4
    assert row["gen_tokens_per_step"] == 24  # min_new_tokens forced all 4 completions to 6 tokens
    assert row["step_s"] > 0 and row["gen_tok_s"] == pytest.approx(24 / row["step_s"])
    assert not (tmp_path / "run" / "eval.json").exists()  # eval_rows 0 with evaluation off: no crash, no eval


def test_fixed_length_argument_names_per_generator():
    bench = _bench()
    assert bench.fixed_length_kwargs(True, 9) == {"min_tokens": 9}  # vLLM SamplingParams (tests/gpu/test_contracts)
    assert bench.fixed_length_kwargs(False, 9) == {"min_new_tokens": 9}  # transformers GenerationConfig
    from transformers import GenerationConfig

    assert GenerationConfig(**bench.fixed_length_kwargs(False, 9)).min_new_tokens == 9
