"""The wire's encoder: a value into one frame's bytes, by value where it is data and as a reference otherwise.

It writes the item layout ``wire`` describes and ``decoder`` reads back: scalars inline, compounds with their
count, a mutable container seen twice in one frame as a back-reference, and everything that is not data (or is too
deep, or holds itself) through the caller's hook as a ``Ref`` the other side interprets.
"""

from __future__ import annotations

import collections
import struct
import types
from collections.abc import Callable
from typing import Any

from .wire import (
    ENCODE_DEPTH,
    F64,
    F64X2,
    FACTORIES,
    MAX_INT_BYTES,
    NUMPY_DTYPES,
    TEXT_TYPES,
    U32,
    NotData,
    Plain,
    Ref,
    builtin_exception,
)

_TAGGED_I64, _TAGGED_U32 = struct.Struct("<Bq"), struct.Struct("<BI")  # a tag byte and its payload in one pack
_I64_LIMIT = 1 << 63
_TEXT_BY_TYPE = {t: (name, enc) for name, (t, enc, _) in TEXT_TYPES.items()}


class Encoder:
    """Sends data by value. ``hook(obj, by_handle)`` gives a ``Ref`` or a ``Plain`` replacement (or raises
    ``NotData``) for every other object; ``by_handle`` asks for a plain handle (a cycle, or too deep). Types for
    which ``hook_first(type)`` holds go to the hook before any other rule."""

    def __init__(self, hook: Callable[[Any, bool], Ref | Plain], hook_first: Callable[[type], bool] = lambda t: False,
                 exception: Callable[[BaseException], tuple] | None = None) -> None:
        self.hook, self.hook_first = hook, hook_first
        self.exception = exception or exception_fields
        self.out = bytearray()
        self.active: set[int] = set()
        self.built = 0  # compounds emitted so far, in the order the decoder builds them (children first)
        self.memo: dict[int, int] = {}  # id of a mutable container already sent -> its build number
        self.keep: list[Any] = []  # the memo's objects stay alive, so their ids are not reused meanwhile
        self.first: dict[type, bool] = {}  # hook_first, per type

    def encode(self, obj: Any) -> bytes:
        self.out = bytearray()
        self.item(obj, 0)
        return bytes(self.out)

    def compound(self, tag: bytes, children: Any, depth: int, obj: Any = None) -> None:
        """``tag``, the count, then each child; scalars inline (most children are: this loop is the channel's
        hot path). A list is copied first: encoding a child may run code that changes it."""
        if type(children) is not tuple:
            children = list(children)
        out = self.out
        out += tag
        out += U32.pack(len(children))
        for child in children:
            t = type(child)
            if t is int and -_I64_LIMIT <= child < _I64_LIMIT:
                out += _TAGGED_I64.pack(0x69, child)
            elif t is str:
                raw = child.encode("utf-8", "surrogatepass")
                out += _TAGGED_U32.pack(0x73, len(raw))
                out += raw
            elif child is None:
                out += b"N"
            elif t is bool:
                out += b"T" if child else b"F"
            else:
                self.item(child, depth + 1)
        if obj is not None:  # a mutable container: a second occurrence in this frame is the same object there
            self.memo[id(obj)] = self.built
            self.keep.append(obj)
        self.built += 1

    def item(self, obj: Any, depth: int) -> None:  # noqa: C901 - one branch per wire type
        t, out = type(obj), self.out
        if obj is None:
            out += b"N"
        elif t is bool:
            out += b"T" if obj else b"F"
        elif obj is Ellipsis:
            out += b"E"
        elif t is int:
            if -_I64_LIMIT <= obj < _I64_LIMIT:
                out += _TAGGED_I64.pack(0x69, obj)
            else:
                raw = obj.to_bytes((obj.bit_length() + 8) // 8, "little", signed=True)
                if len(raw) > MAX_INT_BYTES:
                    raise ValueError("integer too large to send")
                out += b"I" + U32.pack(len(raw)) + raw
        elif t is float:
            out += b"f" + F64.pack(obj)
        elif t is complex:
            out += b"c" + F64X2.pack(obj.real, obj.imag)
        elif t is str:
            raw = obj.encode("utf-8", "surrogatepass")
            out += _TAGGED_U32.pack(0x73, len(raw))
            out += raw
        elif t is bytes:
            out += b"b" + U32.pack(len(obj)) + obj
        elif t is Ref:
            self.ref(obj, depth)
        elif id(obj) in self.memo:
            out += b"@" + U32.pack(self.memo[id(obj)])
        elif depth >= ENCODE_DEPTH or id(obj) in self.active:  # too deep, or a cycle: by reference
            self.ref(self.hook(obj, True), depth)
        else:
            first = self.first.get(t)
            if first is None:
                first = self.first[t] = bool(self.hook_first(t))
            if first:
                self.ref(self.hook(obj, False), depth)
            elif t is tuple:  # immutable: cannot hold itself, and is not remembered
                self.compound(b"t", obj, depth)
            else:
                self.active.add(id(obj))
                try:
                    if t is list:
                        self.compound(b"l", obj, depth, obj)
                    else:
                        self.nested(obj, t, depth)
                finally:
                    self.active.discard(id(obj))

    def nested(self, obj: Any, t: type, depth: int) -> None:  # noqa: C901 - one branch per wire type
        if t in _MUTABLE_KEYED and not all(map(is_key_data, obj)):
            self.ref(self.hook(obj, True), depth)  # keys that are objects: hashed where they live, so by handle
        elif t is list or t is tuple or t is set or t is frozenset:
            self.compound({list: b"l", tuple: b"t", set: b"S", frozenset: b"Z"}[t], obj, depth,
                          None if t is tuple or t is frozenset else obj)
        elif t is dict or t is collections.OrderedDict or t is collections.Counter:
            tag = {dict: b"d", collections.OrderedDict: b"O", collections.Counter: b"C"}[t]
            self.compound(tag, (x for kv in dict.items(obj) for x in kv), depth, obj)
        elif t is collections.defaultdict:
            f = obj.default_factory
            name = f.__name__ if f is not None and FACTORIES.get(getattr(f, "__name__", "")) is f else None
            self.compound(b"U", [name, *(x for kv in dict.items(obj) for x in kv)], depth, obj)
        elif t is collections.deque:
            self.compound(b"Q", [obj.maxlen, *obj], depth, obj)
        elif t is bytearray:  # a compound, so that a second occurrence is the same object there
            self.compound(b"Y", [bytes(obj)], depth, obj)
        elif t is range:
            self.compound(b"r", [obj.start, obj.stop, obj.step], depth)
        elif t is slice:
            self.compound(b"A", [obj.start, obj.stop, obj.step], depth)
        elif t in _TEXT_BY_TYPE:
            name, enc = _TEXT_BY_TYPE[t]
            self.compound(b"V", [name, enc(obj)], depth)
        elif t.__module__ == "numpy" and _numpy_data(obj):
            if t.__name__ == "ndarray":
                a = obj if obj.flags.c_contiguous and obj.dtype.isnative else \
                    obj.astype(obj.dtype.newbyteorder("="), order="C")  # the receiver reads native order
                self.compound(b"n", [a.dtype.name, tuple(int(d) for d in a.shape), a.tobytes()], depth, obj)
            else:
                self.compound(b"g", [obj.dtype.name, obj.tobytes()], depth)
        elif isinstance(obj, BaseException):
            self.compound(b"X", list(self.exception(obj)), depth)  # class, message, args, attributes[, cause]
        elif issubclass(t, tuple) and isinstance(getattr(t, "_fields", None), tuple):
            self.compound(b"P", [t.__name__, tuple(map(str, t._fields)), tuple.__getitem__(obj, slice(None))],
                          depth)
        elif t in _VIEWS:
            self.compound(b"W", [_VIEWS[t], list(obj)], depth)
        elif t is types.SimpleNamespace and all(type(k) is str for k in vars(obj)):
            self.compound(b"K", [dict(vars(obj))], depth)
        else:
            self.ref(self.hook(obj, False), depth)

    def ref(self, ref: Ref | Plain, depth: int) -> None:
        if type(ref) is Plain:
            self.item(ref.value, depth + 1)
            return
        if type(ref) is not Ref:
            raise NotData(type(ref).__name__)
        self.compound(b"R", [ref.kind, tuple(ref.fields)], 0)  # small data: counted afresh, never a handle again


_VIEWS = {type({}.keys()): "keys", type({}.items()): "items", type({}.values()): "values"}
_MUTABLE_KEYED = (set, frozenset, dict, collections.OrderedDict, collections.Counter, collections.defaultdict)
_KEY_SCALARS = frozenset({type(None), bool, int, float, complex, str, bytes})


def is_key_data(k: Any) -> bool:
    """A set element or dict key that crosses by value (hashable plain data, no objects inside)."""
    t = type(k)
    if t in _KEY_SCALARS or t in _TEXT_BY_TYPE or t is range:
        return True
    if t is tuple or t is frozenset:
        return all(map(is_key_data, k))
    return False


def _numpy_data(obj: Any) -> bool:
    dt = getattr(obj, "dtype", None)
    return getattr(dt, "name", None) in NUMPY_DTYPES and getattr(obj, "ndim", 0) <= 32


def exception_fields(exc: BaseException) -> tuple[Any, str, tuple, dict]:
    """Default view of an exception: builtin class name, message, args and public attributes, as data."""
    cls = type(exc)
    name = next((c.__name__ for c in cls.__mro__ if builtin_exception(c.__name__) is c), "Exception")
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001 - a broken __str__ leaves the message empty
        message = ""
    args = exc.args if type(exc.args) is tuple else ()
    attrs = {k: v for k, v in list(getattr(exc, "__dict__", {}).items())[:32]
             if type(k) is str and not k.startswith("_")}
    for kind, fields in _MEMBER_FIELDS:  # builtin fields kept outside __dict__ (``SystemExit.code``)
        if isinstance(exc, kind):
            attrs.update({k: v for k in fields if type(v := getattr(exc, k, None)) in (int, str, type(None))})
    return name, message[:2000], args, attrs


_MEMBER_FIELDS = ((SystemExit, ("code",)), (OSError, ("errno", "strerror", "filename")))
