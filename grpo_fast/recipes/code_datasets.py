"""Mappers for the competitive-programming datasets people train code models on, each to the code recipe's row.

Every mapper reads one upstream schema exactly (the columns as the dataset publishes them) and writes: a chat
``prompt`` that says what the format expects (read stdin / implement ``fn_name``, starter code shown), ``tests`` as
JSON text in a shape ``rewards.code_tests`` reads, the reference solution as ``canonical_solution`` (feeding the gold
self-test; empty where the dataset has none: ``rewards check --programs`` takes programs of one's own instead, see
``grpo_fast.run.programs``), and the row's own ``time_limit`` (seconds per test) and
``memory_limit`` (bytes) when it gives them. ``detect`` picks the mapper from the columns.

| dataset | columns read | tests |
|---|---|---|
| APPS, TACO | ``question``, ``input_output``, ``solutions``, ``starter_code`` | stdin or ``fn_name`` |
| DeepMind CodeContests | ``description``, ``public/private/generated_tests``, ``solutions``, limits | stdin |
| LiveCodeBench | ``question_content``, ``public/private_test_cases``, ``starter_code``, ``metadata`` | both |
| open-r1 Codeforces | ``description``, ``input/output_format``, ``official_tests``, limits | stdin |
| PrimeIntellect verifiable | ``prompt``, ``verification_info``, ``gold_standard_solution`` | both |
| KodCode | ``question``, ``test`` (pytest, or stdin/stdout for ``online_judge``), ``solution`` | pytest, stdin |
"""

from __future__ import annotations

import ast
import base64
import json
import re
import struct
import zlib
from collections.abc import Callable
from typing import Any

from grpo_fast.recipes.common import Missing, chat, need, text

SYSTEM_PROMPT = (
    "You are a careful Python programmer. Reply with one complete, self-contained solution in a single "
    "```python code block. Do not add tests or example usage."
)
STDIN = ("Read the input from standard input and write the answer to standard output. Reply with one complete "
         "Python 3 program in a single ```python code block.")
CALL = "Implement `{fn}`. It is called with each test's arguments; do not read input or print the answer."
PYTHON_LANGUAGES = (3,)  # CodeContests language ids: 3 = PYTHON3 (1 is Python 2, which this kit does not run)


def _json(raw: dict, column: str) -> Any:
    value = need(raw, column)
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError as err:
            raise Missing([column], f"is not valid JSON ({err})") from None
    return value


