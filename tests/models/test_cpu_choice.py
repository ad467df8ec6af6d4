"""The cpu profile's `auto`: chosen from what this CPU can do and what the run's training pass gains, both ways,
and forced by true/false."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from types import SimpleNamespace

import pytest

from grpo_fast.errors import UserError
from grpo_fast.models.cpu_choice import (
    BF16_FLAGS,
    NO_NATIVE_BF16_ENV,
    PROBE_FILE,
    PROBE_MIN,
    PROBE_VERSION,
    CpuClass,
    bf16_probe,
    bf16_training_choice,
    choose,
    cpu_class,
    cpu_flags,
    probe_key,
)
from grpo_fast.models.cpu_probe import EMBEDDED_DIMS, ProbeShape, run_probe, shape_for
from grpo_fast.run.resolve import PROFILES, resolve_config

NATIVE = CpuClass("Xeon", "AVX512", ["amx_bf16"], True, "this CPU has native bf16 (amx_bf16)")
EMULATED = CpuClass("EPYC", "AVX2", [], False, "this CPU has no native bf16")
# a model small enough that probing it takes a fraction of a second: for the cache's behaviour, not for timings
TINY = ProbeShape(hidden=64, intermediate=128, heads=4, kv_heads=2, layers=2, vocab=512, rows=4, completion_tokens=8)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_FAST_CACHE", str(tmp_path))
    return tmp_path


def _chosen(cfg, cls=None):
    return {c.key: c for c in choose(cfg, cls=cls, threads=1)}


def _native_here() -> bool:
    _, flags = cpu_flags()
    return (any(f in flags for f in BF16_FLAGS) and cpu_class().capability.startswith("AVX512")
            and "ONEDNN_MAX_CPU_ISA" not in os.environ and os.environ.get(NO_NATIVE_BF16_ENV, "") in ("", "0"))


def test_bf16_training_pass_follows_native_bf16_and_the_probe_both_ways():
    assert bf16_training_choice(NATIVE, 1.6) == (True, "this CPU has native bf16 (amx_bf16); training-pass probe "
                                                       "1.60x of fp32")
    on, why = bf16_training_choice(EMULATED, 0.07)
    assert not on and why == "this CPU has no native bf16; training-pass probe 0.07x of fp32"
    assert not bf16_training_choice(EMULATED, 3.0)[0]  # no native bf16: off, whatever a noisy probe said
    # native by its flags, but the training pass gains too little: off (a bare matmul may still run 3x faster)
    on, why = bf16_training_choice(NATIVE, 1.02)
    assert not on and "1.02x of fp32" in why and f"needs {PROBE_MIN:.2f}x" in why
    assert bf16_training_choice(NATIVE, PROBE_MIN)[0]


def test_auto_follows_the_probe_of_the_runs_own_training_pass_both_ways(cache):
    """The decision reads the probe answer stored for this run's shape: a gain on, none off."""
    cfg = resolve_config("demo", ["profile=cpu"])
    key = probe_key(NATIVE, shape_for(cfg))
    for speed, expected in ((1.6, True), (1.02, False)):
        (cache / PROBE_FILE).write_text(json.dumps({key: {"fp32_s": 1.0, "bf16_s": 1 / speed, "bf16_speed": speed}}))
        chosen = _chosen(cfg, NATIVE)["cpu_autocast_training"]
        assert chosen.value is expected and f"{speed:.2f}x of fp32" in chosen.why and not chosen.forced


def test_probe_shape_is_the_runs_training_pass():
    demo = shape_for(resolve_config("demo", ["profile=cpu"]))
    assert (demo.rows, demo.completion_tokens, demo.prompts, demo.shared, demo.lora_r) == (8, 16, 1, True, 16)
    assert (demo.hidden, demo.intermediate, demo.layers, demo.vocab) == tuple(
        EMBEDDED_DIMS[k] for k in ("hidden", "intermediate", "layers", "vocab"))
    assert shape_for(SimpleNamespace(**PROFILES["cpu"])) == demo  # doctor: the profile alone, the demo's pass
    for override in ("shared_prefill=false", "gradient_checkpointing=true"):  # no shared-prompt training forward
        assert not shape_for(resolve_config("demo", ["profile=cpu", override])).shared
    bigger = shape_for(resolve_config("demo", ["profile=cpu", "per_device_train_batch_size=16",
                                               "max_completion_length=64"]))
    assert (bigger.rows, bigger.prompts, bigger.completion_tokens) == (16, 2, 64)
    assert shape_for(resolve_config("demo", ["profile=cpu", "lora=false"])).lora_r is None
    assert len({s.key() for s in (demo, bigger, ProbeShape(shared=False))}) == 3  # one cache entry per shape
    capped = ProbeShape(rows=8, completion_tokens=512).capped()
    assert capped.rows * capped.completion_tokens <= 512 and capped.rows >= 1


