"""A program run as a script in its own process: a stdin test (``__main__`` with the test's input), a dataset's
checker, or a tool session's cells. Nothing here knows an expected output; the zygote judges the bytes.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import io
import json
import os
import sys
import threading
import types
from typing import Any


def flush() -> None:
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except BaseException:  # noqa: BLE001, S110 - a closed or replaced stream must not stop the run
            pass


def source_module(name: str, source: str) -> types.ModuleType:
    """An empty module for the program, whose ``__file__`` holds its source (for tracebacks, ``inspect``)."""
    filename = os.path.join(os.getcwd(), "solution.py")
    try:  # plain descriptor calls: the io stack costs a fresh process more
        fd = os.open(filename, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(source.encode())
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
    except OSError:
        pass
    module = types.ModuleType(name)
    module.__file__ = filename
    return module


def read_all(fd: int) -> bytes:
    """Everything in ``fd`` (a memory file the zygote wrote), which is then closed."""
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def exit_builtins() -> None:
    """``exit()`` and ``quit()``, which ``site`` adds to a normal interpreter (the sandbox runs without it)."""
    for name in ("exit", "quit"):
        builtins.__dict__.setdefault(name, sys.exit)


def run_cells(cells: list[str], namespace: dict[str, Any]) -> bool:
    """Notebook semantics for a tool session: the earlier cells are replayed quietly (their output and errors
    dropped), the last one's output is shown, with its final expression's value printed as a notebook shows it.
    False when the last cell raised (its traceback, from the cell's own frames, is on stderr)."""
    import traceback  # noqa: PLC0415 - only for a tool session

    for i, cell in enumerate(cells):
        last = i == len(cells) - 1
        name = f"<cell {i + 1}>"
        try:
            with contextlib.ExitStack() as quiet:
                if not last:
                    quiet.enter_context(contextlib.redirect_stdout(io.StringIO()))
                    quiet.enter_context(contextlib.redirect_stderr(io.StringIO()))
                tree = ast.parse(cell, name)
                tail = tree.body.pop() if last and tree.body and isinstance(tree.body[-1], ast.Expr) else None
                exec(compile(tree, name, "exec"), namespace)  # noqa: S102 - the model's code, in its own process
                if tail is not None:
                    value = eval(compile(ast.Expression(tail.value), name, "eval"), namespace)  # noqa: S307
                    if value is not None:
                        print(repr(value))
        except SystemExit:
            pass  # exit() in a cell ends that cell, as in a notebook
        except BaseException as exc:  # noqa: BLE001 - shown for the last cell, dropped for replayed ones
            if last:
                tb = exc.__traceback__
                while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell"):
                    tb = tb.tb_next  # the cell's own frames only
                traceback.print_exception(type(exc), exc, tb, limit=-4)
                return False
    return True


def run_main(source_fd: int, checker: bool = False, cells: bool = False) -> None:
    """A stdin test: run the program read from ``source_fd`` as ``__main__`` (stdin is the test's input), flush
    its output, exit with its status (never returns). Nothing here knows the expected output.

    ``checker``: this is a dataset's checker; stdin holds the test's input, the program's output and the answer as
    JSON, written here to ``input.txt``, ``output.txt`` and ``answer.txt`` and named in ``sys.argv``. ``cells``: the
    source is a JSON list of a tool session's cells (``run_cells``)."""
    if checker:
        files = json.loads(sys.stdin.read())
        for name in ("input", "output", "answer"):
            with open(f"{name}.txt", "w") as f:
                f.write(str(files.get(name) or ""))
        sys.argv = ["checker.py", "input.txt", "output.txt", "answer.txt"]
        sys.stdin = open("input.txt")  # noqa: SIM115 - the checker's stdin: the test's input
    source = read_all(source_fd).decode("utf-8", errors="replace")
    module = source_module("__main__", source)
    filename = module.__file__
    exit_builtins()
    sys.modules["__main__"] = module
    code = 0
    try:
        if cells:
            code = 0 if run_cells([str(c) for c in json.loads(source)], module.__dict__) else 1
        else:
            exec(compile(source, filename, "exec"), module.__dict__)  # noqa: S102 - the program, in its own process
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - a runtime error: its traceback on stderr, a failing status
        import traceback  # noqa: PLC0415 - only on the program's error

        traceback.print_exc()
        code = 1
    try:
        for t in threading.enumerate():  # like the interpreter's own exit: wait for non-daemon threads
            if t is not threading.main_thread() and not t.daemon:
                t.join()
    finally:
        flush()
        os._exit(code & 0xFF)
