"""The LLM judge served by vLLM's CPU build, executed: the kit starts vLLM's OpenAI server on the embedded model
(``vllm_server.local_server``) and ``llm_judge`` scores over HTTP, as it would a judge on a GPU server.

Checked: the client knows the endpoint for vLLM and continues a started verdict held to the rubric's scale, so
every verdict is read; the self-test reports agreement on the QA and summarization recipes' pairs; the injection
probes score no higher than an honest wrong answer; a QA run and a summarization run train 2 steps with the judge
and evaluate held-out,
logging judge seconds per step; and a judge server that dies mid-run is counted (reward_failures.jsonl, the
guard's limit stops the run with exit 2 naming the reward), never silent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.tiny import save_tiny_model  # tests/helpers (conftest)

from grpo_fast.recipes import get_recipe
from grpo_fast.rewards.judge_checks import INJECTIONS, probe_judge, self_test
from grpo_fast.rewards.judged import make_llm_judge_reward
from grpo_fast.run.resolve import resolve_config

SERVER_FLAGS = ("--max-model-len", "4096", "--enforce-eager")


@pytest.fixture(scope="module")
def model_path() -> str:
    from grpo_fast.models import resolve_model_path

    return resolve_model_path("embedded")


@pytest.fixture(scope="module")
def tiny_policy(tmp_path_factory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny-llama"))


def _serve(model_path: str, log: Path):
    from grpo_fast.models.vllm_colocate import vllm_cpu_environment
    from grpo_fast.models.vllm_server import local_server

    vllm_cpu_environment()
    return local_server(model_path, log, dtype="float32", lora=False, extra=SERVER_FLAGS)


@pytest.fixture(scope="module")
def endpoint(model_path, tmp_path_factory):
    from grpo_fast.models.vllm_server import group_alive

    with _serve(model_path, tmp_path_factory.mktemp("vllm-judge") / "server.log") as served:
        pgid = served.pid
        yield f"{served.url}/v1"
    assert not group_alive(pgid), "a process of the vLLM server outlived the test"


def _entry(url: str, model: str, rubric: str = "qa", **extra: object) -> str:
    more = "".join(f", {k}: {v}" for k, v in extra.items())
    return f"{{name: llm_judge, rubric: {rubric}, endpoint: '{url}', judge_model: '{model}', timeout: 120{more}}}"


@pytest.mark.parametrize("recipe", ["qa", "summarization"])
def test_the_vllm_served_judge_reads_every_verdict_and_reports_its_self_test(endpoint, model_path, recipe):
    spec = get_recipe(recipe)
    rows = spec.rows(resolve_config(recipe))
    judge = make_llm_judge_reward(rubric=recipe, endpoint=endpoint, judge_model=model_path, timeout=120)
    assert judge.backend.starts_reply  # the endpoint said it is vLLM: started, scale-held verdicts
    began = time.perf_counter()
    result = self_test(judge, rows, spec.gold, n_rows=3)
    seconds = time.perf_counter() - began
    stats = judge.stats()
    assert result.pairs >= 8 and result.undecided == 0, result.line()  # every verdict read: none unparsable
    assert stats["unparsable"] == stats["errors"] == stats["timeouts"] == 0, stats
    assert result.agreement is not None and 0.0 <= result.agreement <= 1.0
    print(f"{recipe}: {result.line()}; {stats['judged']} verdicts in {seconds:.1f} s")  # docs/rewards.md (pytest -s)

    lines = probe_judge(judge, rows[:4], spec.gold)
    assert {line.check for line in lines} == {f"injection_{p}" for p in INJECTIONS}
    assert all(line.ok for line in lines), [line for line in lines if not line.ok]


@pytest.mark.parametrize("recipe, check", [("qa", "fuzzy_match"), ("summarization", "rouge_l")])
def test_a_run_trains_with_the_vllm_served_judge_and_evaluates_held_out(endpoint, model_path, tiny_policy, tmp_path,
                                                                        recipe, check):
    rewards = f"rewards=[{check}, {_entry(endpoint, model_path, recipe, self_test_rows=3)}]"
    done = subprocess.run(
        [sys.executable, "-m", "grpo_fast", "train", recipe, f"model={tiny_policy}", "max_steps=2",
         "max_completion_length=8", "eval_rows=2", "eval_k=1", "learning_rate=0.01", "run_dir=run", rewards],
        capture_output=True, text=True, timeout=1800, cwd=tmp_path, env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-4000:]
    out = tmp_path / "run"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 2
    judge = summary["judges"]["llm_judge"]
    assert judge["samples"] >= 8 and judge["judged"] + judge["screened"] + judge["cached"] >= 8, judge
    assert judge["errors"] == judge["timeouts"] == judge["unparsable"] == 0, judge
    assert judge["self_test_agreement"] is not None  # the run's own self-test, before training
    assert "judge self-test" in done.stdout + done.stderr
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in metrics if "judge/seconds" in m]
    assert len(steps) == 2 and all(m["judge/seconds"] > 0 and "rewards/llm_judge/mean" in m for m in steps)
    print(f"{recipe} judge seconds per step (vLLM):", [(round(m["judge/seconds"], 2), round(m.get("step_time", 0), 2))
                                             for m in steps])
    evaluation = json.loads((out / "eval.json").read_text())
    assert "llm_judge" in json.dumps(evaluation)  # the judge's mean on the held-out rows, base and trained


def test_a_judge_server_that_dies_mid_run_is_counted_and_stops_the_run(model_path, tiny_policy, tmp_path):
    from grpo_fast.models.vllm_server import group_alive

    out, log = tmp_path / "run", tmp_path / "train.log"
    with _serve(model_path, tmp_path / "server.log") as served, log.open("w") as sink:
        rewards = f"rewards=[fuzzy_match, {_entry(served.url + '/v1', model_path, self_test='off')}]"
        run = subprocess.Popen(
            [sys.executable, "-m", "grpo_fast", "train", "qa", f"model={tiny_policy}", "max_steps=8",
             "num_generations=4", "per_device_train_batch_size=8", "max_completion_length=8", "evaluate=false",
             "max_reward_failure_rate=0.5", "run_dir=run", rewards],
            stdout=sink, stderr=subprocess.STDOUT, text=True, cwd=tmp_path, env=dict(os.environ))
        try:
            deadline = time.monotonic() + 1200
            while not (out / "metrics.jsonl").exists() or not (out / "metrics.jsonl").read_text().strip():
                assert run.poll() is None and time.monotonic() < deadline, log.read_text()[-4000:]
                time.sleep(0.5)
        except BaseException:
            run.kill()
            raise
    assert not group_alive(served.pid)  # the judge is gone after step 1; the run goes on calling it
    try:
        run.wait(timeout=1200)
    finally:
        run.kill()
    text = log.read_text()
    assert run.returncode == 2, text[-4000:]
    assert "reward 'llm_judge' failed on" in text, text[-2000:]  # the guard trips after 32 samples
    failures = [json.loads(line) for line in (out / "reward_failures.jsonl").read_text().splitlines()]
    assert failures and all(f["reward"] == "llm_judge" for f in failures)
    assert any("judge error" in f["error"] for f in failures), failures[:2]  # connection refused: an error
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert metrics[0]["rewards/llm_judge/failure_rate"] == 0  # step 1 judged
    assert any(m.get("rewards/llm_judge/failure_rate", 0) > 0.5 for m in metrics[1:]), metrics
    assert len(metrics) < 8  # stopped by the failure limit, not run to the end
