"""Judge side of the channel: one job's connection to the candidate's process.

It sends requests and decodes replies (restricted, see ``wire``), keeps one proxy per candidate object (so
identity holds), rebuilds the candidate's exception classes as real ones (so ``except MyError`` works), copies
in-place changes of mutable call arguments back, and serves the candidate's requests about judge objects the test
lent it -- only what each kind of object allows.
"""

from __future__ import annotations

import operator
import re
import sys
import types
import warnings
from typing import Any

from . import decoder, encoder, mutables, wire
from .abcs import CONTAINER_ABCS
from .channel import Channel
from .classes import MAX_CLASSES, RemoteClass, class_handle, program_class
from .iteration import ProgramStopped, as_generator
from .mutables import Shared
from .names import ProgramModule, own_module, setup_instance, setup_object
from .proxy import Remote, RemoteValue, awaited, handle_of, new_proxy
from .scratch import Scratch
from .wire import SETUP_MODULE, SOLUTION_MODULE, Deadline, Lost, Plain, Ref, Stream, WireError

_NO_CALL_EXTRAS = ((), "", "", ())  # a call reply's changes, output, errors and warnings when it leaves them out
_SHOW_WARNING = warnings._showwarnmsg_impl  # noqa: SLF001 - replaced while a test records warnings


