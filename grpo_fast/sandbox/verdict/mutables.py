"""Mutable containers a test hands the program by value, kept in step on both sides for the whole job.

A list the test passes to ``rotate(nums, k)``, or to ``Sorter(items)`` and later sorts through ``s.sort()``, lives
twice: the test's object in the judge and its copy in the program. Each side registers the containers under one
index per job; before a call the judge sends the test's changes, after it the program sends its own, and each side
updates its object in place (so identity holds: ``f(a) is a`` when the program returns what it received).
"""

from __future__ import annotations

import collections
import sys
from typing import Any

LIMIT = 256  # containers tracked per job; more are sent by value only
ELEMENTS = 20_000  # their total size: every call compares them, so a huge list is sent by value only
_MUTABLE = (list, dict, set, bytearray, collections.deque)
_CONTAINERS = frozenset({list, tuple, dict, set, bytearray, collections.deque, collections.OrderedDict,
                         collections.Counter, collections.defaultdict})


def _mutable_types() -> tuple[type, ...]:
    np = sys.modules.get("numpy")
    return _MUTABLE + (np.ndarray,) if np is not None else _MUTABLE


def find(root: Any, depth: int = 4) -> list[Any]:
    """Mutable containers inside ``root`` (a few levels deep), in a fixed order, each once."""
    out: list[Any] = []
    seen: set[int] = set()
    mutable = _mutable_types()

    def walk(x: Any, d: int) -> None:
        if isinstance(x, mutable):
            if id(x) in seen:
                return
            seen.add(id(x))
            out.append(x)
        if d <= 0:
            return
        if type(x) in (list, tuple, collections.deque):
            if any(k in _CONTAINERS or issubclass(k, mutable) for k in set(map(type, x))):
                for y in x:
                    walk(y, d - 1)
        elif isinstance(x, dict):
            for y in x.values():
                walk(y, d - 1)

    walk(root, depth)
    return out


def snapshot(m: Any, depth: int = 2) -> Any:
    """What ``m`` holds, by identity, and what the mutable containers inside it hold (``depth`` levels down), so
    that ``adj[1].append(3)`` counts as a change of ``adj``."""
    if isinstance(m, (set, frozenset)):
        return frozenset(m)
    if type(m).__module__ == "numpy":  # an ndarray
        return m.shape, m.tobytes()
    if isinstance(m, (bytes, bytearray)):
        return bytes(m)
    values = list(m.values()) if isinstance(m, dict) else m
    ids = tuple(map(id, m)) + (tuple(map(id, values)) if values is not m else ())  # a dict: its keys, then values
    inner = tuple(snapshot(x, depth - 1) for x in values if type(x) in _NESTED) if depth > 0 else ()
    return ids, inner


_NESTED = frozenset({list, dict, set, bytearray, collections.deque})


def changed(m: Any, before: Any) -> bool:
    return snapshot(m) != before


def sync(mine: Any, new: Any, same: dict[int, Any]) -> None:
    """Make ``mine`` hold what ``new`` (the other side's copy, just decoded) holds; ``same`` maps the decoded
    copies of other tracked containers to this side's objects, so nested containers keep their identity."""
    get = same.get
    np = sys.modules.get("numpy")
    if np is not None and isinstance(mine, np.ndarray):
        if isinstance(new, np.ndarray) and new.shape == mine.shape:
            mine[...] = new
    elif isinstance(mine, bytearray) and isinstance(new, (bytes, bytearray)):
        mine[:] = new
    elif isinstance(mine, list) and isinstance(new, list):
        mine[:] = [get(id(x), x) for x in new]
    elif isinstance(mine, dict) and isinstance(new, dict):
        mine.clear()
        mine.update({k: get(id(v), v) for k, v in new.items()})
    elif isinstance(mine, set) and isinstance(new, (set, frozenset)):
        mine.clear()
        mine.update(new)
    elif isinstance(mine, collections.deque) and isinstance(new, (collections.deque, list)):
        mine.clear()
        mine.extend(get(id(x), x) for x in new)


def _size(obj: Any) -> int:
    return int(getattr(obj, "size", 0)) if type(obj).__module__ == "numpy" else len(obj)


class Shared:
    """One side's tracked containers: index -> object, with the snapshot taken at the last exchange."""

    def __init__(self) -> None:
        self.objs: dict[int, Any] = {}
        self.ids: dict[int, int] = {}
        self.snaps: dict[int, Any] = {}
        self.elements = 0
        self.issued = 0  # indices are never reused within a job

    def add(self, obj: Any) -> int | None:
        """Track ``obj`` (judge side); its index, or None when the job tracks enough already."""
        if id(obj) in self.ids:
            return None
        self.issued += 1
        return self.issued if self.put(self.issued, obj) else None

    def put(self, idx: int, obj: Any) -> bool:
        """Track ``obj`` under the index the other side chose (program side); False when refused."""
        ok = type(idx) is int and 0 <= idx < (1 << 31) and idx not in self.objs and len(self.objs) < LIMIT \
            and isinstance(obj, _mutable_types()) and self.elements + _size(obj) <= ELEMENTS
        if ok:
            self.objs[idx], self.ids[id(obj)], self.snaps[idx] = obj, idx, snapshot(obj)
            self.elements += _size(obj)
        return ok

    def forget(self, indices: Any) -> None:
        """Stop tracking these (a plain function's arguments after its call)."""
        for idx in list(indices):
            obj = self.objs.pop(idx, None)
            if obj is not None:
                self.ids.pop(id(obj), None)
                self.snaps.pop(idx, None)
                self.elements -= _size(obj)

    def changes(self, also: Any = None) -> list[tuple[int, Any]]:
        """Tracked objects changed since the last exchange (and ``also``, if tracked); snapshots them anew."""
        out = []
        for idx, obj in self.objs.items():
            if obj is also or changed(obj, self.snaps[idx]):
                self.snaps[idx] = snapshot(obj)
                out.append((idx, obj))
        return out

    def apply(self, changes: Any) -> dict[int, Any]:
        """Take the other side's changes in place; returns decoded copy id -> this side's object."""
        if type(changes) is not list:
            return {}
        pairs = [(self.objs[c[0]], c[1]) for c in changes
                 if type(c) is tuple and len(c) == 2 and c[0] in self.objs]
        same = {id(new): mine for mine, new in pairs}
        for mine, new in pairs:
            sync(mine, new, same)
            self.snaps[self.ids[id(mine)]] = snapshot(mine)
        return same
