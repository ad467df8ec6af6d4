"""Pytest files run by pytest in the judge (issue 29): honest programs earn full marks or are counted as outside
the design, wrong ones never do, a file with no test is the row's error, and the checks show every failing
reference (tests/sandbox/pytest_programs.py holds the programs)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pytest_programs import HONEST, OUTSIDE, WRONG

from grpo_fast import sandbox as sb
from grpo_fast.rewards import code_tests
from grpo_fast.rewards.code import make_code_execution_reward

TIMEOUT = 10.0
reward = make_code_execution_reward(timeout=TIMEOUT)
ROOT = Path(__file__).resolve().parents[2]


def _fenced(code: str) -> str:
    return f"```python\n{code}```"


def _run(program: str, tests: str) -> sb.SandboxResult:
    return sb.default_sandbox().run_many([code_tests.job(program, code_tests.parse(tests), timeout=TIMEOUT)])[0]


@pytest.fixture(scope="module")
def scores() -> dict[str, float | None]:
    names = sorted(HONEST)
    return dict(zip(names, reward(None, [_fenced(HONEST[n][1]) for n in names], tests=[HONEST[n][2] for n in names])))


def test_the_suite_covers_the_families() -> None:
    assert len(HONEST) >= 80 and len({family for family, _, _ in HONEST.values()}) >= 12
    assert len(WRONG) >= 15 and {"class_only_wrong", "builtin_named_wrong_sorted"} <= set(WRONG)


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_pytest_file_scores_full(name: str, scores: dict[str, float | None]) -> None:
    if scores[name] != 1.0:
        res = _run(HONEST[name][1], HONEST[name][2])
        pytest.fail(f"{name}: {scores[name]} {res.status} {res.error} {res.failures} {res.stderr[-300:]}")


@pytest.mark.parametrize("name", sorted(OUTSIDE))
def test_outside_the_design_is_counted_and_shown(name: str, caplog: pytest.LogCaptureFixture) -> None:
    why, program, tests = OUTSIDE[name]
    fresh = make_code_execution_reward(timeout=TIMEOUT)
    with caplog.at_level(logging.WARNING, logger="grpo_fast.rewards"):
        assert fresh(None, [_fenced(program)], tests=[tests]) == [0.0]
    detail = fresh.last_details[0]
    assert detail["outside_design"] >= 1 and detail["why"].startswith(f"outside design ({why})"), detail
    assert fresh.outside_design == 1 and "outside the design" in caplog.text


def test_wrong_programs_in_pytest_files_score_below_full() -> None:
    names = sorted(WRONG)
    got = reward(None, [_fenced(WRONG[n][0]) for n in names], tests=[WRONG[n][1] for n in names])
    assert all(s is not None and s < 1.0 for s in got), [n for n, s in zip(names, got) if s is None or s >= 1.0]


def test_items_not_functions_are_the_tests() -> None:
    res = _run(HONEST["parametrize_stack"][1], HONEST["parametrize_stack"][2])
    assert res.n_tests == 4 and res.fraction == 1.0
    skipped = _run(HONEST["skip_mark"][1], HONEST["skip_mark"][2])  # the skipped test leaves the count
    assert skipped.n_tests == 1 and skipped.fraction == 1.0


NO_TESTS = {
    "helpers_only": "from solution import add\n\n\ndef check(x):\n    assert add(x, 0) == x\n",
    "class_without_tests": ("from solution import add\n\n\nclass Helper:\n    def run(self):\n"
                            "        return add(1, 2)\n"),
    "needs_a_missing_module": ("from solution import add\nimport no_such_testing_library\n\n\ndef test_a():\n"
                               "    assert add(1, 1) == 2\n"),
    "all_skipped": ("import pytest\nfrom solution import add\n\n\n@pytest.mark.skip\ndef test_a():\n"
                    "    assert add(1, 1) == 2\n"),
}


@pytest.mark.parametrize("name", sorted(NO_TESTS))
def test_a_file_without_a_test_is_the_rows_error_never_an_assert(name: str) -> None:
    tests = NO_TESTS[name]
    assert code_tests.parse(tests) == tests  # a test file, not one assert that passes once the imports work
    fresh = make_code_execution_reward(timeout=TIMEOUT)
    assert fresh(None, [_fenced("def add(a, b):\n    return a + b\n")], tests=[tests]) == [0.0]
    assert fresh.last_details[0]["row_error"], fresh.last_details


def test_asserts_in_a_string_stay_one_assert_test() -> None:
    text = "def helper(x):\n    return x\n\nassert helper(add(1, 2)) == 3\n"
    assert code_tests.parse(text) == [text]
    assert reward(None, [_fenced("def add(a, b):\n    return a + b\n")], tests=[text]) == [1.0]


def _kodcode_rows(bad: int, good: int) -> list[dict]:
    test = "from solution import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\ndef test_zero():\n" \
           "    assert add(0, 0) == 0\n"
    right, wrong = "def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a - b\n"
    rows = [{"question_id": f"good_{i}", "question": f"Write add(a, b), good row {i}.", "solution": right,
             "test": test} for i in range(good)]
    rows += [{"question_id": f"bad_{i}", "question": f"Write add(a, b), broken reference {i}.", "solution": wrong,
              "test": test} for i in range(bad)]
    rows.append({"question_id": "no_test", "question": "Write add(a, b), a test file without tests.",
                 "solution": right, "test": NO_TESTS["class_without_tests"]})
    return rows


def _rewards_check(tmp_path: Path, rows: list[dict]) -> subprocess.CompletedProcess:
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "grpo_fast", "rewards", "check", "code", f"dataset={path}",
                           "eval_rows=0", "evaluate=false"], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=600)


def test_rewards_check_cli_shows_failing_references(tmp_path: Path) -> None:
    done = _rewards_check(tmp_path, _kodcode_rows(bad=2, good=6))
    out = done.stdout + done.stderr
    assert done.returncode == 1, out  # never OK while a reference fails
    assert "3 of 9 reference solutions do not get full" in out, out
    assert "AssertionError" in out and "no test collected in the test file" in out, out
    assert "dropped rows (not trained on):" in out and "broken reference" in out, out
    assert "OK" not in out.split("dropped rows")[1].replace("ok", ""), out


def test_rewards_check_cli_stops_when_most_references_fail(tmp_path: Path) -> None:
    done = _rewards_check(tmp_path, _kodcode_rows(bad=5, good=2))
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert "6 of 8 reference solutions do not get full" in out and "Traceback" not in out, out
    assert "the reward or the data is broken" in out, out


def test_shared_files_never_leave_the_working_directory(tmp_path: Path) -> None:
    """What the program sends back is checked on arrival: no absolute path, no ``..``, no link followed."""
    from grpo_fast.sandbox.verdict.scratch import Scratch

    root = tmp_path / "work"
    (root / "sub").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "link").symlink_to(outside)
    Scratch(str(root)).apply({"../escaped": b"x", "/tmp/abs": b"x", "sub/../../escaped2": b"x",
                              "link/through": b"x", "solution.py": b"x", "ok/file.txt": b"fine", "dir/": True})
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["file.txt"]
    assert (root / "dir").is_dir() and not list(outside.iterdir())
    side = Scratch(str(root))
    assert side.changed() == {"sub/": True, "ok/": True, "ok/file.txt": b"fine", "dir/": True}
    assert side.changed() == {}  # only what changed crosses


def test_the_training_log_gets_each_rows_reason_and_the_share_outside_the_design() -> None:
    extra: dict[str, list] = {}
    metrics: dict[str, float] = {}
    why, program, tests = OUTSIDE["money_equals_number"]
    fresh = make_code_execution_reward(timeout=TIMEOUT)
    got = fresh(None, [_fenced(program), _fenced(HONEST["capsys_out"][1])], tests=[tests, HONEST["capsys_out"][2]],
                log_extra=lambda col, vals: extra.setdefault(col, vals),
                log_metric=lambda name, value: metrics.setdefault(name, value))
    assert got == [0.0, 1.0]
    assert extra["code_why"][0].startswith(f"outside design ({why})") and extra["code_why"][1] == ""
    assert metrics == {"code/outside_design": 0.5, "code/row_error": 0.0}


THREE_TESTS = ("from solution import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\n"
               "def test_add_more():\n    assert add(2, 2) == 4\n\n\ndef test_add_neg():\n    assert add(-1, 1) == 1\n")


def test_a_program_that_stops_the_session_fails_every_test() -> None:
    """``KeyboardInterrupt`` ends pytest's session inside the first test: that test and the two never run fail (a
    test counted as passed when it started scored this wrong program 1.0, with one test in all)."""
    res = _run("def add(a, b):\n    raise KeyboardInterrupt\n", THREE_TESTS)
    assert res.n_tests == 3 and res.passed == [False] * 3, (res.n_tests, res.failures)
    assert reward(None, [_fenced("def add(a, b):\n    raise KeyboardInterrupt\n")], tests=[THREE_TESTS]) == [0.0]


@pytest.mark.parametrize("margin", [0.015, 0.005, 0.001])
def test_a_failure_timed_to_the_judges_alarm_never_passes(margin: float) -> None:
    """A wrong program that raises just before the job's deadline: the alarm lands while pytest reports the
    failure (4 of 12 such programs scored 1.0 before)."""
    timeout = 1.0  # per test: the job's deadline is 3 x 1 + 1 s from the start
    program = ("import time\nT0 = time.monotonic()\ndef add(a, b):\n"
               f"    time.sleep(max(0.0, T0 + 4.0 - {margin} - time.monotonic()))\n    raise ValueError\n")
    job = code_tests.job(program, code_tests.parse(THREE_TESTS), timeout=timeout)
    (res,) = sb.default_sandbox().run_many([job])
    # on a loaded machine the deadline may land before pytest has collected the three tests: the job then ends
    # as a whole ("exited"), still with no credit
    assert res.fraction == 0.0 and (res.n_tests == 3 or res.status != "ok"), (res.status, res.failures)
