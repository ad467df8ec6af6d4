"""What a test's names, and the program's references to modules and to the setup's objects, mean in the judge.

A name the test uses as a module is the judge's own import (the standard library and ``IMPORTABLE_PACKAGES``),
never the program's copy; a module the judge cannot import arrives as ``ProgramModule`` (no module at all); the
setup code's classes and functions are the judge's own copies, found by exact name in the setup module only.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

from .wire import SETUP_MODULE, WireError

IMPORTABLE_PACKAGES = frozenset({"numpy"})  # besides the standard library, what a test may name without importing
_NO_IMPORT = frozenset({"antigravity", "this", "__hello__", "__phello__", "idlelib", "turtle", "turtledemo",
                        "tkinter", "webbrowser", "pydoc", "ensurepip", "venv", "lib2to3", "test", "__main__"})
_OWN_PACKAGE = __name__.split(".")[0]  # "grpo_fast_sandbox" in the zygote, "grpo_fast" when imported normally


def importable(name: str) -> bool:
    """A module a test may get without importing it: the standard library (a few with side effects excepted)
    and ``IMPORTABLE_PACKAGES``; never this sandbox, the program or the test module, and no private or
    ``__main__`` part (``unittest.__main__`` runs the test runner when imported)."""
    parts = name.split(".")
    top = parts[0]
    return all(p.isidentifier() and not p.startswith("_") for p in parts) and top not in _NO_IMPORT \
        and top != _OWN_PACKAGE and (top in sys.stdlib_module_names or top in IMPORTABLE_PACKAGES)


def own_module(name: str) -> types.ModuleType | None:
    """The judge's own import of module ``name`` (see ``importable``), else None."""
    if not importable(name):
        return None
    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001 - an unimportable name is simply not resolved
        return None


def setup_object(name: str) -> Any:
    """A top-level class or function of the judge's copy of the dataset's setup code, by its exact name."""
    mod = sys.modules.get(SETUP_MODULE)
    obj = vars(mod).get(name) if mod is not None and name.isidentifier() else None
    ok = isinstance(obj, (type, types.FunctionType)) and getattr(obj, "__module__", None) == SETUP_MODULE
    return obj if ok else None


def setup_instance(name: Any, attrs: dict) -> Any:
    """A fresh instance of a class of the setup code, with the candidate's attribute values (data).

    The trusted class stays the test's: an attribute may not hide anything the class (or a base) defines other
    than a plain data default (a method, property, classmethod, any descriptor or callable), nor be a dunder."""
    cls = setup_object(name) if type(name) is str else None
    if not isinstance(cls, type) or not all(type(k) is str and k.isidentifier() and not k.startswith("__")
                                            and not _class_defines(cls, k) for k in attrs):
        raise WireError("not an instance of a setup class")
    obj = cls.__new__(cls)
    vars(obj).update(attrs)
    return obj


def _class_defines(cls: type, name: str) -> bool:
    """``name`` is behaviour of ``cls``: found in a class of its MRO as something other than plain data."""
    for klass in cls.__mro__:
        if name in vars(klass):
            value = vars(klass)[name]
            return callable(value) or hasattr(type(value), "__get__") or hasattr(type(value), "__set__")
    return False


class ProgramModule(types.ModuleType):
    """What a test gets for a module of the program's that the judge cannot import itself: no module at all
    (the program's copy may be patched), with a message that says so."""

    def __getattr__(self, attr: str) -> Any:
        raise AttributeError(f"module {self.__name__!r} is the program's: a test gets only the judge's own "
                             f"imports (the standard library, {', '.join(sorted(IMPORTABLE_PACKAGES))})")


# Usual aliases of modules: under one of these names a test gets the judge's own import of that module, or (a
# module it cannot import) only a module the program bound there, never any other object of the program's.
MODULE_ALIASES = {"np": "numpy", "pd": "pandas", "plt": "matplotlib.pyplot", "mpl": "matplotlib", "sp": "scipy",
                  "nx": "networkx", "tf": "tensorflow", "sns": "seaborn", "sk": "sklearn", "sym": "sympy",
                  "npt": "numpy.typing", "la": "numpy.linalg", "LA": "numpy.linalg", "npr": "numpy.random",
                  "dt": "datetime", "it": "itertools", "ft": "functools", "op": "operator", "mp": "multiprocessing",
                  "st": "statistics", "cs": "collections", "coll": "collections", "rnd": "random", "rand": "random"}


def module_for_test(name: str, used_as_modules: frozenset[str]) -> types.ModuleType | None:
    """The judge's own import for a name a test uses as a module (``name.attr``) or a module's usual alias."""
    if name in used_as_modules:
        return own_module(name)
    return own_module(MODULE_ALIASES[name]) if name in MODULE_ALIASES else None


def name_for_test(name: str, value: Any, used_as_modules: frozenset[str]) -> Any:
    """The program's value for a test's name, unless the name is a module's (used as one, or a usual alias) and the
    value is not a module: then the name is not resolved (KeyError)."""
    if (name in used_as_modules or name in MODULE_ALIASES) and not isinstance(value, types.ModuleType):
        raise KeyError(name)
    return value