class Connection:
    """The judge's end of one job: requests, proxies, exception classes, and objects lent to the candidate."""

    def __init__(self, sock: Any, deadline: float, shared_workdir: bool = False) -> None:
        self.proxies: dict[int, Remote] = {}
        self.classes: dict[int, RemoteClass] = {}  # the judge's classes for the program's (``classes``)
        self.generators: dict[int, Any] = {}  # the program's generators as the judge's (``iteration``), kept for
        self.generator_hids: dict[int, int] = {}  # the job: never closed by a finalizer, mid-request
        self.steps = False  # the job's tests send into or throw into generators: they are stepped one item at a time
        self.exc_classes: dict[int, type] = {}
        self.exc_hids: dict[int, int] = {}
        self.local: list[Any] = []
        self.local_ids: dict[int, int] = {}
        self.dead = ""  # why the candidate can no longer answer ("timeout", "candidate process lost ...")
        self.shared = Shared()
        self.rule = ""  # set when the operator rule kept a plain value from the program during the current test
        self.scratch = Scratch() if Scratch.usable() and not shared_workdir else None
        self.files_shared = shared_workdir or self.scratch is not None  # one directory, or two kept in step
        self.files = False  # the running test uses files: the working directories are kept in step (``scratch``)
        stream = Stream(sock, max_frame=wire.MAX_FRAME)
        stream.deadline = deadline
        self.channel = Channel(stream, self.dumps, self.loads, self.serve)

    # -- requests
    def note(self, rule: str) -> None:
        self.rule = self.rule or rule

    def loaded(self) -> Any:
        """The outcome of the program's load, which its process sends unasked (``channel.LOAD``)."""
        return self.request(None)

    def request(self, op: str | None, *args: Any) -> Any:
        """A request and its reply; ``op`` None: the reply to ``LOAD``, without a request."""
        if self.dead:
            raise Lost(self.dead)
        try:
            return self.channel.request(op, *args)
        except (StopIteration, StopAsyncIteration) as exc:  # PEP 479: the program's never ends the test's loop
            value = exc.args[0] if isinstance(exc, StopIteration) and exc.args else None  # a generator's return
            raise ProgramStopped(type(exc).__name__, value) from None
        except Lost as err:
            self.dead = self.dead or f"candidate process lost ({err})"
            raise
        except Deadline:
            self.dead = "timeout"
            raise

    def call(self, fn: Remote, args: tuple, kwargs: dict) -> Any:
        """A call into the program; while the running test uses files, the files either side wrote since the
        last call cross first and after (``scratch``), as if both worked in one directory."""
        files = self.files and self.scratch is not None
        if files:
            written = self.scratch.changed()
            if written:
                self.request("state", {"files": written})
        try:
            return self._call(fn, args, kwargs)
        finally:
            if files and not self.dead:
                self.scratch.apply(self.request("files"))

    def _call(self, fn: Remote, args: tuple, kwargs: dict) -> Any:
        updates = self.shared.changes()  # what the test changed in containers the program holds copies of
        # the keyword dict itself is never the program's (a call unpacks it into a new one); its values may be
        new = [(idx, m) for m in mutables.find((args, tuple(kwargs.values())))
               if (idx := self.shared.add(m)) is not None]
        capture = (sys.stdout is not sys.__stdout__, sys.stderr is not sys.__stderr__,  # the test redirected them
                   warnings._showwarnmsg_impl is not _SHOW_WARNING)  # noqa: SLF001 - the test records warnings
        # A plain function's arguments are kept in step for its call only (functions rarely keep them, and every
        # tracked container is compared at every call); a class, a method or another callable may keep them.
        keep = not isinstance(fn, Remote) or object.__getattribute__(fn, "_sbx_kind") != "function"
        if new or updates or any(capture):
            reply = self.request("call", fn, args, kwargs, new, updates, capture, keep)
        else:  # the common case, in its short form: nothing to track, nothing captured
            reply = self.request("call", fn, args, kwargs)
        if type(reply) is not tuple or len(reply) not in (1, 2, 5):
            raise TypeError("malformed call reply")
        result, changes, printed, errors, warned = reply + _NO_CALL_EXTRAS[len(reply) - 1:]
        for wanted, text, stream in ((capture[0], printed, sys.stdout), (capture[1], errors, sys.stderr)):
            if wanted and type(text) is str and text:
                stream.write(text)
        for item in warned if capture[2] and type(warned) is list else ():
            if type(item) is tuple and len(item) == 2 and type(item[1]) is str:
                category = wire.builtin_exception(item[0])
                ok = isinstance(category, type) and issubclass(category, Warning)
                warnings.warn(item[1], category if ok else UserWarning, stacklevel=2)
        same = self.shared.apply(changes)
        if not keep:
            self.shared.forget(idx for idx, _ in new)
        return same.get(id(result), result)

    def next_items(self, it: Remote, n: int) -> tuple[list, bool, BaseException | None]:
        capture = (sys.stdout is not sys.__stdout__, sys.stderr is not sys.__stderr__)
        reply = self.request("next", it, n, capture)
        if type(reply) is not tuple or len(reply) not in (5, 6) or type(reply[0]) is not list \
                or type(reply[1]) is not bool:
            raise TypeError("malformed iterator reply")
        for wanted, text, stream in ((capture[0], reply[3], sys.stdout), (capture[1], reply[4], sys.stderr)):
            if wanted and type(text) is str and text:
                stream.write(text)
        exc = reply[2] if isinstance(reply[2], BaseException) else None
        if isinstance(exc, (StopIteration, StopAsyncIteration)):
            exc = RuntimeError("the program's iterator raised StopIteration")
        if len(reply) == 6 and reply[1] and exc is None:  # a generator's return value, for ``yield from``
            exc = StopIteration(reply[5])
        return reply[0], reply[1], exc

    # -- decoding: the candidate's replies; data is rebuilt by ``wire``, references mean what this side says
    def loads(self, data: bytes) -> Any:
        return decoder.decode(data, self.on_ref)

    def on_ref(self, kind: str, f: tuple) -> Any:  # noqa: C901 - one branch per kind of reference
        if kind == "h" and len(f) in (3, 4) and _handle(f[0]) and type(f[1]) is str and type(f[2]) is str \
                and (len(f) == 3 or isinstance(f[3], RemoteClass)):
            return self.proxy(f[0], f[1], f[2], f[3] if len(f) == 4 else None)
        if kind == "c" and len(f) == 5 and _handle(f[0]) and all(type(x) is str and len(x) <= wire.MAX_NAME
                                                                  for x in f[1:4]) and type(f[4]) is tuple:
            return self.program_class(*f)
        if kind == "j" and len(f) == 1 and type(f[0]) is int and 0 <= f[0] < len(self.local):
            return self.local[f[0]]
        if kind == "e" and len(f) == 1 and wire.builtin_exception(f[0]) is not None:
            return wire.builtin_exception(f[0])
        if kind == "x" and len(f) == 4 and _handle(f[0]) and type(f[1]) is str and type(f[2]) is tuple \
                and type(f[3]) is str:
            return self.exc_class(*f)
        if kind == "a" and len(f) == 2 and _handle(f[0]) and type(f[1]) is str:
            return awaited(self.proxy(f[0], f[1], ""))
        if kind == "m" and len(f) == 2 and type(f[0]) is str and _handle(f[1]):
            return own_module(f[0]) or ProgramModule(f[0][:100])  # the judge's import, or no module at all
        if kind == "s" and len(f) == 2 and type(f[0]) is str and _handle(f[1]):
            found = setup_object(f[0])
            return found if found is not None else self.proxy(f[1], f[0], "")
        if kind == "g" and len(f) == 2 and type(f[1]) is dict:
            return setup_instance(f[0], f[1])
        raise WireError(f"reference {kind!r} not accepted")

    def proxy(self, hid: int, kind: str, base: str = "", cls: RemoteClass | None = None) -> Any:
        """The one proxy of program object ``hid``: an instance of ``cls``, the judge's class for its program
        class, where that fits its builtin base."""
        if kind == "generator" and cls is None:  # the program's generator as one of the judge's, one per generator
            gen = self.generators.get(hid)
            if gen is None:
                gen = self.generators[hid] = as_generator(self.proxy(hid, "generator*"), self)
                self.generator_hids[id(gen)] = hid
            return gen
        p = self.proxies.get(hid)
        if p is None:
            if hid in self.classes:
                return self.classes[hid]
            t = wire.builtin_base_named(base)
            fits = cls is not None and (t is None) != issubclass(cls, RemoteValue)
            klass = cls if fits else Remote if t is None else RemoteValue
            p = self.proxies[hid] = new_proxy(klass, self, hid, kind[:100], t)
        return p

    def proxy_named(self, text: str) -> bool:
        """``text`` (an error message) names the class of a proxy: ``Remote``, or the judge's class for one of
        the program's."""
        names = {"Remote", "RemoteValue", *(type.__getattribute__(c, "__name__") for c in self.classes.values())}
        return any(re.search(rf"\b{re.escape(name)}\b", text) for name in names)

    def program_class(self, hid: int, name: str, qualname: str, base: str, abcs: tuple) -> Any:
        """The judge's class standing for the program's class ``hid`` (``classes.program_class``), one per class,
        registered under the container ABCs (from the fixed table) the program's class declares."""
        cls = self.classes.get(hid)
        if cls is None:
            if len(self.classes) >= MAX_CLASSES or hid in self.proxies:
                return self.proxy(hid, "type")
            value = wire.builtin_base_named(base) is not None
            cls = self.classes[hid] = program_class(self, hid, name, qualname, RemoteValue if value else Remote)
            for abc in (CONTAINER_ABCS.get(a) if type(a) is str else None for a in abcs[:len(CONTAINER_ABCS)]):
                if abc is not None:
                    abc.register(cls)
        return cls

    def exc_class(self, hid: int, qualname: str, bases: tuple, module: str) -> type:
        """The candidate's exception class as a class of the judge's: a standard library one is the judge's own
        (``json.JSONDecodeError``); the program's own is rebuilt with the same name and bases, so that ``except
        MyError`` and ``except ValueError`` in a test both work."""
        cls = self.exc_classes.get(hid)
        if cls is None:
            if not all(isinstance(b, type) and issubclass(b, BaseException) for b in bases):
                raise WireError("exception bases must be exception classes")
            real = getattr(own_module(module), qualname, None) if qualname.isidentifier() else None
            if isinstance(real, type) and issubclass(real, BaseException):
                cls = self.exc_classes[hid] = real
            else:
                cls = self.exc_classes[hid] = decoder.rebuilt_exception_class(qualname.rsplit(".", 1)[-1], bases)
            self.exc_hids[id(cls)] = hid
        return cls

    # -- encoding: call arguments; data by value, candidate objects by handle, judge objects lent
    def dumps(self, obj: Any) -> bytes:
        return encoder.Encoder(self.hook, _is_remote, self.exception).encode(obj)

    def hook(self, obj: Any, by_handle: bool) -> Ref | Plain:
        if isinstance(obj, Remote):
            return Ref("h", (handle_of(obj),))
        if isinstance(obj, RemoteClass):
            return Ref("h", (class_handle(obj),))
        if type(obj) is types.GeneratorType and id(obj) in self.generator_hids:
            return Ref("h", (self.generator_hids[id(obj)],))
        if by_handle:
            return Ref("j", (self.lend(obj),))
        if isinstance(obj, type):
            hid = self.exc_hids.get(id(obj))
            if hid is not None:
                return Ref("h", (hid,))
            if wire.builtin_exception(obj.__name__) is obj:
                return Ref("e", (obj.__name__,))
        if isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType)):
            mod, qual = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
            if isinstance(mod, str) and isinstance(qual, str) and mod not in ("__main__", SOLUTION_MODULE) \
                    and _lookup(mod, qual) is obj:
                return Ref("n", (mod, qual))  # the candidate side has (or can import) the same object
        if wire.builtin_base(type(obj)) is not None:
            return Plain(wire.base_value(obj))
        return Ref("j", (self.lend(obj),))

    def exception(self, exc: BaseException) -> tuple[Any, str, tuple, dict]:
        """An exception the test raises into the program: its class, never an assertion's message (it may
        hold an expected value)."""
        hid = self.exc_hids.get(id(type(exc)))
        name, message, args, _ = encoder.exception_fields(exc)
        if isinstance(exc, AssertionError):
            message, args = "", ()
        return (Ref("h", (hid,)) if hid is not None else name), message, args, {}

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
    "await": lambda coro: _driven(coro),
}


