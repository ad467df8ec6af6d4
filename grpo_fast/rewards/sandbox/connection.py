"""Judge side of the channel: one job's connection to the candidate's process.

It sends requests and decodes replies (restricted, see ``wire``), keeps one proxy per candidate object (so
identity holds), rebuilds the candidate's exception classes as real ones (so ``except MyError`` works), copies
in-place changes of mutable call arguments back, and serves the candidate's requests about judge objects the test
lent it -- only what each kind of object allows.
"""

from __future__ import annotations

import collections
import importlib
import io
import operator
import pickle
import sys
import types
from typing import Any

from . import wire
from .channel import Channel
from .proxy import Remote, RemoteValue, awaited, handle_of
from .wire import SETUP_MODULE, SOLUTION_MODULE, Deadline, Lost, Stream

_NO_IMPORT = frozenset({"antigravity", "this", "__hello__", "__phello__", "idlelib", "turtle", "turtledemo",
                        "tkinter", "webbrowser", "pydoc", "ensurepip", "venv", "lib2to3", "test", "__main__"})
_OWN_PACKAGE = __name__.split(".")[0]  # "grpo_fast_sandbox" in the zygote, "grpo_fast" when imported normally
_MUTABLE = (list, dict, set, bytearray, collections.deque)
_CONTAINERS = frozenset({list, tuple, dict, set, bytearray, collections.deque, collections.OrderedDict,
                         collections.Counter, collections.defaultdict})


def _mutables(root: Any, depth: int = 4) -> list[Any]:
    """Mutable containers among call arguments (a few levels deep), in a fixed order, each once."""
    out: list[Any] = []
    seen: set[int] = set()
    np = sys.modules.get("numpy")
    mutable = _MUTABLE + (np.ndarray,) if np is not None else _MUTABLE

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


def _sync(mine: Any, new: Any, mapping: dict[int, Any]) -> None:
    """Make the judge's container hold what the candidate's copy holds after the call."""
    same = mapping.get
    np = sys.modules.get("numpy")
    if np is not None and isinstance(mine, np.ndarray):
        if isinstance(new, np.ndarray) and new.shape == mine.shape:
            mine[...] = new
    elif isinstance(mine, bytearray) and isinstance(new, (bytes, bytearray)):
        mine[:] = new
    elif isinstance(mine, list) and isinstance(new, list):
        mine[:] = [same(id(x), x) for x in new]
    elif isinstance(mine, dict) and isinstance(new, dict):
        mine.clear()
        mine.update({k: same(id(v), v) for k, v in new.items()})
    elif isinstance(mine, set) and isinstance(new, (set, frozenset)):
        mine.clear()
        mine.update(new)
    elif isinstance(mine, collections.deque) and isinstance(new, (collections.deque, list)):
        mine.clear()
        mine.extend(same(id(x), x) for x in new)


