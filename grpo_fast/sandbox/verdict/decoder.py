"""The wire's decoder: one frame's bytes back into a value, building only the fixed set of types ``wire`` sends.

Every length and count is checked against the bytes received before anything is allocated; the loop is iterative
(no recursion, depth at most ``MAX_DEPTH``); nothing the sender names is looked up, called or given attributes
beyond what each tag's builder does with validated fields; references go to the receiving side's ``on_ref``.
"""

from __future__ import annotations

import collections
import math
import types
from collections.abc import Callable
from typing import Any

from .wire import (
    F64,
    F64X2,
    FACTORIES,
    I64,
    MAX_DEPTH,
    MAX_INT_BYTES,
    MAX_NAME,
    NUMPY_DTYPES,
    SOLUTION_MODULE,
    TEXT_TYPES,
    U32,
    Deadline,
    Lost,
    WireError,
    builtin_exception,
)


def decode(data: bytes, on_ref: Callable[[str, tuple], Any],
           on_exception: Callable[[Any, str, tuple, dict], BaseException] | None = None,
           hash_refs: bool = False) -> Any:
    """One value from ``data``; raises ``WireError`` for anything malformed, oversized or not allowed.

    ``hash_refs``: references may be set elements and dict keys (only where hashing them calls nobody else)."""
    try:
        return _Decoder(data, on_ref, on_exception or make_exception, hash_refs).run()
    except (Lost, Deadline):
        raise
    except RecursionError:
        raise WireError("value nested too deeply") from None
    except Exception as err:  # noqa: BLE001 - any failure to build means a malformed frame
        raise WireError(f"malformed value ({type(err).__name__}: {str(err)[:200]})") from None