def literal(text: str) -> Any:
    """JSON, or a Python literal (some sets store ``str(dict)``: single quotes, None); read as data, never run."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as err:
        raise ValueError(f"neither JSON nor a Python literal ({type(err).__name__})") from None


def _row(statement: str, tests: dict[str, Any], solution: str = "", starter: str = "", time_limit: Any = None,
         memory_limit: Any = None) -> dict[str, Any]:
    fn = tests.get("fn_name")
    if fn:
        how = CALL.format(fn=fn)
        how += f"\nStart from this code:\n```text\n{starter.rstrip()}\n```" if starter.strip() else ""
    else:
        how = STDIN
    n = min(len(tests.get("inputs") or []), len(tests.get("outputs") or []))
    if not n:
        raise Missing(["tests"], "has no input/output pairs")
    return {"prompt": chat(SYSTEM_PROMPT, f"{statement.strip()}\n\n{how}"), "tests": json.dumps(tests),
            "test_setup_code": "", "test": "", "entry_point": "", "canonical_solution": solution,
            "time_limit": float(time_limit) if time_limit else None,
            "memory_limit": int(memory_limit) if memory_limit else None}


def _limit(value: Any, unit: str) -> float | None:
    """``"2 seconds"``, ``"256 megabytes"`` (TACO) or a plain number, in seconds or bytes."""
    if isinstance(value, (int, float)):
        return float(value)
    m = re.match(r"\s*([\d.]+)\s*(\w*)", str(value or ""))
    if not m:
        return None
    number, word = float(m.group(1)), m.group(2).lower()
    if unit == "bytes":
        scale = {"kilobytes": 1 << 10, "megabytes": 1 << 20, "gigabytes": 1 << 30, "mb": 1 << 20}.get(word, 1 << 20)
        return number * scale
    return number / 1000 if word.startswith("milli") else number


def apps(raw: dict) -> dict:
    """APPS and TACO: ``input_output`` JSON (``inputs``/``outputs``, ``fn_name`` for call-based), ``solutions``
    JSON list, ``starter_code``; TACO adds ``time_limit`` ("2 seconds") and ``memory_limit`` ("256 megabytes")."""
    io = _json(raw, "input_output")
    tests = {"inputs": io.get("inputs") or [], "outputs": io.get("outputs") or []}
    if io.get("fn_name"):
        tests["fn_name"] = io["fn_name"]
    solutions = raw.get("solutions") or "[]"
    solutions = json.loads(solutions) if isinstance(solutions, str) else solutions
    seconds, memory = _limit(raw.get("time_limit"), "s"), _limit(raw.get("memory_limit"), "bytes")
    return _row(text(raw, "question"), tests, solutions[0] if solutions else "", str(raw.get("starter_code") or ""),
                seconds, memory)


def code_contests(raw: dict) -> dict:
    """DeepMind CodeContests: public, private and generated tests (``input``/``output`` lists), a Python 3 solution
    picked by language id, ``time_limit`` ``{seconds, nanos}``, ``memory_limit_bytes``."""
    inputs: list[str] = []
    outputs: list[str] = []
    for column in ("public_tests", "private_tests", "generated_tests"):
        block = raw.get(column) or {}
        inputs += list(block.get("input") or [])
        outputs += list(block.get("output") or [])
    solutions = raw.get("solutions") or {}
    python = [s for lang, s in zip(solutions.get("language") or [], solutions.get("solution") or [])
              if lang in PYTHON_LANGUAGES or str(lang).upper() == "PYTHON3"]  # ids, or labels in some copies
    limit = raw.get("time_limit") or {}
    seconds = (limit.get("seconds") or 0) + (limit.get("nanos") or 0) / 1e9 if isinstance(limit, dict) else None
    return _row(text(raw, "description"), {"inputs": inputs, "outputs": outputs}, python[0] if python else "",
                time_limit=seconds or None, memory_limit=raw.get("memory_limit_bytes"))


def livecodebench(raw: dict) -> dict:
    """LiveCodeBench: public tests as JSON, private tests packed as base64(zlib(pickle(JSON text))) and unpacked
    without unpickling anything but a string; ``functional`` tests call ``metadata.func_name`` with one JSON value
    per input line. No reference solutions."""
    cases = _json(raw, "public_test_cases")
    private = raw.get("private_test_cases")
    if private:  # packed in the published set; plain JSON in some copies
        cases = cases + json.loads(private if private.lstrip().startswith("[") else unpack_private_tests(private))
    metadata = _json(raw, "metadata") if raw.get("metadata") else {}
    fn = metadata.get("func_name") if isinstance(metadata, dict) else None
    functional = any(c.get("testtype") == "functional" for c in cases)
    if functional and fn:
        tests: dict[str, Any] = {"fn_name": fn, "inputs": [[json.loads(x) for x in c["input"].splitlines() if x]
                                                           for c in cases],
                                 "outputs": [json.loads(c["output"]) for c in cases]}
    else:
        tests = {"inputs": [c["input"] for c in cases], "outputs": [c["output"] for c in cases]}
    return _row(text(raw, "question_content"), tests, "", str(raw.get("starter_code") or ""))


def codeforces(raw: dict) -> dict:
    """open-r1 Codeforces: statement in ``description`` + ``input_format`` + ``output_format`` (+ ``note``),
    ``official_tests`` (``input``/``output``), ``time_limit`` seconds, ``memory_limit`` megabytes, and for problems
    with several right answers a ``generated_checker``, run the way open-r1 runs it (``open_r1_checker``). No
    reference solutions in this set."""
    parts = [text(raw, "description")]
    for title, column in (("Input", "input_format"), ("Output", "output_format"), ("Note", "note")):
        if raw.get(column):
            parts.append(f"{title}\n{raw[column]}")
    tests = need(raw, "official_tests")
    memory = raw.get("memory_limit")
    spec: dict[str, Any] = {"inputs": [t["input"] for t in tests], "outputs": [t["output"] for t in tests]}
    if isinstance(raw.get("generated_checker"), str) and raw["generated_checker"].strip():
        spec["checker"] = open_r1_checker(raw["generated_checker"])  # several right answers
    return _row("\n\n".join(parts), spec, time_limit=raw.get("time_limit"),
                memory_limit=memory * (1 << 20) if memory else None)


# open-r1's grader (the piston `codeforces` package its cf_scoring runs) calls the generated checker as
# `python3 checker.py INPUT CORRECT_OUTPUT SOLUTION_OUTPUT` -- the answer before the candidate's output, unlike testlib
# -- after dropping empty lines from both outputs and carriage returns from the input and the answer; the test passes
# when the checker exits 0 *and* prints 1 (or 100). The kit's checkers follow testlib (`input output answer`, exit 0
# accepts), so this adapter runs the dataset's checker the way open-r1 does and turns its verdict into an exit status.
OPEN_R1_CHECKER = """
import contextlib as _c, io as _io, os as _os, sys as _sys


