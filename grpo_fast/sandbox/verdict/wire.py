"""The wire between a judge and a candidate's process: frames, and a data-only codec for the values they exchange.

Nothing that crosses is decoded by pickle or by anything that resolves a name the sender chose, calls a constructor
the sender chose, or sets attributes on an existing object. A value is a tree of tagged items; the decoder
(``decoder.py``) builds only the fixed set of types below, each from validated fields, and checks every length,
count and depth against the bytes actually received *before* it allocates anything. Decoding is iterative (no
recursion, no call into the other side). Whatever is not data crosses as a *reference* ``Ref(kind, fields)`` whose
meaning each side gives itself (``decode(..., on_ref=...)``): typically a handle, a number the owning side issued
for this job.

Item layout: one tag byte, then a fixed payload (scalars) or a u32 child count and the children (compounds).
"""

from __future__ import annotations

import builtins
import collections
import datetime
import decimal
import fractions
import ipaddress
import os
import pathlib
import select
import struct
import time
import types
import uuid
from collections.abc import Callable
from typing import Any

SETUP_MODULE = "test_setup"  # the dataset's setup code runs under this module name on both sides
SOLUTION_MODULE = "solution"  # the candidate's program: a module, so ``__name__ != "__main__"``
ASYNC_FUNCTION = "async function"  # the kind of a handle to an ``async def`` function
MAX_FRAME = 16 << 20  # what one side accepts from the other in one frame
MAX_DEPTH = 1000  # nesting of decoded values
ENCODE_DEPTH = 200  # deeper than this, a sender sends the subtree as a reference (a handle)
MAX_INT_BYTES = 8192  # ~19,700 decimal digits
MAX_NAME = 200  # type, field and exception names
U32 = struct.Struct("<I")  # frame lengths, counts and sizes
I64, F64, F64X2 = struct.Struct("<q"), struct.Struct("<d"), struct.Struct("<dd")  # int, float, complex
_TAGGED_I64, _TAGGED_U32 = struct.Struct("<Bq"), struct.Struct("<BI")  # a tag byte and its payload in one pack
_I64_LIMIT = 1 << 63


class Lost(BaseException):
    """The other side is gone, sent something malformed, or a frame was too large."""


class Deadline(BaseException):
    """The job's wall-clock budget ran out (a BaseException so test code cannot swallow it by accident)."""


class WireError(Lost):
    """A frame that does not decode: the channel is no longer usable."""


class Stream:
    """Length-prefixed frames over a stream socket; ``deadline`` (monotonic seconds) bounds every wait.

    ``sock``: a socket object (kept, so its descriptor stays open) or a bare descriptor. Either way the frames go
    through ``os.read``/``os.write``: a job's fresh process then never builds a socket object, which costs it
    ~0.3 ms of first-touch work."""

    def __init__(self, sock: Any, max_frame: int = MAX_FRAME) -> None:
        self.sock, self.max_frame, self.buf = sock, max_frame, bytearray()
        self.fd: int = sock if type(sock) is int else sock.fileno()
        self.deadline: float | None = None
        self.poller = select.poll()  # not select(): a template's descriptors may be numbered past 1024
        self.poller.register(self.fd, select.POLLIN)

    def send(self, payload: bytes) -> None:
        view = memoryview(U32.pack(len(payload)) + payload)
        try:
            while view:
                view = view[os.write(self.fd, view):]
        except OSError as err:
            raise Lost(f"send failed: {err}") from None

    def recv(self) -> bytes:
        while True:
            if len(self.buf) >= 4:
                n = U32.unpack_from(self.buf)[0]
                if n > self.max_frame:
                    raise Lost("frame too large")
                if len(self.buf) >= 4 + n:
                    data = bytes(self.buf[4:4 + n])
                    del self.buf[:4 + n]
                    return data
            if self.deadline is not None:
                left = self.deadline - time.monotonic()
                if left <= 0 or not self.poller.poll(left * 1000):
                    raise Deadline
            try:
                chunk = os.read(self.fd, 65536)
            except OSError as err:
                raise Lost(f"recv failed: {err}") from None
            if not chunk:
                raise Lost("closed")
            self.buf += chunk


class Ref:
    """What is not data: ``kind`` (one letter) and ``fields`` (data) that the receiving side interprets."""

    __slots__ = ("kind", "fields")

    def __init__(self, kind: str, fields: tuple = ()) -> None:
        self.kind, self.fields = kind, fields


