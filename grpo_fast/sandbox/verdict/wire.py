"""The wire between a judge and a candidate's process: frames, and the vocabulary of a data-only codec for the values
they exchange (``encoder.py`` writes it, ``decoder.py`` reads it).

Nothing that crosses is decoded by pickle or by anything that resolves a name the sender chose, calls a constructor
the sender chose, or sets attributes on an existing object. A value is a tree of tagged items; the decoder builds only
the fixed set of types below, each from validated fields, and checks every length, count and depth against the
bytes actually received *before* it allocates anything. Decoding is iterative (no recursion, no call into the
other side). Whatever is not data crosses as a *reference* ``Ref(kind, fields)`` whose meaning each side gives
itself (``decode(..., on_ref=...)``): typically a handle, a number the owning side issued for this job.

Item layout: one tag byte, then a fixed payload (scalars) or a u32 child count and the children (compounds).
"""

from __future__ import annotations

import builtins
import datetime
import decimal
import fractions
import ipaddress
import os
import pathlib
import select
import struct
import time
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
