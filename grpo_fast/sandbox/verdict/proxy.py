"""What the tests see instead of the candidate's objects, and the rule that keeps a lying object from passing.

An operator between a proxy and a judge value (``==``, ``<``, ``+``, ``in``...) is never sent to the candidate, so a
rigged ``__eq__`` never sees the expected value: ``proxy == plain`` is False, ordering and arithmetic raise
TypeError, ``plain in proxy`` iterates the proxy and compares here. Between two proxies (two candidate objects, e.g.
``Point(1, 2) == Point(1, 2)``) the operator is the candidate's: the test itself trusts the candidate's class.
Calls, attribute reads, ``len``, iteration, indexing and conversions (``str``, ``int``, ``bool``...) are forwarded:
their inputs are the test's inputs. Instances of subclasses of builtin types (an IntEnum member, ``class
Stack(list)``) keep their methods, but against judge values they compare and compute as their data, fetched fresh.

What is forwarded is an allow-list: the special methods this class implements in Python, attribute reads of
public names and of ``ATTRIBUTE_DUNDERS``. Any other special name (``__array_interface__``, ``__array_wrap__``,
``__array__``, ``__index__``, a library's own protocol...) is an AttributeError raised here, never a question to
the program: C code in the judge (numpy's, the buffer protocol's) cannot be handed a pointer, a layout or a
result of the program's choosing. The program's answer to a conversion must be the exact builtin type.
"""

from __future__ import annotations

import operator
import sys
from typing import Any, Protocol

from .iteration import Batched, anext_of, buffer_of
from .wire import ASYNC_FUNCTION


class Connection(Protocol):
    """What a proxy needs from the judge's end of the channel (``connection.Connection`` provides it)."""

    def request(self, op: str, *args: Any) -> Any: ...

    def call(self, fn: Remote, args: tuple, kwargs: dict) -> Any: ...

    def next_items(self, it: Remote, n: int) -> tuple[list, bool, BaseException | None]: ...

    def note(self, rule: str) -> None:
        """The operator rule kept a plain value from the program in this test (reported if the test fails)."""


ATTRIBUTE_DUNDERS = frozenset({"__name__", "__qualname__", "__doc__", "__module__", "__dict__"})  # read as data


def forwarded_name(name: str) -> bool:
    """An attribute name a test may ask the program for: public, or plain metadata; never a protocol's name."""
    return type(name) is str and (not name.startswith("_") or name in ATTRIBUTE_DUNDERS
                                  or (not name.startswith("__") and not name.endswith("_")))


