"""grpo_fast: an Unsloth-first, single-GPU GRPO training kit on TRL.

    import grpo_fast

    run = grpo_fast.train("demo", max_steps=30)       # a recipe, a YAML file or a RunConfig, plus any key
    print(run.describe())                              # reward first -> last, held-out before -> after, files
    grpo_fast.evaluate(run)                            # base vs trained on the held-out rows again (eval.json)
    grpo_fast.export(run, format="merged")             # adapter | merged | gguf
    run = grpo_fast.load("runs/demo-20261203-101500")  # a run directory, back as an object

The layers, each importing only those above it: ``config`` (every key, validated; TRL's GRPOConfig as schema)
-> ``data``, ``recipes``, ``rewards``, ``sandbox`` (untrusted programs), ``tools`` -> ``models`` (backends,
loading, memory plan, CPU speed-ups) -> ``run`` (resolve, prepare, stages, callbacks, checkpoints) and ``watch``
(health, alarms, trackers, report) -> ``train``, ``evaluate``, ``export``, ``infer``; ``rundir`` is the run
directory they share. The ``grpo-fast`` command (``cli``) is a thin shell over these functions. Heavy imports
(torch, trl) happen when a function runs, so ``import grpo_fast`` is cheap.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import sys
import types
from collections.abc import Callable
from typing import Any

__version__ = "0.1.0"
__all__ = ["train", "evaluate", "export", "health", "load", "resolve_config", "recipes", "Run", "RunConfig",
           "UserError"]

# Public name -> (module, attribute). The three pipeline modules are themselves callable (see make_callable).
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


class _CallableModule(types.ModuleType):
    """A pipeline module you can call: ``grpo_fast.train(...)`` is ``grpo_fast.train.train(...)``."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__dict__["__entry__"](*args, **kwargs)


def make_callable(module_name: str, entry: Callable[..., Any]) -> None:
    """Make ``grpo_fast.<module>`` callable as its entry function, whatever the import order: the module and
    the function keep one name, as the CLI's subcommands do."""
    module = sys.modules[module_name]
    module.__class__ = _CallableModule
    module.__entry__ = entry
    module.__signature__ = inspect.signature(entry)


def quiet_libraries(verbose: bool = False) -> None:
    """The kit's own lines and progress bars; transformers/TRL warnings only with ``verbose`` (or when the
    user set TRANSFORMERS_VERBOSITY). The CLI and the Python API print the same."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(name)s: %(message)s")
    logging.getLogger("grpo_fast").setLevel(logging.INFO)
    if verbose or "TRANSFORMERS_VERBOSITY" in os.environ:
        return
    os.environ["TRANSFORMERS_VERBOSITY"] = "error"
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
