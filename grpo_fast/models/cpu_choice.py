"""Which CPU speed-ups pay on this machine: the ``auto`` of ``cpu_autocast_training``, ``shared_prefill``,
``merged_generation`` and ``cpu_threads``, each with the reason it was chosen.

bf16 autocast can pay only where the CPU computes bf16 natively (AVX512-BF16 or AMX on x86, the BF16 extension
on Arm). Elsewhere torch emulates it and the training pass runs several times slower (measured 0.2x of fp32
under AVX2). Native is not enough either: on the demo's small micro-batch the training pass gains nothing (0.97x
on a Sapphire Rapids core) although a bare matmul runs 3-5x faster, because autocast re-casts the frozen LoRA
base weights on every call (see ``cpu_probe``). So the choice is made from the CPU's capability (torch's and
/proc/cpuinfo's flags) and confirmed by ``cpu_probe``, a short probe of the run's own training pass (its
model's layer shapes, LoRA, micro-batch), run once per machine and shape (CPU, instruction-set limits, torch
version) and cached in the kit's cache directory. ``GRPO_FAST_CPU_NO_NATIVE_BF16=1`` makes the capability
check say "no native bf16" (to try the slow-CPU path on a fast one).
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from grpo_fast.config import RunConfig
from grpo_fast.embedded import cache_dir
from grpo_fast.models.cpu_probe import ProbeShape, run_probe, shape_for

NO_NATIVE_BF16_ENV = "GRPO_FAST_CPU_NO_NATIVE_BF16"
BF16_FLAGS = ("amx_bf16", "avx512_bf16")  # x86 /proc/cpuinfo flags; Arm's is "bf16"
# where bf16 is native, the probe must find the training pass at least this much faster than fp32. Not 1.0: the
# probe runs one thread on cache-warm weights and reads bf16 better than a run does (Sapphire Rapids core, 8 x 64
# tokens: probe 1.36-1.67x, the real pass 1.29-1.36x; the demo's 8 x 16: 0.95-1.05x, the pass 0.97x on one thread
# and 0.90x on two), and a gain under 10% of the training pass (a third of a step) is under 4% of a step.
PROBE_MIN = 1.1
PROBE_FILE = "cpu_probe.json"
PROBE_VERSION = "probe v2"  # v1 timed a bare MLP block: its cached answers do not describe the training pass
# oneDNN instruction-set limits (ONEDNN_MAX_CPU_ISA) that still include bf16 arithmetic
ONEDNN_BF16_ISAS = ("BF16", "AMX", "FP16", "AVX10", "ALL", "DEFAULT")


@dataclass
class CpuClass:
    """What this CPU offers for bf16, as torch and the kernel report it."""

    name: str
    capability: str  # torch.backends.cpu.get_cpu_capability(): AVX512, AVX2, DEFAULT, SVE256, ...
    bf16_flags: list[str]
    native_bf16: bool
    why: str

    @property
    def label(self) -> str:
        bf16 = f"native bf16 ({', '.join(self.bf16_flags)})" if self.native_bf16 else "no native bf16"
        return f"{self.name}: torch {self.capability}, {bf16}"


@dataclass
class Choice:
    """One speed-up's setting for a run and why (``forced``: set to true/false in the config)."""

    key: str
    label: str
    value: Any
    why: str
    forced: bool = False

    @property
    def shown(self) -> str:
        """on/off for a switch, the number for threads."""
        if isinstance(self.value, bool):
            return "on" if self.value else "off"
        return str(self.value)

    def line(self) -> str:
        return f"{self.label}: {self.shown} — {self.why}"


def cpu_flags() -> tuple[str, set[str]]:
    """The CPU's model name and flag set from /proc/cpuinfo (empty where it does not exist)."""
    name, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "model name" and value.strip():
                name = value.strip()
            elif key in ("flags", "Features") and not flags:
                flags = set(value.split())
    except OSError:
        pass
    return name, flags


def cpu_class() -> CpuClass:
    """This CPU's class: native bf16 only when the hardware has it and neither torch's dispatch
    (ATEN_CPU_CAPABILITY), oneDNN's limit (ONEDNN_MAX_CPU_ISA) nor GRPO_FAST_CPU_NO_NATIVE_BF16 rules it out."""
    import torch

    name, flags = cpu_flags()
    capability = torch.backends.cpu.get_cpu_capability()
    have = [f for f in (*BF16_FLAGS, "bf16") if f in flags]
    isa_limit = os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper()
    x86 = platform.machine().lower() in ("x86_64", "amd64", "i686")
    if os.environ.get(NO_NATIVE_BF16_ENV, "") not in ("", "0"):
        native, why = False, f"no native bf16 ({NO_NATIVE_BF16_ENV}=1 says so)"
    elif not have:
        native, why = False, "this CPU has no native bf16 (no " + ", ".join(BF16_FLAGS) + " flag)"
    elif x86 and not capability.startswith("AVX512"):
        native, why = False, f"no native bf16 here: torch dispatches {capability} kernels"
    elif isa_limit and not any(isa in isa_limit for isa in ONEDNN_BF16_ISAS):
        native, why = False, f"no native bf16 here: ONEDNN_MAX_CPU_ISA={isa_limit}"
    else:
        native, why = True, f"this CPU has native bf16 ({', '.join(have)})"
    return CpuClass(name, capability, have, native, why)


