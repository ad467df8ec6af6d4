"""The cpu profile's `auto`: chosen from what this CPU can do, both ways, and forced by true/false."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from grpo_fast.cpu_choice import (
    BF16_FLAGS,
    NO_NATIVE_BF16_ENV,
    PROBE_FILE,
    CpuClass,
    bf16_probe,
    bf16_training_choice,
    choose,
    cpu_class,
    cpu_flags,
)
from grpo_fast.errors import UserError
from grpo_fast.resolve import resolve_config

NATIVE = CpuClass("Xeon", "AVX512", ["amx_bf16"], True, "this CPU has native bf16 (amx_bf16)")
EMULATED = CpuClass("EPYC", "AVX2", [], False, "this CPU has no native bf16")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_FAST_CACHE", str(tmp_path))
    return tmp_path


def _chosen(cfg, cls=None):
    return {c.key: c for c in choose(cfg, cls=cls, threads=1)}


def test_bf16_training_pass_follows_native_bf16_and_the_probe_both_ways():
    assert bf16_training_choice(NATIVE, 2.1) == (True, "this CPU has native bf16 (amx_bf16); probe 2.10x of fp32")
    on, why = bf16_training_choice(EMULATED, 0.07)
    assert not on and why == "this CPU has no native bf16; probe 0.07x of fp32"
    assert not bf16_training_choice(EMULATED, 3.0)[0]  # no native bf16: off, whatever a noisy probe said
    on, why = bf16_training_choice(NATIVE, 0.5)  # native by its flags, but the probe finds it slow: off
    assert not on and "probe 0.50x" in why


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
    _, flags = cpu_flags()
    hardware = any(f in flags for f in BF16_FLAGS) and cpu_class().capability.startswith("AVX512")
    if not hardware or "ONEDNN_MAX_CPU_ISA" in os.environ:
        pytest.skip("this CPU has no native bf16: the other way is covered by the decision test above")
    cls = cpu_class()
    assert cls.native_bf16
    chosen = _chosen(cfg, cls)["cpu_autocast_training"]
    assert chosen.value is (bf16_probe(cls)["bf16_speed"] >= 1.0) and "probe" in chosen.why


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


def test_probe_runs_once_per_machine_and_is_cached(cache, monkeypatch):
    cls = cpu_class()
    first = bf16_probe(cls)
    assert not first["cached"] and first["fp32_s"] > 0 and first["bf16_s"] > 0
    again = bf16_probe(cls)
    assert again["cached"] and again["bf16_speed"] == first["bf16_speed"]
    stored = json.loads((cache / PROBE_FILE).read_text())
    (key,) = stored
    assert cls.name in key and "torch" in key
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")  # another instruction-set limit is another machine
    assert not bf16_probe(cpu_class())["cached"] and len(json.loads((cache / PROBE_FILE).read_text())) == 2


def test_avx2_restriction_is_seen_as_no_native_bf16(cache):
    """ATEN_CPU_CAPABILITY=avx2 + ONEDNN_MAX_CPU_ISA=AVX2 (an AVX2-only machine, as torch sees it): off."""
    code = ("from grpo_fast.cpu_choice import cpu_class, bf16_training_choice, bf16_probe; c = cpu_class(); "
            "print(c.capability, c.native_bf16, bf16_training_choice(c, bf16_probe(c)['bf16_speed'])[0])")
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["AVX2", "False", "False"]
