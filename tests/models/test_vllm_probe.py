"""``generation: auto``'s probe of colocated vLLM on this machine: its cache (keys, expiry), the decision it gives
at a run's shape (against figures worked out by hand below, not by the code under test), the line the run's report
carries, and a probe that cannot run (no vLLM here) saying why while another machine's figures decide."""

from __future__ import annotations

import importlib.util
import json

import pytest

from grpo_fast.models import generation, vllm_probe
from grpo_fast.models import machine as machine_facts
from grpo_fast.models.cpu_choice import CpuClass, cpu_class
from grpo_fast.models.generation import choose_engine, vllm_choice
from grpo_fast.models.vllm_probe import MAX_AGE_DAYS, RETRY_DAYS, ProbePlan, cached, fit, probe_key, store
from grpo_fast.run.resolve import resolve_config
from grpo_fast.run.vllm_measure import probe_cached, probe_for

NATIVE = CpuClass("AMD EPYC", "AVX512", ["avx512_bf16"], True, "native")
PLAN = ProbePlan("embedded", 16, "all-linear", 8, 8, 1.0, 1.0, 0, None, 1.0, True, True, (32, 128))
VERSIONS = "torch 2.13.0, transformers 5.0, trl 1.14.2, peft 0.18, vllm 0.32.0"
DAY = 86400.0
NOW = 1_800_000_000.0

# A probe's points (the fastest of each length limit counts), chosen so that each part is exactly
# fixed + per_step x longest:
#   generate:   0.1  + 0.1   x n  -> at 512: 51.3 s   at 32: 3.3 s   at 8: 0.9 s   (a slower round at 128: 20 s)
#   vLLM:       0.36 + 0.02  x n  -> at 512: 10.6 s   at 32: 1.0 s   at 8: 0.52 s
#   train:      0.4  + 0.05  x n  -> at 512: 26.0 s   at 32: 2.0 s   at 8: 0.8 s
#   correction: 0.22 + 0.015 x n  -> at 512: 7.9 s    at 32: 0.7 s   at 8: 0.34 s
#   sync: the fastest of 0.5, 0.4, 0.6 = 0.4 s
# ratio = (generate + train) / (vLLM + sync + correction + train):
#   at 512: 77.3 / 44.9 = 1.72; at 32: 5.3 / 4.1 = 1.29; at 8: 1.7 / 2.06 = 0.83
PROBE = {"generate": [{"limit": 32, "longest": 32, "seconds": 3.3}, {"limit": 128, "longest": 128, "seconds": 20.0},
                      {"limit": 128, "longest": 128, "seconds": 12.9}],
         "vllm": [{"limit": 32, "longest": 32, "seconds": 1.0}, {"limit": 128, "longest": 128, "seconds": 2.92}],
         "train": [{"limit": 32, "longest": 32, "seconds": 2.0}, {"limit": 128, "longest": 128, "seconds": 6.8}],
         "correction": [{"limit": 32, "longest": 32, "seconds": 0.7}, {"limit": 128, "longest": 128, "seconds": 2.14}],
         "sync_s": [0.5, 0.4, 0.6], "lengths": [32, 128], "rows": 8, "alternative": "TRL's default generate",
         "threads": 1, "load": "0.50 0.40 0.30 before, 1.00 0.60 0.40 after", "probe_s": 95.0,
         "measured": "2026-12-07 01:10"}
EXPECTED = {512: "1.72x", 32: "1.29x", 8: "0.83x"}


def test_the_decision_at_the_runs_shape_is_the_hand_worked_ratio():
    facts = {"cuda": False, "vllm": True, "native_bf16": True}
    for tokens, on in ((512, True), (32, True), (8, False)):
        cfg = resolve_config("code", ["profile=cpu", f"max_completion_length={tokens}"])
        picked, why = vllm_choice(cfg, **facts, probe=PROBE)
        assert picked is on, (tokens, why)
        assert f"measured on this machine on 2026-12-07 01:10: {EXPECTED[tokens]}" in why
        assert f"8 x {tokens} tokens" in why and "not on this machine" not in why
        assert ("needs 1.10x" in why) is not on
    # the measurement decides in either CPU class: emulated bf16 no longer refuses by itself
    cfg = resolve_config("code", ["profile=cpu"])
    assert vllm_choice(cfg, **{**facts, "native_bf16": False}, probe=PROBE)[0]


def test_fit_separates_the_fixed_cost_from_the_per_step_cost():
    assert fit(PROBE["generate"]) == pytest.approx((0.1, 0.1))
    # completions that all ended early at both limits: no per-step cost can be told apart, the mean stands
    assert fit([{"limit": 32, "longest": 9, "seconds": 1.0},
                {"limit": 128, "longest": 10, "seconds": 3.0}]) == pytest.approx((2.0, 0.0))


def test_a_probe_that_failed_says_why_and_another_machines_figures_decide():
    cfg = resolve_config("code", ["profile=cpu"])
    failed = {"error": "its subprocess exited with 1: ModuleNotFoundError: No module named 'vllm'"}
    on, why = vllm_choice(cfg, cuda=False, vllm=True, native_bf16=True, probe=failed)
    assert on and why.startswith("not measured on this machine (its subprocess exited with 1: ModuleNotFoundError")
    assert "another machine's figures decide" in why and "2.12x" in why and "not on this machine" in why
    on, why = vllm_choice(cfg, cuda=False, vllm=True, native_bf16=False, probe=failed)
    assert not on and "native bf16" in why


