"""The judge: runs the dataset's setup and tests in a trusted process and counts what passed.

A fresh judge serves exactly one job: it is forked for that job from a clean template (the forker, which has
imported everything a judge needs and has never run a job), isolated like a program (its own uid, PID, mount, IPC
and network namespaces, a read-only root, a private /tmp), and exits after sending its verdict. Nothing a job does,
through a bug in the judge or not, outlives the job. It hands only the program and the setup to the candidate's
process and runs each test with the candidate's names resolved to proxies (``proxy``); the verdict never exists
anywhere the candidate can reach: not its memory, frames, garbage collector, exit code or output.
"""

from __future__ import annotations

import _signal
import ast
import builtins
import errno
import marshal
import os
import re
import signal
import socket
import sys
import time
import types
from typing import Any

from . import pytest_run
from .connection import Connection
from .encoder import Encoder
from .names import IMPORTABLE_PACKAGES, importable, module_for_test, name_for_test
from .shared_state import SharedState
from .wire import SETUP_MODULE, SOLUTION_MODULE, Deadline, Lost, Stream, WireError

_encode = Encoder(lambda obj, by_handle: _not_data(obj)).encode


def _not_data(obj: Any) -> Any:
    raise WireError(f"verdicts hold data only, not {type(obj).__name__}")

_BUILTIN_NAMES = frozenset(dir(builtins))
OUTSIDE_DESIGN = "outside design"  # a failed test in which the operator rule withheld a plain value


class TestGlobals(dict):
    """Test namespace: what the setup and the tests define, then the candidate's module.

    A builtin name stays the builtin (a candidate ``abs = lambda x: 0`` cannot bend a test), and a module name
    that a test uses as a module (``math.isclose``) is the judge's own import of that module (a candidate
    ``math = FakeMath()`` cannot bend it either), unless the job exposes the name (a HumanEval entry point may be
    named like one). A name the test calls (``numbers(5)``) is the program's. A module the program imported under
    another name (``np``) arrives as the judge's own import.
    """

    __slots__ = ("conn", "expose", "modules")

    def __missing__(self, name: str) -> Any:
        if name.startswith("__") or (name in _BUILTIN_NAMES and name not in self.expose):
            raise KeyError(name)
        if name not in self.expose:
            module = module_for_test(name, self.modules)
            if module is not None:
                return module
        found, value = self.conn.request("global", name)
        if found is not True:
            raise KeyError(name)
        return value if name in self.expose else name_for_test(name, value, self.modules)


def module_names(sources: list[str]) -> frozenset[str]:
    """Names the tests use as modules (``name.attr``) that are modules a test may get without importing.

    Most test code names no module at all: a source only goes through ``ast`` when one of its words (or a
    non-ASCII character, which may spell one) could be such a name."""
    names: set[str] = set()
    for src in sources:
        if src.isascii() and not any(map(importable, _MODULE_WORDS.intersection(_WORD.findall(src)))):
            continue
        tree = _parse(src)
        if tree is not None:
            names.update(n.value.id for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                         and isinstance(n.value, ast.Name) and importable(n.value.id))
    return frozenset(names)


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MODULE_WORDS = frozenset(sys.stdlib_module_names) | IMPORTABLE_PACKAGES


def _parse(src: str) -> ast.AST | None:
    try:
        return ast.parse(src)
    except (SyntaxError, ValueError):
        return None


def describe(exc: BaseException) -> str:
    """``Type: message`` for a failure; the message may hold a candidate object, whose ``str`` can fail."""
    try:
        text = str(exc)
    except (Exception, Lost):  # noqa: BLE001 - a Deadline still propagates
        text = ""
    return (f"{type(exc).__name__}: {text}" if text else type(exc).__name__)[:300]


def _alarm(signum: int, frame: Any) -> None:
    raise Deadline


