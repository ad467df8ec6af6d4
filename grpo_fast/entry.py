"""How the kit is entered, from Python and from the shell alike: pipeline modules callable as their entry
function, and the same quiet library logs for both.

The ground floor (the standard library only): ``train``, ``evaluate``, ``export``, ``watch.health`` and ``cli``
use it, so it cannot live in the package face (``grpo_fast/__init__``), which sits above them all.
"""

from __future__ import annotations

import inspect
import logging
import os
import sys
import types
from collections.abc import Callable
from typing import Any


class CallableModule(types.ModuleType):
    """A pipeline module you can call: ``grpo_fast.train(...)`` is ``grpo_fast.train.train(...)``."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__dict__["__entry__"](*args, **kwargs)


def make_callable(module_name: str, entry: Callable[..., Any]) -> None:
    """Make ``grpo_fast.<module>`` callable as its entry function, whatever the import order: the module and
    the function keep one name, as the CLI's subcommands do."""
    module = sys.modules[module_name]
    module.__class__ = CallableModule
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
