"""Candidate side: runs the program as module ``solution`` and answers the judge's requests about its objects.

This process holds no test, no expected value and no verdict: the judge sends only the program, the dataset's setup
code and call arguments. Results go back by value when they are plain data (see ``wire``), else as handles.
"""

from __future__ import annotations

import copy
import importlib
import io
import marshal
import math
import operator
import os
import random
import socket
import sys
import types
import warnings
from typing import Any

from . import decoder, encoder, wire
from .channel import LOAD, Channel
from .exports import Exports, Handle, by_hook
from .lent import IN_PLACE, Judged, put_back
from .mutables import Shared
from .program_state import ProgramState
from .script import exit_builtins, flush, read_all, source_module
from .wire import SETUP_MODULE, SOLUTION_MODULE, Stream

_MISSING = object()
_UNARY = {"neg": operator.neg, "pos": operator.pos, "abs": abs, "invert": operator.invert, "int": int,
          "float": float, "complex": complex, "index": operator.index, "round": round, "trunc": math.trunc,
          "floor": math.floor, "ceil": math.ceil, "reversed": reversed}
_BINARY = {name: getattr(operator, name) for name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow",
                                                       "matmul", "lshift", "rshift", "and_", "or_", "xor")}
_BINARY["divmod"] = divmod
_CMP = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
        "ge": operator.ge}