class Connection:
    """The judge's end of one job: requests, proxies, exception classes, and objects lent to the candidate."""

    def __init__(self, sock: Any, deadline: float) -> None:
        self.proxies: dict[int, Remote] = {}
        self.exc_classes: dict[int, type] = {}
        self.exc_hids: dict[int, int] = {}
        self.local: list[Any] = []
        self.local_ids: dict[int, int] = {}
        self.dead = ""  # why the candidate can no longer answer ("timeout", "candidate process lost ...")
        self.decoding = 0  # a crafted pickle must not make the decoder call a proxy or read its attributes
        self.markers = {"ref": self.proxy, "jref": self.local.__getitem__, "plain": wire.plain,
                        "named": wire.named, "view": wire.view, "error": wire.error, "exc_class": self.exc_class,
                        "stdref": self.stdref, "awaitable": lambda hid, kind: awaited(self.proxy(hid, kind))}
        stream = Stream(sock, max_frame=16 << 20)
        stream.deadline = deadline
        self.channel = Channel(stream, self.dumps, self.loads, self.serve)

    # -- requests
    def request(self, op: str, *args: Any) -> Any:
        if self.dead:
            raise Lost(self.dead)
        if self.decoding and op not in ("hash", "cmp", "value"):  # building a set or dict of them is fine
            raise pickle.UnpicklingError("candidate objects cannot be used while decoding")
        try:
            return self.channel.request(op, *args)
        except Lost as err:
            self.dead = self.dead or f"candidate process lost ({err})"
            raise
        except Deadline:
            self.dead = "timeout"
            raise

    def call(self, fn: Remote, args: tuple, kwargs: dict) -> Any:
        muts = _mutables((args, kwargs))
        capture = sys.stdout is not sys.__stdout__  # the test redirected stdout: it wants what the call prints
        reply = self.request("call", fn, args, kwargs, muts, capture)
        if type(reply) is not tuple or len(reply) != 3:
            raise TypeError("malformed call reply")
        result, new, printed = reply
        if capture and type(printed) is str and printed:
            sys.stdout.write(printed)
        if type(new) is list and len(new) == len(muts):
            mapping = {id(n): m for m, n in zip(muts, new)}
            for m, n in zip(muts, new):
                _sync(m, n, mapping)
            result = mapping.get(id(result), result)
        return result

    def next_items(self, it: Remote, n: int) -> tuple[list, bool, BaseException | None]:
        reply = self.request("next", it, n)
        if type(reply) is not tuple or len(reply) != 3 or type(reply[0]) is not list or type(reply[1]) is not bool:
            raise TypeError("malformed iterator reply")
        exc = reply[2] if isinstance(reply[2], BaseException) else None
        return reply[0], reply[1], exc

    # -- decoding
    def loads(self, data: bytes) -> Any:
        self.decoding += 1
        try:
            return wire.loads_restricted(data, self.markers)
        finally:
            self.decoding -= 1

    def proxy(self, hid: int, kind: str, base: str = "") -> Remote:
        p = self.proxies.get(hid)
        if p is None:
            t = wire.builtin_base_named(base)
            cls = Remote if t is None else RemoteValue
            p = self.proxies[hid] = cls.make(self, int(hid), str(kind)[:100], t)
        return p

    def exc_class(self, hid: int, module: str, qualname: str, bases: tuple) -> type:
        cls = self.exc_classes.get(hid)
        if cls is None:
            real = resolve(str(module), str(qualname)) if module != SOLUTION_MODULE else None
            if isinstance(real, type) and issubclass(real, BaseException):
                cls = real
            else:
                name = str(qualname).rsplit(".", 1)[-1][:100] or "CandidateError"
                ok = tuple(b for b in bases if isinstance(b, type) and issubclass(b, BaseException)) or (Exception,)
                try:
                    cls = type(name, ok, {"__module__": SOLUTION_MODULE})
                except TypeError:  # incompatible bases: keep the name and the first base's meaning
                    cls = type(name, ok[:1], {"__module__": SOLUTION_MODULE})
            self.exc_classes[hid] = cls
            self.exc_hids[id(cls)] = hid
        return cls

    def stdref(self, module: str, qualname: str, hid: int, kind: str) -> Any:
        """Modules by name (the judge's own copy) and the setup's objects; anything else stays a proxy."""
        if module == SETUP_MODULE or not qualname:
            obj = resolve(str(module), str(qualname))
            if obj is not None:
                return obj
        return self.proxy(hid, kind)

    # -- encoding
    def dumps(self, obj: Any) -> bytes:
        buf = io.BytesIO()
        JudgePickler(buf, self).dump(obj)
        return buf.getvalue()

    def lend(self, obj: Any) -> int:
        jid = self.local_ids.get(id(obj))
        if jid is None:
            jid = self.local_ids[id(obj)] = len(self.local)
            self.local.append(obj)
        return jid

    # -- callbacks: the candidate using what the test lent it
    def serve(self, op: str, args: tuple) -> Any:
        """A request about a judge object. Only what the test lent, only what its kind allows: a function may be
        called, an iterator iterated; attributes only of instances of the test's or setup's own classes, and
        never private ones (no route to frames, code objects or the test's namespace)."""
        target = args[0] if args else None
        fn = _CALLBACKS.get(op)
        if fn is None or self.local_ids.get(id(target)) is None or not _allowed(target, op, args):
            raise PermissionError(f"the candidate may not {op} this judge object")
        return fn(*args)


