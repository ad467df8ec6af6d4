"""Candidate side: runs the program as module ``solution`` and answers the judge's requests about its objects.

This process holds no test, no expected value and no verdict: the judge sends only the program, the dataset's setup
code and call arguments. Results go back by value when they are plain data (see ``wire``), else as handles.
"""

from __future__ import annotations

import copy
import io
import math
import operator
import os
import pickle
import socket
import sys
import types
from typing import Any

from . import wire
from .channel import Channel
from .wire import SETUP_MODULE, SOLUTION_MODULE, Stream

_RUNNER: Runner | None = None


class Judged:
    """A judge object the test passed in (a function, an iterator...): every use is a request to the judge."""

    __slots__ = ("_sbx_jid", "__weakref__")

    def __init__(self, jid: int) -> None:
        object.__setattr__(self, "_sbx_jid", jid)

    def _sbx(self, op: str, *args: Any) -> Any:
        assert _RUNNER is not None
        return _RUNNER.channel.request(op, self, *args)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._sbx("call", args, kwargs)

    def __getattr__(self, name: str) -> Any:
        return self._sbx("getattr", name)

    def __setattr__(self, name: str, value: Any) -> None:
        self._sbx("setattr", name, value)

    def __iter__(self) -> Any:
        return self._sbx("iter")

    def __next__(self) -> Any:
        return self._sbx("next")

    def __len__(self) -> int:
        return self._sbx("len")

    def __getitem__(self, key: Any) -> Any:
        return self._sbx("getitem", key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._sbx("setitem", key, value)

    def __contains__(self, item: Any) -> bool:
        return self._sbx("contains", item)

    def __bool__(self) -> bool:
        return self._sbx("bool")

    def __repr__(self) -> str:
        return self._sbx("repr")

    def __str__(self) -> str:
        return self._sbx("str")

    def __hash__(self) -> int:
        return self._sbx("hash")

    def __eq__(self, other: object) -> Any:
        return self._sbx("cmp", "eq", other)

    def __ne__(self, other: object) -> Any:
        return self._sbx("cmp", "ne", other)

    def __lt__(self, other: object) -> Any:
        return self._sbx("cmp", "lt", other)

    def __le__(self, other: object) -> Any:
        return self._sbx("cmp", "le", other)

    def __gt__(self, other: object) -> Any:
        return self._sbx("cmp", "gt", other)

    def __ge__(self, other: object) -> Any:
        return self._sbx("cmp", "ge", other)


# ----------------------------------------------------------------------------------------------------------
# encoder: how each type of candidate object crosses to the judge (chosen once per type)


def _default(r: Runner, o: Any) -> Any:
    return NotImplemented


def _handle(r: Runner, o: Any) -> Any:
    return wire.ref, (r.export(o), type(o).__qualname__)


def _error(r: Runner, o: BaseException) -> Any:
    args = o.args if type(o.args) is tuple else ()
    attrs = dict(list(vars(o).items())[:32]) if hasattr(o, "__dict__") else {}
    return wire.error, (type(o), args, attrs)


def _named_or_handle(r: Runner, o: Any) -> Any:
    """Modules cross by name (the judge uses its own copy); so do the setup's functions. The rest by handle."""
    if o in _MARKERS or wire.crosses_by_name(o):
        return NotImplemented  # the function of a (marker, args) pair or of a value's reduction: by name
    if isinstance(o, types.ModuleType):
        return wire.stdref, (str(o.__name__), "", r.export(o), "module")
    qual = getattr(o, "__qualname__", None)
    if getattr(o, "__module__", None) == SETUP_MODULE and isinstance(qual, str) \
            and wire.lookup(SETUP_MODULE, qual) is o:
        return wire.stdref, (SETUP_MODULE, qual, r.export(o), type(o).__qualname__)
    return _handle(r, o)


def _class(r: Runner, cls: type) -> Any:
    if wire.crosses_by_name(cls):
        return NotImplemented
    name, mod = cls.__qualname__, cls.__module__
    if mod == "builtins" and wire.lookup("builtins", name) is cls and (
            wire.is_value_class(cls) or issubclass(cls, BaseException)):
        return NotImplemented  # by name; the judge resolves it to its own builtin
    if issubclass(cls, BaseException):
        bases = tuple(b for b in cls.__bases__ if issubclass(b, BaseException))
        return wire.exc_class, (r.export(cls), mod, name, bases)
    if (mod == SETUP_MODULE and "." not in name and wire.lookup(mod, name) is cls) or wire.is_value_class(cls):
        return NotImplemented
    return _named_or_handle(r, cls)


def _array(r: Runner, a: Any) -> Any:
    np = sys.modules["numpy"]
    if type(a) is np.ndarray and not a.dtype.hasobject:
        return NotImplemented
    a = np.asarray(a)
    return wire.plain, (a.tolist() if a.dtype.hasobject else a,)


def _numpy_other(r: Runner, o: Any) -> Any:
    dt = getattr(o, "dtype", o)
    return _handle(r, o) if getattr(dt, "hasobject", True) else NotImplemented


def _choose(t: type) -> Any:
    if t is Judged:
        return lambda r, o: (wire.jref, (object.__getattribute__(o, "_sbx_jid"),))
    if wire.is_value_class(t):
        if t.__module__ == "zoneinfo":  # its own reduction goes through getattr, which may not cross
            return lambda r, o: (t, (o.key,)) if isinstance(o.key, str) else _handle(r, o)
        return _default
    np = sys.modules.get("numpy")
    if np is not None and t.__module__.startswith("numpy"):
        if issubclass(t, np.ndarray):
            return _array
        if issubclass(t, (np.generic, np.dtype)):
            return _numpy_other
    if issubclass(t, BaseException):
        return _error
    if issubclass(t, type):
        return _class
    if t in (types.FunctionType, types.BuiltinFunctionType, types.ModuleType):
        return _named_or_handle
    if t is types.CoroutineType:
        return lambda r, o: (wire.awaitable, (r.export(o), t.__qualname__))
    kind = wire.view_kind
    if t in (type({}.keys()), type({}.items()), type({}.values())):
        return lambda r, o: (wire.view, (kind(o), list(o)))
    if issubclass(t, tuple) and isinstance(getattr(t, "_fields", None), tuple):
        return lambda r, o: (wire.named, (t.__name__, tuple(map(str, t._fields)), tuple.__getitem__(o, slice(None))))
    base = wire.builtin_base(t)
    if base is not None:  # keeps its methods; the judge compares it as its data (op_value)
        return lambda r, o: (wire.ref, (r.export(o), t.__qualname__, base.__name__))
    return _handle


_HOW: dict[type, Any] = {}
_MARKERS = frozenset({wire.ref, wire.jref, wire.plain, wire.named, wire.view, wire.error, wire.exc_class,
                      wire.stdref, wire.awaitable})


class CandidatePickler(pickle.Pickler):
    def __init__(self, file: Any, runner: Runner) -> None:
        super().__init__(file, protocol=5)
        self.runner = runner

    def reducer_override(self, obj: Any) -> Any:
        t = type(obj)
        how = _HOW.get(t)
        if how is None:
            how = _HOW[t] = _choose(t)
        return how(self.runner, obj)


# ----------------------------------------------------------------------------------------------------------


def _snapshot(m: Any) -> Any:
    if isinstance(m, dict):
        return list(m.items())
    if isinstance(m, set):
        return set(m)
    if type(m).__module__ == "numpy":  # an ndarray
        return m.shape, m.tobytes()
    return list(m)


def _changed(m: Any, before: Any) -> bool:
    now = _snapshot(m)
    if isinstance(m, set) or type(m).__module__ == "numpy":
        return now != before
    if isinstance(m, dict):
        return len(now) != len(before) or any(a[0] is not b[0] or a[1] is not b[1] for a, b in zip(now, before))
    return len(now) != len(before) or any(a is not b for a, b in zip(now, before))


_UNARY = {"neg": operator.neg, "pos": operator.pos, "abs": abs, "invert": operator.invert, "int": int,
          "float": float, "complex": complex, "index": operator.index, "round": round, "trunc": math.trunc,
          "floor": math.floor, "ceil": math.ceil, "reversed": reversed}
_BINARY = {name: getattr(operator, name) for name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow",
                                                       "matmul", "lshift", "rshift", "and_", "or_", "xor")}
