"""Candidate side: runs the program as module ``solution`` and answers the judge's requests about its objects.

This process holds no test, no expected value and no verdict: the judge sends only the program, the dataset's setup
code and call arguments. Results go back by value when they are plain data (see ``wire``), else as handles.
"""

from __future__ import annotations

import copy
import io
import math
import operator
import os
import socket
import sys
import types
from typing import Any

from . import wire
from .channel import Channel
from .encoding import CandidatePickler, Judged
from .wire import SETUP_MODULE, SOLUTION_MODULE, Stream


def _snapshot(m: Any) -> Any:
    if isinstance(m, dict):
        return list(m.items())
    if isinstance(m, set):
        return set(m)
    if type(m).__module__ == "numpy":  # an ndarray
        return m.shape, m.tobytes()
    return list(m)


def _changed(m: Any, before: Any) -> bool:
    now = _snapshot(m)
    if isinstance(m, set) or type(m).__module__ == "numpy":
        return now != before
    if isinstance(m, dict):
        return len(now) != len(before) or any(a[0] is not b[0] or a[1] is not b[1] for a, b in zip(now, before))
    return len(now) != len(before) or any(a is not b for a, b in zip(now, before))


_UNARY = {"neg": operator.neg, "pos": operator.pos, "abs": abs, "invert": operator.invert, "int": int,
          "float": float, "complex": complex, "index": operator.index, "round": round, "trunc": math.trunc,
          "floor": math.floor, "ceil": math.ceil, "reversed": reversed}
_BINARY = {name: getattr(operator, name) for name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow",
                                                       "matmul", "lshift", "rshift", "and_", "or_", "xor")}
_BINARY["divmod"] = divmod
_CMP = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
        "ge": operator.ge}


