"""The standard library's container ABCs a program class may declare: the judge registers its class for the
program's under each (``classes``), so ``isinstance(obj, collections.abc.Mapping)`` holds in a test as in one
interpreter. A fixed table on both sides: a name from the program is looked up here, never anywhere else."""

from __future__ import annotations

import collections.abc

CONTAINER_ABCS: dict[str, type] = {name: getattr(collections.abc, name) for name in (
    "Mapping", "MutableMapping", "Sequence", "MutableSequence", "Set", "MutableSet", "Collection", "Container",
    "Iterable", "Iterator", "Reversible", "Sized", "Hashable", "Callable", "MappingView", "KeysView", "ItemsView",
    "ValuesView", "Awaitable", "AsyncIterable", "AsyncIterator")}


def declared_abcs(cls: type) -> tuple[str, ...]:
    """The names of the table's ABCs ``cls`` is a subclass of (the program's side)."""
    return tuple(name for name, abc in CONTAINER_ABCS.items() if issubclass(cls, abc))