def _driven(coro: Any) -> Any:
    """A coroutine of the test's that the program awaits, run here to its end. It may ``await asyncio.sleep(0)``
    or other coroutines; one that waits on the event loop (a real sleep, a future) cannot be driven from inside
    a request, and says so."""
    try:
        while True:
            if coro.send(None) is not None:
                coro.close()
                raise RuntimeError("a test's coroutine awaited by the program may not wait on the event loop")
    except StopIteration as stop:
        return stop.value


_METADATA = frozenset({"__name__", "__qualname__", "__doc__", "__module__"})  # what functools.wraps reads
_OPAQUE = (type, types.FunctionType, types.MethodType, types.BuiltinFunctionType, types.GeneratorType,
           types.CoroutineType, types.AsyncGeneratorType, types.FrameType, types.CodeType, types.TracebackType,
           types.ModuleType)  # routes to frames, code and namespaces: never opened to the program


def _allowed(target: Any, op: str, args: tuple) -> bool:
    if op in ("repr", "str", "hash", "bool"):
        return True
    if op == "call":
        return callable(target) and type(args[1]) is tuple and type(args[2]) is dict
    if op in ("iter", "next"):
        return True
    if op == "await":
        return type(target) is types.CoroutineType
    name = args[1] if len(args) > 1 else None
    if op == "getattr" and name in _METADATA and callable(target):
        return True
    if op == "getattr" and type(name) is str and not name.startswith("_") and _stdlib_instance(target):
        return True  # a StringIO, a random.Random, a queue.Queue the test lent: its public methods
    if type(target).__module__ not in ("__main__", SETUP_MODULE):  # the test's own classes only
        return False
    if op in ("getattr", "setattr"):
        return type(name) is str and not name.startswith("_")
    return op != "cmp" or name in _COMPARE


def _stdlib_instance(obj: Any) -> bool:
    module = type(obj).__module__
    return isinstance(module, str) and module != "builtins" and not isinstance(obj, _OPAQUE) \
        and module.split(".")[0] in sys.stdlib_module_names


def _handle(x: Any) -> bool:
    return type(x) is int and 0 <= x < (1 << 31)


def _is_remote(t: type) -> bool:
    return issubclass(t, (Remote, RemoteClass))


def _lookup(module: str, qualname: str) -> Any:
    obj: Any = sys.modules.get(module)
    for part in qualname.split("."):
        if obj is None or part.startswith("<"):
            return None
        obj = getattr(obj, part, None)
    return obj