class Runner:
    """The candidate's objects by handle, and one method per request the judge may make."""

    def __init__(self, sock: socket.socket) -> None:
        self.objs: list[Any] = []
        self.ids: dict[int, int] = {}
        self.judged: dict[int, Judged] = {}
        self.module: types.ModuleType | None = None
        self.markers = {"ref": lambda hid, kind, base="": self.objs[hid], "jref": self._judged, "plain": wire.plain,
                        "named": wire.named, "view": wire.view, "jerror": wire.jerror}
        self.channel = Channel(Stream(sock), self.dumps, self.loads, self.dispatch)

    def _judged(self, jid: int) -> Judged:
        if jid not in self.judged:
            self.judged[jid] = Judged(jid, self.channel)
        return self.judged[jid]

    def export(self, obj: Any) -> int:
        hid = self.ids.get(id(obj))
        if hid is None:
            hid = self.ids[id(obj)] = len(self.objs)
            self.objs.append(obj)  # kept alive for the whole job, so ids are never reused
        return hid

    def dumps(self, obj: Any) -> bytes:
        buf = io.BytesIO()
        CandidatePickler(buf, self).dump(obj)
        return buf.getvalue()

    def loads(self, data: bytes) -> Any:
        return wire.TrustingUnpickler(data, self.markers).load()

    def dispatch(self, op: str, args: tuple) -> Any:
        return getattr(self, "op_" + op)(*args)

    def op_load(self, source: str, setup: str) -> None:
        """Run setup, then the program, as modules; the program sees the setup's names."""
        setup_mod = types.ModuleType(SETUP_MODULE)
        sys.modules[SETUP_MODULE] = setup_mod
        filename = os.path.join(os.getcwd(), "solution.py")
        try:
            with open(filename, "w") as f:  # for tracebacks, inspect.getsource and the like
                f.write(source)
        except OSError:
            pass
        mod = types.ModuleType(SOLUTION_MODULE)
        mod.__file__ = filename
        sys.modules[SOLUTION_MODULE] = self.module = mod
        try:
            if setup:
                exec(compile(setup, "<setup>", "exec"), setup_mod.__dict__)  # noqa: S102
            mod.__dict__.update({k: v for k, v in vars(setup_mod).items() if not k.startswith("__")})
            exec(compile(source, filename, "exec"), mod.__dict__)  # noqa: S102
        finally:
            flush()

    def op_global(self, name: str) -> tuple[bool, Any]:
        d = self.module.__dict__ if self.module is not None else {}
        return (True, d[name]) if name in d else (False, None)

    def op_call(self, fn: Any, args: tuple, kwargs: dict, muts: list, capture: bool) -> tuple[Any, list | None, str]:
        """Call. If it mutated arguments in place, send them all back so the judge can update its copies; if the
        test is capturing stdout, send back what the call printed."""
        before = [_snapshot(m) for m in muts]
        out, saved = io.StringIO(), sys.stdout
        if capture:
            sys.stdout = out
        try:
            result = fn(*args, **kwargs)
        finally:
            if capture:
                sys.stdout = saved
        return result, (muts if any(_changed(m, b) for m, b in zip(muts, before)) else None), out.getvalue()

    def op_await(self, aw: Any) -> Any:
        import asyncio

        async def main() -> Any:
            return await aw
        return asyncio.run(main())

    def op_method(self, obj: Any, name: str, args: tuple, kwargs: dict) -> Any:
        return getattr(obj, name)(*args, **kwargs)

    def op_getattr(self, obj: Any, name: str) -> Any:
        return getattr(obj, name)

    def op_setattr(self, obj: Any, name: str, value: Any) -> None:
        setattr(obj, name, value)

    def op_delattr(self, obj: Any, name: str) -> None:
        delattr(obj, name)

    def op_getitem(self, obj: Any, key: Any) -> Any:
        return obj[key]

    def op_setitem(self, obj: Any, key: Any, value: Any) -> None:
        obj[key] = value

    def op_delitem(self, obj: Any, key: Any) -> None:
        del obj[key]

    def op_value(self, obj: Any) -> Any:
        return wire.base_value(obj)

    def op_len(self, obj: Any) -> int:
        return len(obj)

    def op_bool(self, obj: Any) -> bool:
        return bool(obj)

    def op_str(self, obj: Any) -> str:
        return str(obj)

    def op_repr(self, obj: Any) -> str:
        return repr(obj)

    def op_format(self, obj: Any, spec: str) -> str:
        return format(obj, spec)

    def op_hash(self, obj: Any) -> int:
        return hash(obj)

    def op_dir(self, obj: Any) -> list[str]:
        return sorted(str(n) for n in dir(obj))

    def op_iter(self, obj: Any) -> Any:
        return iter(obj)

    def op_next(self, it: Any, n: int) -> tuple[list, bool, BaseException | None]:
        """Up to ``n`` items; ``done`` when exhausted; an exception raised after the items, if any."""
        items: list[Any] = []
        try:
            for _ in range(n):
                items.append(next(it))
        except StopIteration:
            return items, True, None
        except Exception as exc:  # noqa: BLE001 - delivered after the items already produced
            return items, False, exc
        return items, False, None

    def op_unary(self, name: str, obj: Any, *extra: Any) -> Any:
        return _UNARY[name](obj, *extra)

    def op_binop(self, name: str, a: Any, b: Any) -> Any:
        return _BINARY[name](a, b)

    def op_cmp(self, name: str, a: Any, b: Any) -> Any:
        return _CMP[name](a, b)

    def op_contains(self, container: Any, item: Any) -> bool:
        return item in container

    def op_isinstance(self, obj: Any, cls: Any) -> bool:
        return isinstance(obj, cls)

    def op_issubclass(self, a: Any, b: Any) -> bool:
        return issubclass(a, b)

    def op_copy(self, obj: Any) -> Any:
        return copy.copy(obj)

    def op_deepcopy(self, obj: Any) -> Any:
        return copy.deepcopy(obj)


def flush() -> None:
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except BaseException:  # noqa: BLE001, S110 - a closed or replaced stream must not stop the run
            pass


def serve(fd: int) -> None:
    """Answer the judge on ``fd`` until it closes the channel, then exit (never returns)."""
    try:
        Runner(socket.socket(fileno=fd)).channel.serve_forever()
    except BaseException:  # noqa: BLE001, S110 - the judge closing the channel is the normal end
        pass
    finally:
        flush()
        os._exit(0)
