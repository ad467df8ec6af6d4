"""Run untrusted Python programs (and their tests) without letting them touch the trainer.

Why the design looks like this (details in docs/sandbox.md):

* A *zygote* -- a fresh ``python -I -S`` started once with a scrubbed environment and its own empty
  network namespace -- forks per program, so a program costs two ``fork()`` calls, not an interpreter start,
  and never shares memory with the trainer.
* Per program the zygote forks a supervisor that enters new PID + mount namespaces and forks the program as
  PID 1 there: when it ends, the kernel kills everything it started (setsid, double forks included).
  The program gets a private ``/proc``, private tmpfs ``/tmp``, rlimits, a dedicated unprivileged uid and
  ``no_new_privs``. Weaker levels (uid drop, rlimits only) kick in where the OS refuses, with a warning.
* Pass/fail is decided by the harness (``_harness``), never by exit codes or stdout: the verdict is one
  token-authenticated report written after the last test; anything that ends the run early leaves no report.

This module imports only the standard library: it is also the zygote's ``__main__``.
"""

from __future__ import annotations

import ast
import atexit
import ctypes
import json
import logging
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("grpo_fast.sandbox")

LEVELS = {
    "namespaces+uid-drop": "new PID, mount and network namespaces; private /proc and /tmp; unprivileged uid",
    "uid-drop": "separate process as an unprivileged uid, rlimits, killed by uid; network NOT blocked",
    "rlimits-only": "separate process with rlimits, killed via subreaper; runs as YOUR uid, network NOT blocked",
}
_CLONE_NEWNS, _CLONE_NEWPID, _CLONE_NEWNET = 0x20000, 0x20000000, 0x40000000
_MS_REC, _MS_PRIVATE, _MS_NOSUID, _MS_NODEV = 0x4000, 0x40000, 0x2, 0x4
_PR_SET_PDEATHSIG, _PR_SET_NO_NEW_PRIVS, _PR_SET_CHILD_SUBREAPER = 1, 38, 36
_NPROC = 8  # processes+threads per program; the memory bound of a program is memory_mb * _NPROC
_OUT_CAP = 64 * 1024


@dataclass
class SandboxResult:
    """Outcome of one program. ``passed`` holds the per-test verdicts from the authenticated report."""

    status: str  # "ok" | "error" (program raised) | "exited" (ended without a report) | "timeout" | "killed"
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    wall_s: float = 0.0
    passed: list[bool] = field(default_factory=list)
    n_tests: int = 0
    error: str = ""

    @property
    def fraction(self) -> float:
        """Share of tests passed; 0.0 unless the harness delivered a complete report."""
        if self.status not in ("ok", "error") or not self.n_tests or len(self.passed) != self.n_tests:
            return 0.0
        return sum(self.passed) / self.n_tests


# ----------------------------------------------------------------------------------------------------------
# harness: runs inside the sandboxed process, after privileges are dropped


class _Untrusted(BaseException):
    """A value of a type the harness cannot compare safely came out of candidate code."""


def _harden(src: str) -> ast.Module:
    """Route comparisons, asserts and calls of test code through the harness's strict helpers.

    Defeats objects whose ``__eq__``/``__bool__``/``__sub__``... lie: only builtin-typed values are compared.
    """

    class T(ast.NodeTransformer):
        def visit_Compare(self, n: ast.Compare) -> ast.AST:
            self.generic_visit(n)
            ops = ast.Tuple([ast.Constant(type(o).__name__) for o in n.ops], ast.Load())
            vals = ast.Tuple([n.left, *n.comparators], ast.Load())
            return ast.Call(ast.Name("__sbx_cmp", ast.Load()), [ops, vals], [])

        def visit_Assert(self, n: ast.Assert) -> ast.AST:
            self.generic_visit(n)
            n.test = ast.Call(ast.Name("__sbx_truth", ast.Load()), [n.test], [])
            return n

        def visit_Call(self, n: ast.Call) -> ast.AST:
            self.generic_visit(n)
            return ast.Call(ast.Name("__sbx_call", ast.Load()), [n.func, *n.args], n.keywords)

    tree = T().visit(ast.parse(src))
    return ast.fix_missing_locations(tree)