class Plain:
    """An encoder hook's answer: send ``value`` (data) in place of the object."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class NotData(Exception):
    """Raised by an encoder hook for an object it will not send at all."""


# ----------------------------------------------------------------------------------------------------------
# value types that cross as text, each rebuilt by its own constructor from a validated string

def _tz_name(d: Any) -> str | None:
    key = getattr(getattr(d, "tzinfo", None), "key", None)
    return key if isinstance(key, str) else None


def _zone(text: str) -> Any:
    from zoneinfo import ZoneInfo  # noqa: PLC0415 - only for a time zone; a tz database name, ZoneInfo rejects paths

    return ZoneInfo(text)


def _datetime(text: str) -> datetime.datetime:
    stamp, _, zone = text.partition("|")
    value = datetime.datetime.fromisoformat(stamp)
    return value.replace(tzinfo=_zone(zone)) if zone else value


def _fraction(text: str) -> fractions.Fraction:
    num, _, den = text.partition("/")
    return fractions.Fraction(int(num), int(den or "1"))


TEXT_TYPES: dict[str, tuple[type, Callable[[Any], str], Callable[[str], Any]]] = {
    "Fraction": (fractions.Fraction, lambda v: f"{v.numerator}/{v.denominator}", _fraction),
    "Decimal": (decimal.Decimal, str, decimal.Decimal),
    "date": (datetime.date, datetime.date.isoformat, datetime.date.fromisoformat),
    "time": (datetime.time, datetime.time.isoformat, datetime.time.fromisoformat),
    "datetime": (datetime.datetime, lambda v: v.isoformat() + ("|" + _tz_name(v) if _tz_name(v) else ""),
                 _datetime),
    "timedelta": (datetime.timedelta, lambda v: f"{v.days},{v.seconds},{v.microseconds}",
                  lambda s: datetime.timedelta(*(int(x) for x in s.split(",", 2)))),
    "timezone": (datetime.timezone, lambda v: str(v.utcoffset(None).total_seconds()),
                 lambda s: datetime.timezone(datetime.timedelta(seconds=float(s)))),
    "UUID": (uuid.UUID, str, uuid.UUID),
    "IPv4Address": (ipaddress.IPv4Address, str, ipaddress.IPv4Address),
    "IPv6Address": (ipaddress.IPv6Address, str, ipaddress.IPv6Address),
    "IPv4Network": (ipaddress.IPv4Network, str, ipaddress.IPv4Network),
    "IPv6Network": (ipaddress.IPv6Network, str, ipaddress.IPv6Network),
    "IPv4Interface": (ipaddress.IPv4Interface, str, ipaddress.IPv4Interface),
    "IPv6Interface": (ipaddress.IPv6Interface, str, ipaddress.IPv6Interface),
    "PurePosixPath": (pathlib.PurePosixPath, str, pathlib.PurePosixPath),
    "PosixPath": (pathlib.PosixPath, str, pathlib.PurePosixPath),  # a path as data: no filesystem behind it
}
_TEXT_BY_TYPE = {t: (name, enc) for name, (t, enc, _) in TEXT_TYPES.items()}
NUMPY_DTYPES = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                          "float16", "float32", "float64", "complex64", "complex128"})
EXCEPTIONS = frozenset(n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException))
FACTORIES = {"list": list, "int": int, "set": set, "dict": dict, "str": str, "float": float, "tuple": tuple,
             "frozenset": frozenset, "bool": bool}
BUILTIN_BASES = (bool, int, float, complex, str, bytes, bytearray, list, tuple, dict, set, frozenset)


def builtin_exception(name: Any) -> type[BaseException] | None:
    """A builtin exception class by name, from the fixed list; anything else is None."""
    if type(name) is str and name in EXCEPTIONS:
        return vars(builtins)[name]
    return None


def builtin_base(t: type) -> type | None:
    return next((b for b in t.__mro__ if b in BUILTIN_BASES), None)


def builtin_base_named(name: Any) -> type | None:
    return next((b for b in BUILTIN_BASES if b.__name__ == name), None)


def base_value(obj: Any) -> Any:
    """The plain value of an instance of a builtin subclass (an IntEnum member, a ``str`` subclass...)."""
    base = builtin_base(type(obj))
    if base is None:
        return None
    if base in (list, dict, set, frozenset, tuple, bytearray):
        return base(base.__iter__(obj)) if base is not dict else dict(dict.items(obj))
    return base(obj) if base is not bool else bool(int(obj))


# ----------------------------------------------------------------------------------------------------------
# encoder


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
