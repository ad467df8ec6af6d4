"""vLLM server mode by adapter, executed: vLLM's OpenAI server from the CPU build serves the embedded model, the kit
trains two steps with ``vllm_mode=server`` and keeps the server in step by loading each step's LoRA adapter.

Checked: the server's log-probabilities of a fixed completion under the newest adapter match the trainer's own
(recorded by the run after each load) and the saved adapter's, computed here with peft; they differ from the base
model's and from the previous version's; the old version is unloaded; generations changed. The server runs in its own
process group, which is killed whatever the test does (and by the kernel, should pytest itself die).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import requests

REWARDS = "rewards=[{name: ideal_length, target: 4}, {name: numeric_match, weight: 2.0}]"
PROMPTS = ["What is 3 + 4?", "What is 12 + 5?", "What is 9 + 9?", "What is 1 + 7?"]
# fp32 on both sides: the same sums in another order (vLLM's kernels vs torch's), so 1e-3 nats per token is loose;
# one training step at learning_rate 0.05 moves them by > 0.05 nats on average
TOLERANCE = 1e-3
MOVED = 0.05


@pytest.fixture(scope="module")
def model_path() -> str:
    from grpo_fast.models import resolve_model_path

    return resolve_model_path("embedded")


@pytest.fixture(scope="module")
def server(model_path, tmp_path_factory):
    """The OpenAI server of vLLM's CPU build with runtime LoRA loading (fp32: the tolerance above); its URL."""
    from grpo_fast.models.vllm_colocate import vllm_cpu_environment
    from grpo_fast.models.vllm_server import group_alive, local_server

    vllm_cpu_environment()  # KV-cache size and thread binding, read by the server from the environment
    log = tmp_path_factory.mktemp("vllm-server") / "server.log"
    with local_server(model_path, log, max_lora_rank=16, dtype="float32", extra=("--max-model-len", "1024",
                                                                                   "--enforce-eager")) as served:
        pgid = served.pid
        yield served.url
    assert not group_alive(pgid), "a process of the vLLM server outlived the test"


def _greedy(base: str, model: str, prompt_ids: list[int], tokens: int = 8) -> list[int]:
    body = {"model": model, "prompt": prompt_ids, "max_tokens": tokens, "temperature": 0.0, "return_token_ids": True}
    response = requests.post(f"{base}/v1/completions", json=body, timeout=300)
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]["token_ids"]


def _server_logprobs(base: str, model: str, prompt_ids: list[int], completion: list[int]) -> list[float]:
    body = {"model": model, "prompt": prompt_ids + completion, "max_tokens": 1, "temperature": 1.0,
            "prompt_logprobs": 0}
    response = requests.post(f"{base}/v1/completions", json=body, timeout=300)
    assert response.status_code == 200, response.text
    rows = response.json()["choices"][0]["prompt_logprobs"][len(prompt_ids):]
    return [row[str(token)]["logprob"] for row, token in zip(rows, completion)]


def _peft_logprobs(model, prompt_ids: list[int], completion: list[int]) -> list[float]:
    import torch

    ids = torch.tensor([prompt_ids + completion])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1:-1].float()
    return torch.log_softmax(logits, -1).gather(1, ids[0, len(prompt_ids):, None])[:, 0].tolist()


def test_server_mode_trains_with_the_adapter_loaded_after_each_step(server, model_path, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    port = server.rsplit(":", 1)[1]
    out = tmp_path / "run"
    env = {**os.environ, "GRPO_FAST_VLLM_CPU": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "grpo_fast", "train", "demo", "use_vllm=true", "vllm_mode=server",
         "vllm_server_host=127.0.0.1", f"vllm_server_port={port}", "max_steps=2", "num_generations=4",
         "per_device_train_batch_size=4", "max_completion_length=8", "learning_rate=0.05", "evaluate=false",
         "run_dir=run", REWARDS],  # relative, as users write it: the server runs in another directory
        capture_output=True, text=True, timeout=1800, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert json.loads((out / "summary.json").read_text())["steps"] == 2

    # the run's own check after each load: server and trainer agree on the fixed completion's log-probabilities
    records = [json.loads(line) for line in (out / "vllm_server_sync.jsonl").read_text().splitlines()]
    assert [r["version"] for r in records] == [1, 2]  # before step 1 (initial adapter), before step 2
    first, newest = records[0]["adapter"], records[1]["adapter"]
    print('vllm_server_sync.jsonl:', *records, sep='\n')  # the figures docs/scale.md quotes (pytest -s)
    for record in records:
        assert record["probe_tokens"] == 16 and record["logprob_max_abs_diff"] <= TOLERANCE, record
        assert record["adapter_mb"] > 0 and record["sync_ms"] > 0
    assert records[1]["previous_adapter_mean_abs_diff"] >= MOVED, records  # step 1 moved the policy
    assert records[1]["base_model_mean_abs_diff"] >= MOVED, records

    # the server, asked independently: the newest version is loaded, the old one is gone, and it is the saved adapter
    listed = {m["id"] for m in requests.get(f"{server}/v1/models", timeout=30).json()["data"]}
    assert newest in listed and first not in listed, listed
    assert sorted(p.name for p in (out / "vllm_adapters").iterdir()) == [newest]
    tok = AutoTokenizer.from_pretrained(model_path)
    base_model = AutoModelForCausalLM.from_pretrained(model_path).eval()
    adapted = PeftModel.from_pretrained(base_model, str(out / "vllm_adapters" / newest)).eval()
    changed = 0
    for prompt in PROMPTS:
        ids = tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                      tokenize=True, return_dict=False)
        tuned, untuned = _greedy(server, newest, ids), _greedy(server, model_path, ids)
        changed += tuned != untuned
        served = _server_logprobs(server, newest, ids, tuned)
        local = _peft_logprobs(adapted, ids, tuned)
        assert max(abs(a - b) for a, b in zip(served, local)) <= TOLERANCE, (prompt, served, local)
        with adapted.disable_adapter():
            base_lp = _peft_logprobs(adapted, ids, tuned)
        assert sum(abs(a - b) for a, b in zip(served, base_lp)) / len(tuned) >= MOVED, (prompt, served, base_lp)
    assert changed >= 1, "the adapter after one step changed no greedy generation"
