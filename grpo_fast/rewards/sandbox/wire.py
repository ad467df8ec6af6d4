"""Verdict channel, part 1: frames and the value codecs between the judge and the candidate's process.

The candidate's process may send anything, so the judge decodes with a restricted unpickler: plain values, a short
list of stdlib value types, numpy arrays without Python objects, classes of the dataset's setup module, and the
markers below. Anything else a candidate returns crosses as a *handle* (a number) that the judge wraps in a proxy.
Decoding never runs candidate code in the judge. Values the judge sends the other way (call arguments) are trusted
there; judge objects that are not plain data cross as handles too, so the test's state never leaves the judge.
"""

from __future__ import annotations

import builtins
import collections
import io
import pickle
import select
import struct
import sys
import time
from typing import Any

SETUP_MODULE = "test_setup"  # the dataset's setup code runs under this module name on both sides
SOLUTION_MODULE = "solution"  # the candidate's program: a module, so ``__name__ != "__main__"``
MAX_FRAME = 64 << 20
_HDR = struct.Struct("<I")


class Lost(BaseException):
    """The other side is gone, sent something malformed, or a frame was too large."""


class Deadline(BaseException):
    """The job's wall-clock budget ran out (a BaseException so test code cannot swallow it by accident)."""


class Stream:
    """Length-prefixed frames over a stream socket; ``deadline`` (monotonic seconds) bounds every wait."""

    def __init__(self, sock: Any, max_frame: int = MAX_FRAME) -> None:
        self.sock, self.max_frame, self.buf = sock, max_frame, bytearray()
        self.deadline: float | None = None

    def send(self, payload: bytes) -> None:
        try:
            self.sock.sendall(_HDR.pack(len(payload)) + payload)
        except OSError as err:
            raise Lost(f"send failed: {err}") from None

    def recv(self) -> bytes:
        while True:
            if len(self.buf) >= 4:
                n = _HDR.unpack_from(self.buf)[0]
                if n > self.max_frame:
                    raise Lost("frame too large")
                if len(self.buf) >= 4 + n:
                    data = bytes(self.buf[4:4 + n])
                    del self.buf[:4 + n]
                    return data
            if self.deadline is not None:
                left = self.deadline - time.monotonic()
                if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                    raise Deadline
            try:
                chunk = self.sock.recv(65536)  # below malloc's mmap threshold: no map/unmap per read
            except OSError as err:
                raise Lost(f"recv failed: {err}") from None
            if not chunk:
                raise Lost("closed")
            self.buf += chunk


# ----------------------------------------------------------------------------------------------------------
# markers: module-level names that appear in pickles; each decoder maps them to its own side's meaning


def ref(hid: int, kind: str, base: str = "") -> Any:
    """Marker: a candidate object, by handle. ``kind``: its type's name (for messages); ``base``: the builtin type
    it subclasses, if any (then it compares as its data, see ``proxy.RemoteValue``)."""
    raise pickle.UnpicklingError("ref is resolved by the decoder")


def jref(jid: int) -> Any:
    """Marker: a judge object, by handle."""
    raise pickle.UnpicklingError("jref is resolved by the decoder")


def plain(value: Any) -> Any:
    """Marker: a value converted to a plain one by the sender (builtin subclass, numpy object array...)."""
    return value


def named(typename: str, fields: tuple[str, ...], values: tuple[Any, ...]) -> tuple:
    """Marker: a namedtuple, rebuilt with the same type name and fields (equal to the plain tuple)."""
    return _namedtuple(typename, fields)(*values)


def view(kind: str, items: list[Any]) -> Any:
    """Marker: a dict view (``keys`` and ``items`` compare like sets)."""
    if kind == "keys":
        return dict.fromkeys(items).keys()
    if kind == "items":
        return dict(items).items()
    return dict(enumerate(items)).values()


