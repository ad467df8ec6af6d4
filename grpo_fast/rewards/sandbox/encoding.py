"""How the program's objects cross to the judge: data by value, a few things by name, everything else as handles.

Runs in the program's process, so nothing here needs to resist the program: the judge's decoder (``wire``) is what
keeps a crafted message harmless. The choice is made once per type. Also here: ``Judged``, the program's stand-in
for an object the test lent it.
"""

from __future__ import annotations

import pickle
import sys
import types
from typing import TYPE_CHECKING, Any, Protocol

from . import wire
from .wire import SETUP_MODULE

if TYPE_CHECKING:
    from .channel import Channel


class Exporter(Protocol):
    def export(self, obj: Any) -> int: ...


class Judged:
    """A judge object the test passed in (a function, an iterator...): every use is a request to the judge."""

    __slots__ = ("_sbx_jid", "_sbx_chan", "__weakref__")

    def __init__(self, jid: int, channel: Channel) -> None:
        object.__setattr__(self, "_sbx_jid", jid)
        object.__setattr__(self, "_sbx_chan", channel)

    def _sbx(self, op: str, *args: Any) -> Any:
        return object.__getattribute__(self, "_sbx_chan").request(op, self, *args)

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


def _default(r: Exporter, o: Any) -> Any:
    return NotImplemented


def _handle(r: Exporter, o: Any) -> Any:
    return wire.ref, (r.export(o), type(o).__qualname__)


def _error(r: Exporter, o: BaseException) -> Any:
    args = o.args if type(o.args) is tuple else ()
    attrs = dict(list(vars(o).items())[:32]) if hasattr(o, "__dict__") else {}
    return wire.error, (type(o), args, attrs)


def _named_or_handle(r: Exporter, o: Any) -> Any:
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


def _class(r: Exporter, cls: type) -> Any:
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


def _array(r: Exporter, a: Any) -> Any:
    np = sys.modules["numpy"]
    if type(a) is np.ndarray and not a.dtype.hasobject:
        return NotImplemented
    a = np.asarray(a)
    return wire.plain, (a.tolist() if a.dtype.hasobject else a,)


def _numpy_other(r: Exporter, o: Any) -> Any:
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
    def __init__(self, file: Any, runner: Exporter) -> None:
        super().__init__(file, protocol=5)
        self.runner = runner

    def reducer_override(self, obj: Any) -> Any:
        t = type(obj)
        how = _HOW.get(t)
        if how is None:
            how = _HOW[t] = _choose(t)
        return how(self.runner, obj)


# ----------------------------------------------------------------------------------------------------------
