"""Stdin/stdout, call-based and pytest-file tests through the real code reward, and the dataset mappers on their
shipped samples (each in its dataset's exact schema)."""

from __future__ import annotations

import base64
import json
import os
import pickle
import zlib

import pytest
from stdio_programs import CALLS, HOSTILE, HOSTILE_TESTS, STDIN

from grpo_fast.recipes import code_datasets
from grpo_fast.recipes.code import map_row
from grpo_fast.recipes.common import Missing, sample
from grpo_fast.rewards.code import make_code_execution_reward
from grpo_fast.rewards.code_tests import parse

TIMEOUT = 10.0  # generous per test: the machine running the tests may be busy
reward = make_code_execution_reward(timeout=TIMEOUT)


def _fenced(program: str) -> str:
    return f"Here is my solution.\n```python\n{program}\n```"


@pytest.fixture(scope="module")
def stdin_scores() -> dict[str, float | None]:
    names = sorted(STDIN)
    tests = [json.dumps({"inputs": STDIN[n][1], "outputs": STDIN[n][2]}) for n in names]
    return dict(zip(names, reward(None, [_fenced(STDIN[n][0]) for n in names], tests=tests)))


@pytest.fixture(scope="module")
def call_scores() -> dict[str, float | None]:
    names = sorted(CALLS)
    tests = [json.dumps({"fn_name": CALLS[n][1], "inputs": CALLS[n][2], "outputs": CALLS[n][3]}) for n in names]
    return dict(zip(names, reward(None, [_fenced(CALLS[n][0]) for n in names], tests=tests)))


def test_the_honest_battery_is_big_enough() -> None:
    assert len(STDIN) + len(CALLS) >= 40


@pytest.mark.parametrize("name", sorted(STDIN))
def test_honest_stdin_program_scores_full(name: str, stdin_scores: dict[str, float | None]) -> None:
    assert stdin_scores[name] == 1.0


@pytest.mark.parametrize("name", sorted(CALLS))
def test_honest_call_based_program_scores_full(name: str, call_scores: dict[str, float | None]) -> None:
    assert call_scores[name] == 1.0


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_stdin_program_scores_zero(name: str) -> None:
    tests = json.dumps({"inputs": HOSTILE_TESTS[0], "outputs": HOSTILE_TESTS[1]})
    short = make_code_execution_reward(timeout=2.0)
    assert short(None, [_fenced(HOSTILE[name])], tests=[tests]) == [0.0]


def test_the_expected_output_never_reaches_the_program(tmp_path) -> None:
    """The program sees its input and nothing else: a search of everything it can read finds no expected output."""
    marker = "EXPECTED-7b1f9c"
    prog = ("import os\nhits = 0\nfor root in ('/', '/proc/self'):\n    for d, _, files in os.walk(root):\n"
            "        for f in files:\n            try:\n"
            "                if b'7b1f9c' in open(os.path.join(d, f), 'rb').read(1 << 20):\n"
            "                    hits += 1\n            except OSError:\n                pass\n"
            "        if d.count('/') > 6:\n            break\nprint(hits)")
    tests = json.dumps({"inputs": ["x\n"], "outputs": [marker]})
    assert reward(None, [_fenced(prog)], tests=[tests]) == [0.0]


def test_partial_credit_and_all_or_nothing() -> None:
    tests = json.dumps({"inputs": ["1\n", "2\n", "3\n", "4\n"], "outputs": ["1\n", "4\n", "9\n", "0\n"]})
    prog = _fenced("n = int(input())\nprint(n * n)")
    assert reward(None, [prog], tests=[tests]) == [0.75]
    strict = make_code_execution_reward(timeout=TIMEOUT, all_or_nothing=True)
    assert strict(None, [prog], tests=[tests]) == [0.0]


def test_comparison_modes_and_row_limits() -> None:
    tests = json.dumps({"inputs": [""], "outputs": ["1.0000001\n"]})
    prog = _fenced("print(1.0)")
    assert reward(None, [prog], tests=[tests]) == [1.0]
    exact = make_code_execution_reward(timeout=TIMEOUT, compare="exact")
    assert exact(None, [prog], tests=[tests]) == [0.0]
    slow = _fenced("import time\ntime.sleep(1.5)\nprint(1)")
    one = json.dumps({"inputs": [""], "outputs": ["1"]})
    assert reward(None, [slow], tests=[one], time_limit=[0.5]) == [0.0]
    assert reward(None, [slow], tests=[one], time_limit=[5.0]) == [1.0]
    hungry = _fenced("x = bytearray(400 << 20)\nprint(1)")
    assert reward(None, [hungry], tests=[one], memory_limit=[256 << 20]) == [0.0]
    assert reward(None, [hungry], tests=[one], memory_limit=[2048 << 20]) == [1.0]