def _make_checks() -> dict[str, Any]:
    """Strict helpers bound to references captured before any candidate code runs."""
    import collections
    import operator
    import types

    t_type, t_len, t_all, t_id, t_bool = type, len, all, id, bool
    num = frozenset({bool, int, float, complex})
    atoms = frozenset({str, bytes, type(None), range, slice, type(Ellipsis)}) | num
    seqs = frozenset({list, tuple, collections.deque})
    sets = frozenset({set, frozenset})
    dicts = frozenset({dict, collections.OrderedDict, collections.defaultdict, collections.Counter})
    iters = frozenset(t_type(x) for x in (iter([]), iter(()), iter(""), map(id, ()), filter(None, ()),
                                           zip(), enumerate(()), reversed([]), (i for i in ())))
    cfuncs = frozenset({types.BuiltinFunctionType, types.MethodWrapperType, types.WrapperDescriptorType,
                        types.MethodDescriptorType, types.ClassMethodDescriptorType})
    heap_flag = 1 << 9
    ops = {"Lt": operator.lt, "LtE": operator.le, "Gt": operator.gt, "GtE": operator.ge}
    trusted_codes: set[int] = set()
    keep: list[Any] = []
    stdlib_types = frozenset(t_id(v) for v in _STDLIB_CALLABLES if isinstance(v, type))
    for f in _STDLIB_CALLABLES:
        if t_type(f) is types.FunctionType:
            keep.append(f.__code__)
            trusted_codes.add(t_id(f.__code__))

    def plain(v: Any, depth: int = 0) -> bool:
        t = t_type(v)
        if t in atoms:
            return True
        if depth > 50:
            return False
        if t in seqs or t in sets:
            return t_all(plain(x, depth + 1) for x in v)
        if t in dicts:
            return t_all(plain(k, depth + 1) and plain(x, depth + 1) for k, x in dict.items(v))
        return False

    def teq(a: Any, b: Any, depth: int = 0) -> bool:
        ta, tb = t_type(a), t_type(b)
        if ta in num and tb in num:
            return a == b
        if depth > 50:
            return False
        if ta in atoms or tb in atoms:
            return ta is tb and a == b
        if ta in seqs and tb in seqs:
            return ta is tb and t_len(a) == t_len(b) and t_all(teq(x, y, depth + 1) for x, y in zip(a, b))
        if ta in sets and tb in sets:
            return plain(a) and plain(b) and a == b
        if ta in dicts and tb in dicts:
            if not (t_all(plain(k) for k in a) and t_all(plain(k) for k in b)) or t_len(a) != t_len(b):
                return False
            miss = object()
            return t_all(teq(dict.get(a, k, miss), v, depth + 1) for k, v in dict.items(b))
        return False

    def cmp(names: tuple[str, ...], vals: tuple[Any, ...]) -> bool:
        for name, a, b in zip(names, vals, vals[1:]):
            if name == "Is":
                ok = a is b
            elif name == "IsNot":
                ok = a is not b
            elif name == "Eq":
                ok = teq(a, b)
            elif name == "NotEq":
                ok = plain(a) and plain(b) and not teq(a, b)
            elif not (plain(a) and plain(b)):
                ok = False
            elif name == "In":
                ok = a in b
            elif name == "NotIn":
                ok = a not in b
            else:
                ok = t_bool(ops[name](a, b))
            if not ok:
                return False
        return True

    def truth(v: Any) -> bool:
        return t_bool(v) if plain(v) else False

    def trusted_callable(f: Any, depth: int = 0) -> bool:
        t = t_type(f)
        if t in cfuncs:
            return True
        if t is type or isinstance(f, type):
            return not (f.__flags__ & heap_flag) or t_id(f) in stdlib_types
        if t is types.FunctionType:
            return t_id(f.__code__) in trusted_codes
        if t is types.MethodType and depth < 3:
            return trusted_callable(f.__func__, depth + 1)
        return False

    def call(f: Any, *args: Any, **kw: Any) -> Any:
        r = f(*args, **kw)
        if trusted_callable(f) or plain(r) or t_type(r) in iters:
            return r
        raise _Untrusted

    def trust_code(code: types.CodeType) -> None:
        keep.append(code)
        trusted_codes.add(t_id(code))
        for c in code.co_consts:
            if t_type(c) is types.CodeType:
                trust_code(c)

    return {"__sbx_cmp": cmp, "__sbx_truth": truth, "__sbx_call": call, "trust_code": trust_code}