def test_probe_sees_more_gain_where_the_pass_has_more_work():
    """On a CPU with native bf16: the demo's pass (128 completion tokens, the prompt once, frozen weights re-cast
    on each of two calls) gains less than one with 8 x (64 + 64) tokens in a single call."""
    if not _native_here():
        pytest.skip("this CPU has no native bf16: emulated bf16 is slow at every shape")
    pairs = []
    for _ in range(3):  # a timing on a shared machine: another job can land on either probe; one clear pair is enough
        small = run_probe(ProbeShape())
        large = run_probe(ProbeShape(completion_tokens=64, shared=False))
        assert small["rounds"] >= 2 and small["layer_speed"] > 0 and small["head_speed"] > 0
        pairs.append((small["bf16_speed"], large["bf16_speed"]))
        if large["bf16_speed"] > small["bf16_speed"]:
            break
    assert pairs[-1][1] > pairs[-1][0], pairs


def test_switch_makes_the_capability_check_say_no_native_bf16(cache, monkeypatch):
    cfg = resolve_config("demo", ["profile=cpu"])
    assert cfg.cpu_autocast_training == "auto" and cfg.shared_prefill == "auto"
    monkeypatch.setenv(NO_NATIVE_BF16_ENV, "1")
    cls = cpu_class()
    assert not cls.native_bf16 and NO_NATIVE_BF16_ENV in cls.why
    chosen = _chosen(cfg, cls)
    assert chosen["cpu_autocast_training"].value is False and NO_NATIVE_BF16_ENV in chosen["cpu_autocast_training"].why
    assert chosen["shared_prefill"].value is True and chosen["merged_generation"].value is True
    monkeypatch.setenv(NO_NATIVE_BF16_ENV, "0")
    if not _native_here():
        pytest.skip("this CPU has no native bf16: the other way is covered by the decision tests above")
    cls = cpu_class()
    assert cls.native_bf16
    chosen = _chosen(cfg, cls)["cpu_autocast_training"]
    assert chosen.value is (bf16_probe(cls, shape_for(cfg))["bf16_speed"] >= PROBE_MIN) and "probe" in chosen.why


def test_true_and_false_still_force_it(cache, monkeypatch):
    monkeypatch.setenv(NO_NATIVE_BF16_ENV, "1")
    chosen = _chosen(resolve_config("demo", ["profile=cpu", "cpu_autocast_training=true", "merged_generation=false"]))
    assert chosen["cpu_autocast_training"].value is True and chosen["cpu_autocast_training"].forced
    assert chosen["merged_generation"].value is False and chosen["merged_generation"].why == "set in the config"
    assert not (cache / PROBE_FILE).exists()  # forced: no probe
    off = _chosen(resolve_config("demo", ["profile=cpu", "cpu_autocast_training=false"]))
    assert off["cpu_autocast_training"].value is False
    with pytest.raises(UserError):
        resolve_config("demo", ["cpu_autocast_training=sometimes"])


def test_probe_runs_once_per_machine_and_shape_and_is_cached(cache, monkeypatch):
    import torch

    cls = cpu_class()
    # what the first probe (a bare MLP block) stored for this machine: not this run's training pass, never read
    old = f"torch {torch.__version__} | {cls.name} | {cls.capability} | {','.join(cls.bf16_flags)} | "
    (cache / PROBE_FILE).write_text(json.dumps({old: {"fp32_s": 0.028, "bf16_s": 0.013, "bf16_speed": 2.11}}))
    first = bf16_probe(cls, TINY)
    assert not first["cached"] and first["fp32_s"] > 0 and first["bf16_s"] > 0
    again = bf16_probe(cls, TINY)
    assert again["cached"] and again["bf16_speed"] == first["bf16_speed"]
    (key,) = set(json.loads((cache / PROBE_FILE).read_text())) - {old}  # the older probe's answer is not read
    assert key.startswith(PROBE_VERSION) and cls.name in key and "torch" in key and TINY.key() in key
    assert not bf16_probe(cls, replace(TINY, shared=False))["cached"]  # another shape
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")  # another instruction-set limit is another machine
    assert not bf16_probe(cpu_class(), TINY)["cached"] and len(json.loads((cache / PROBE_FILE).read_text())) == 4


@pytest.mark.slow
def test_avx2_restriction_is_seen_as_no_native_bf16(cache):
    """ATEN_CPU_CAPABILITY=avx2 + ONEDNN_MAX_CPU_ISA=AVX2 (an AVX2-only machine, as torch sees it): auto is off."""
    code = ("from grpo_fast.models.cpu_choice import cpu_class; from grpo_fast.run.resolve import resolve_config; "
            "from grpo_fast.models.cpu_choice import choose; c = cpu_class(); "
            "a = {x.key: x for x in choose(resolve_config('demo', ['profile=cpu']), cls=c, threads=1)}; "
            "print(c.capability, c.native_bf16, a['cpu_autocast_training'].value)")
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-3:] == ["AVX2", "False", "False"]