def _read(path):
    with open(path, newline="") as f:
        return f.read()


def _no_cr(text):
    return "\\n".join(line[:-1] if line.endswith("\\r") else line for line in text.split("\\n"))


def _no_empty_lines(text):
    *lines, last = text.split("\\n")
    return "".join(line + "\\n" for line in lines if line) + last


def _write(path, text):
    with open(path, "w", newline="") as f:
        f.write(text)


_inp, _out, _ans = (_read(p) for p in _sys.argv[1:4])
_write("cf_input.txt", _no_cr(_inp))
_write("cf_correct_output.txt", _no_empty_lines(_no_cr(_ans.rstrip("\\n") + "\\n")))
_write("cf_solution_output.txt", _no_empty_lines(_out))
_sys.argv = ["checker.py", "cf_input.txt", "cf_correct_output.txt", "cf_solution_output.txt"]


def _exit(status=0):
    raise SystemExit(status)


_real_exit, _os._exit = _os._exit, _exit
_said = _io.TextIOWrapper(_io.BytesIO(), encoding="utf-8")
_code = 0
try:
    with _c.redirect_stdout(_said):
        exec(compile(CHECKER, "checker.py", "exec"), {"__name__": "__main__", "__file__": "checker.py"})
except SystemExit as exc:
    _code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
finally:
    _os._exit = _real_exit
_said.flush()
_verdict = "".join(_said.buffer.getvalue().decode("utf-8", "replace").split())
_sys.exit(0 if _code == 0 and _verdict in ("1", "100") else 1)
"""


def open_r1_checker(source: str) -> str:
    """open-r1's ``generated_checker`` as a kit checker (testlib argv, exit 0 accepts): see ``OPEN_R1_CHECKER``."""
    return f"CHECKER = {source!r}\n{OPEN_R1_CHECKER}"


def prime_intellect(raw: dict) -> dict:
    """PrimeIntellect verifiable-coding-problems: ``verification_info`` (JSON, or the same as a Python literal) with
    ``test_cases`` of type ``stdin_stdout`` (``input``/``output``) or ``function_call`` (``fn_name``, ``input`` args,
    ``output``; args given as text are one JSON value per line, LeetCode style); ``gold_standard_solution`` in a
    python fence."""
    info = need(raw, "verification_info")
    if isinstance(info, str):
        try:
            info = literal(info)
        except ValueError as err:
            raise Missing(["verification_info"], f"is {err}") from None
    if not isinstance(info, dict):
        raise Missing(["verification_info"], f"must be an object with 'test_cases', got {type(info).__name__}")
    cases = info.get("test_cases") or []
    calls = [c for c in cases if c.get("type") == "function_call"]
    if calls:
        pairs = [_call_case(c["input"], c["output"]) for c in calls]
        tests: dict[str, Any] = {"fn_name": calls[0]["fn_name"], "inputs": [a for a, _ in pairs],
                                 "outputs": [o for _, o in pairs]}
    else:
        tests = {"inputs": [c["input"] for c in cases], "outputs": [c["output"] for c in cases]}
    gold = str(raw.get("gold_standard_solution") or "")
    fenced = re.findall(r"```(?:python|py)?[^\n]*\n(.*?)```", gold, re.S)
    return _row(text(raw, "prompt"), tests, fenced[-1] if fenced else gold)