_PRELOAD = ("math", "cmath", "random", "string", "re", "itertools", "functools", "collections", "heapq",
            "bisect", "operator", "statistics", "decimal", "fractions", "typing", "copy", "hashlib", "json",
            "datetime", "builtins", "os", "time", "array", "numbers")
_SNAPSHOT: dict[str, tuple[Any, dict[str, Any]]] = {}
_STDLIB_CALLABLES: list[Any] = []  # classes and functions of preloaded modules: tests may call them freely
_CHECKS: dict[str, Any] = {}  # built once in the zygote, before any program exists


def _snapshot_modules() -> None:
    """Record stdlib module namespaces in the zygote, so the harness can undo a program's monkeypatching."""
    import resource  # noqa: F401 - loaded once here instead of in every child
    for name in _PRELOAD:
        try:
            mod = __import__(name)
        except ImportError:
            continue
        _SNAPSHOT[name] = (mod, dict(mod.__dict__))
        _STDLIB_CALLABLES.extend(v for v in mod.__dict__.values() if isinstance(v, type) or callable(v))


def _harness(token: str, rfd: int, program: str, tests: Sequence[str], setup: str) -> None:
    """Run setup + program + tests; write ``token\\n{json}`` to ``rfd`` only after the last test."""
    write, exit_, dumps, compile_, exec_ = os.write, os._exit, json.dumps, compile, exec
    checks = dict(_CHECKS) if _CHECKS else _make_checks()
    trust_code = checks.pop("trust_code")
    trusted_builtins = dict(_SNAPSHOT["builtins"][1]) if "builtins" in _SNAPSHOT else dict(vars(__builtins__))
    sys_modules, snapshot, settrace, setprofile = sys.modules, dict(_SNAPSHOT), sys.settrace, sys.setprofile
    sig, setitimer, gc_callbacks = signal.signal, signal.setitimer, __import__("gc").callbacks
    name_of = type.__dict__["__name__"].__get__  # reads tp_name; no metaclass code runs
    streams = (sys.stdout, sys.stderr)
    try:  # harden tests before the candidate can touch ast/compile
        test_codes = [compile_(_harden(t), "<test>", "exec") for t in tests]
    except SyntaxError:
        test_codes = None
    for c in test_codes or ():
        trust_code(c)
    ns: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    error = ""
    try:
        if setup:
            exec_(compile_(setup, "<setup>", "exec"), ns)
        exec_(compile_(program, "<program>", "exec"), ns)
    except BaseException as e:  # noqa: BLE001 - SystemExit too: ending early is a failure
        error = "program raised " + name_of(type(e))
    passed: list[bool] = []
    if not error and test_codes is not None:
        settrace(None)
        setprofile(None)
        setitimer(signal.ITIMER_REAL, 0)
        for s in (signal.SIGALRM, signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2):
            sig(s, signal.SIG_DFL)
        gc_callbacks.clear()
        for name, (mod, saved) in snapshot.items():  # undo monkeypatching of preloaded stdlib modules
            sys_modules[name] = mod
            d = mod.__dict__
            for k in [k for k in d if k not in saved]:
                del d[k]
            d.update(saved)
        tns = {k: v for k, v in ns.items() if k not in trusted_builtins and not k.startswith("__sbx")}
        tns["__builtins__"] = trusted_builtins
        tns.update(checks)
        tns["__name__"] = "__main__"
        for code in test_codes:
            try:
                exec_(code, tns)
                passed.append(True)
            except BaseException:  # noqa: BLE001 - an exception of any kind fails the test
                passed.append(False)
    elif test_codes is None:
        error = "tests do not compile"
    for f in streams:
        try:
            f.flush()
        except BaseException:  # noqa: BLE001, S110 - a closed or broken stream must not cost the verdict
            pass
    report = token + "\n" + dumps({"passed": passed, "n": len(tests), "error": error})
    data, off = report.encode(), 0
    while off < len(data):
        off += write(rfd, data[off:])
    exit_(0)


