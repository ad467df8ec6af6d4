"""Which engine generates a GRPO step's completions when vLLM does not: the ``generation`` key.

TRL 1.14.2 offers, besides vLLM, three ways to generate with the policy itself: ``model.generate`` (its default,
dynamic KV cache), the same with a static KV cache (``cache_implementation: static``; TRL turns torch.compile
off for it) and transformers' continuous batching (``use_transformers_continuous_batching``: ``generate_batch``
over a paged KV cache). The kit's ``shared_prefill`` and ``merged_generation`` wrap ``model.generate`` and so
apply to the first two; continuous batching calls ``generate_batch`` and bypasses them.

Every engine samples from the same distribution (``benchmarks/bench_generation.py`` checks it: greedy tokens
equal to TRL's default path, and the same sampled rows for one seed where the engine draws random numbers in the
same order). ``auto`` picks the fastest by the measurements below; the run prints the choice and why.
"""

from __future__ import annotations

from typing import Any

from grpo_fast.models.cpu_choice import Choice

GENERATION = ("auto", "generate", "static_cache", "continuous_batching")
# the engines bench_generation.py compares: TRL's default path (generate without the kit's wrappers), the two
# other TRL engines, and the kit's path (generate with merged-LoRA generation and shared prompt prefill)
ENGINES = ("trl", "static_cache", "continuous_batching", "kit")
# Measured with bench_generation.py (engines alternated in one run; benchmarks/results/bench_generation_cpu_*.json):
# on CPU model.generate is the fastest engine; a static cache without torch.compile attends over the whole
# preallocated length at every token, and continuous batching's paged cache costs more than it saves at 8 rows.
CPU_MEASURED = "measured fastest on CPU (bench_generation, 8 x 512: static cache 0.76x, continuous batching 0.82x)"
GPU_UNMEASURED = "TRL's default; the other engines are not measured on a GPU yet (bench_generation, next GPU run)"


def trl_engine(cfg: Any) -> str | None:
    """The engine the user chose through TRL's own keys (passed through ``grpo``), if any."""
    if cfg.grpo.get("use_transformers_continuous_batching"):
        return "continuous_batching"
    if cfg.grpo.get("cache_implementation") == "static":
        return "static_cache"
    return None


def choose_engine(cfg: Any, cuda: bool) -> Choice:
    """The ``generation`` choice for a run and why (``value`` None: vLLM generates)."""
    label = "generation engine"
    if cfg.args.use_vllm:
        return Choice("generation", label, None, f"vLLM ({cfg.args.vllm_mode} mode) generates", True)
    through_trl = trl_engine(cfg)
    if through_trl:
        return Choice("generation", label, through_trl, "set through TRL's own key", True)
    if cfg.generation != "auto":
        return Choice("generation", label, cfg.generation, "set in the config", True)
    return Choice("generation", label, "generate", GPU_UNMEASURED if cuda else CPU_MEASURED)


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
