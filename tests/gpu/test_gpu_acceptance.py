"""benchmarks/gpu_acceptance.py end to end in its reduced mode on CPU: every phase runs or says why not."""

from __future__ import annotations

import functools
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import background
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_acceptance.py"


@functools.cache
def reduced_dir() -> Path:
    """The reduced run's folder (its JSON and run dirs), made when the run starts."""
    return Path(tempfile.mkdtemp(prefix="gpu-acceptance-"))


def reduced_run() -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--reduced", "--out", str(reduced_dir() / "acceptance.json")],
                          capture_output=True, text=True, timeout=1800, cwd=reduced_dir())


# started when the suite is collected (tests/helpers/background.py): one fresh interpreter, a minute on 2 cores
BACKGROUND = {"test_reduced_mode_runs_every_phase_and_writes_one_json": reduced_run}


@pytest.mark.slow
def test_reduced_mode_runs_every_phase_and_writes_one_json():
    out = reduced_dir() / "acceptance.json"
    proc = background.result("test_reduced_mode_runs_every_phase_and_writes_one_json")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    report = json.loads(out.read_text())
    assert report["mode"] == "reduced" and report["setup"]["status"] == "skipped"
    assert report["environment"]["versions"]["trl"] == "1.14.2"
    assert report["lock"]["ran"] == report["lock"]["decided"] == "cpu" and report["lock"]["matches"]
    hf, unsloth, *engines, four_bit, four_bit_vllm = report["train"]
    assert [(r["backend"], r["generation"]) for r in engines] == [("transformers", "static_cache"),
                                                                  ("transformers", "continuous_batching")]
    # the memory profile's path (4-bit on Unsloth, then inside vLLM): each runs or says in one line why not
    assert [(r["backend"], r["generation"]) for r in (four_bit, four_bit_vllm)] == [("unsloth", "4-bit"),
                                                                                    ("unsloth", "4-bit + vLLM")]
    for run in (four_bit, four_bit_vllm):
        assert run["status"] == "skipped" and ("CUDA" in run["why"] or "bitsandbytes" in run["why"]), run
    for run in engines:  # the other generation engines train the same config side by side
        assert run["status"] == "ok" and run["gen_tokens_per_step"] == hf["gen_tokens_per_step"], run
    assert hf["status"] == "ok" and hf["backend"] == "transformers" and hf["step_s"] > 0
    assert hf["gen_tokens_per_step"] == report["config"]["completion"] * report["config"]["generations"]
    assert hf["plan_gib"] > 0  # the planner ran on the random model's config
    assert unsloth["status"] == "skipped" and "CUDA" in unsloth["why"]
    after = report["after_training"]
    assert after["generate"]["records"] == 2 and after["chat"]["turns"] == 2
    assert after["export_merged"]["greedy_matches_base_plus_adapter"] is True
    assert after["export_merged"]["adapter_changed_logits"] is True  # a trained adapter, not the zero init
    assert "adapter_model.safetensors" in after["export_adapter"]["files"]
    assert after["export_gguf"]["status"] == "skipped" and "llama.cpp" in after["export_gguf"]["why"]
    assert report["vllm"]["status"] == "skipped"
    tools = report["tools"]  # the tool caller through TRL's tool loop with the sandboxed python tool
    assert tools["model"]["status"] == "ok" and tools["model"]["check"]["calls"] == tools["model"]["check"]["rows"]
    hf_tools, unsloth_tools = tools["runs"]
    assert hf_tools["status"] == "ok" and hf_tools["backend"] == "transformers" and hf_tools["steps"] == 2
    assert hf_tools["call_frequency"] > 0 and hf_tools["python_ran"] > 0  # calls were made, parsed and ran
    assert unsloth_tools["status"] == "skipped" and "CUDA" in unsloth_tools["why"]
    printed = proc.stdout
    assert f"{'unsloth generate':<34}skipped: Unsloth needs a CUDA GPU" in printed and "export_gguf: skipped" in printed
    assert "tools transformers ok (" in printed and "tools unsloth      skipped" in printed
    assert f"JSON: {out}" in printed


def test_setup_without_wheels_says_so(tmp_path):
    spec = importlib.util.spec_from_file_location("gpu_acceptance", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.setup(None)["status"] == "skipped"
    assert module.setup(str(tmp_path)) == {"status": "failed", "why": f"no .whl files in {tmp_path}"}


def test_a_lock_other_than_the_installed_one_stops_with_one_line(tmp_path):
    """--lock cu12 on this CPU torch: exit 2 before anything runs, naming both."""
    proc = subprocess.run([sys.executable, str(SCRIPT), "--lock", "cu12", "--out", str(tmp_path / "a.json")],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 2 and "--lock cu12, but the installed torch is cpu's" in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and not (tmp_path / "a.json").exists()
