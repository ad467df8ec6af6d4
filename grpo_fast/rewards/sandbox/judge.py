"""The judge: runs the dataset's setup and tests in a trusted process and counts what passed.

One judge per worker slot lives across jobs (a warm, unprivileged process with its own uid, not dumpable). Per job
it receives the program, the setup and the tests, hands only the program and the setup to the candidate's process,
and runs each test with the candidate's names resolved to proxies (``proxy``). The verdict never exists anywhere
the candidate can reach: not its memory, frames, garbage collector, exit code or output.
"""

from __future__ import annotations

import ast
import builtins
import json
import os
import signal
import socket
import sys
import time
import types
from typing import Any

from .connection import Connection
from .proxy import data, truth
from .wire import SETUP_MODULE, SOLUTION_MODULE, Deadline, Lost, Stream

_BUILTIN_NAMES = frozenset(dir(builtins))
JOBS_PER_JUDGE = 500  # a fresh judge now and then bounds whatever test code leaves behind


class TestGlobals(dict):
    """Test namespace: what the setup and the tests define, then the candidate's module.

    A name that is a builtin stays the builtin (a candidate ``abs = lambda x: 0`` cannot bend a test), unless
    the job exposes it (a HumanEval entry point may be named like one).
    """

    __slots__ = ("conn", "expose")

    def __missing__(self, name: str) -> Any:
        if name.startswith("__") or (name in _BUILTIN_NAMES and name not in self.expose):
            raise KeyError(name)
        found, value = self.conn.request("global", name)
        if found is not True:
            raise KeyError(name)
        return value


class _Asserts(ast.NodeTransformer):
    """``assert x`` and ``assert not x`` count only data: a program object asserted directly is a failure."""

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        self.generic_visit(node)
        test = node.test
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test.operand = ast.Call(ast.Name("__sbx_data", ast.Load()), [test.operand], [])
        node.test = ast.Call(ast.Name("__sbx_truth", ast.Load()), [test], [])
        return node


def compile_test(src: str, i: int) -> types.CodeType:
    tree = ast.fix_missing_locations(_Asserts().visit(ast.parse(src)))
    return compile(tree, f"<test {i}>", "exec")


def describe(exc: BaseException) -> str:
    """``Type: message`` for a failure; the message may hold a candidate object, whose ``str`` can fail."""
    try:
        text = str(exc)
    except (Exception, Lost):  # noqa: BLE001 - a Deadline still propagates
        text = ""
    return (f"{type(exc).__name__}: {text}" if text else type(exc).__name__)[:300]


def _alarm(signum: int, frame: Any) -> None:
    raise Deadline


def _solution_module(conn: Connection) -> types.ModuleType:
    """``import solution`` / ``from solution import f`` in a test reach the candidate's module."""
    mod = types.ModuleType(SOLUTION_MODULE)

    def __getattr__(name: str) -> Any:  # noqa: N807 - PEP 562 module attribute hook
        if not name.startswith("__"):
            found, value = conn.request("global", name)
            if found is True:
                return value
        raise AttributeError(f"module {SOLUTION_MODULE!r} has no attribute {name!r}")

    mod.__getattr__ = __getattr__  # type: ignore[method-assign]
    return mod


class _Hygiene:
    """What a job's test code may leave behind in this long-lived process, put back after the job."""

    def __init__(self) -> None:
        self.builtins, self.limit = dict(builtins.__dict__), sys.getrecursionlimit()
        self.streams = (sys.stdin, sys.stdout, sys.stderr)

    def restore(self) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, _alarm)
        if builtins.__dict__ != self.builtins:
            builtins.__dict__.clear()
            builtins.__dict__.update(self.builtins)
        sys.setrecursionlimit(self.limit)
        sys.stdin, sys.stdout, sys.stderr = self.streams
        for name in (SETUP_MODULE, SOLUTION_MODULE):
            sys.modules.pop(name, None)