def test_pytest_file_tests_count_each_item() -> None:
    test_file = ("from solution import add\nimport pytest\n\ndef test_one():\n    assert add(1, 2) == 3\n\n"
                 "def test_two():\n    assert add(0, 0) == 1\n\n@pytest.mark.parametrize('a,b', [(1, 1), (2, 2)])\n"
                 "def test_param(a, b):\n    assert add(a, b) == a + b\n")
    assert parse(test_file) == test_file
    assert reward(None, [_fenced("def add(a, b):\n    return a + b")], tests=[test_file]) == [0.75]  # 3 of 4 items


SAMPLES = ["apps", "taco", "code_contests", "livecodebench", "codeforces", "primeintellect", "kodcode"]
WITHOUT_REFERENCES = ("livecodebench", "codeforces")  # no solutions upstream: the kit ships programs beside them


def _right_programs(name: str, raws: list[dict]) -> list[str]:
    """The hand-written right program per row, from ``<name>_sample.programs.jsonl``."""
    from grpo_fast import data
    from grpo_fast.run.programs import row_id

    entries = data.read_rows(str(sample(f"{name}_sample.programs.jsonl")))
    right = {e["id"]: e["program"] for e in entries if "expect" not in e}
    return [right[row_id(raw)] for raw in raws]


def _rows(name: str) -> list[dict]:
    from grpo_fast import data

    return [map_row(raw) for raw in data.read_rows(str(sample(f"{name}_sample.jsonl")))]


@pytest.mark.parametrize("name", SAMPLES)
def test_each_mapper_reads_its_sample_and_judges_both_ways(name: str) -> None:
    rows = _rows(name)
    raws = __import__("grpo_fast").data.read_rows(str(sample(f"{name}_sample.jsonl")))
    assert rows and all(code_datasets.detect(raw) is not None for raw in raws)
    programs = _right_programs(name, raws) if name in WITHOUT_REFERENCES else [r["canonical_solution"] for r in rows]
    assert all(programs)
    cols = {k: [r.get(k) for r in rows] for k in ("tests", "time_limit", "memory_limit")}
    assert reward(None, [_fenced(p) for p in programs], **cols) == [1.0] * len(rows)
    wrong = _fenced("print(0)\ndef solve(*a, **k):\n    return 0")
    assert reward(None, [wrong] * len(rows), **cols) == [0.0] * len(rows)
    prompt = rows[0]["prompt"][-1]["content"]
    spec = json.loads(rows[0]["tests"]) if rows[0]["tests"].lstrip().startswith("{") else {}
    if spec.get("fn_name"):
        assert spec["fn_name"] in prompt and "do not read input" in prompt
    elif spec:
        assert "standard input" in prompt
    else:
        assert "from solution import" in prompt


def test_codecontests_keeps_only_python3_solutions_and_its_limits() -> None:
    rows = _rows("code_contests")
    assert "#include" not in rows[0]["canonical_solution"]
    assert rows[1]["time_limit"] == 1.5 and rows[1]["memory_limit"] == 268435456
    assert len(json.loads(rows[0]["tests"])["inputs"]) == 3  # public + private + generated


def test_livecodebench_private_tests_are_read_without_unpickling() -> None:
    cases = [{"input": "1\n", "output": "2\n", "testtype": "stdin"}]
    blob = base64.b64encode(zlib.compress(pickle.dumps(json.dumps(cases)))).decode()
    assert json.loads(code_datasets.unpack_private_tests(blob)) == cases

    class Evil:
        def __reduce__(self):
            return (os.system, ("touch /tmp/grpo_fast_lcb_pwned",))

    for payload in (pickle.dumps(Evil()), pickle.dumps(["a", "b"]), pickle.dumps(b"bytes")):
        with pytest.raises(Missing):
            code_datasets.unpack_private_tests(base64.b64encode(zlib.compress(payload)).decode())
    assert not os.path.exists("/tmp/grpo_fast_lcb_pwned")