class Remote:
    """A candidate object; every use the rules above allow is a request to the candidate's process."""

    __slots__ = ("_sbx_conn", "_sbx_hid", "_sbx_kind", "_sbx_buf", "__weakref__")

    def _sbx(self, op: str, *args: Any) -> Any:
        return self._sbx_conn.request(op, self, *args)

    def __repr__(self) -> str:
        return _exact(self._sbx("repr"), str, "__repr__")

    def __str__(self) -> str:
        return _exact(self._sbx("str"), str, "__str__")

    def __format__(self, spec: str) -> str:
        return _exact(self._sbx("format", spec), str, "__format__")

    def __getattr__(self, name: str) -> Any:
        if not forwarded_name(name):  # numpy's __array_interface__, __array_wrap__...: never the program's answer
            raise AttributeError(name)
        if name == "_is_coroutine" and self._sbx_kind == ASYNC_FUNCTION:  # asyncio.iscoroutinefunction's mark
            coroutines = sys.modules.get("asyncio.coroutines")
            if coroutines is not None:
                return getattr(coroutines, "_is_coroutine", None)
        return self._sbx("getattr", name)

    def __setattr__(self, name: str, value: Any) -> None:
        if not forwarded_name(name) or name in ATTRIBUTE_DUNDERS:
            raise AttributeError(f"a test may not set {name!r} on a program object")
        self._sbx("setattr", name, value)

    def __delattr__(self, name: str) -> None:
        if not forwarded_name(name) or name in ATTRIBUTE_DUNDERS:
            raise AttributeError(f"a test may not delete {name!r} on a program object")
        self._sbx("delattr", name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._sbx_conn.call(self, args, kwargs)

    def __getitem__(self, key: Any) -> Any:
        return self._sbx("getitem", key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._sbx("setitem", key, value)

    def __delitem__(self, key: Any) -> None:
        self._sbx("delitem", key)

    def __len__(self) -> int:
        return _exact(self._sbx("len"), int, "__len__")

    def __bool__(self) -> bool:  # the program's truth value: it could as well have returned True or False
        value = self._sbx("bool")
        if type(value) is not bool:
            raise TypeError("the program's __bool__ did not return a bool")
        return value

    def __hash__(self) -> int:
        value = self._sbx("hash")
        if type(value) is not int:
            raise TypeError("the program's __hash__ did not return an int")
        return value

    def __iter__(self) -> Any:
        it = self._sbx("iter")
        return Batched(it) if isinstance(it, Remote) else iter(it)

    def __next__(self) -> Any:
        buf = buffer_of(self)  # items a loop over this iterator fetched ahead and did not take
        if buf:
            return buf.popleft()
        items, done, exc = self._sbx_conn.next_items(self, 1)
        if items:
            return items[0]
        if exc is not None:
            raise exc
        raise StopIteration

    def __reversed__(self) -> Any:
        return self._sbx_conn.request("unary", "reversed", self)

    def __aiter__(self) -> Remote:
        return self

    def __anext__(self) -> Any:
        return anext_of(self)

    async def __aenter__(self) -> Any:
        return await self._sbx("method", "__aenter__", (), {})

    async def __aexit__(self, kind: Any, exc: Any, tb: Any) -> bool:
        """As ``__exit__``: the exception's class only, and no suppression."""
        asked = await self._sbx("method", "__aexit__", (kind, None, None), {})
        if kind is not None and issubclass(kind, Exception) and not issubclass(kind, AssertionError) and asked:
            self._sbx_conn.note("a program's context manager cannot suppress an exception raised in the test")
        return False

    def __contains__(self, item: Any) -> bool:
        if isinstance(item, Remote):
            return self._sbx("contains", item)
        self._sbx_conn.note("a plain value's membership in a program object is checked by iterating it")
        return any(x is item or x == item for x in self)

    def __enter__(self) -> Any:
        return self._sbx("method", "__enter__", (), {})

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> bool:
        """The program's ``__exit__`` runs (its clean-up), told only the exception's class, never its message or
        arguments (they may hold an expected value); whatever it answers, an exception goes on: no program hook
        swallows a test's failure, of any type. A test that meant the suppression is counted as outside the design."""
        asked = self._sbx("method", "__exit__", (kind, None, None), {})
        if kind is not None and issubclass(kind, Exception) and not issubclass(kind, AssertionError) and asked:
            self._sbx_conn.note("a program's context manager cannot suppress an exception raised in the test")
        return False

    def __instancecheck__(self, obj: Any) -> bool:
        return isinstance(obj, Remote) and self._sbx_conn.request("isinstance", obj, self)

    def __subclasscheck__(self, cls: Any) -> bool:
        return isinstance(cls, Remote) and self._sbx_conn.request("issubclass", cls, self)

    def __copy__(self) -> Any:
        return self._sbx("copy")

    def __deepcopy__(self, memo: Any) -> Any:
        return self._sbx("deepcopy")

    def __dir__(self) -> list[str]:
        return self._sbx("dir")

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError(f"a candidate object ({self._sbx_kind}) cannot be serialised by the judge")


def _binary(name: str, reflected: bool) -> Any:
    def op(self: Remote, other: Any) -> Any:
        if not isinstance(other, Remote):
            self._sbx_conn.note("arithmetic between a program object and a plain value")
            return NotImplemented  # never hand a judge value to a candidate operator
        a, b = (other, self) if reflected else (self, other)
        return self._sbx_conn.request("binop", name, a, b)
    return op


def _compare(name: str) -> Any:
    def op(self: Remote, other: Any) -> Any:
        if not isinstance(other, Remote):
            self._sbx_conn.note("a program object compared with a plain value")
            return NotImplemented
        return self._sbx_conn.request("cmp", name, self, other)
    return op


def _exact(value: Any, kind: type, hook: str) -> Any:
    """The program's answer to a conversion, if it is exactly the builtin type the protocol promises."""
    if type(value) is not kind:
        raise TypeError(f"the program's {hook} did not return a {kind.__name__}")
    return value


_CONVERSIONS = {"int": int, "float": float, "complex": complex, "trunc": int, "floor": int, "ceil": int}


def _unary(name: str) -> Any:
    kind = _CONVERSIONS.get(name)

    def op(self: Remote, *extra: Any) -> Any:
        value = self._sbx_conn.request("unary", name, self, *extra)
        return value if kind is None else _exact(value, kind, f"__{name}__")
    return op


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "lshift", "rshift", "and",
              "or", "xor", "divmod"):
    _op = _name + "_" if _name in ("and", "or") else _name
    setattr(Remote, f"__{_name}__", _binary(_op, False))
    setattr(Remote, f"__r{_name}__", _binary(_op, True))
for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    setattr(Remote, f"__{_name}__", _compare(_name))
for _name in ("neg", "pos", "abs", "invert", "int", "float", "complex", "round", "trunc", "floor", "ceil"):
    setattr(Remote, f"__{_name}__", _unary(_name))


_OPS = {name: getattr(operator, name) for name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow",
                                                    "matmul", "lshift", "rshift", "and_", "or_", "xor")}