_BINARY["divmod"] = divmod
_CMP = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
        "ge": operator.ge}


class Runner:
    """The candidate's objects by handle, and one method per request the judge may make."""

    def __init__(self, sock: socket.socket) -> None:
        self.objs: list[Any] = []
        self.ids: dict[int, int] = {}
        self.judged: dict[int, Judged] = {}
        self.module: types.ModuleType | None = None
        self.markers = {"ref": lambda hid, kind, base="": self.objs[hid], "jref": self._judged, "plain": wire.plain,
                        "named": wire.named, "view": wire.view, "jerror": wire.jerror}
        self.channel = Channel(Stream(sock), self.dumps, self.loads, self.dispatch)

    def _judged(self, jid: int) -> Judged:
        if jid not in self.judged:
            self.judged[jid] = Judged(jid)
        return self.judged[jid]

    def export(self, obj: Any) -> int:
        hid = self.ids.get(id(obj))
        if hid is None:
            hid = self.ids[id(obj)] = len(self.objs)
            self.objs.append(obj)  # kept alive for the whole job, so ids are never reused
        return hid

    def dumps(self, obj: Any) -> bytes:
        buf = io.BytesIO()
        CandidatePickler(buf, self).dump(obj)
        return buf.getvalue()

    def loads(self, data: bytes) -> Any:
        return wire.TrustingUnpickler(data, self.markers).load()

    def dispatch(self, op: str, args: tuple) -> Any:
        return getattr(self, "op_" + op)(*args)

    def op_load(self, source: str, setup: str) -> None:
        """Run setup, then the program, as modules; the program sees the setup's names."""
        setup_mod = types.ModuleType(SETUP_MODULE)
        sys.modules[SETUP_MODULE] = setup_mod
        filename = os.path.join(os.getcwd(), "solution.py")
        try:
            with open(filename, "w") as f:  # for tracebacks, inspect.getsource and the like
                f.write(source)
        except OSError:
            pass
        mod = types.ModuleType(SOLUTION_MODULE)
        mod.__file__ = filename
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

    def op_call(self, fn: Any, args: tuple, kwargs: dict, muts: list, capture: bool) -> tuple[Any, list | None, str]:
        """Call. If it mutated arguments in place, send them all back so the judge can update its copies; if the
        test is capturing stdout, send back what the call printed."""
        before = [_snapshot(m) for m in muts]
        out, saved = io.StringIO(), sys.stdout
        if capture:
            sys.stdout = out
        try:
            result = fn(*args, **kwargs)
        finally:
            if capture:
                sys.stdout = saved
        return result, (muts if any(_changed(m, b) for m, b in zip(muts, before)) else None), out.getvalue()

    def op_await(self, aw: Any) -> Any:
        import asyncio

        async def main() -> Any:
            return await aw
        return asyncio.run(main())

    def op_method(self, obj: Any, name: str, args: tuple, kwargs: dict) -> Any:
        return getattr(obj, name)(*args, **kwargs)

    def op_getattr(self, obj: Any, name: str) -> Any:
        return getattr(obj, name)

    def op_setattr(self, obj: Any, name: str, value: Any) -> None:
        setattr(obj, name, value)

    def op_delattr(self, obj: Any, name: str) -> None:
        delattr(obj, name)

    def op_getitem(self, obj: Any, key: Any) -> Any:
        return obj[key]

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

    def op_next(self, it: Any, n: int) -> tuple[list, bool, BaseException | None]:
        """Up to ``n`` items; ``done`` when exhausted; an exception raised after the items, if any."""
        items: list[Any] = []
        try:
            for _ in range(n):
                items.append(next(it))
        except StopIteration:
            return items, True, None
        except Exception as exc:  # noqa: BLE001 - delivered after the items already produced
            return items, False, exc
        return items, False, None

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


def flush() -> None:
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except BaseException:  # noqa: BLE001, S110 - a closed or replaced stream must not stop the run
            pass


def serve(fd: int) -> None:
    """Answer the judge on ``fd`` until it closes the channel, then exit (never returns)."""
    global _RUNNER
    try:
        _RUNNER = Runner(socket.socket(fileno=fd))
        _RUNNER.channel.serve_forever()
    except BaseException:  # noqa: BLE001, S110 - the judge closing the channel is the normal end
        pass
    finally:
        flush()
        os._exit(0)
