"""grpo_fast: an Unsloth-first, single-GPU GRPO training kit on TRL.

    import grpo_fast

    run = grpo_fast.train("demo", max_steps=30)       # a recipe, a YAML file or a RunConfig, plus any key
    print(run.describe())                              # reward first -> last, held-out before -> after, files
    grpo_fast.evaluate(run)                            # base vs trained on the held-out rows again (eval.json)
    grpo_fast.export(run, format="merged")             # adapter | merged | gguf
    run = grpo_fast.load("runs/demo-20261203-101500")  # a run directory, back as an object

A one-way stack, lowest first; each layer imports only its own and those before it: ``errors``, ``files``
(atomic writes) and ``entry`` (callable modules, quiet logs) -> ``sandbox`` (untrusted programs) -> ``config``
(every key, validated; TRL's GRPOConfig as schema) -> ``data`` -> ``rewards``, ``tools`` -> ``recipes`` ->
``models`` (backends, loading, memory plan, CPU speed-ups) -> ``rundir`` (the run directory) -> ``watch`` (health,
alarms, trackers, report) -> ``run`` (resolve, prepare, stages, callbacks, checkpoints) -> ``evaluate``,
``export``, ``scale``, ``doctor`` -> ``infer`` -> ``train`` -> this package face -> ``cli``. The ``grpo-fast``
command is a thin shell over these functions. Heavy imports (torch, trl) happen when a function runs, so
``import grpo_fast`` is cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"
__all__ = ["train", "evaluate", "export", "health", "load", "resolve_config", "recipes", "Run", "RunConfig",
           "UserError"]

# Public name -> (module, attribute). The three pipeline modules are themselves callable (entry.make_callable).
_API = {
    "train": ("grpo_fast.train", None),
    "evaluate": ("grpo_fast.evaluate", None),
    "export": ("grpo_fast.export", None),
    "health": ("grpo_fast.watch.health", None),
    "load": ("grpo_fast.rundir", "load"),
    "resolve_config": ("grpo_fast.run.resolve", "resolve_config"),
    "recipes": ("grpo_fast.recipes", None),
    "Run": ("grpo_fast.rundir", "Run"),
    "RunConfig": ("grpo_fast.config", "RunConfig"),
    "UserError": ("grpo_fast.errors", "UserError"),
}


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module 'grpo_fast' has no attribute {name!r}")
    module_name, attribute = _API[name]
    module = importlib.import_module(module_name)
    return module if attribute is None else getattr(module, attribute)


def __dir__() -> list[str]:
    return sorted([*__all__, "__version__"])