class _Decoder:
    """Values are built children first. Beside each value goes whether a reference (the other side's object) is
    anywhere inside it: a compound remembers which of its children hold one (usually none)."""

    def __init__(self, data: bytes, on_ref: Callable[[str, tuple], Any],
                 on_exception: Callable[[Any, str, tuple, dict], BaseException], hash_refs: bool) -> None:
        self.data, self.on_ref, self.on_exception = data, on_ref, on_exception
        self.hash_refs = hash_refs
        self.built: list[tuple[Any, bool]] = []  # every compound, in build order: what ``@`` refers to

    def run(self) -> Any:  # noqa: C901 - the scalar cases inline: this loop is the channel's hot path
        data, pos, end = self.data, 0, len(self.data)
        stack: list[tuple[int, int, list[Any], list[int]]] = []  # tag, count, children, indices holding refs
        unpack_u32, unpack_q, unpack_d = U32.unpack_from, I64.unpack_from, F64.unpack_from
        built = self.built
        while True:
            if pos >= end:
                raise WireError("truncated frame")
            code = data[pos]
            pos += 1
            has_ref = False
            if code in _CONSTANTS:
                value = _CONSTANTS[code]
            elif code in _SIZED:
                if pos + 4 > end:
                    raise WireError("truncated frame")
                n = unpack_u32(data, pos)[0]
                pos += 4
                if code == 0x40:  # @: a container sent earlier in this frame
                    if n >= len(built):
                        raise WireError("reference to a value not yet sent")
                    value, has_ref = built[n]
                elif code in _COMPOUND_CODES:
                    if n > end - pos:  # every child takes at least one byte
                        raise WireError("count larger than the frame")
                    if len(stack) >= MAX_DEPTH:
                        raise WireError("value nested too deeply")
                    if n:
                        stack.append((code, n, [], []))
                        continue
                    value, has_ref = self.build(code, [], [])
                    built.append((value, has_ref))
                else:
                    if n > end - pos or (code == 0x49 and n > MAX_INT_BYTES):
                        raise WireError("truncated frame or integer too large")
                    raw = data[pos:pos + n]
                    pos += n
                    if code == 0x73:  # s
                        value = raw.decode("utf-8", "surrogatepass")
                    elif code == 0x62:  # b
                        value = raw
                    else:  # I
                        value = int.from_bytes(raw, "little", signed=True)
            elif code == 0x69:  # i
                if pos + 8 > end:
                    raise WireError("truncated frame")
                value = unpack_q(data, pos)[0]
                pos += 8
            elif code == 0x66:  # f
                if pos + 8 > end:
                    raise WireError("truncated frame")
                value = unpack_d(data, pos)[0]
                pos += 8
            elif code == 0x63:  # c
                if pos + 16 > end:
                    raise WireError("truncated frame")
                value = complex(*F64X2.unpack_from(data, pos))
                pos += 16
            else:
                raise WireError(f"unknown tag {bytes((code,))!r}")
            while stack:
                tag, count, children, refs = stack[-1]
                if has_ref:
                    refs.append(len(children))
                children.append(value)
                if len(children) < count:
                    break
                stack.pop()
                value, has_ref = self.build(tag, children, refs)
                built.append((value, has_ref))
            else:
                if pos != end:
                    raise WireError("trailing bytes")
                return value

    def build(self, code: int, v: list[Any], refs: list[int]) -> tuple[Any, bool]:  # noqa: C901 - one per type
        """The value of a compound from its children ``v``; ``refs``: which children hold a reference."""
        has_ref = bool(refs)
        if code == 0x74:  # t
            return tuple(v), has_ref
        if code == 0x6C:  # l
            return v, has_ref
        if code == 0x52:  # R
            if len(v) != 2 or type(v[0]) is not str or type(v[1]) is not tuple:
                raise WireError("bad reference")
            return self.on_ref(v[0], v[1]), True
        if code in (0x53, 0x5A):  # S Z
            self.keys_are_data(refs)
            return (set(v) if code == 0x53 else frozenset(v)), False
        if code in (0x64, 0x4F, 0x43, 0x55):  # d O C U
            factory = None
            first_key = 0
            if code == 0x55:
                if not v or not (v[0] is None or (type(v[0]) is str and v[0] in FACTORIES)):
                    raise WireError("bad defaultdict factory")
                factory, v, first_key = FACTORIES.get(v[0]), v[1:], 1
            if len(v) % 2:
                raise WireError("odd dict")
            self.keys_are_data([i for i in refs if i >= first_key and (i - first_key) % 2 == 0])
            pairs = zip(v[0::2], v[1::2])
            if code == 0x64:
                return dict(pairs), has_ref
            if code == 0x4F:
                return collections.OrderedDict(pairs), has_ref
            if code == 0x43:
                c = collections.Counter()
                dict.update(c, pairs)
                return c, has_ref
            return collections.defaultdict(factory, pairs), has_ref
        if code == 0x51:  # Q
            if not v or not (v[0] is None or (type(v[0]) is int and 0 <= v[0] <= len(self.data))):
                raise WireError("bad deque")
            return collections.deque(v[1:], v[0]), has_ref
        if code in (0x72, 0x41):  # r A
            if len(v) != 3 or has_ref:
                raise WireError("bad range/slice")
            if code == 0x72:
                if not all(type(x) is int for x in v):
                    raise WireError("bad range")
                return range(*v), False
            return slice(*v), False
        if code == 0x56:  # V
            if len(v) != 2 or type(v[0]) is not str or type(v[1]) is not str or v[0] not in TEXT_TYPES:
                raise WireError("bad text value")
            if len(v[1]) > 10_000:
                raise WireError("text value too long")
            return TEXT_TYPES[v[0]][2](v[1]), False
        if code in (0x6E, 0x67):  # n g
            return _numpy(code, v), False
        if code == 0x58:  # X
            if len(v) not in (4, 5) or type(v[1]) is not str or type(v[2]) is not tuple or type(v[3]) is not dict:
                raise WireError("bad exception")
            exc = self.on_exception(v[0], v[1], v[2], v[3])
            if len(v) == 5 and isinstance(v[4], BaseException):  # ``raise ... from err``: the cause, as received
                exc.__cause__ = v[4]
            return exc, has_ref
        if code == 0x50:  # P
            if len(v) != 3 or type(v[1]) is not tuple or type(v[2]) is not tuple or len(v[1]) != len(v[2]):
                raise WireError("bad namedtuple")
            return namedtuple_value(v[0], v[1], v[2]), has_ref
        if code == 0x57:  # W
            if len(v) != 2 or v[0] not in ("keys", "items", "values") or type(v[1]) is not list:
                raise WireError("bad view")
            if v[0] != "values":
                self.keys_are_data([i for i in refs if i >= 1])
            return _view(v[0], v[1]), has_ref
        if code == 0x59:  # Y
            if len(v) != 1 or type(v[0]) is not bytes:
                raise WireError("bad bytearray")
            return bytearray(v[0]), False
        if code == 0x4B:  # K
            if len(v) != 1 or type(v[0]) is not dict or not all(type(k) is str and k.isidentifier() for k in v[0]):
                raise WireError("bad namespace")
            return types.SimpleNamespace(**v[0]), has_ref
        raise WireError(f"unknown tag {bytes((code,))!r}")

    def keys_are_data(self, refs: list[int]) -> None:
        """Keys of sets and dicts must be data: hashing another side's object would call into it mid-decode.
        ``refs``: the keys that hold a reference."""
        if refs and not self.hash_refs:
            raise WireError("a set element or dict key refers to the other side's object")