def error(cls: Any, args: tuple, attrs: dict) -> BaseException:
    """Marker: an exception instance of ``cls`` (a builtin class or one rebuilt by ``exc_class``)."""
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        raise pickle.UnpicklingError("not an exception class")
    args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
    try:
        exc = cls(*args)
    except Exception:  # noqa: BLE001 - a class with a fussy __init__: keep the type and the args
        exc = cls.__new__(cls)
        exc.args = args
    if isinstance(attrs, dict) and attrs:
        try:
            exc.__dict__.update({k: v for k, v in attrs.items() if isinstance(k, str) and not k.startswith("__")})
        except (AttributeError, TypeError):
            pass
    return exc


def jerror(name: str, args: tuple) -> BaseException:
    """Marker (judge to candidate): an exception, rebuilt from its class name."""
    cls = getattr(builtins, name, None)
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        cls = type(name, (Exception,), {})
    try:
        return cls(*args)
    except Exception:  # noqa: BLE001
        return cls()


def exc_class(hid: int, module: str, qualname: str, bases: tuple) -> type:
    """Marker: an exception class that is not a builtin; the judge maps it to a real or rebuilt class."""
    raise pickle.UnpicklingError("exc_class is resolved by the decoder")


def awaitable(hid: int, kind: str) -> Any:
    """Marker: a candidate coroutine; the judge gets a coroutine of its own that awaits it remotely."""
    raise pickle.UnpicklingError("awaitable is resolved by the decoder")


def stdref(module: str, qualname: str, hid: int, kind: str) -> Any:
    """Marker: a stdlib (or setup) function, class or module: the judge uses its own copy, else a proxy."""
    raise pickle.UnpicklingError("stdref is resolved by the decoder")


_MARKERS = ("ref", "jref", "plain", "named", "view", "error", "jerror", "exc_class", "stdref", "awaitable")
_NT_CACHE: dict[tuple[str, tuple[str, ...]], type] = {}


def _namedtuple(typename: str, fields: tuple[str, ...]) -> Any:
    key = (str(typename), tuple(str(f) for f in fields))
    cls = _NT_CACHE.get(key)
    if cls is None:
        try:
            cls = collections.namedtuple(*key)  # validates the names
        except (TypeError, ValueError):
            return lambda *values: tuple(values)
        if len(_NT_CACHE) < 512:
            _NT_CACHE[key] = cls
    return cls


# ----------------------------------------------------------------------------------------------------------
# what may cross by value

_BUILTIN_VALUES = frozenset({"complex", "set", "frozenset", "bytearray", "range", "slice", "int", "float", "str",
                             "bytes", "list", "tuple", "dict", "bool", "Ellipsis", "NotImplemented"})
