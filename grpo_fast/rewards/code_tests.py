"""The shapes a code dataset's ``tests`` column takes, each turned into one sandbox job for a program.

* a list of assert statements (MBPP) -- each assert one test;
* ``{"inputs": [...], "outputs": [...]}`` (a dict, or the same as JSON text) -- stdin/stdout tests (APPS, TACO,
  CodeContests, Codeforces): the program runs as ``__main__`` once per test with the input on stdin, and its
  stdout is compared with the output outside its process (``grpo_fast.sandbox.stdio``), or, with a
  ``"checker"`` (Python source), judged by that checker;
* ``{"fn_name": "solve", "inputs": [[1, 2], ...], "outputs": [3, ...]}`` -- call-based tests (APPS's convention):
  ``solve(*inputs[i])`` (or ``Solution().solve(...)``, LeetCode style) must equal ``outputs[i]``, tuples compared
  as lists, numbers within tolerance, an output wrapped in a one-element list accepted; the comparison runs in the
  judge, never in the program's process;
* a pytest file (KodCode): run by pytest in the judge (``grpo_fast.sandbox.pytest_run``), the program importable
  as ``solution``; each collected item that is not skipped is one test. A file with no collectable test is an
  error of the row, never an assert.

HumanEval (``test`` defining ``check`` + ``entry_point``) is read by ``rewards.code`` itself.
"""

from __future__ import annotations

import ast
import json
from typing import Any

from grpo_fast.sandbox import make_io_job, make_job

MAX_JOB_S = 120.0  # a call-based or pytest row's whole budget, whatever its number of tests

CALL_HELPERS = '''
import math as _sbx_math


def _sbx_target(name):
    g = globals()
    try:
        return g[name]
    except KeyError:
        return getattr(g["Solution"](), name)


def _sbx_plain(x):
    if isinstance(x, tuple):
        x = list(x)
    if isinstance(x, list):
        return [_sbx_plain(v) for v in x]
    if isinstance(x, dict):
        return {k: _sbx_plain(v) for k, v in x.items()}
    return x


def _sbx_same(a, b, tol):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return a == b or _sbx_math.isclose(a, b, rel_tol=tol, abs_tol=tol)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_sbx_same(x, y, tol) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_sbx_same(a[k], b[k], tol) for k in a)
    return a == b


def _sbx_call(name, args, expected, tol):
    got = _sbx_plain(_sbx_target(name)(*args))
    if _sbx_same(got, expected, tol):
        return
    if isinstance(expected, list) and len(expected) == 1 and _sbx_same(got, expected[0], tol):
        return
    raise AssertionError("wrong answer")
'''

def parse(value: Any) -> list[str] | dict[str, Any] | str | None:
    """The column's value as asserts (list), an input/output spec (dict), a pytest file (str), or None."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("{"):  # a spec: JSON, or the same as a Python literal; never run as an assert
            try:
                value = json.loads(text)
            except ValueError:
                try:
                    value = ast.literal_eval(text)
                except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                    return None
        elif is_test_file(value):
            return value  # a pytest file; one with no collectable test is the row's error, never an assert
        else:
            return [value] if text else None
    if isinstance(value, dict):
        if isinstance(value.get("inputs"), list) and isinstance(value.get("outputs"), list):
            return value
        return None
    if isinstance(value, (list, tuple)):
        asserts = [t for t in value if isinstance(t, str)]
        return asserts or None
    return None


def is_test_file(source: str) -> bool:
    """Python that is more than asserts: a test file (run by pytest), even if nothing in it is collectable.

    A string of top-level asserts (with imports and plain statements around them) is one assert test."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    defines = any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for n in tree.body)
    asserts = any(isinstance(n, ast.Assert) for n in tree.body)
    return defines and not (asserts and not test_count(tree))


def test_count(tree: ast.Module) -> int:
    """Test functions and test methods at the file's top level (parametrize not expanded): sizes the time budget."""
    count = 0
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            count += 1
        elif isinstance(node, ast.ClassDef):
            count += sum(isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name.startswith("test")
                         for m in node.body)
    return count


def _text(x: Any) -> str:
    """A stdin input or expected output; some datasets store one as a list of lines."""
    if isinstance(x, list):
        return "\n".join(map(str, x)) + "\n"
    return str(x)


def job(program: str, tests: list[str] | dict[str, Any] | str, *, setup: str = "", timeout: float = 5.0,
        memory_mb: int = 1024, packages: bool = True, compare: str = "tokens", tolerance: float = 1e-6,
        all_or_nothing: bool = False, time_limit: Any = None, memory_limit: Any = None) -> dict[str, Any]:
    """The sandbox job for ``program`` against ``tests`` (see ``parse``). ``time_limit`` (seconds per test) and
    ``memory_limit`` (bytes) are a row's own limits, when the dataset gives them."""
    per_test = float(time_limit) if isinstance(time_limit, (int, float)) and time_limit > 0 else timeout
    if isinstance(memory_limit, (int, float)) and memory_limit > 0:
        memory_mb = max(128, int(memory_limit) >> 20)
    if isinstance(tests, list):
        return make_job(program, tests, setup, timeout, memory_mb, packages=packages)
    if isinstance(tests, str):  # one pytest run in the judge; the verdicts are its items
        count = test_count(ast.parse(tests))
        spec = make_job(program, [tests], setup, min(MAX_JOB_S, per_test * max(1, count) + 1.0), memory_mb,
                        packages=packages)
        return {**spec, "pytest": True}
    inputs, outputs = tests["inputs"], tests["outputs"]
    n = min(len(inputs), len(outputs))
    name = tests.get("fn_name")
    if isinstance(name, str) and name:
        calls = [f"_sbx_call({name!r}, {_args(a)!r}, {o!r}, {tolerance!r})" for a, o in zip(inputs, outputs)]
        return make_job(program, calls, setup, min(MAX_JOB_S, per_test * max(1, n)), memory_mb,
                        entry_point=name, trusted=CALL_HELPERS, packages=packages)
    checker = tests.get("checker") if isinstance(tests.get("checker"), str) else ""
    return make_io_job(program, [_text(x) for x in inputs[:n]], [_text(x) for x in outputs[:n]], per_test,
                       memory_mb, compare=compare, abs_tol=tolerance, rel_tol=tolerance,
                       all_or_nothing=all_or_nothing, packages=packages, checker=checker)


def _args(a: Any) -> list:
    return list(a) if isinstance(a, (list, tuple)) else [a]
