"""A program's classes as classes of the judge's, so that type identity holds in a test as in one interpreter.

For each class the program defines, the judge makes one class of its own (``program_class``), a subclass of
``proxy.Remote`` (or of ``RemoteValue`` for a subclass of a builtin type) named like the program's, and the program's
instances of that class arrive as instances of it: ``type(p) is Point``, ``type(p).__name__ == 'Point'``,
``{Add: f}[type(op)]``, ``type(b) is not Animal`` all hold. Only the names cross, as data: the judge's class has no
attribute, method or base of the program's; every use is still a request (``Point(1, 2)`` and ``Point.origin()`` are
calls of the program's class, ``isinstance(p, Shape)`` and ``issubclass(Circle, Shape)`` are answered by the
program, as for any proxy). A program could make ``type(x).__name__`` say anything: so could naming its class so.
"""

from __future__ import annotations

from typing import Any

from .proxy import Remote, forwarded_name

# the program's; ``__mro__`` and ``__dict__`` stay the stand-in's own (the ABC machinery reads them): a failed test
# that reads a program class's ``__mro__`` is counted as outside the design (``judge.outside_rule``)
_FORWARDED_DUNDERS = frozenset({"__doc__", "__bases__"})
MAX_CLASSES = 10_000  # stand-ins per job; beyond, a program's instances are plain proxies (no type identity)


class RemoteClass(type):
    """The metaclass of the judge's stand-ins for a program's classes (``program_class``)."""

    def __new__(mcls, name: str, bases: tuple, ns: dict, **kw: Any) -> RemoteClass:
        if "_sbx_class_hid" not in ns:  # a test subclassing a program class: its instances would be the program's
            for base in bases:
                if isinstance(base, RemoteClass):
                    type.__getattribute__(base, "_sbx_class_conn").note("a test subclassing a program class")
            raise TypeError(f"a test cannot subclass a program class ({name})")
        return super().__new__(mcls, name, bases, ns, **kw)

    def _sbx_request(cls, op: str, *args: Any) -> Any:
        return type.__getattribute__(cls, "_sbx_class_conn").request(op, cls, *args)

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return type.__getattribute__(cls, "_sbx_class_conn").call(cls, args, kwargs)

    def __getattribute__(cls, name: str) -> Any:
        """Public names (class attributes, class and static methods) and the class's ``__mro__``, ``__bases__``,
        ``__doc__`` and ``__dict__`` are the program's; its name, qualified name and module are this class's own."""
        if type(name) is str and not name.startswith("_sbx") and (
                (forwarded_name(name) and not name.startswith("__")) or name in _FORWARDED_DUNDERS):
            return type.__getattribute__(cls, "_sbx_request")("getattr", name)
        return type.__getattribute__(cls, name)

    def __setattr__(cls, name: str, value: Any) -> None:
        if not forwarded_name(name) or name.startswith("__"):
            raise AttributeError(f"a test may not set {name!r} on a program class")
        cls._sbx_request("setattr", name, value)

    def __delattr__(cls, name: str) -> None:
        if not forwarded_name(name) or name.startswith("__"):
            raise AttributeError(f"a test may not delete {name!r} on a program class")
        cls._sbx_request("delattr", name)

    def __instancecheck__(cls, obj: Any) -> bool:
        conn = type.__getattribute__(cls, "_sbx_class_conn")
        return type(obj) is cls or (isinstance(obj, Remote) and conn.request("isinstance", obj, cls) is True)

    def __subclasscheck__(cls, sub: Any) -> bool:
        conn = type.__getattribute__(cls, "_sbx_class_conn")
        return sub is cls or (isinstance(sub, RemoteClass) and conn.request("issubclass", sub, cls) is True)

    # what the program's class (an Enum, a class with a metaclass) does as an object
    def __iter__(cls) -> Any:
        it = cls._sbx_request("iter")
        return iter(it) if not isinstance(it, Remote) else it.__iter__()

    def __len__(cls) -> int:
        value = cls._sbx_request("len")
        if type(value) is not int:
            raise TypeError("the program's __len__ did not return an int")
        return value

    def __getitem__(cls, key: Any) -> Any:
        return cls._sbx_request("getitem", key)

    def __contains__(cls, item: Any) -> bool:
        if isinstance(item, (Remote, RemoteClass)):
            return cls._sbx_request("contains", item) is True
        type.__getattribute__(cls, "_sbx_class_conn").note(
            "a plain value's membership in a program object is checked by iterating it")
        return any(x is item or x == item for x in cls)


def class_handle(cls: RemoteClass) -> int:
    """The program-side handle of the program class ``cls`` stands for."""
    return type.__getattribute__(cls, "_sbx_class_hid")


def program_class(conn: Any, hid: int, name: str, qualname: str, base: type) -> RemoteClass:
    """The judge's class for the program's class ``hid``: ``base`` is ``Remote`` or ``RemoteValue``."""
    name = name if name.isidentifier() else "ProgramClass"
    ns = {"__slots__": (), "__module__": "solution", "__qualname__": qualname or name, "__doc__": None,
          "_sbx_class_hid": hid, "_sbx_class_conn": conn}
    return RemoteClass(name, (base,), ns)
