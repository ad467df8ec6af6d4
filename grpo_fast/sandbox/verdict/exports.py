"""What each of the program's objects becomes on the wire (the program's side): data by value, the rest by handle.

A handle is a number this side issues for the job (``export``); the judge is told, with it, the object's kind, its
builtin base and, for an instance of a class the program defined, that class (``class_ref``: the judge makes a class
of its own for it, ``classes``). Exceptions go as their class, message, args, public attributes and cause.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from . import wire
from .abcs import declared_abcs
from .encoder import exception_fields
from .lent import Judged
from .wire import ASYNC_FUNCTION, SETUP_MODULE, SOLUTION_MODULE, Plain, Ref

_CO_COROUTINE = 0x80  # inspect.CO_COROUTINE: an ``async def`` function


class Handle:
    """A value the program sends by handle although it is data: a mutable container reached inside a program
    object (``stack.items``: the test may change it in place), or a reply too large for one frame."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class Exports:
    """The program's objects by handle: kept alive for the whole job, so ids are never reused."""

    def __init__(self) -> None:
        self.objs: list[Any] = []
        self.ids: dict[int, int] = {}
        self.class_refs: dict[int, Ref] = {}  # the program's classes as the judge is told of them (kept alive: objs)

    def export(self, obj: Any) -> int:
        hid = self.ids.get(id(obj))
        if hid is None:
            hid = self.ids[id(obj)] = len(self.objs)
            self.objs.append(obj)  # kept alive for the whole job, so ids are never reused
        return hid

    def hook(self, obj: Any, by_handle: bool) -> Ref | Plain:  # noqa: C901 - one branch per kind of object
        t = type(obj)
        if t is Judged:
            return Ref("j", (object.__getattribute__(obj, "_sbx_jid"),))
        if t is Handle:
            obj, t = obj.value, type(obj.value)
            base = wire.builtin_base(t)
            return Ref("h", (self.export(obj), t.__qualname__[:100], base.__name__ if base is not None else "",
                             *self.class_of(t)))
        kind = t.__qualname__[:100]
        if t is types.FunctionType and obj.__code__.co_flags & _CO_COROUTINE:
            kind = ASYNC_FUNCTION  # ``asyncio.iscoroutinefunction(f)`` holds in the test
        if by_handle:
            return Ref("h", (self.export(obj), kind, ""))
        if isinstance(obj, type) and issubclass(obj, BaseException):
            return self.exception_class(obj)
        if isinstance(obj, type) and _program_class(obj):
            return self.class_ref(obj)
        if t is types.CoroutineType:
            return Ref("a", (self.export(obj), kind))
        if t is types.ModuleType:
            return Ref("m", (str(getattr(obj, "__name__", "")), self.export(obj)))
        if t.__module__ == "numpy":  # object, string or record arrays and scalars: as Python data
            if hasattr(obj, "tolist"):
                return Plain(obj.tolist())
        qual = getattr(obj, "__qualname__", None) if isinstance(obj, (type, types.FunctionType)) else None
        if qual and getattr(obj, "__module__", None) == SETUP_MODULE and _setup_attr(qual) is obj:
            return Ref("s", (qual, self.export(obj)))  # the dataset's own class or function: the judge's copy
        if t.__module__ == SETUP_MODULE and _setup_attr(t.__qualname__) is t and wire.builtin_base(t) is None:
            attrs = getattr(obj, "__dict__", None)
            if type(attrs) is dict and all(type(k) is str for k in attrs):
                return Ref("g", (t.__qualname__, dict(attrs)))  # an instance of the dataset's class: by value
        base = wire.builtin_base(t)
        return Ref("h", (self.export(obj), kind, base.__name__ if base is not None else "", *self.class_of(t)))

    def class_ref(self, cls: type) -> Ref:
        """A class the program defined: the judge makes a class of its own for it (``classes``), from its names
        and the container ABCs it is a subclass of."""
        ref = self.class_refs.get(id(cls))
        if ref is None:
            base = wire.builtin_base(cls)
            ref = self.class_refs[id(cls)] = Ref("c", (
                self.export(cls), cls.__name__[:wire.MAX_NAME], cls.__qualname__[:wire.MAX_NAME],
                base.__name__ if base is not None else "", declared_abcs(cls)))
        return ref

    def class_of(self, t: type) -> tuple:
        """An instance's class, where the program defined it: ``type(p) is Point`` holds in the test."""
        return (self.class_ref(t),) if _program_class(t) else ()

    def exception_class(self, cls: type) -> Ref:
        if wire.builtin_exception(cls.__name__) is cls:
            return Ref("e", (cls.__name__,))
        bases = tuple(self.exception_class(b) for b in cls.__bases__ if issubclass(b, BaseException))
        return Ref("x", (self.export(cls), cls.__qualname__[:200], bases, str(cls.__module__)[:200]))

    def exception(self, exc: BaseException) -> tuple:
        """Class, message, args, public attributes, and the cause (``raise ... from err``) where there is one."""
        _, message, args, attrs = exception_fields(exc)
        cause = exc.__cause__
        fields = (self.exception_class(type(exc)), message, args, attrs)
        return (*fields, cause) if isinstance(cause, BaseException) else fields


def by_hook(t: type) -> bool:
    """Judge objects, handles, and namedtuples (a program's namedtuple keeps its methods and class by handle)."""
    return t is Judged or t is Handle or (t is not tuple and issubclass(t, tuple) and hasattr(t, "_fields"))


def _program_class(cls: type) -> bool:
    return cls.__module__ == SOLUTION_MODULE and not issubclass(cls, BaseException)


def _setup_attr(qualname: str) -> Any:
    """A top-level object of the setup module by name (the dataset's code, run on both sides)."""
    mod = sys.modules.get(SETUP_MODULE)
    return vars(mod).get(qualname) if mod is not None and "." not in qualname else None