def probe_key(cls: CpuClass, shape: ProbeShape) -> str:
    """The cache key: what makes the probe's answer differ (the probe's version, CPU, its flags, instruction-set
    limits, torch, the training pass's shape)."""
    import torch

    limits = ",".join(f"{k}={os.environ[k]}" for k in ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", NO_NATIVE_BF16_ENV)
                      if k in os.environ)
    return (f"{PROBE_VERSION} | torch {torch.__version__} | {cls.name} | {cls.capability} | "
            f"{','.join(cls.bf16_flags)} | {limits} | {shape.key()}")


def bf16_probe(cls: CpuClass, shape: ProbeShape | None = None, cache: Path | None = None) -> dict[str, Any]:
    """The probe's result for this machine and training-pass shape: from the cache, else measured once and
    stored (``cached`` says which). Answers of older probe versions have other keys: never read."""
    shape = shape or ProbeShape()
    path = (cache or cache_dir()) / PROBE_FILE
    key = probe_key(cls, shape)
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    if isinstance(known, dict) and isinstance(known.get(key), dict) and "bf16_speed" in known[key]:
        return {**known[key], "cached": True}
    # without native bf16 the choice is off whatever the probe says: one round (emulated bf16 is slow) reports it
    result = {**run_probe(shape, rounds=6 if cls.native_bf16 else 1), "measured": time.strftime("%Y-%m-%d %H:%M")}
    known = known if isinstance(known, dict) else {}  # older versions' answers stay (a kit of that version reads them)
    known[key] = result
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(known, indent=1))
        tmp.replace(path)
    except OSError:
        pass  # a read-only cache: probe again next time
    return {**result, "cached": False}


def bf16_training_choice(cls: CpuClass, bf16_speed: float) -> tuple[bool, str]:
    """On only where bf16 is native and the probe finds the training pass at least ``PROBE_MIN`` times faster
    under it; the reason in words."""
    measured = f"{bf16_speed:.2f}x of fp32"
    if not cls.native_bf16:
        return False, f"{cls.why}; training-pass probe {measured}"
    if bf16_speed < PROBE_MIN:
        return False, f"{cls.why}, but the training-pass probe finds bf16 {measured} (needs {PROBE_MIN:.2f}x to pay)"
    return True, f"{cls.why}; training-pass probe {measured}"


def choose(cfg: RunConfig, cls: CpuClass | None = None, threads: int | None = None, cuda: bool = False) -> list[Choice]:
    """The speed-ups for a run: each key's value (``auto`` resolved) and why. ``threads``: the count
    ``cpu_threads: auto`` picked (sampled once by the caller). ``cuda``: the CPU-only keys do not apply, and keys
    left off are not listed."""
    choices = []
    if cfg.cpu_threads is not None and not cuda:
        if cfg.cpu_threads == "auto":
            why = (f"{threads} of {os.cpu_count() or 1} cores free of other jobs (sampled)" if threads is not None
                   else "the cores free of other jobs, sampled when training starts")
            choices.append(Choice("cpu_threads", "threads", threads if threads is not None else "auto", why))
        else:
            choices.append(Choice("cpu_threads", "threads", int(cfg.cpu_threads), "set in the config", True))
    if cfg.cpu_autocast_training == "auto" and not cuda:
        cls = cls or cpu_class()
        on, why = bf16_training_choice(cls, bf16_probe(cls, shape_for(cfg))["bf16_speed"])
        choices.append(Choice("cpu_autocast_training", "bf16 training pass", on, why))
    elif not cuda or cfg.cpu_autocast_training:
        choices.append(Choice("cpu_autocast_training", "bf16 training pass", bool(cfg.cpu_autocast_training) and not
                              cuda, "set in the config" if not cuda else "CPU only", True))
    saves_work = {"shared_prefill": ("shared prompt prefill", "computes each group's prompt once"),
                  "merged_generation": ("merged LoRA generation", "one matmul per layer instead of three")}
    for key, (label, what) in saves_work.items():
        value = getattr(cfg, key)
        if value == "auto":
            choices.append(Choice(key, label, True, f"{what}: less work on any CPU"))
        elif value or not cuda:
            choices.append(Choice(key, label, bool(value), "set in the config", True))
    return choices


def as_record(choices: list[Choice], cls: CpuClass | None = None) -> dict[str, Any]:
    """The summary.json entry ``cpu_choices``: the CPU class and each choice with its reason."""
    record: dict[str, Any] = {"choices": [asdict(c) | {"line": c.line()} for c in choices]}
    if cls is not None:
        record["cpu"] = cls.label
    return record