def _call_case(args: Any, output: Any) -> tuple[Any, Any]:
    """A call's arguments and result: a list as given, or text holding one JSON value per line (and JSON output)."""
    if not isinstance(args, str):
        return args, output
    try:
        values = [json.loads(line) for line in args.splitlines() if line.strip()]
        return values, json.loads(output) if isinstance(output, str) else output
    except ValueError:
        return [args], output


def kodcode(raw: dict) -> dict:
    """KodCode: the task in ``question``, the reference in ``solution``, and in ``test`` (``test_code`` in earlier
    revisions) a pytest file that imports from ``solution`` -- or, for ``online_judge`` rows, stdin/stdout cases
    ``{'stdin': [...], 'stdout': [...]}`` as a Python literal and a whole program as the solution."""
    question = text(raw, "question")
    test = str(need(raw, "test", "test_code"))
    judge = online_judge_cases(test)
    if judge is not None:
        return _row(question, judge, str(raw.get("solution") or ""))
    user = (f"{question}\n\nWrite the solution as a Python module: the tests import it with "
            "`from solution import ...`. Reply with one ```python code block.")
    return {"prompt": chat(SYSTEM_PROMPT, user), "tests": test, "test_setup_code": "",
            "test": "", "entry_point": "", "canonical_solution": str(raw.get("solution") or ""),
            "time_limit": None, "memory_limit": None}


def online_judge_cases(test: str) -> dict[str, Any] | None:
    """KodCode's stdin/stdout cases as the code reward's ``{"inputs", "outputs"}``, or None for a pytest file."""
    if not test.lstrip().startswith("{"):
        return None
    try:
        value = literal(test)
    except ValueError:
        raise Missing(["test"], "looks like stdin/stdout cases but is neither JSON nor a Python literal") from None
    if not (isinstance(value, dict) and isinstance(value.get("stdin"), list) and isinstance(value.get("stdout"), list)):
        raise Missing(["test"], "is an object without 'stdin' and 'stdout' lists")
    return {"inputs": [str(x) for x in value["stdin"]], "outputs": [str(x) for x in value["stdout"]]}


DETECT: tuple[tuple[tuple[str, ...], Callable[[dict], dict]], ...] = (
    (("input_output", "question"), apps),
    (("public_tests", "description"), code_contests),
    (("question_content", "public_test_cases"), livecodebench),
    (("official_tests",), codeforces),
    (("verification_info",), prime_intellect),
    (("question", "test", "solution"), kodcode),
    (("question", "test_code", "solution"), kodcode),
)


def detect(raw: dict) -> Callable[[dict], dict] | None:
    """The mapper whose columns the row has, or None (MBPP, HumanEval: the code recipe's own)."""
    return next((mapper for columns, mapper in DETECT if all(c in raw for c in columns)), None)


# ----------------------------------------------------------------------------------------------------------
# LiveCodeBench's private tests: a pickled string, read by hand (a dataset file is data, never code to unpickle)

_STRING_OPS = {0x8C: "<B", 0x58: "<I", 0x8D: "<Q"}  # SHORT_BINUNICODE, BINUNICODE, BINUNICODE8


def unpack_private_tests(blob: str) -> str:
    """base64 -> zlib -> a pickle that holds exactly one string; any other opcode is refused."""
    try:
        data = zlib.decompress(base64.b64decode(blob))
    except (ValueError, zlib.error) as err:
        raise Missing(["private_test_cases"], f"is not base64/zlib data ({err})") from None
    pos, found = 0, None
    while pos < len(data):
        op = data[pos]
        pos += 1
        if op == 0x80:  # PROTO n
            pos += 1
        elif op == 0x95:  # FRAME size
            pos += 8
        elif op == 0x94:  # MEMOIZE
            pass
        elif op in _STRING_OPS and found is None:
            fmt = _STRING_OPS[op]
            (n,) = struct.unpack_from(fmt, data, pos)
            pos += struct.calcsize(fmt)
            found = data[pos:pos + n].decode("utf-8")
            pos += n
        elif op == 0x2E and found is not None:  # STOP
            return found
        else:
            raise Missing(["private_test_cases"], f"holds more than a string (pickle opcode {op:#x}); refused")
    raise Missing(["private_test_cases"], "is truncated")
