"""What the sandbox leaves open is said where it matters: at the start of a run that scores code, in report.html,
in ``grpo-fast doctor``; ``sandbox_min_level`` refuses weaker isolation with exit 2 and one message."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from report_runs import make_run

from grpo_fast.files import write_json
from grpo_fast.sandbox import LEVELS, remaining_threats, weaker_than
from grpo_fast.watch.report import write_report

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="uid-drop (a container's level) needs root")


def _cli(*args: str, cwd, level: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "GRPO_FAST_SANDBOX_LEVEL": level}  # the level a stock container gets
    return subprocess.run([sys.executable, "-m", "grpo_fast", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=600, env=env)


def test_each_weaker_level_names_what_stays_open() -> None:
    assert remaining_threats("namespaces+uid-drop", {"seccomp": "holds (libseccomp)"}) == []
    assert "your files: readable and writable" in remaining_threats("rlimits-only", {})
    assert "network: open" in remaining_threats("uid-drop", {})
    memory = remaining_threats("namespaces+userns", {"cgroup memory": "refused: not root"})
    assert len(memory) == 1 and memory[0].startswith("memory:") and "20 ms" in memory[0]
    order = list(LEVELS)
    assert all(weaker_than(b, a) and not weaker_than(a, b) for a, b in zip(order, order[1:]))


@root_only
def test_a_run_that_scores_code_says_its_level_and_threats_at_its_start(tmp_path) -> None:
    proc = _cli("train", "code", "--dry-run", cwd=tmp_path, level="uid-drop")
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("code sandbox:"))
    assert "uid-drop" in line and "network: open" in line and "host files" in line


@root_only
def test_sandbox_min_level_refuses_weaker_isolation_with_exit_2(tmp_path) -> None:
    proc = _cli("train", "code", "sandbox_min_level=namespaces+userns", "--dry-run", cwd=tmp_path, level="uid-drop")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and proc.stderr.count("error:") == 1
    assert "sandbox_min_level" in proc.stderr and "network: open" in proc.stderr
    assert "fix: give the container namespaces" in proc.stderr
    assert not (tmp_path / "runs").exists()
    ok = _cli("train", "code", "sandbox_min_level=uid-drop", "--dry-run", cwd=tmp_path, level="uid-drop")
    assert ok.returncode == 0, ok.stderr[-2000:]


def test_sandbox_min_level_is_checked_as_a_key(tmp_path) -> None:
    proc = _cli("train", "code", "sandbox_min_level=strong", "--dry-run", cwd=tmp_path, level="auto")
    assert proc.returncode == 2 and "sandbox_min_level" in proc.stderr and "Traceback" not in proc.stderr


def test_the_report_says_what_a_program_could_reach(tmp_path) -> None:
    run = make_run(tmp_path / "run")
    summary = json.loads((run / "summary.json").read_text()) if (run / "summary.json").exists() else {}
    write_json(run / "summary.json", {**summary, "sandbox": {"level": "uid-drop", "threats": [
        "network: open", "host files: the world-readable ones readable"]}})
    page = write_report(run).read_text()
    assert "code sandbox: uid-drop" in page and "<li>network: open</li>" in page


@root_only
def test_doctor_lists_what_a_program_can_reach() -> None:
    code = ("import json; from grpo_fast import doctor; "
            "print(json.dumps([r.__dict__ for r in doctor.environment_rows()]))")
    env = {**os.environ, "GRPO_FAST_SANDBOX_LEVEL": "uid-drop"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    rows = {r["name"]: r for r in json.loads(proc.stdout.strip().splitlines()[-1])}
    assert rows["code sandbox"]["value"] == "uid-drop"
    assert rows["  reachable: network"]["value"] == "open" and rows["  reachable: network"]["status"] != "ok"