# ----------------------------------------------------------------------------------------------------------
# zygote side: supervisor per program


_libc = ctypes.CDLL(None, use_errno=True)


def _mount(src: str, dst: str, fstype: str | None, flags: int, data: str | None) -> None:
    args = (src.encode(), dst.encode(), fstype.encode() if fstype else None, flags,
            data.encode() if data else None)
    if _libc.mount(*args) != 0:
        raise OSError(ctypes.get_errno(), f"mount {dst}")


def _enter_private_fs() -> str:
    """In a new mount namespace: private /proc for the PID namespace, fresh tmpfs on the world-writable dirs."""
    _mount("none", "/", None, _MS_REC | _MS_PRIVATE, None)
    _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV, None)
    _mount("tmpfs", "/tmp", "tmpfs", _MS_NOSUID | _MS_NODEV, "size=64m,mode=1777")
    for extra in ("/dev/shm", "/var/tmp"):  # other world-writable places: private too, where they exist
        try:
            _mount("tmpfs", extra, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=16m,mode=1777")
        except OSError:
            pass
    return "/tmp"


def _child(job: dict[str, Any], level: str, uid: int, token: str, rfd: int, out: int, err: int,
           workdir: str) -> None:
    """The program's process: limits, privilege drop, then the harness. Never returns."""
    try:
        import resource  # preloaded by the zygote: no import cost here

        os.setsid()
        if level == "namespaces+uid-drop":
            if _libc.unshare(_CLONE_NEWNS) != 0:
                raise OSError(ctypes.get_errno(), "unshare mount namespace")
            workdir = os.path.join(_enter_private_fs(), "work")  # /tmp is private: a fixed name is fine
            os.mkdir(workdir, 0o700)
            os.chown(workdir, uid, uid)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.dup2(rfd, 3)
        os.closerange(4, 65536)
        os.chdir(workdir)
        mem = int(job["memory_mb"]) * 1024 * 1024
        cpu = int(job["timeout"]) + 2
        for lim, val in ((resource.RLIMIT_AS, mem), (resource.RLIMIT_CPU, cpu), (resource.RLIMIT_CORE, 0),
                         (resource.RLIMIT_FSIZE, 16 * 1024 * 1024), (resource.RLIMIT_NOFILE, 64)):
            resource.setrlimit(lim, (val, val))
        if level != "rlimits-only":
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            nproc = _NPROC
        else:
            nproc = _NPROC + sum(1 for p in os.listdir("/proc") if p.isdigit())  # counts all our processes
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        if level != "rlimits-only":
            os.setresuid(uid, uid, uid)
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # a uid change cleared it
        os.environ.clear()
        os.environ.update({"PATH": "/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8"})
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        sys.argv = ["program"]
        _harness(token, 3, job["source"], job.get("tests") or [], job.get("setup") or "")
    finally:
        os._exit(1)


def _kill_leftovers(level: str, uid: int, pid: int) -> None:
    """Without a PID namespace: kill the uid's processes / our adopted orphans until none remain."""
    for _ in range(200):
        found = False
        for p in os.listdir("/proc"):
            if not p.isdigit():
                continue
            try:
                with open(f"/proc/{p}/status") as f:
                    st = dict(line.split(":", 1) for line in f if ":" in line)
            except OSError:
                continue
            mine = int(st.get("PPid", "0")) == os.getpid()
            if level == "uid-drop":
                mine = mine or int(st.get("Uid", "0 0").split()[1]) == uid
            if mine and int(p) != os.getpid():
                found = True
                try:
                    os.kill(int(p), signal.SIGKILL)
                except OSError:
                    pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            if not found:
                return
        if not found:
            return
        time.sleep(0.001)


def _supervise(job: dict[str, Any], level: str, uid: int) -> dict[str, Any]:
    """Fork the program, enforce the wall-clock limit, collect output and the authenticated report."""
    t0 = time.monotonic()
    token = os.urandom(16).hex()
    r_rep, w_rep = os.pipe()
    r_out, w_out = os.pipe()
    r_err, w_err = os.pipe()
    workdir = ""
    if level == "namespaces+uid-drop":
        if _libc.unshare(_CLONE_NEWPID) != 0:  # the program's mount namespace is its own (see _child)
            raise OSError(ctypes.get_errno(), "unshare")
    else:
        _libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        workdir = tempfile.mkdtemp(prefix="grpo_fast_sbx_")
        os.chown(workdir, uid, uid) if level == "uid-drop" else None
    pid = os.fork()
    if pid == 0:
        _child(job, level, uid, token, w_rep, w_out, w_err, workdir)
    for fd in (w_rep, w_out, w_err):
        os.close(fd)
    bufs: dict[int, bytearray] = {r_rep: bytearray(), r_out: bytearray(), r_err: bytearray()}
    open_fds = set(bufs)
    deadline = t0 + float(job["timeout"])
    timed_out = False
    status_raw: int | None = None
    while open_fds:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        ready, _, _ = select.select(list(open_fds), [], [], min(left, 0.05))
        for fd in ready:
            chunk = os.read(fd, 65536)
            cap = 1 << 20 if fd == r_rep else _OUT_CAP
            if not chunk or len(bufs[fd]) >= cap:
                open_fds.discard(fd)
                os.close(fd)
            else:
                bufs[fd] += chunk[: cap - len(bufs[fd])]
        if not ready and status_raw is None:  # child gone yet descendants keep the pipes open
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status_raw = st
                break
    try:
        os.kill(pid, signal.SIGKILL)  # PID 1 of the namespace: takes every descendant with it
    except ProcessLookupError:
        pass
    if status_raw is None:
        status_raw = os.waitpid(pid, 0)[1]
    for fd in open_fds:
        os.close(fd)
    if level != "namespaces+uid-drop":
        _kill_leftovers(level, uid, pid)
        shutil.rmtree(workdir, ignore_errors=True)  # fd-based: does not follow the program's symlinks
    rc = os.waitstatus_to_exitcode(status_raw)
    res: dict[str, Any] = {"returncode": rc, "wall_s": time.monotonic() - t0, "n_tests": len(job.get("tests") or []),
                           "stdout": bufs[r_out].decode(errors="replace"),
                           "stderr": bufs[r_err].decode(errors="replace"), "passed": [], "error": ""}
    report = bytes(bufs[r_rep])
    head, _, body = report.partition(b"\n")
    verdict = None
    if head == token.encode():
        try:
            verdict = json.loads(body)
        except ValueError:
            verdict = None
    if timed_out:
        res["status"] = "timeout"
    elif verdict is None or not isinstance(verdict.get("passed"), list) or verdict.get("n") != res["n_tests"]:
        res["status"] = "killed" if rc < 0 else "exited"
    elif verdict["error"]:
        res.update(status="error", error=str(verdict["error"]))
    elif len(verdict["passed"]) != res["n_tests"] or not all(type(p) is bool for p in verdict["passed"]):
        res["status"] = "exited"
    else:
        res.update(status="ok", passed=verdict["passed"])
    return res


# ----------------------------------------------------------------------------------------------------------
# zygote process: ``python -I -S sandbox.py --zygote LEVEL WORKERS``; frames are 4-byte length + JSON


def _send(fd: int, obj: Any) -> None:
    data = json.dumps(obj).encode()
    data = struct.pack("<I", len(data)) + data
    off = 0
    while off < len(data):
        off += os.write(fd, data[off:])


def _detect_level(requested: str) -> str:
    """Strongest level this process can set up; ``requested`` may only weaken it."""
    order = list(LEVELS)
    best = "rlimits-only"
    if os.geteuid() == 0:
        best = "uid-drop"
        if _libc.unshare(_CLONE_NEWNET) == 0:  # the zygote and everything it forks: no network at all
            pid = os.fork()
            if pid == 0:
                try:
                    if _libc.unshare(_CLONE_NEWPID | _CLONE_NEWNS) != 0:
                        os._exit(1)
                    c = os.fork()
                    if c == 0:
                        try:
                            _enter_private_fs()
                            os._exit(0)
                        finally:
                            os._exit(1)
                    os._exit(os.waitstatus_to_exitcode(os.waitpid(c, 0)[1]))
                finally:
                    os._exit(1)
            if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0:
                best = "namespaces+uid-drop"
    if requested in LEVELS and order.index(requested) > order.index(best):
        return requested
    return best


def _zygote_main(requested: str, workers: int) -> None:
    """Serve jobs from stdin: one supervisor fork per job, at most ``workers`` at a time."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    level = _detect_level(requested)
    _snapshot_modules()
    _CHECKS.update(_make_checks())
    uid_base = 0x40000000 + int.from_bytes(os.urandom(2), "little") * 1024
    _send(1, {"level": level})
    inbuf = bytearray()
    queue: list[dict[str, Any]] = []
    free = list(range(workers))
    running: dict[int, tuple[Any, int, int, bytearray]] = {}  # result fd -> (job id, slot, pid, buffer)
    stdin_open = True
    zombies: list[int] = []
    while stdin_open or running or queue:
        while queue and free:
            job, slot = queue.pop(0), free.pop()
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                try:
                    os.close(r)
                    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
                    try:
                        res = _supervise(job, level, uid_base + slot)
                    except Exception as e:  # noqa: BLE001 - a supervisor fault is a failed run, not a crash
                        res = {"status": "exited", "error": f"sandbox fault: {e!r}", "n_tests": 0}
                    res["id"] = job["id"]
                    _send(w, res)
                finally:
                    os._exit(0)
            os.close(w)
            running[r] = (job["id"], slot, pid, bytearray())
        fds = list(running) + ([0] if stdin_open else [])
        if not fds:
            break
        for fd in select.select(fds, [], [], 0.05 if zombies else None)[0]:
            chunk = os.read(fd, 1 << 16)
            if fd == 0:
                if not chunk:
                    stdin_open = False
                    continue
                inbuf += chunk
                while len(inbuf) >= 4 and len(inbuf) >= 4 + struct.unpack("<I", inbuf[:4])[0]:
                    n = struct.unpack("<I", inbuf[:4])[0]
                    queue.append(json.loads(bytes(inbuf[4:4 + n])))
                    del inbuf[:4 + n]
            elif chunk:
                running[fd][3].extend(chunk)
            else:
                _, slot, pid, buf = running.pop(fd)
                os.close(fd)
                zombies.append(pid)  # reaped without blocking: its exit may still be tearing down
                free.append(slot)
                os.write(1, bytes(buf))
        for pid in list(zombies):
            if os.waitpid(pid, os.WNOHANG)[0]:
                zombies.remove(pid)


# ----------------------------------------------------------------------------------------------------------
# parent side


class Sandbox:
    """Client of one zygote. Thread-safe; calls are serialised, programs inside a call run in parallel."""

    def __init__(self, workers: int | None = None, level: str | None = None):
        self.workers = max(1, workers or os.cpu_count() or 1)
        self.requested = level or os.environ.get("GRPO_FAST_SANDBOX_LEVEL", "auto")
        self._proc: subprocess.Popen[bytes] | None = None
        self._level = ""
        self._lock = threading.Lock()
        self._next = 0

    def _ensure(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
        args = [sys.executable, "-I", "-S", os.path.abspath(__file__), "--zygote", self.requested,
                str(self.workers)]
        self._proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                      close_fds=True, cwd="/")
        hello = self._read(self._proc, time.monotonic() + 30)
        if hello is None:
            raise RuntimeError("sandbox zygote failed to start")
        self._level = hello["level"]
        if self._level != "namespaces+uid-drop":
            log.warning("code sandbox running at reduced isolation %r: %s", self._level, LEVELS[self._level])
        return self._proc

    @staticmethod
    def _read(proc: subprocess.Popen[bytes], deadline: float) -> dict[str, Any] | None:
        fd = proc.stdout.fileno()  # type: ignore[union-attr]
        buf = b""
        need = 4
        while len(buf) < need:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, need - len(buf))
            if not chunk:
                return None
            buf += chunk
            if need == 4 and len(buf) == 4:
                need = 4 + struct.unpack("<I", buf)[0]
        return json.loads(buf[4:])

    def level(self) -> str:
        with self._lock:
            self._ensure()
            return self._level

    def close(self) -> None:
        with self._lock:
            if self._proc is not None:
                self._proc.kill()
                self._proc.wait()
                self._proc = None

    def run_many(self, jobs: Sequence[dict[str, Any]]) -> list[SandboxResult]:
        """Run job dicts (source, tests, setup, timeout, memory_mb) in parallel; results in input order."""
        with self._lock:
            proc = self._ensure()
            ids = {}
            frames = []
            for i, job in enumerate(jobs):
                self._next += 1
                ids[self._next] = i
                frames.append({**job, "id": self._next})
            data = b"".join(struct.pack("<I", len(d)) + d for d in (json.dumps(f).encode() for f in frames))

            def feed() -> None:
                try:
                    proc.stdin.write(data)  # type: ignore[union-attr]
                    proc.stdin.flush()  # type: ignore[union-attr]
                except (BrokenPipeError, ValueError):
                    pass

            writer = threading.Thread(target=feed, daemon=True)
            writer.start()
            longest = max((float(j["timeout"]) for j in jobs), default=0.0)
            deadline = time.monotonic() + (longest + 2) * (len(jobs) // self.workers + 1) + 10
            out: list[SandboxResult | None] = [None] * len(jobs)
            for _ in jobs:
                res = self._read(proc, deadline)
                if res is None:  # zygote died or hung: never leave the caller waiting
                    proc.kill()
                    proc.wait()
                    self._proc = None
                    break
                idx = ids.pop(res.pop("id"))
                out[idx] = SandboxResult(**res)
            writer.join(timeout=1)
            return [r or SandboxResult(status="exited", error="sandbox lost") for r in out]


_default: Sandbox | None = None


def default_sandbox() -> Sandbox:
    global _default
    if _default is None:
        _default = Sandbox()
        atexit.register(_default.close)
    return _default


def isolation_level() -> str:
    """Isolation level in force on this machine (see ``LEVELS`` for what each one means)."""
    return default_sandbox().level()


def describe_isolation() -> str:
    level = isolation_level()
    return f"{level}: {LEVELS[level]}"


def _job(source: str, tests: Sequence[str] | None, setup: str, timeout: float, memory_mb: int) -> dict[str, Any]:
    return {"source": source, "tests": list(tests or []), "setup": setup, "timeout": float(timeout),
            "memory_mb": int(memory_mb)}


def run_program(source: str, *, tests: Sequence[str] | None = None, setup: str = "", timeout: float = 5.0,
                memory_mb: int = 1024, sandbox: Sandbox | None = None) -> SandboxResult:
    """Run ``setup + source`` then each test string in a fresh sandboxed process."""
    return run_many([source], tests=[tests], setups=[setup], timeout=timeout, memory_mb=memory_mb,
                    sandbox=sandbox)[0]


def run_many(sources: Sequence[str], *, tests: Sequence[Sequence[str] | None] | None = None,
             setups: Sequence[str] | None = None, timeout: float = 5.0, memory_mb: int = 1024,
             sandbox: Sandbox | None = None) -> list[SandboxResult]:
    """Run many programs in parallel (pool sized to the cores); one result per source, in order."""
    tests = tests or [None] * len(sources)
    setups = setups or [""] * len(sources)
    jobs = [_job(s, t, su, timeout, memory_mb) for s, t, su in zip(sources, tests, setups)]
    return (sandbox or default_sandbox()).run_many(jobs)


if __name__ == "__main__" and sys.argv[1:2] == ["--zygote"]:
    _zygote_main(sys.argv[2], int(sys.argv[3]))