_COMPOUND_CODES = frozenset(b"ltSZdOCUQrAVngXPWKYR")
_SIZED = _COMPOUND_CODES | frozenset(b"@sbI")  # a u32 follows the tag
_CONSTANTS = {ord("N"): None, ord("T"): True, ord("F"): False, ord("E"): Ellipsis}




def _view(kind: str, items: list[Any]) -> Any:
    if kind == "keys":
        return dict.fromkeys(items).keys()
    if kind == "items":
        if not all(type(p) is tuple and len(p) == 2 for p in items):
            raise WireError("bad items view")
        return dict(items).items()
    return dict(enumerate(items)).values()


def _numpy(code: int, v: list[Any]) -> Any:
    import numpy  # noqa: PLC0415 - optional: only for an array

    if code == 0x67:  # g: a scalar
        if len(v) != 2 or v[0] not in NUMPY_DTYPES or type(v[1]) is not bytes:
            raise WireError("bad numpy scalar")
        dt = numpy.dtype(v[0])
        if len(v[1]) != dt.itemsize:
            raise WireError("bad numpy scalar size")
        return numpy.frombuffer(v[1], dtype=dt)[0]
    if len(v) != 3 or v[0] not in NUMPY_DTYPES or type(v[1]) is not tuple or type(v[2]) is not bytes:
        raise WireError("bad numpy array")
    shape = v[1]
    if len(shape) > 32 or not all(type(d) is int and 0 <= d < (1 << 31) for d in shape):
        raise WireError("bad numpy shape")
    dt = numpy.dtype(v[0])
    if math.prod(shape) * dt.itemsize != len(v[2]):
        raise WireError("numpy size mismatch")
    return numpy.frombuffer(v[2], dtype=dt).reshape(shape).copy()


_NT_CACHE: dict[tuple[str, tuple[str, ...]], type] = {}


def namedtuple_value(typename: Any, fields: tuple, values: tuple) -> tuple:
    """A namedtuple with the sender's type name and fields (validated identifiers), equal to the plain tuple."""
    ok = type(typename) is str and len(typename) <= MAX_NAME and typename.isidentifier() and len(fields) <= 255 \
        and all(type(f) is str and f.isidentifier() and not f.startswith("_") for f in fields)
    if not ok:
        return tuple(values)
    key = (typename, tuple(fields))
    cls = _NT_CACHE.get(key)
    if cls is None:
        try:
            cls = collections.namedtuple(typename, fields)
        except (TypeError, ValueError):
            return tuple(values)
        if len(_NT_CACHE) < 512:
            _NT_CACHE[key] = cls
    return cls(*values)


def make_exception(cls: Any, message: str, args: tuple, attrs: dict) -> BaseException:
    """An exception of a builtin class (named from the fixed list) or of a class the receiving side rebuilt."""
    if type(cls) is str:
        cls = builtin_exception(cls) or Exception
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        raise WireError("not an exception class")
    exc = cls.__new__(cls)
    try:
        exc.args = args
    except (AttributeError, TypeError):
        pass
    for k, val in list(attrs.items())[:32]:
        if type(k) is str and k.isidentifier() and not k.startswith("_"):
            try:
                object.__setattr__(exc, k, val)
            except (AttributeError, TypeError):
                pass
    if not getattr(cls, "_sbx_rebuilt", False) or not message:
        return exc
    try:
        object.__setattr__(exc, "_sbx_message", message)
    except (AttributeError, TypeError):
        pass
    return exc


def rebuilt_exception_class(name: Any, bases: tuple[type, ...]) -> type:
    """A class standing for an exception class of the other side: same name, same (rebuilt or builtin) bases;
    ``str()`` of its instances is the message the other side computed."""
    ok = tuple(b for b in bases if isinstance(b, type) and issubclass(b, BaseException)) or (Exception,)
    name = name if type(name) is str and name.isidentifier() and len(name) <= MAX_NAME else "CandidateError"
    ns = {"__module__": SOLUTION_MODULE, "_sbx_rebuilt": True, "__str__": _rebuilt_str}
    try:
        return type(name, ok, ns)
    except TypeError:  # incompatible layouts: keep the name and the first base's meaning
        return type(name, ok[:1], ns)


def _rebuilt_str(self: BaseException) -> str:
    message = self.__dict__.get("_sbx_message")
    return message if type(message) is str else BaseException.__str__(self)