# A published row's private tests (LiveCodeBench code_generation_lite, question 1873_A), as a copy of that row shows
# them: the decoder must read the real packing (protocol 4: PROTO, FRAME, BINUNICODE, MEMOIZE, STOP).
PUBLISHED_BLOB = ("eJxrYJmaz8gABhEZQEZ0tVJmXkFpiZKVgpJhTF5iUnJMnpKOglJ+aQlUNNI1GCJUklpcUlJZkAoSLC5JycxTqtVRQNJuDNWOILAY"
                  "hCCIMdI0Ji85MQloWjKQSE5KjMlLSgSam5SciG64nz+y2WACJESMJWYY7ibFG8T5KnaKHgAcinnp")


def test_livecodebench_private_tests_of_a_published_row() -> None:
    cases = json.loads(code_datasets.unpack_private_tests(PUBLISHED_BLOB))
    assert [c["testtype"] for c in cases] == ["stdin"] * 4
    assert cases[0] == {"input": "1\nabc\n", "output": "YES\n", "testtype": "stdin"}


def test_kodcode_online_judge_rows_are_stdin_tests_and_older_revisions_map() -> None:
    """KodCode's online_judge rows carry {'stdin': [...], 'stdout': [...]} (a Python literal) in `test`, and a whole
    program as the solution; earlier revisions name the pytest column `test_code`."""
    from grpo_fast import data

    pytest_row, judge_row = data.read_rows(str(sample("kodcode_sample.jsonl")))
    judged = map_row(judge_row)
    assert json.loads(judged["tests"]) == {"inputs": ["1 2\n", "-5 7\n"], "outputs": ["3\n", "2\n"]}
    assert "standard input" in judged["prompt"][-1]["content"]
    older = {k: v for k, v in pytest_row.items() if k not in ("version", "test")} | {"test_code": pytest_row["test"]}
    assert map_row(older)["tests"] == pytest_row["test"]
    broken = dict(judge_row, test="{'stdin': ['1 2\n']")
    with pytest.raises(Missing):
        map_row(broken)


def test_a_spec_that_is_not_json_never_runs_as_an_assert() -> None:
    """Text that opens like a spec but is not one scores nothing (as an assert, a dict literal would pass)."""
    assert reward(None, [_fenced("print('nonsense')")], tests=["{'stdin': ['1 2\\n'], 'stdout': ['3\\n']}"]) == [None]
    assert reward(None, [_fenced("print('nonsense')")], tests=["{not even a literal"]) == [None]
    literal = str({"inputs": ["1 2\n"], "outputs": ["3\n"]})
    assert reward(None, [_fenced("print(sum(map(int, input().split())))")], tests=[literal]) == [1.0]


@pytest.mark.parametrize("info", [
    json.dumps({"language": "python", "test_cases": [{"type": "function_call", "fn_name": "add",
                                                       "input": [1, 2], "output": [3]}]}),
    str({"language": "python", "test_cases": [{"type": "function_call", "fn_name": "add", "input": [1, 2],
                                               "output": [3], "extra": None}]}),
    json.dumps({"language": "python", "test_cases": [{"type": "function_call", "fn_name": "add", "input": "1\n2",
                                                       "output": "3"}]}),
])
def test_primeintellect_verification_info_as_json_or_python_literal(info: str) -> None:
    raw = {"source": "apps", "task_type": "verifiable_code", "in_source_id": "1", "prompt": "Write add(a, b).",
           "gold_standard_solution": "```python\ndef add(a, b):\n    return a + b\n```", "verification_info": info,
           "metadata": "{}", "problem_id": "vfc_9"}
    row = map_row(raw)
    programs = [row["canonical_solution"], "def add(a, b):\n    return a - b"]
    assert reward(None, [_fenced(p) for p in programs], tests=[row["tests"]] * 2) == [1.0, 0.0]


def test_a_row_without_tests_is_reported_by_file_and_row(tmp_path) -> None:
    from grpo_fast.errors import UserError
    from grpo_fast.recipes.common import Source, map_rows

    bad = {"question": "q", "input_output": json.dumps({"inputs": [], "outputs": []}), "solutions": "[]"}
    path = tmp_path / "apps.jsonl"
    path.write_text(json.dumps(bad) + "\n")
    with pytest.raises(UserError) as err:
        map_rows([Source(str(path), [bad], path)], map_row, "hint")
    assert "apps.jsonl:1" in str(err.value) and "tests" in str(err.value)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["apps", "livecodebench"])
def test_code_recipe_trains_a_step_on_a_competitive_sample(name: str, in_tmp) -> None:
    """`grpo-fast train code dataset=<sample>`: stdin and call-based rows (APPS), rows without references (LCB)."""
    from grpo_fast import resolve_config, train

    cfg = resolve_config("code", [f"dataset={sample(f'{name}_sample.jsonl')}", "max_steps=1",
                                  "max_completion_length=8", "num_generations=2", "per_device_train_batch_size=2",
                                  "evaluate=false"])
    result = train(cfg)
    assert result.summary["steps"] == 1 and (result.path / "adapter" / "adapter_config.json").exists()


