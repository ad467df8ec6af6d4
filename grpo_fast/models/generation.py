"""Which engine generates a GRPO step's completions when vLLM does not: the ``generation`` key.

TRL 1.14.2 offers, besides vLLM, three ways to generate with the policy itself: ``model.generate`` (its default,
dynamic KV cache), the same with a static KV cache (``cache_implementation: static``; TRL turns torch.compile
off for it) and transformers' continuous batching (``use_transformers_continuous_batching``: ``generate_batch``
over a paged KV cache). The kit's ``shared_prefill`` and ``merged_generation`` wrap ``model.generate`` and so
apply to the first two; continuous batching calls ``generate_batch`` and bypasses them.

Where vLLM is installed and no GPU is visible, ``auto`` can also turn vLLM on: colocated, its weights packed for
its CPU kernels and packed again after each sync (``vllm_colocate``), where it measured faster on this machine at
the run's shape, the sync included (``pick_vllm``, called before the backend is chosen: TRL builds its engine with
the trainer). The measurement is ``vllm_probe``'s, taken once per machine and run shape and cached; where it could
not run, the figures committed from another machine (``VLLM_LONG``, ``VLLM_SHORT_RUN``) decide and the run says so.

Every engine samples from the same distribution (``benchmarks/bench_generation.py`` checks it: greedy tokens
equal to TRL's default path, and the same sampled rows for one seed where the engine draws random numbers in the
same order). ``auto`` picks the fastest by the measurements below; the run prints the choice and why.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from grpo_fast.config import RunConfig
from grpo_fast.models import machine, vllm_probe
from grpo_fast.models.cpu_choice import Choice, cpu_class
from grpo_fast.models.machine import VLLM_CPU_ENV

GENERATION = ("auto", "generate", "static_cache", "continuous_batching")
# the engines bench_generation.py compares: TRL's default path (generate without the kit's wrappers), the two
# other TRL engines, and the kit's path (generate with merged-LoRA generation and shared prompt prefill)
ENGINES = ("trl", "static_cache", "continuous_batching", "kit")
# Measured with bench_generation.py (engines alternated in one run; benchmarks/results/bench_generation_cpu_*.json):
# on CPU model.generate is the fastest engine; a static cache without torch.compile attends over the whole
# preallocated length at every token, and continuous batching's paged cache costs more than it saves at 8 rows.
CPU_MEASURED = "measured fastest on CPU (bench_generation, 8 x 512: static cache 0.76x, continuous batching 0.82x)"
GPU_UNMEASURED = "TRL's default; the other engines are not measured on a GPU yet (bench_generation, next GPU run)"


@dataclass(frozen=True)
class Measured:
    """One committed benchmark figure: vLLM colocated (packed bf16, the weight sync included) against TRL's default
    path in steps/s, and where, when and how often it was measured. ``tests/models/test_generation.py`` recomputes each
    field from the JSON, so the figure a run quotes is the file's."""

    ratio: float
    file: str
    date: str
    rounds: int
    rows: int
    max_tokens: int
    tokens_each: float  # completion tokens per row actually generated
    fixed_length: bool
    machine: str
    load: tuple[float, float]  # the load average's range before and after the run

    def said(self) -> str:
        length = ("every completion forced to that length" if self.fixed_length
                  else f"sampled: about {self.tokens_each:.0f} tokens each")
        rounds = "one round" if self.rounds == 1 else f"{self.rounds} rounds"
        return (f"{self.ratio:.2f}x TRL's default steps/s at {self.rows} x {self.max_tokens} tokens ({length}), the "
                f"weight sync included: {rounds} on {self.date}, {self.machine} at load {self.load[0]}-{self.load[1]} "
                f"({self.file}), not on this machine")


# The two points measured on another machine (bench_generation --vllm-colocate): what auto falls back on where the
# probe of this machine (``vllm_probe``) could not run. Short completions keep the transformers engines; completions
# between 16 and 512 tokens, sampled lengths at 512, CPUs without native bf16, other model sizes and more than one
# round at 512 are unmeasured there.
VLLM_LONG = Measured(2.12, "benchmarks/results/bench_generation_cpu_code_vllm_colocate.json", "2026-12-06", 1, 8, 512,
                     512.0, True, "a 2-core Xeon with AMX", (5.1, 8.2))
VLLM_SHORT_RUN = Measured(0.92, "benchmarks/results/bench_generation_cpu_demo_vllm_colocate.json", "2026-12-06", 2,
                          8, 16, 3.1, False, "a 2-core Xeon with AMX", (3.5, 6.3))
VLLM_MIN_COMPLETION = VLLM_LONG.max_tokens
VLLM_MEASURED = f"measured {VLLM_LONG.said()}"
VLLM_SHORT = f"measured {VLLM_SHORT_RUN.said()}; its weight sync and fixed costs outweigh the tokens"
AUTO = "generation: auto — "  # how auto's vLLM line starts in the run's notes (on or off)
Probe = Callable[[RunConfig], dict[str, Any]]


def vllm_refusal(cfg: RunConfig, *, cuda: bool, vllm: bool) -> str | None:
    """Why ``generation: auto`` leaves vLLM off whatever it would measure; None where only a measurement decides."""
    if cuda:
        return "a GPU is visible: the profile decides use_vllm"
    if cfg.generation != "auto":
        return f"generation: {cfg.generation} is set in the config"
    if cfg.args.use_vllm or cfg.set_by_user("use_vllm") or cfg.args.vllm_mode != "colocate":
        return "use_vllm (or vllm_mode) is set in the config"
    if not vllm:
        return "vLLM is not installed (its CPU build: make test-vllm's venv)"
    if not cfg.lora or cfg.load_in_4bit:
        return "the kit's vLLM weight sync on CPU pushes merged LoRA weights on full-precision bases only"
    return None