_COMPARE = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
            "ge": operator.ge}
_CALLBACKS: dict[str, Any] = {
    "call": lambda f, a, k: f(*a, **k), "getattr": getattr, "setattr": setattr, "iter": iter, "next": next,
    "len": len, "getitem": operator.getitem, "setitem": operator.setitem, "contains": lambda o, x: x in o,
    "bool": bool, "repr": repr, "str": str, "hash": hash, "cmp": lambda o, name, x: _COMPARE[name](o, x),
}


def _allowed(target: Any, op: str, args: tuple) -> bool:
    if op in ("repr", "str", "hash", "bool"):
        return True
    if op == "call":
        return callable(target) and type(args[1]) is tuple and type(args[2]) is dict
    if op in ("iter", "next"):
        return True
    if type(target).__module__ not in ("__main__", SETUP_MODULE):  # the test's own classes only
        return False
    if op in ("getattr", "setattr"):
        return type(args[1]) is str and not args[1].startswith("_")
    return op != "cmp" or args[1] in _COMPARE


def resolve(module: str, qualname: str) -> Any:
    """The judge's own module or setup object, else None. Only already-loaded modules and top-level stdlib
    modules (a short list of ones with side effects excepted) are imported for it; the sandbox's own modules are
    never handed out."""
    if not module or module in (SOLUTION_MODULE, "__main__") or module.split(".")[0] == _OWN_PACKAGE:
        return None
    if module not in sys.modules:
        if "." in module or module not in sys.stdlib_module_names or module in _NO_IMPORT:
            return None
        try:
            importlib.import_module(module)
        except Exception:  # noqa: BLE001 - an unimportable name is simply not resolved
            return None
    return wire.lookup(module, qualname) if qualname else sys.modules.get(module)


class JudgePickler(pickle.Pickler):
    """Call arguments: data by value; candidate objects by handle; judge objects that are not data are lent."""

    def __init__(self, file: Any, conn: Connection) -> None:
        super().__init__(file, protocol=5)
        self.conn = conn

    def reducer_override(self, obj: Any) -> Any:
        t = type(obj)
        if isinstance(obj, Remote):
            return wire.ref, (handle_of(obj), "")
        if isinstance(obj, type):
            hid = self.conn.exc_hids.get(id(obj))
            if hid is not None:
                return wire.ref, (hid, "")
        if wire.is_value_class(t) or (t.__module__.startswith("numpy") and _numpy_data(obj)):
            return NotImplemented
        if isinstance(obj, BaseException):  # an assertion's message may hold an expected value: not sent
            args = () if isinstance(obj, AssertionError) or type(obj.args) is not tuple else obj.args
            return wire.jerror, (t.__name__, args)
        if isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType)):
            mod = getattr(obj, "__module__", None)
            if mod not in (None, "__main__") and wire.lookup(mod, getattr(obj, "__qualname__", "")) is obj:
                return NotImplemented  # the candidate side has (or can import) the same object
        elif t is not types.ModuleType:
            kind = wire.view_kind(obj)
            if kind is not None:
                return wire.view, (kind, list(obj))
            if issubclass(t, tuple) and isinstance(getattr(t, "_fields", None), tuple):
                return wire.named, (t.__name__, tuple(map(str, t._fields)), tuple.__getitem__(obj, slice(None)))
            if wire.builtin_base(t) is not None:
                return wire.plain, (wire.base_value(obj),)
        return wire.jref, (self.conn.lend(obj),)


def _numpy_data(obj: Any) -> bool:
    np = sys.modules.get("numpy")
    return np is not None and isinstance(obj, (np.ndarray, np.generic, np.dtype))
