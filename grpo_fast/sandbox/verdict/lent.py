"""The program's side of what the test lent it: each use of a ``Judged`` object is a request to the judge.

A container read from a test's object during a call (``cart.items``) arrives as a copy; it stays one copy for the
whole call, and at the call's end, if the program changed it, it goes back to the test's object (``put_back``).
"""

from __future__ import annotations

import collections
import copy
from typing import Any

from .channel import Channel

IN_PLACE = (list, dict, set, bytearray, collections.deque)  # containers a side may change in place
# containers read from the test's objects during the current call: (object, name, value, value as read)
_FETCHED: dict[tuple[int, str], tuple[Any, str, Any, Any]] = {}


def put_back() -> None:
    """At the end of a call, containers of the test's objects that the program changed go back (``setattr``), as
    if the program had changed the test's own (``cart.items.append(x)``)."""
    while _FETCHED:
        obj, name, value, before = _FETCHED.popitem()[1]
        try:
            if value != before:
                obj.__setattr__(name, value)
        except Exception:  # noqa: BLE001, S110 - an object the test lent read-only (a stdlib one): nothing to do
            pass


_LENT_METADATA = frozenset({"__name__", "__qualname__", "__doc__", "__module__"})  # what functools.wraps reads


class Judged:
    """A judge object the test lent the program (a function, an iterator...): every use is a request to the judge."""

    __slots__ = ("_sbx_jid", "_sbx_chan", "__weakref__")

    def __init__(self, jid: int, channel: Channel) -> None:
        object.__setattr__(self, "_sbx_jid", jid)
        object.__setattr__(self, "_sbx_chan", channel)

    def _sbx(self, op: str, *args: Any) -> Any:
        return object.__getattribute__(self, "_sbx_chan").request(op, self, *args)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._sbx("call", args, kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name not in _LENT_METADATA:
            raise AttributeError(name)  # the judge lends no internals; copy and friends look for these
        key = (object.__getattribute__(self, "_sbx_jid"), name)
        if key in _FETCHED:  # the same container for the whole call: every change lands in one copy
            return _FETCHED[key][2]
        value = self._sbx("getattr", name)
        if type(value) in IN_PLACE:  # a container of the test's object (``cart.items``): written back (``put_back``)
            _FETCHED[key] = (self, name, value, copy.deepcopy(value))
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        self._sbx("setattr", name, value)

    def __copy__(self) -> Judged:  # a lent object is the test's: a copy of it is itself, as for a function
        return self

    def __deepcopy__(self, memo: Any) -> Judged:
        return self

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

    def __await__(self) -> Any:
        """A coroutine of the test's, awaited by the program: the judge runs it to its end (``connection``)."""
        return self._sbx("await")
        yield  # a generator: ``await`` takes its return value


for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    setattr(Judged, f"__{_name}__", lambda self, other, _n=_name: self._sbx("cmp", _n, other))