def run_job(job: dict[str, Any], sock: socket.socket) -> dict[str, Any]:
    """Load the program in the candidate's process, run every test here; the verdict as a JSON-able dict."""
    tests = [t for t in job.get("tests") or [] if isinstance(t, str)]
    n = len(tests)
    out: dict[str, Any] = {"passed": [False] * n, "n": n, "status": "ok", "error": "", "failures": [""] * n}
    deadline = time.monotonic() + float(job["timeout"])
    conn = Connection(sock, deadline)
    signal.setitimer(signal.ITIMER_REAL, float(job["timeout"]))
    setup_mod = types.ModuleType(SETUP_MODULE)
    sys.modules[SETUP_MODULE] = setup_mod
    sys.modules[SOLUTION_MODULE] = _solution_module(conn)
    try:
        setup = job.get("setup") or ""
        try:
            exec(compile(setup, "<setup>", "exec"), setup_mod.__dict__)  # noqa: S102 - the dataset's code
            codes = [compile_test(t, i) for i, t in enumerate(tests)]
        except (SyntaxError, ValueError) as err:
            return {**out, "status": "error", "error": f"tests do not compile: {describe(err)}"}
        except Exception as err:  # noqa: BLE001 - broken setup code: nothing can pass
            return {**out, "status": "error", "error": f"setup failed: {describe(err)}"}
        try:
            conn.request("load", job["source"], setup)
        except Deadline:
            return {**out, "status": "timeout", "error": "timeout while loading the program"}
        except Lost as err:
            return {**out, "status": "lost", "error": f"lost the program while loading: {err}"}
        except BaseException as err:  # noqa: BLE001 - the program raised (SystemExit included)
            return {**out, "status": "error", "error": f"program raised {describe(err)}"}
        tns = TestGlobals({k: v for k, v in vars(setup_mod).items() if not k.startswith("__")})
        tns.conn, tns.expose = conn, frozenset(job.get("expose") or ())
        tns.update({"__builtins__": builtins.__dict__, "__name__": "__main__", "__sbx_truth": truth,
                    "__sbx_data": data})
        if job.get("trusted"):  # the dataset's helpers: the tests use these, not the program's copies
            try:
                exec(compile(job["trusted"], "<prompt>", "exec"), tns)  # noqa: S102
            except Exception:  # noqa: BLE001, S110 - unusable: the tests fall back to the program's names
                pass
            for name in tns.expose:
                tns.pop(name, None)
        for i, code in enumerate(codes):
            if conn.dead:
                out["failures"][i] = f"not run: {conn.dead}"
                continue
            try:
                exec(code, tns)  # noqa: S102 - the dataset's test
                ok, why = True, ""
            except Deadline:
                conn.dead, ok, why = "timeout", False, "timeout"
            except BaseException as err:  # noqa: BLE001 - any exception fails the test
                ok, why = False, describe(err)
            if conn.dead and ok:  # the candidate died or hung inside this test: never a pass
                ok, why = False, conn.dead
            out["passed"][i], out["failures"][i] = ok, why
        if conn.dead:
            out["status"] = "timeout" if conn.dead == "timeout" else "lost"
        return out
    except Deadline:  # outside a test (the prompt's code, between tests): the verdicts so far stand
        return {**out, "status": "timeout", "error": "timeout"}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _recv_job(ctl: socket.socket) -> tuple[dict[str, Any], int] | None:
    """One job: a 4-byte length sent together with the candidate channel's descriptor, then the JSON."""
    msg, fds, _flags, _addr = socket.recv_fds(ctl, 4, 1)
    if len(msg) < 4 or not fds:
        return None
    n = int.from_bytes(msg, "little")
    data = bytearray()
    while len(data) < n:
        chunk = ctl.recv(min(1 << 20, n - len(data)))
        if not chunk:
            return None
        data += chunk
    return json.loads(data), fds[0]


def main(ctl_fd: int) -> None:
    """Serve jobs from the zygote on ``ctl_fd`` until it closes or enough jobs have run (never returns)."""
    hygiene = _Hygiene()
    hygiene.restore()
    ctl = socket.socket(fileno=ctl_fd)
    reply = Stream(ctl)
    try:
        for served in range(1, JOBS_PER_JUDGE + 1):
            got = _recv_job(ctl)
            if got is None:
                break
            job, fd = got
            sock = socket.socket(fileno=fd)
            try:
                verdict = run_job(job, sock)
            except BaseException as err:  # noqa: BLE001 - a judge fault is reported, never a crash mid-job
                verdict = {"status": "judge-error", "error": describe(err), "passed": [], "n": -1, "failures": []}
            finally:
                sock.close()  # the candidate sees the end of the channel and exits
                hygiene.restore()
            verdict["retire"] = served == JOBS_PER_JUDGE  # the zygote starts a fresh judge for the next job
            reply.send(json.dumps(verdict).encode())
    finally:
        os._exit(0)