def vllm_choice(cfg: RunConfig, *, cuda: bool, vllm: bool, native_bf16: bool,
                probe: dict[str, Any] | None = None) -> tuple[bool, str]:
    """Whether ``generation: auto`` turns colocated vLLM on for this run, and why (pure: the facts are passed).
    ``probe``: this machine's measurement (``vllm_probe``), or its ``error``; without one, the committed figures of
    another machine decide, and the reason says so."""
    refused = vllm_refusal(cfg, cuda=cuda, vllm=vllm)
    if refused:
        return False, refused
    if probe is not None and "error" not in probe:
        ratio, measured = vllm_probe.measured_why(probe, probe["rows"], int(cfg.args.max_completion_length or 0))
        if ratio < vllm_probe.MIN_GAIN:
            return False, f"colocated vLLM {measured}; needs {vllm_probe.MIN_GAIN:.2f}x to pay"
        return True, f"colocated vLLM {measured}; TRL's importance-sampling correction on"
    unmeasured = (f"not measured on this machine ({probe['error']}), so another machine's figures decide: "
                  if probe is not None else "not measured on this machine, so another machine's figures decide: ")
    if not native_bf16:
        return False, unmeasured + "vLLM on CPU was measured there with native bf16 (AVX512-BF16/AMX) only"
    if int(cfg.args.max_completion_length or 0) < VLLM_MIN_COMPLETION:
        return False, (f"{unmeasured}completions under {VLLM_MIN_COMPLETION} tokens: vLLM on CPU {VLLM_SHORT}, "
                       "unmeasured in between")
    return True, (f"{unmeasured}vLLM's CPU build is installed: colocated, packed bf16 weights re-packed after each "
                  f"sync, {VLLM_MEASURED}; TRL's importance-sampling correction on")


def vllm_facts(cuda: bool) -> dict[str, bool]:
    """This machine's facts for ``vllm_choice``: vLLM installed (without CUDA), native bf16 (probed only then)."""
    vllm = not cuda and importlib.util.find_spec("vllm") is not None
    return {"cuda": cuda, "vllm": vllm, "native_bf16": vllm and cpu_class().native_bf16}


def pick_vllm(cfg: RunConfig, probe: Probe | None = None) -> bool:
    """``generation: auto`` on a machine without CUDA: turn colocated vLLM on where ``vllm_choice`` says so, after
    ``probe`` (``grpo_fast.run.vllm_measure.probe_for``: cached, else measured once) where only a measurement can
    decide. The decision either way is said in the run's report. Before the backend is chosen: TRL builds its
    engine with the trainer."""
    facts = vllm_facts(machine.cuda_available())
    picked = False
    for stage in cfg.stage_list:
        if stage.sft or vllm_refusal(stage.cfg, cuda=facts["cuda"], vllm=facts["vllm"]):
            continue
        on, why = vllm_choice(stage.cfg, **facts, probe=probe(stage.cfg) if probe else None)
        if on:
            stage.cfg.change("use_vllm", True, AUTO + why)
            picked = True
        else:
            stage.cfg.notes.append(f"{AUTO}vLLM stays off: {why}")
    if picked:
        os.environ[VLLM_CPU_ENV] = "1"  # the backend checks let vLLM run on this CPU
    return picked


def auto_note(cfg: RunConfig) -> str | None:
    """What ``pick_vllm`` said for this config (on or off), for the engine's line in the run's record."""
    return next((n.split(AUTO, 1)[1] for n in reversed(cfg.notes) if AUTO in n), None)


def trl_engine(cfg: RunConfig) -> str | None:
    """The engine the user chose through TRL's own keys (passed through ``grpo``), if any."""
    if cfg.grpo.get("use_transformers_continuous_batching"):
        return "continuous_batching"
    if cfg.grpo.get("cache_implementation") == "static":
        return "static_cache"
    return None


def choose_engine(cfg: RunConfig, cuda: bool) -> Choice:
    """The ``generation`` choice for a run and why (``value`` None: vLLM generates)."""
    label = "generation engine"
    note = auto_note(cfg)
    if cfg.args.use_vllm:
        return Choice("generation", label, None, f"vLLM ({cfg.args.vllm_mode} mode) generates"
                      + (f": {AUTO}{note}" if note else ""), not note)
    through_trl = trl_engine(cfg)
    if through_trl:
        return Choice("generation", label, through_trl, "set through TRL's own key", True)
    if cfg.generation != "auto":
        return Choice("generation", label, cfg.generation, "set in the config", True)
    return Choice("generation", label, "generate", (GPU_UNMEASURED if cuda else CPU_MEASURED)
                  + (f"; {note}" if note else ""))


def set_engine(trainer: Any, engine: str) -> None:
    """Make a built GRPOTrainer generate with ``engine`` (one of ``GENERATION`` but auto), as TRL would have set it
    up from its own keys."""
    static = "static" if engine == "static_cache" else None
    trainer.generation_config.cache_implementation = static
    trainer.generation_kwargs["cache_implementation"] = static
    trainer.use_transformers_continuous_batching = engine == "continuous_batching"
    if engine == "continuous_batching" and trainer.continuous_batching_config is None:
        from transformers.generation import ContinuousBatchingConfig

        trainer.continuous_batching_config = ContinuousBatchingConfig(max_memory_percent=0.5)  # TRL's default
