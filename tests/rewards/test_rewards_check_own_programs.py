"""`grpo-fast rewards check` with programs of one's own: datasets without reference solutions (LiveCodeBench,
open-r1 Codeforces) are checked with the hand-written programs shipped beside their samples, through the real
command, the real sandbox and real files; a bad programs file stops with one located message and exit code 2."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from grpo_fast import data
from grpo_fast.cli import main
from grpo_fast.recipes.common import sample

WITHOUT_REFERENCES = ["livecodebench", "codeforces"]
WIDE = {"COLUMNS": "2000"}  # rich wraps its table at 80 columns without a terminal


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in re.split(r"[│|]", line) if cell.strip()]


def programs_line(out: str, limit: str) -> str:
    """The report's `programs` line whose limit (the expected score) is ``limit``."""
    found = [ln for ln in out.splitlines() if cells(ln)[:1] == ["programs"] and cells(ln)[3] == limit]
    assert len(found) == 1, out
    return found[0]


def score_of(line: str) -> str:
    return cells(line)[2]


def shipped(name: str) -> list[dict]:
    return data.read_rows(str(sample(f"{name}_sample.programs.jsonl")))


@pytest.mark.parametrize("name", WITHOUT_REFERENCES)
def test_the_command_scores_shipped_programs_right_1_and_wrong_0(name: str, tmp_path) -> None:
    """The real entry point on the sample as a user runs it: the programs file beside it is found and used."""
    entries = shipped(name)
    assert {e.get("expect", 1.0) for e in entries} == {0.0, 1.0}
    dataset = data.read_rows(str(sample(f"{name}_sample.jsonl")))
    assert all("solutions" not in r and "canonical_solution" not in r for r in dataset)  # really none upstream
    proc = subprocess.run([sys.executable, "-m", "grpo_fast", "rewards", "check", "code",
                           f"dataset={sample(f'{name}_sample.jsonl')}"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300, env={**__import__("os").environ, **WIDE})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{name}_sample.programs.jsonl (found beside the dataset)" in proc.stdout
    right, wrong = programs_line(proc.stdout, "1.000"), programs_line(proc.stdout, "0.000")
    assert score_of(right) == "1.000" and f"ok {sum('expect' not in e for e in entries)} right" in right
    assert score_of(wrong) == "0.000" and f"ok {sum('expect' in e for e in entries)} wrong" in wrong
    assert re.search(r"gold\s*[│|].*ok no row has a reference answer; the programs below stand in", proc.stdout)


@pytest.mark.parametrize("name", WITHOUT_REFERENCES)
def test_a_reward_that_misjudged_them_would_fail_the_check(name: str, tmp_path, capsys, monkeypatch) -> None:
    """Expectations swapped: every right program is reported at 1.0 and every wrong one at 0.0, and the check
    fails (exit 1): the scores are the reward's, not the file's."""
    monkeypatch.setenv("COLUMNS", "2000")
    swapped = tmp_path / "swapped.jsonl"
    swapped.write_text("".join(json.dumps({**e, "expect": 1.0 if "expect" in e else 0.0}) + "\n"
                               for e in shipped(name)))
    code = main(["rewards", "check", "code", f"dataset={sample(f'{name}_sample.jsonl')}", "--programs",
                 str(swapped)])
    out = capsys.readouterr().out
    assert code == 1
    right = [e for e in shipped(name) if "expect" not in e]
    wrong = [e for e in shipped(name) if "expect" in e]
    for line, scored, n in ((programs_line(out, "1.000"), "0.0000", len(wrong)),
                            (programs_line(out, "0.000"), "1.0000", len(right))):
        assert "FAIL" in line and "swapped.jsonl:" in line
        assert line.count(f"scored {scored}") == min(n, 3)  # the report names three misses, then "..."


def test_a_users_dataset_without_references(tmp_path, capsys, monkeypatch) -> None:
    """Any dataset file: without a right program the gold check still fails; `row` numbers work like ids."""
    monkeypatch.setenv("COLUMNS", "2000")
    dataset = tmp_path / "mine.jsonl"
    shutil.copy(sample("codeforces_sample.jsonl"), dataset)
    assert main(["rewards", "check", "code", f"dataset={dataset}"]) == 1
    assert "no row has a reference answer" in capsys.readouterr().out
    (tmp_path / "mine.programs.jsonl").write_text(json.dumps({"row": 2, "program": "print(0)", "expect": 0}) + "\n")
    assert main(["rewards", "check", "code", f"dataset={dataset}"]) == 1  # a wrong program proves nothing
    out = capsys.readouterr().out
    assert "mine.programs.jsonl (found beside the dataset)" in out and "FAIL no row has a reference answer" in out
    two_thirds = {"row": 1, "program": "w = int(input())\nprint('YES' if w % 2 == 0 else 'NO')", "expect": 0.6667}
    right = {"row": 2, "program": "input()\nprint(sum(map(int, input().split())))"}
    (tmp_path / "mine.programs.jsonl").write_text("".join(json.dumps(e) + "\n" for e in (two_thirds, right)))
    assert main(["rewards", "check", "code", f"dataset={dataset}"]) == 0
    out = capsys.readouterr().out
    assert "ok 1 partial program(s)" in programs_line(out, "0.667")  # forgets w = 2: 2 of 3 tests
    assert score_of(programs_line(out, "1.000")) == "1.000"


BAD = [  # (programs file text, what the message must say)
    ('{"row": 1, "program": "print(1)"}\n{"row": 1, "program": \n', ["broken JSON", "bad.jsonl:2:"]),
    ('["row", 1]\n', ["must be a JSON object", "bad.jsonl:1"]),
    ('\n{"id": "9999Z", "program": "print(1)"}\n', ["no dataset row has id '9999Z'", "bad.jsonl:2",
                                                     "'9999/A', '9999/B', '9999/C'"]),
    ('{"row": 4, "program": "print(1)"}\n', ["row 4 is not a row", "bad.jsonl:1", "1 to 3"]),
    ('{"row": 0, "program": "print(1)"}\n', ["row 0 is not a row", "bad.jsonl:1"]),
    ('{"program": "print(1)"}\n', ["'row'", "'id'", "exactly one", "bad.jsonl:1"]),
    ('{"row": 1, "id": "9999/A", "program": "print(1)"}\n', ["exactly one", "bad.jsonl:1"]),
    ('{"row": 1}\n', ["'program' is missing", "bad.jsonl:1"]),
    ('{"row": 1, "program": "print(1)", "expected": 0}\n', ["unknown key 'expected'", "did you mean 'expect'",
                                                            "bad.jsonl:1"]),
    ('{"row": 1, "program": "print(1)", "expect": 2}\n', ["'expect' must be a number from 0 to 1", "bad.jsonl:1"]),
    ("\n\n", ["has no programs"]),
]


@pytest.mark.parametrize(("text", "needles"), BAD)
def test_a_bad_programs_file_is_one_located_message(text: str, needles: list[str], tmp_path, capsys) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(text)
    assert main(["rewards", "check", "code", f"dataset={sample('codeforces_sample.jsonl')}", "--programs",
                 str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "fix:" in err and "Traceback" not in err
    assert all(n in err for n in needles), err


def test_a_missing_programs_file_and_a_recipe_without_programs(tmp_path) -> None:
    """The real entry point: exit 2, the path named, no traceback."""
    for args, needle in ((["code", "--programs", "nowhere.jsonl"], "programs file 'nowhere.jsonl' does not exist"),
                         (["math", "--programs", "nowhere.jsonl"], "recipe 'math' has no programs to check")):
        proc = subprocess.run([sys.executable, "-m", "grpo_fast", "rewards", "check", *args], capture_output=True,
                              text=True, cwd=tmp_path, timeout=300)
        assert proc.returncode == 2 and needle in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
