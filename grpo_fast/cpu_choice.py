"""Which CPU speed-ups pay on this machine: the ``auto`` of ``cpu_autocast_training``, ``shared_prefill``,
``merged_generation`` and ``cpu_threads``, each with the reason it was chosen.

bf16 autocast pays only where the CPU computes bf16 natively (AVX512-BF16 or AMX on x86, the BF16 extension on
Arm). Elsewhere torch emulates it and the training pass runs several times slower (measured 0.2x of fp32 under
AVX2), so the choice is made from the CPU's capability (torch's and /proc/cpuinfo's flags) and confirmed by a
micro-probe: a few timed forward+backward passes through linear layers of the embedded model's shapes, bf16
autocast vs fp32. The probe runs once per machine (CPU, instruction-set limits, torch version) and is cached in
the kit's cache directory. ``GRPO_FAST_CPU_NO_NATIVE_BF16=1`` makes the capability check say "no native bf16"
(to try the slow-CPU path on a fast one).
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

NO_NATIVE_BF16_ENV = "GRPO_FAST_CPU_NO_NATIVE_BF16"
BF16_FLAGS = ("amx_bf16", "avx512_bf16")  # x86 /proc/cpuinfo flags; Arm's is "bf16"
# where bf16 is native, the probe must find it at least this fast relative to fp32 (one thread, Sapphire Rapids
# class: native 2.4-2.6x; the same CPU restricted to AVX2, i.e. emulated: 0.04x)
PROBE_MIN = 1.0
PROBE_FILE = "cpu_probe.json"
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


def probe_key(cls: CpuClass) -> str:
    """The cache key: what makes the probe's answer differ (CPU, its flags, instruction-set limits, torch)."""
    import torch

    limits = ",".join(f"{k}={os.environ[k]}" for k in ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", NO_NATIVE_BF16_ENV)
                      if k in os.environ)
    return f"torch {torch.__version__} | {cls.name} | {cls.capability} | {','.join(cls.bf16_flags)} | {limits}"


def run_probe(tokens: int = 256, hidden: int = 576, intermediate: int = 1536, rounds: int = 5) -> dict[str, float]:
    """Fastest of a few forward+backward passes through an MLP block of the embedded model's shapes (SmolLM2-135M:
    576 -> 1536 -> 576), fp32 and under bf16 autocast, alternating, on one thread: other jobs on shared cores make
    multi-threaded timings swing 3x, one thread's fastest pass holds still. Under a second where bf16 is native;
    where it is emulated a pass takes about 0.5 s (more on a busy machine), so it stops after two rounds."""
    import torch

    gen = torch.Generator().manual_seed(0)
    up, down = torch.nn.Linear(hidden, intermediate), torch.nn.Linear(intermediate, hidden)
    x = torch.randn(tokens, hidden, generator=gen, requires_grad=True)

    def once(bf16: bool) -> float:
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            y = down(torch.nn.functional.silu(up(x)))
        y.float().square().mean().backward()
        return time.perf_counter() - start

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        once(False), once(True)  # warm-up: kernel selection, oneDNN primitive caches
        fp32, bf16 = [], []
        for _ in range(rounds):
            fp32.append(once(False))
            bf16.append(once(True))
            if len(bf16) >= 2 and min(bf16) > 2 * max(fp32):
                break
    finally:
        torch.set_num_threads(threads)
    return {"fp32_s": min(fp32), "bf16_s": min(bf16), "bf16_speed": min(fp32) / min(bf16)}


def bf16_probe(cls: CpuClass, cache: Path | None = None) -> dict[str, Any]:
    """The probe's result for this machine: from the cache, else measured once and stored (``cached`` says which)."""
    from grpo_fast.models import cache_dir

    path = (cache or cache_dir()) / PROBE_FILE
    key = probe_key(cls)
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    if isinstance(known, dict) and isinstance(known.get(key), dict) and "bf16_speed" in known[key]:
        return {**known[key], "cached": True}
    # without native bf16 the choice is off whatever the probe says: one short round (emulated bf16 is slow) reports it
    sized = {} if cls.native_bf16 else {"rounds": 1, "tokens": 128}
    result = {**run_probe(**sized), "measured": time.strftime("%Y-%m-%d %H:%M")}
    known = known if isinstance(known, dict) else {}
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
    """On only where bf16 is native and the probe confirms it pays; the reason in words."""
    probe = f"probe {bf16_speed:.2f}x of fp32"
    if not cls.native_bf16:
        return False, f"{cls.why}; {probe}"
    if bf16_speed < PROBE_MIN:
        return False, f"{cls.why}, but the {probe} (needs {PROBE_MIN:.2f}x)"
    return True, f"{cls.why}; {probe}"


def choose(cfg: Any, cls: CpuClass | None = None, threads: int | None = None, cuda: bool = False) -> list[Choice]:
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
        on, why = bf16_training_choice(cls, bf16_probe(cls)["bf16_speed"])
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