SPLIT_CHECKER = ("import sys\ninp, out, ans = (open(p).read() for p in sys.argv[1:4])\nn = int(inp)\n"
                 "try:\n    a, b = map(int, out.split())\nexcept ValueError:\n    sys.exit(1)\n"
                 "sys.exit(0 if a + b == n and min(a, b) > 0 and a % 2 == b % 2 == 0 else 1)\n")


def test_a_dataset_checker_accepts_every_right_answer() -> None:
    """Several right answers: the dataset's checker (run sandboxed, testlib-style) judges, not the one output."""
    tests = json.dumps({"inputs": ["8\n", "12\n"], "outputs": ["2 6\n", "2 10\n"], "checker": SPLIT_CHECKER})
    programs = ["n = int(input())\nprint(2, n - 2)", "n = int(input())\nprint(n - 2, 2)",
                "n = int(input())\nprint(n // 2 - n // 2 % 2, n - (n // 2 - n // 2 % 2))",
                "n = int(input())\nprint(1, n - 1)", "import os\nprint(open('answer.txt').read())"]
    assert reward(None, [_fenced(p) for p in programs], tests=[tests] * 5) == [1.0, 1.0, 1.0, 0.0, 0.0]


# open-r1's convention (its grader runs `checker.py INPUT CORRECT_OUTPUT SOLUTION_OUTPUT` and passes a test when the
# checker exits 0 and prints 1 or 100): this checker reads the answer from argv[2] and the candidate from argv[3],
# and prints its verdict, exiting 0 either way.
OPEN_R1_STYLE = ("import sys\n_, inp, correct, solution = sys.argv\nwant = sorted(open(correct).read().split())\n"
                 "got = sorted(open(solution).read().split())\nprint(100 if got == want else 0)\n")


@pytest.mark.parametrize(("checker", "programs", "scores"), [
    (OPEN_R1_STYLE, ["n = int(input())\nprint(2, n - 2)", "n = int(input())\nprint(n - 2, 2)",
                     "n = int(input())\nprint()\nprint(2)\nprint()\nprint(n - 2)",  # empty lines are dropped
                     "n = int(input())\nprint(1, n - 1)", "print(0)"], [1.0, 1.0, 1.0, 0.0, 0.0]),
    ("print(1)\nraise SystemExit(3)", ["print(0)"], [0.0]),  # says 1 but exits non-zero: rejected
    ("import os\nos._exit(0)", ["print(0)"], [0.0]),  # exits 0 without a verdict: rejected
    ("import sys\nsys.stdout.buffer.write(b' 1\\n')", ["print(0)"], [1.0]),
])
def test_codeforces_checkers_are_run_the_way_open_r1_runs_them(checker: str, programs: list[str],
                                                               scores: list[float]) -> None:
    """open-r1's generated_checker: the answer before the output in argv, the verdict printed (exit 0 alone is not
    an acceptance), as its grader does; a wrong answer its checker rejects scores 0."""
    from grpo_fast import data

    raw = data.read_rows(str(sample("codeforces_sample.jsonl")))[2]
    row = map_row(dict(raw, official_tests=[{"input": "8\n", "output": "2 6\n"}, {"input": "12\n", "output": "2 10\n"}],
                       generated_checker=checker))
    assert reward(None, [_fenced(p) for p in programs], tests=[row["tests"]] * len(programs)) == scores


def test_rows_whose_reference_fails_are_reported_and_not_trained_on(tmp_path, capsys) -> None:
    from grpo_fast import data
    from grpo_fast.cli import main

    raws = data.read_rows(str(sample("apps_sample.jsonl")))
    broken = dict(raws[0], question=raws[0]["question"] + " (variant)", solutions=json.dumps(["print(0)"]))
    path = tmp_path / "apps.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [*raws, broken]))
    assert main(["train", "code", f"dataset={path}", "evaluate=false", "--dry-run"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert " reference solutions do not get full" in out and "not trained on" in out
    assert "print(0)" in out  # the dropped row is shown
    every = tmp_path / "all_broken.jsonl"
    every.write_text(json.dumps(broken) + "\n")
    assert main(["train", "code", f"dataset={every}", "evaluate=false", "--dry-run"]) == 2  # a broken reward?