def test_cache_keys_name_what_changes_the_answer(monkeypatch):
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    key = probe_key(NATIVE, PLAN, cores=2, installed=VERSIONS)
    assert key == probe_key(NATIVE, PLAN, cores=2, installed=VERSIONS)
    others = [probe_key(NATIVE, PLAN, cores=4, installed=VERSIONS),
              probe_key(NATIVE, PLAN, cores=2, installed=VERSIONS.replace("vllm 0.32.0", "vllm 0.33.0")),
              probe_key(CpuClass("Intel Xeon", "AVX512", ["amx_bf16"], True, ""), PLAN, 2, VERSIONS),
              probe_key(NATIVE, ProbePlan(**{**PLAN.__dict__, "rows": 16}), 2, VERSIONS),
              probe_key(NATIVE, ProbePlan(**{**PLAN.__dict__, "model": "Qwen/Qwen2.5-0.5B-Instruct"}), 2, VERSIONS),
              probe_key(NATIVE, ProbePlan(**{**PLAN.__dict__, "lengths": (4, 16)}), 2, VERSIONS),
              probe_key(NATIVE, ProbePlan(**{**PLAN.__dict__, "training": "autocast False, shared forward True"}), 2,
                        VERSIONS)]
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    others.append(probe_key(NATIVE, PLAN, cores=2, installed=VERSIONS))
    assert len({key, *others}) == len(others) + 1


def test_cache_expires_and_keeps_other_answers(tmp_path):
    store("a", PROBE, tmp_path, now=NOW)
    store("failed", {"error": "no vLLM"}, tmp_path, now=NOW)
    assert cached("a", tmp_path, now=NOW + (MAX_AGE_DAYS - 1) * DAY)["cached"] is True
    assert cached("a", tmp_path, now=NOW + (MAX_AGE_DAYS + 1) * DAY) is None
    assert cached("failed", tmp_path, now=NOW + RETRY_DAYS * DAY / 2)["error"] == "no vLLM"
    assert cached("failed", tmp_path, now=NOW + (RETRY_DAYS + 1) * DAY) is None
    assert cached("b", tmp_path, now=NOW) is None
    known = json.loads((tmp_path / vllm_probe.PROBE_FILE).read_text())
    assert set(known) == {"a", "failed"} and known["a"]["time"] == NOW
    (tmp_path / vllm_probe.PROBE_FILE).write_text("{not json")
    assert cached("a", tmp_path, now=NOW) is None


@pytest.fixture
def vllm_machine(monkeypatch):
    """A CPU machine with vLLM installed: pick_vllm reads these facts itself."""
    monkeypatch.setenv(machine_facts.VLLM_CPU_ENV, "0")  # restored after the test: pick_vllm sets it
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "vllm" else real_find_spec(name, *a))
    monkeypatch.setattr(machine_facts, "cuda_available", lambda: False)
    monkeypatch.setattr(generation, "cpu_class", lambda: NATIVE)


@pytest.mark.parametrize(("tokens", "on"), [(512, True), (8, False)])
def test_the_runs_report_and_record_carry_the_measurement(tokens, on, vllm_machine):
    cfg = resolve_config("code", ["profile=cpu", f"max_completion_length={tokens}"])
    asked = []
    assert generation.pick_vllm(cfg, lambda stage: asked.append(stage) or PROBE) is on
    assert asked == [cfg] and bool(cfg.args.use_vllm) is on
    (note,) = [n for n in cfg.notes if "generation: auto" in n]
    said = f"measured on this machine on 2026-12-07 01:10: {EXPECTED[tokens]} the steps/s of TRL's default generate"
    assert said in note and f"at 8 x {tokens} tokens" in note
    assert note.startswith("use_vllm=True: generation: auto — colocated vLLM" if on else
                           "generation: auto — vLLM stays off: colocated vLLM")
    engine = choose_engine(cfg, cuda=False)  # summary.json's cpu_choices and the HTML report show this line
    assert said in engine.line() and engine.value == (None if on else "generate")


def test_no_probe_where_the_config_decides(vllm_machine):
    cfg = resolve_config("code", ["profile=cpu", "generation=generate"])
    assert not generation.pick_vllm(cfg, lambda stage: pytest.fail("probed although the config decides"))
    assert not [n for n in cfg.notes if "generation: auto" in n]


@pytest.mark.slow  # the probe's real subprocess: `make test-fast` leaves it out
def test_a_probe_that_cannot_run_here_is_cached_with_its_reason(tmp_path, tiny_model_dir):
    """Without vLLM the probe's subprocess fails for real: the reason is stored (retried after RETRY_DAYS) and the
    next call reads it without starting the subprocess again."""
    assert importlib.util.find_spec("vllm") is None, "this suite runs without vLLM (tests_vllm runs the probe)"
    cfg = resolve_config("demo", ["profile=cpu", f"model={tiny_model_dir}"])
    first = probe_for(cfg, cache=tmp_path, budget_s=300)
    assert first["cached"] is False and "vllm" in first["error"], first
    second = probe_for(cfg, cache=tmp_path)
    assert second["cached"] is True and second["time"] == first["time"] and second["error"] == first["error"]


def test_a_dry_run_reads_the_cache_and_never_measures(tmp_path, vllm_machine):
    """``--dry-run`` and ``check`` load no weights: without a cached answer the line says it is not measured yet."""
    cfg = resolve_config("code", ["profile=cpu"])
    assert generation.pick_vllm(cfg, lambda stage: probe_cached(stage, cache=tmp_path))  # another machine's rule
    (note,) = [n for n in cfg.notes if "generation: auto" in n]
    assert "not measured on this machine (not measured yet: a dry run or check only reads the cache" in note
    assert not list(tmp_path.iterdir())  # nothing measured, nothing stored
    cfg = resolve_config("code", ["profile=cpu"])
    stored = store(probe_key(cpu_class(), vllm_probe.plan_for(cfg)), PROBE, tmp_path)  # this machine's key
    assert probe_cached(cfg, cache=tmp_path)["time"] == stored["time"]
