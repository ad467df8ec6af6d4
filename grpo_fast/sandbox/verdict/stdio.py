"""Standard-input tests: a program reads a test's input on stdin and prints its answer, judged here from the bytes.

Competitive-programming datasets (APPS, TACO, CodeContests, Codeforces...) test a whole program this way. Each test
is one run of the program as ``__main__`` in a fresh process from the warm pool, with the input as its stdin; the
expected output never enters that process. The zygote compares the program's stdout with the expected output as
data (``same_output``), so nothing the program prints is ever interpreted. A row's tests run one after the other
in one worker slot; with ``all_or_nothing`` the row stops at its first failure (the rest cannot change its score).
A dataset's checker (for problems with several right answers) runs as its own sandboxed program after each test,
testlib-style: ``checker.py input.txt output.txt answer.txt`` in its working directory, exit status 0 accepting.
It is trusted data, but it still never runs in the candidate's process, and the candidate never sees the answer.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

COMPARE_MODES = ("tokens", "lines", "exact")
OUTPUT_CAP = 1 << 20  # stdout kept per test beyond the expected output's size: a flood fails fast, harms nothing


_INTEGER = re.compile(r"[+-]?[0-9]+")


def _number(token: str) -> float | None:
    try:
        value = float(token)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def same_tokens(actual: str, expected: str, abs_tol: float, rel_tol: float) -> bool:
    """One token compared as the judges of these datasets compare it.

    An expected integer (``[+-]digits``) matches only the same integer, written as one (``007`` is 7; ``7.0``,
    ``7e0`` and a float within any tolerance are not: ``n*n/2`` printed where ``n*(n+1)/2`` is expected fails).
    An expected real (a number with a point or an exponent) matches any number within ``abs_tol``/``rel_tol``.
    Anything else matches only the same text."""
    if actual == expected:
        return True
    if _INTEGER.fullmatch(expected):
        return _INTEGER.fullmatch(actual) is not None and int(actual) == int(expected)
    x, y = _number(actual), _number(expected)
    return x is not None and y is not None and math.isclose(x, y, rel_tol=rel_tol, abs_tol=abs_tol)


def same_output(actual: str, expected: str, mode: str = "tokens", abs_tol: float = 1e-6,
                rel_tol: float = 1e-6) -> bool:
    """``tokens``: whitespace-separated tokens (``same_tokens``: integers exact, reals within tolerance);
    ``lines``: lines with trailing whitespace and trailing empty lines ignored; ``exact``: byte for byte (after
    decoding)."""
    if mode == "exact":
        return actual == expected
    if mode == "lines":
        a, b = actual.rstrip().splitlines(), expected.rstrip().splitlines()
        return len(a) == len(b) and all(x.rstrip() == y.rstrip() for x, y in zip(a, b))
    a, b = actual.split(), expected.split()
    return len(a) == len(b) and all(same_tokens(x, y, abs_tol, rel_tol) for x, y in zip(a, b))


@dataclass
class IoRow:
    """One row's stdin tests, run one at a time; ``record`` takes each run's outcome and says what runs next."""

    spec: dict[str, Any]
    t0: float = 0.0
    passed: list[bool] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    first_failure: tuple[str, str] = ("", "")  # stdout and stderr of the first failed test, for debugging
    checking: str | None = None  # the current test's output, waiting for the dataset's checker

    @property
    def inputs(self) -> list[str]:
        return self.spec["inputs"]

    @property
    def expected(self) -> list[str]:
        return self.spec["outputs"]

    def cap(self, i: int) -> int:
        """Bytes of stdout kept for test ``i``: the expected output's size with room to spare."""
        return 2 * len(self.expected[i].encode()) + OUTPUT_CAP

    def next_run(self) -> tuple[str, int] | None:
        """``("test", i)``: run the program on test ``i``; ``("check", i)``: run the checker on its output."""
        if self.checking is not None:
            return "check", len(self.passed)
        i = self.next_test()
        return None if i is None else ("test", i)

    def check_input(self, i: int) -> str:
        """What the checker reads (as files ``input.txt``, ``output.txt``, ``answer.txt``): JSON on its stdin."""
        return json.dumps({"input": self.inputs[i], "output": self.checking, "answer": self.expected[i]})

    def next_test(self) -> int | None:
        i = len(self.passed)
        if i >= len(self.inputs):
            return None
        if self.spec.get("all_or_nothing") and not all(self.passed):
            return None
        return i

    def record(self, out: bytes, err: bytes, report: dict[str, Any], overflow: bool) -> None:
        i = len(self.passed)
        rc = report.get("returncode")
        text = out.decode("utf-8", errors="replace")
        if overflow:
            why = "output limit exceeded"
        elif report.get("timed_out"):
            why = "timeout"
        elif report.get("fault"):
            why = f"sandbox fault: {report['fault']}"
        elif rc != 0:
            why = f"runtime error (exit code {rc})"
        elif self.spec.get("cells"):  # a tool session's call: its output is the result, nothing to judge
            self.first_failure = (text[:65536], err.decode("utf-8", errors="replace")[:65536])
            why = ""
        elif self.spec.get("checker"):  # several right answers: the dataset's checker decides
            self.checking = text
            return
        elif not same_output(text, self.expected[i], self.spec.get("compare", "tokens"),
                             float(self.spec.get("abs_tol", 1e-6)), float(self.spec.get("rel_tol", 1e-6))):
            why = "wrong answer"
        else:
            why = ""
        self.passed.append(not why)
        self.failures.append(why)
        if why and not any(self.first_failure):
            self.first_failure = (text[:65536], err.decode("utf-8", errors="replace")[:65536])

    def record_check(self, err: bytes, report: dict[str, Any]) -> None:
        """The checker's verdict (testlib's convention: exit status 0 accepts the output)."""
        rc = report.get("returncode")
        why = "" if rc == 0 else ("checker timeout" if report.get("timed_out") else f"wrong answer (checker {rc})")
        self.passed.append(not why)
        self.failures.append(why)
        if why and not any(self.first_failure):
            self.first_failure = (self.checking or "", err.decode("utf-8", errors="replace")[:65536])
        self.checking = None

    def result(self, wall_s: float) -> dict[str, Any]:
        n = len(self.inputs)
        left = n - len(self.passed)
        failures = self.failures + ["not run: an earlier test failed"] * left
        status = "ok" if not any(f in ("timeout",) for f in self.failures) else "timeout"
        return {"status": status, "returncode": None, "wall_s": wall_s, "stdout": self.first_failure[0],
                "stderr": self.first_failure[1], "passed": self.passed + [False] * left, "n_tests": n,
                "error": "", "failures": failures}