class Runner(Exports):
    """The candidate's objects by handle (``Exports``), and one method per request the judge may make."""

    def __init__(self, sock: int | socket.socket) -> None:
        super().__init__()
        self.judged: dict[int, Judged] = {}
        self.module: types.ModuleType | None = None
        self.shared = Shared()
        self.state = ProgramState()  # what a pytest test changed in its process, applied here
        self.patched: dict[str, Any] = {}  # globals the test patched: their own values
        self.unsent = ("", "")  # what a call that raised had printed while the test captured its output
        self.channel = Channel(Stream(sock), self.dumps, self.loads, self.dispatch, self.shrink)

    def dumps(self, obj: Any) -> bytes:
        return encoder.Encoder(self.hook, by_hook, self.exception).encode(obj)

    def shrink(self, op: str, value: Any) -> Any:
        """A reply too large for a frame: its value stays here, the judge gets a handle (``len`` etc. still work)."""
        if op == "call" and type(value) is tuple:
            return (Handle(value[0]), *value[1:])
        return Handle(value)

    # -- decoding: what the judge sends (trusted: the judge runs the dataset's code, not the program's)
    def on_ref(self, kind: str, fields: tuple) -> Any:
        if kind == "h":
            return self.objs[fields[0]]
        if kind == "j":
            jid = fields[0]
            if jid not in self.judged:
                self.judged[jid] = Judged(jid, self.channel)
            return self.judged[jid]
        if kind == "e":
            return wire.builtin_exception(fields[0]) or Exception
        if kind == "n":  # a stdlib function or class the test passed (``key=str.lower``): this side's own copy
            return _named(*fields)
        raise ValueError(f"unknown reference {kind!r}")

    def loads(self, data: bytes) -> Any:
        return decoder.decode(data, self.on_ref, hash_refs=True)  # its own objects: hashing them is local

    def dispatch(self, op: str, args: tuple) -> Any:
        return getattr(self, "op_" + op)(*args)

    def op_load(self, source: str, setup: str) -> None:
        """Run setup, then the program, as modules; the program sees the setup's names."""
        setup_mod = types.ModuleType(SETUP_MODULE)
        sys.modules[SETUP_MODULE] = setup_mod
        mod = source_module(SOLUTION_MODULE, source)
        filename = mod.__file__
        sys.modules[SOLUTION_MODULE] = self.module = mod
        try:
            if setup:
                exec(compile(setup, "<setup>", "exec"), setup_mod.__dict__)  # noqa: S102
            mod.__dict__.update({k: v for k, v in vars(setup_mod).items() if not k.startswith("__")})
            exec(compile(source, filename, "exec"), mod.__dict__)  # noqa: S102
        finally:
            flush()

    def op_global(self, name: str) -> tuple[bool, Any]:
        d = self.module.__dict__ if self.module is not None else {}
        return (True, d[name]) if name in d else (False, None)

    def op_live(self, name: str) -> tuple[bool, Any]:
        """A global as ``from solution import name`` binds it: a container by handle, so the test sees it change."""
        found, value = self.op_global(name)
        return (found, Handle(value)) if found and type(value) in IN_PLACE else (found, value)

    def op_names(self) -> list[str]:
        """What ``from solution import *`` binds: ``__all__``, else every name not starting with ``_``."""
        d = self.module.__dict__ if self.module is not None else {}
        names = d.get("__all__")
        if isinstance(names, (list, tuple)) and all(type(n) is str for n in names):
            return list(names)
        return [n for n in d if type(n) is str and not n.startswith("_")]

    def op_state(self, changes: dict) -> None:
        """What the test changed in its process since the last call (``shared_state``)."""
        self.state.apply(changes)

    def op_files(self) -> dict:
        """Files the program wrote in its working directory since the last step (``scratch``)."""
        return self.state.scratch.changed()

    def op_logged(self) -> list:
        """The program's log records since the last step, while the test reads log records."""
        return self.state.logged()

    def op_unsent(self) -> tuple[str, str]:
        """What the last call that raised printed to stdout and stderr while captured (then forgotten)."""
        unsent, self.unsent = self.unsent, ("", "")
        return unsent

    def op_random_state(self) -> Any:
        return random.getstate()

    def op_setglobal(self, name: str, value: Any) -> None:
        """``monkeypatch.setattr(solution, name, value)`` / ``mock.patch("solution.name")`` from the test."""
        if self.module is not None and type(name) is str and not name.startswith("__"):
            self.patched.setdefault(name, self.module.__dict__.get(name, _MISSING))
            setattr(self.module, name, value)

    def op_unpatch(self, name: str) -> None:
        """A patch the test undoes (``delattr``): the program's own value is back."""
        if self.module is not None and name in self.patched:
            value = self.patched.pop(name)
            if value is _MISSING:
                self.module.__dict__.pop(name, None)
            else:
                setattr(self.module, name, value)

    def op_call(self, fn: Any, args: tuple, kwargs: dict, new: list | tuple = (), updates: list | tuple = (),
                capture: tuple = (False, False, False), keep: bool = True) -> tuple:
        """Call ``fn``. ``new``: containers among the arguments to track (for the job, or with ``keep`` false for
        this call only); ``updates``: the test's changes to tracked ones. The reply carries the program's changes
        to tracked containers, and, while the test captures them, what the call wrote to stdout and stderr and the
        warnings it raised; what is empty at its end is left out."""
        fresh = [idx for idx, obj in new if self.shared.put(idx, obj)] if type(new) is list else []
        self.shared.apply(updates)
        try:
            return self._call(fn, args, kwargs, capture)
        finally:
            if not keep:
                self.shared.forget(fresh)

    def _call(self, fn: Any, args: tuple, kwargs: dict, capture: tuple) -> tuple:
        if not any(capture):  # the common case: nothing to redirect
            try:
                result = fn(*args, **kwargs)
            finally:
                put_back()
            changes = self.shared.changes(also=result)
            return (result, changes) if changes else (result,)
        out, err, saved = io.StringIO(), io.StringIO(), (sys.stdout, sys.stderr)
        if capture[0]:
            sys.stdout = out
        if capture[1]:
            sys.stderr = err
        with warnings.catch_warnings(record=True) as caught:
            if capture[2]:
                warnings.simplefilter("always")
            try:
                result = fn(*args, **kwargs)
            except BaseException:
                self.unsent = (out.getvalue(), err.getvalue())  # printed before it raised: the judge may ask
                raise
            finally:
                sys.stdout, sys.stderr = saved
                put_back()
        warned = [(w.category.__name__, str(w.message)) for w in caught] if capture[2] else []
        return result, self.shared.changes(also=result), out.getvalue(), err.getvalue(), warned[:100]

    def op_anext(self, agen: Any) -> tuple[bool, Any]:
        return self.state.anext(agen)

    def op_await(self, aw: Any) -> Any:
        return self.state.run(aw)

    def op_method(self, obj: Any, name: str, args: tuple, kwargs: dict) -> Any:
        value = getattr(obj, name)(*args, **kwargs)
        return Handle(value) if name == "__enter__" and type(value) in IN_PLACE else value  # ``with f() as xs``

    def op_getattr(self, obj: Any, name: str) -> Any:
        value = getattr(obj, name)
        return Handle(value) if type(value) in IN_PLACE else value

    def op_setattr(self, obj: Any, name: str, value: Any) -> None:
        setattr(obj, name, value)

    def op_delattr(self, obj: Any, name: str) -> None:
        delattr(obj, name)

    def op_getitem(self, obj: Any, key: Any) -> Any:
        value = obj[key]
        return Handle(value) if type(value) in IN_PLACE else value

    def op_setitem(self, obj: Any, key: Any, value: Any) -> None:
        obj[key] = value

    def op_delitem(self, obj: Any, key: Any) -> None:
        del obj[key]

    def op_value(self, obj: Any) -> Any:
        return wire.base_value(obj)

    def op_len(self, obj: Any) -> int:
        return len(obj)

    def op_bool(self, obj: Any) -> bool:
        return bool(obj)

    def op_str(self, obj: Any) -> str:
        return str(obj)

    def op_repr(self, obj: Any) -> str:
        return repr(obj)

    def op_format(self, obj: Any, spec: str) -> str:
        return format(obj, spec)

    def op_hash(self, obj: Any) -> int:
        return hash(obj)

    def op_dir(self, obj: Any) -> list[str]:
        return sorted(str(n) for n in dir(obj))

    def op_iter(self, obj: Any) -> Any:
        return iter(obj)

    def op_next(self, it: Any, n: int, capture: tuple = (False, False)) -> tuple:
        """Up to ``n`` items; ``done`` when exhausted; an exception raised after the items, if any; and what the
        iterator printed meanwhile, while the test captures it."""
        items: list[Any] = []
        out, err, saved = io.StringIO(), io.StringIO(), (sys.stdout, sys.stderr)
        if capture[0]:
            sys.stdout = out
        if capture[1]:
            sys.stderr = err
        done, exc, returned = False, None, None
        try:
            for _ in range(n):
                items.append(next(it))
        except StopIteration as stop:
            done, returned = True, stop.value
        except Exception as e:  # noqa: BLE001 - delivered after the items already produced
            exc = e
        finally:
            sys.stdout, sys.stderr = saved
        if returned is not None:  # a generator's return value (``yield from``, ``StopIteration.value``)
            return items, done, exc, out.getvalue(), err.getvalue(), returned
        return items, done, exc, out.getvalue(), err.getvalue()

    def op_unary(self, name: str, obj: Any, *extra: Any) -> Any:
        return _UNARY[name](obj, *extra)

    def op_binop(self, name: str, a: Any, b: Any) -> Any:
        return _BINARY[name](a, b)

    def op_cmp(self, name: str, a: Any, b: Any) -> Any:
        return _CMP[name](a, b)

    def op_contains(self, container: Any, item: Any) -> bool:
        return item in container

    def op_isinstance(self, obj: Any, cls: Any) -> bool:
        return isinstance(obj, cls)

    def op_issubclass(self, a: Any, b: Any) -> bool:
        return issubclass(a, b)

    def op_copy(self, obj: Any) -> Any:
        return copy.copy(obj)

    def op_deepcopy(self, obj: Any) -> Any:
        return copy.deepcopy(obj)


def _named(module: str, qualname: str) -> Any:
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def serve(fd: int, load_fd: int | None = None) -> None:
    """Answer the judge on ``fd`` until it closes the channel, then exit (never returns). ``load_fd``: the
    program and the setup code (marshal, from the zygote); loaded at once, the outcome sent to the judge
    unasked, while the judge is still starting."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 3000))  # nested callbacks cost frames on both sides
    exit_builtins()
    try:
        runner = Runner(fd)
        if load_fd is not None:
            source, setup = marshal.loads(read_all(load_fd))
            runner.channel.answer(LOAD, "load", (source, setup))
        runner.channel.serve_forever()
    except BaseException:  # noqa: BLE001, S110 - the judge closing the channel is the normal end
        pass
    finally:
        flush()
        os._exit(0)