VALUE_CLASSES = frozenset({
    ("collections", "OrderedDict"), ("collections", "Counter"), ("collections", "deque"),
    ("collections", "defaultdict"), ("fractions", "Fraction"), ("decimal", "Decimal"), ("datetime", "date"),
    ("datetime", "time"), ("datetime", "datetime"), ("datetime", "timedelta"), ("datetime", "timezone"),
    ("uuid", "UUID"), ("uuid", "SafeUUID"), ("ipaddress", "IPv4Address"), ("ipaddress", "IPv6Address"),
    ("ipaddress", "IPv4Network"), ("ipaddress", "IPv6Network"), ("ipaddress", "IPv4Interface"),
    ("ipaddress", "IPv6Interface"), ("pathlib", "PurePosixPath"), ("pathlib", "PosixPath"), ("array", "array"),
    ("zoneinfo", "ZoneInfo"),
})
_EXTRA_GLOBALS = frozenset({("array", "_array_reconstructor")})
_NUMPY_GLOBALS = frozenset({("numpy", "ndarray"), ("numpy._core.multiarray", "_reconstruct"),
                            ("numpy._core.multiarray", "scalar"), ("numpy._core.numeric", "_frombuffer"),
                            ("numpy.core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "scalar"),
                            ("numpy.core.numeric", "_frombuffer")})
BY_NAME = VALUE_CLASSES | _EXTRA_GLOBALS | _NUMPY_GLOBALS | {("numpy", "dtype")}  # reducers the judge accepts
_BASES = (int, float, complex, str, bytes, bytearray, list, tuple, dict, set, frozenset)
_TO_BASE = {int: int.__int__, float: float.__float__, complex: complex.__complex__, str: str.__str__,
            bytes: bytes.__bytes__, bytearray: bytearray, list: list.copy, dict: dict.copy, set: set.copy,
            frozenset: frozenset.copy, tuple: lambda t: tuple.__getitem__(t, slice(None))}
_VIEWS = {type({}.keys()): "keys", type({}.items()): "items", type({}.values()): "values"}


def lookup(module: str, qualname: str) -> Any:
    """``module.qualname`` among modules already imported here, or None."""
    obj: Any = sys.modules.get(module)
    for part in qualname.split("."):
        if obj is None or part.startswith("<"):
            return None
        obj = getattr(obj, part, None)
    return obj


def is_named(obj: Any, allowed: frozenset[tuple[str, str]]) -> bool:
    """``obj`` is the very object its module and qualified name point to, and that name is allowed."""
    key = (getattr(obj, "__module__", None), getattr(obj, "__qualname__", None))
    return key in allowed and lookup(*key) is obj  # type: ignore[arg-type]


def crosses_by_name(obj: Any) -> bool:
    """A class or function the judge's decoder accepts by name (used inside values' reductions)."""
    return is_named(obj, BY_NAME)


def _safe_dtype(*args: Any) -> Any:
    import numpy

    dt = numpy.dtype(*args)
    if dt.hasobject:
        raise pickle.UnpicklingError("numpy object dtypes may not cross")
    return dt


class _MarkedUnpickler(pickle.Unpickler):
    """One frame's decoder: this module's markers map to the meanings the reading side gives them; every other
    global is resolved by ``resolve``."""

    def __init__(self, data: bytes, markers: dict[str, Any]) -> None:
        super().__init__(io.BytesIO(data))
        self.markers = markers

    def find_class(self, module: str, name: str) -> Any:
        if module == __name__ and name in self.markers:
            return self.markers[name]
        return self.resolve(module, name)

    def resolve(self, module: str, name: str) -> Any:
        return super().find_class(module, name)


class RestrictedUnpickler(_MarkedUnpickler):
    """The judge's decoder: only the globals listed above, the setup module's classes and the markers."""

    def resolve(self, module: str, name: str) -> Any:
        if module == "builtins":
            obj = getattr(builtins, name, None)
            if name in _BUILTIN_VALUES or (isinstance(obj, type) and issubclass(obj, BaseException)):
                return obj
        elif module == SETUP_MODULE:
            obj = getattr(sys.modules.get(SETUP_MODULE), name, None)
            if isinstance(obj, type) and obj.__module__ == SETUP_MODULE:
                return obj
        elif module == "numpy" and name == "dtype":
            return _safe_dtype
        elif (module, name) in VALUE_CLASSES or (module, name) in _EXTRA_GLOBALS or (module, name) in _NUMPY_GLOBALS:
            __import__(module)
            obj = lookup(module, name)
            if obj is not None:
                return obj
        raise pickle.UnpicklingError(f"{module}.{name} may not cross into the judge")


def loads_restricted(data: bytes, markers: dict[str, Any]) -> Any:
    return RestrictedUnpickler(data, markers).load()


class TrustingUnpickler(_MarkedUnpickler):
    """The candidate side's decoder (its input comes from the judge): markers map to local meanings, other
    globals import as usual."""


def base_value(obj: Any) -> Any:
    """Plain value of an instance of a builtin subclass (an IntEnum member, a str subclass...), else None."""
    for base in type(obj).__mro__:
        if base in _TO_BASE:
            return _TO_BASE[base](obj)
    return None


def builtin_base(t: type) -> type | None:
    return next((b for b in t.__mro__ if b in _BASES), None)


def builtin_base_named(name: str) -> type | None:
    return next((b for b in _BASES if b.__name__ == name), None)


def view_kind(obj: Any) -> str | None:
    return _VIEWS.get(type(obj))


def is_value_class(t: type) -> bool:
    return is_named(t, VALUE_CLASSES) or (t.__module__ == "builtins" and t.__name__ in _BUILTIN_VALUES
                                          and getattr(builtins, t.__name__, None) is t)