class SolutionModule(types.ModuleType):
    """``import solution`` / ``from solution import f`` in a test reach the candidate's module: a container
    global comes by handle (``from solution import history`` sees the program's list as it changes), ``from
    solution import *`` binds the program's public names (``__all__``), builtin-named ones included, and a
    test's ``monkeypatch.setattr(solution, ...)`` or ``mock.patch("solution.f")`` sets the program's global."""

    def __getattr__(self, name: str) -> Any:
        conn = self.__dict__["_sbx_conn"]
        if name == "__all__":
            names = conn.request("names")
            if type(names) is list and all(type(n) is str for n in names):
                return names
        elif not name.startswith("__"):
            found, value = conn.request("live", name)
            if found is True:
                return value
        raise AttributeError(f"module {SOLUTION_MODULE!r} has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("__"):
            super().__setattr__(name, value)
        else:
            self.__dict__["_sbx_conn"].request("setglobal", name, value)

    def __delattr__(self, name: str) -> None:  # a patch undone: the program's own value is back
        if name.startswith("__"):
            super().__delattr__(name)
        else:
            self.__dict__["_sbx_conn"].request("unpatch", name)


def _solution_module(conn: Connection) -> types.ModuleType:
    mod = SolutionModule(SOLUTION_MODULE)
    mod.__dict__["_sbx_conn"] = conn
    return mod


def compile_job(job: dict[str, Any]) -> dict[str, Any]:
    """The dataset's code of a job, compiled: setup, tests, the trusted prompt (None if unusable) and the names
    the tests use as modules; or ``{"error": ...}``. Done by the zygote, whose compiler is warm, and shipped to
    the judge as code objects: a fresh process would spend ~0.5 ms in a cold compiler. Nothing is run here."""
    tests = [t for t in job.get("tests") or [] if isinstance(t, str)]
    try:
        setup = compile(job.get("setup") or "", "<setup>", "exec")
        codes = [compile(t, f"<test {i}>", "exec") for i, t in enumerate(tests)]
    except (SyntaxError, ValueError) as err:
        return {"error": f"tests do not compile: {describe(err)}"}
    except Exception as err:  # noqa: BLE001 - e.g. nested too deeply: nothing can pass
        return {"error": f"setup failed: {describe(err)}"}
    try:
        trusted = compile(job["trusted"], "<prompt>", "exec") if job.get("trusted") else None
    except Exception:  # noqa: BLE001 - unusable: the tests fall back to the program's names
        trusted = None
    return {"setup": setup, "tests": codes, "trusted": trusted,
            "modules": sorted(module_names([*tests, job.get("trusted") or ""])), "files": uses_files(codes),
            "steps": any(not {"send", "throw"}.isdisjoint(pytest_run.code_names(c, set())) for c in codes)}


_DATACLASS_FUNCTIONS = frozenset({"asdict", "astuple", "fields", "replace", "is_dataclass"})
_PROTOCOL_ERRORS = ("interpreted as an integer", "indices must be integers", "bytes-like object is required")


def outside_rule(err: BaseException, code: types.CodeType, conn: Connection) -> str:
    """Why a failed test fails outside the design, where the judge's own code (not the operator rule) met a
    program object it cannot treat as in one interpreter; else ''. Each is in docs/sandbox.md, "Outside the design"."""
    if isinstance(err, OSError) and ((conn.files and not conn.files_shared) or err.errno == errno.EROFS):
        return "the test's files: this judge has no working directory kept in step with the program's"
    if isinstance(err, TypeError) and any(text in str(err) for text in _PROTOCOL_ERRORS) and conn.proxy_named(str(err)):
        return "a program object where the judge's code needs __index__ or a buffer, never asked of a program"
    names = pytest_run.code_names(code, set())
    if ("__mro__" in names or "mro" in names) and conn.classes:
        return "a program class's __mro__ is that of the judge's stand-in for it"
    if "dataclasses" in names and not _DATACLASS_FUNCTIONS.isdisjoint(names):
        return "dataclasses' functions on a program's dataclass instance (the judge holds a proxy of it)"
    return ""


def uses_files(codes: list[types.CodeType]) -> list[int]:
    """The tests that use files (``open``, ``write_text``, ``mkdtemp``...: ``pytest_run.FILE_NAMES``): while
    one runs, the judge's and the program's working directories are kept in step at each call (``scratch``)."""
    return [i for i, code in enumerate(codes)
            if not pytest_run.FILE_NAMES.isdisjoint(pytest_run.code_names(code, set()))]


def run_job(job: dict[str, Any], sock: int | socket.socket, shared_workdir: bool = False) -> dict[str, Any]:
    """Load the program in the candidate's process, run every test here; the verdict as a JSON-able dict.
    ``job["compiled"]``: ``compile_job``'s result, when the zygote made it. ``shared_workdir``: this process works
    in the program's directory (no mount namespaces: ``forker.shares_workdir``)."""
    n = len([t for t in job.get("tests") or [] if isinstance(t, str)])
    out: dict[str, Any] = {"passed": [False] * n, "n": n, "status": "ok", "error": "", "failures": [""] * n}
    deadline = time.monotonic() + float(job["timeout"])
    conn = (SharedState if job.get("pytest") else Connection)(sock, deadline, shared_workdir)
    signal.setitimer(signal.ITIMER_REAL, float(job["timeout"]))
    setup_mod = types.ModuleType(SETUP_MODULE)
    sys.modules[SETUP_MODULE] = setup_mod
    sys.modules[SOLUTION_MODULE] = _solution_module(conn)
    try:
        setup = job.get("setup") or ""
        compiled = job.get("compiled") or compile_job(job)
        if "error" in compiled:
            return {**out, "status": "error", "error": compiled["error"]}
        try:
            exec(compiled["setup"], setup_mod.__dict__)  # noqa: S102 - the dataset's code
        except (SyntaxError, ValueError) as err:
            return {**out, "status": "error", "error": f"tests do not compile: {describe(err)}"}
        except Exception as err:  # noqa: BLE001 - broken setup code: nothing can pass
            return {**out, "status": "error", "error": f"setup failed: {describe(err)}"}
        try:
            if "source" in job:  # the program's process waits for it
                conn.request("load", job["source"], setup)
            else:  # the zygote gave it to the program's process, which loads it unasked
                conn.loaded()
        except Deadline:
            return {**out, "status": "timeout", "error": "timeout while loading the program"}
        except Lost as err:
            return {**out, "status": "lost", "error": f"lost the program while loading: {err}"}
        except BaseException as err:  # noqa: BLE001 - the program raised (SystemExit included)
            return {**out, "status": "error", "error": f"program raised {describe(err)}"}
        tns = TestGlobals({k: v for k, v in vars(setup_mod).items() if not k.startswith("__")})
        tns.conn, tns.expose = conn, frozenset(job.get("expose") or ())
        tns.modules = frozenset(compiled["modules"])
        tns.update({"__builtins__": builtins.__dict__, "__name__": "__main__"})
        if job.get("trusted"):  # the dataset's helpers: the tests use these, not the program's copies
            try:
                if compiled["trusted"] is not None:
                    exec(compiled["trusted"], tns)  # noqa: S102
            except Exception:  # noqa: BLE001, S110 - unusable: the tests fall back to the program's names
                pass
            for name in tns.expose:
                tns.pop(name, None)
        if job.get("pytest"):
            return _pytest_verdict(out, compiled["tests"][0], tns, conn)
        with_files = frozenset(compiled.get("files") or ())
        conn.steps = bool(compiled.get("steps"))
        for i, code in enumerate(compiled["tests"]):
            if conn.dead:
                out["failures"][i] = f"not run: {conn.dead}"
                continue
            conn.rule, conn.files = "", i in with_files
            try:
                exec(code, tns)  # noqa: S102 - the dataset's test
                ok, why = True, ""
            except Deadline:
                conn.dead, ok, why = "timeout", False, "timeout"
            except BaseException as err:  # noqa: BLE001 - any exception fails the test
                ok, why = False, describe(err)
                rule = outside_rule(err, code, conn)
                if rule:
                    conn.note(rule)
            if conn.dead and ok:  # the candidate died or hung inside this test: never a pass
                ok, why = False, conn.dead
            if not ok and conn.rule:  # visible, never a silent zero: see "Outside the design" in docs/sandbox.md
                why = f"{OUTSIDE_DESIGN} ({conn.rule}): {why}"
            out["passed"][i], out["failures"][i] = ok, why
        if conn.dead:
            out["status"] = "timeout" if conn.dead == "timeout" else "lost"
        return out
    except Deadline:  # outside a test (the prompt's code, between tests): the verdicts so far stand
        return {**out, "status": "timeout", "error": "timeout"}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _pytest_verdict(out: dict[str, Any], code: types.CodeType, tns: TestGlobals, conn: Connection) -> dict[str, Any]:
    """A pytest file's verdict: one per collected item that was not skipped (``pytest_run``)."""
    ran = pytest_run.run(code, tns, conn, describe)
    if ran["error"]:
        return {**out, "n": 0, "passed": [], "failures": [], "status": "error", "error": ran["error"]}
    out = {**out, "n": len(ran["passed"]), "passed": ran["passed"], "failures": ran["failures"]}
    if conn.dead:
        out["status"] = "timeout" if conn.dead == "timeout" else "lost"
    return out


def main(ctl_fd: int, chan_fd: int, shared_workdir: bool = False) -> None:
    """Serve one job: read it from the zygote on ``ctl_fd``, judge the program on ``chan_fd``, send the verdict,
    exit (never returns)."""
    _signal.signal(_signal.SIGALRM, _alarm)  # the C function: signal.signal's enum wrapping costs a fresh process more
    sys.setrecursionlimit(10_000)  # nested callbacks between the test and the program cost frames here
    sys.set_int_max_str_digits(0)  # one interpreter would let a program lift the limit for the test as well
    try:
        ctl = Stream(ctl_fd)
        ctl.deadline = time.monotonic() + 60
        job = marshal.loads(ctl.recv())  # from the zygote (trusted): data and the tests' code objects
        try:
            verdict = run_job(job, chan_fd, shared_workdir)
        except BaseException as err:  # noqa: BLE001 - a judge fault is reported, never a crash mid-job
            verdict = {"status": "judge-error", "error": describe(err), "passed": [], "n": -1, "failures": []}
        finally:
            os.close(chan_fd)  # the candidate sees the end of the channel and exits
        ctl.send(_encode(verdict))  # captured at import: a test that breaks json cannot break the verdict
    finally:
        os._exit(0)