_OPS["divmod"] = divmod


class RemoteValue(Remote):
    """A candidate object whose type subclasses a builtin one (``int``, ``str``, ``list``, ``dict``...).

    Its methods stay the candidate's (``stack.push(1)``), but against a judge value it compares, hashes, tests
    membership and computes as its data: the builtin base's copy of it, fetched fresh, used here. A ``str``
    subclass with a rigged ``__eq__`` therefore compares as the characters it holds. ``isinstance(x, list)`` holds.
    """

    __slots__ = ("_sbx_base",)

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # noqa: F811 - isinstance() falls back to __class__
        return object.__getattribute__(self, "_sbx_base")

    def _sbx_value(self) -> Any:
        value = self._sbx("value")
        if type(value) is not object.__getattribute__(self, "_sbx_base"):
            raise TypeError("the candidate sent a value of the wrong type")
        return value

    def __hash__(self) -> int:
        return hash(self._sbx_value())

    def __bool__(self) -> bool:
        return bool(self._sbx_value())

    def __contains__(self, item: Any) -> bool:
        if isinstance(item, Remote):
            return self._sbx("contains", item)
        return item in self._sbx_value()


def _value_binary(name: str, reflected: bool) -> Any:
    fn = _OPS[name]

    def op(self: RemoteValue, other: Any) -> Any:
        if isinstance(other, Remote):
            a, b = (other, self) if reflected else (self, other)
            return self._sbx_conn.request("binop", name, a, b)
        value = self._sbx_value()
        return fn(other, value) if reflected else fn(value, other)
    return op


def _value_compare(name: str) -> Any:
    fn = getattr(operator, name)

    def op(self: RemoteValue, other: Any) -> Any:
        if isinstance(other, Remote):
            return self._sbx_conn.request("cmp", name, self, other)
        return fn(self._sbx_value(), other)
    return op


for _name in _OPS:
    _dunder = _name.rstrip("_")
    setattr(RemoteValue, f"__{_dunder}__", _value_binary(_name, False))
    setattr(RemoteValue, f"__r{_dunder}__", _value_binary(_name, True))
for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    setattr(RemoteValue, f"__{_name}__", _value_compare(_name))


def new_proxy(cls: type, conn: Connection, hid: int, kind: str, base: type | None = None) -> Remote:
    """A proxy of class ``cls`` (``Remote``, ``RemoteValue`` or a program class's stand-in) for handle ``hid``.
    A function, not a method: a method's name would hide the program's attribute of the same name."""
    self = object.__new__(cls)
    for name, value in (("_sbx_conn", conn), ("_sbx_hid", hid), ("_sbx_kind", kind), ("_sbx_base", base)):
        if value is not None:
            object.__setattr__(self, name, value)
    return self


def handle_of(p: Remote) -> int:
    """The candidate-side handle a proxy stands for."""
    return object.__getattribute__(p, "_sbx_hid")


async def awaited(p: Remote) -> Any:
    """The judge's coroutine for a candidate coroutine: awaiting it runs the candidate's to completion there."""
    return p._sbx_conn.request("await", p)
