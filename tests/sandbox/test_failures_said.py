"""Failures of a layer are said, never reported as held (issue 52): each test forces the failure for real (a host
whose forker cannot set a job's ``shmall``, a path clean-up may not remove) and checks what the user is told."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import host_kinds
import pytest

from grpo_fast.sandbox.isolation import cleanup, memory
from grpo_fast.sandbox.policy import REFUSED_LAYER_THREATS

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to build the host (read-only cgroups, uids)")

POOL = """
import json
from grpo_fast.sandbox import Sandbox, make_io_job
sb = Sandbox(workers=1)
res, = sb.run_many([make_io_job("print(6 * 7)", [""], ["42"], 10, 128)])
print(json.dumps({"level": sb.level(), "layers": sb.layers(), "threats": sb.threats(), "honest": res.fraction}))
sb.close()
"""


@needs_root
def test_a_shared_memory_limit_the_forker_cannot_set_is_said_not_held() -> None:
    """Root with read-only cgroups: namespaces hold, so jobs run in the forker's minimal root, where no /proc is
    mounted: neither a job's ``shmall`` nor the memory watch's reads can work there. The run start says both are
    refused, with why, and names what that leaves open (before: both said to hold)."""
    proc = host_kinds.without_cgroups([sys.executable, "-c", POOL])
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["level"] == "namespaces+uid-drop" and report["layers"]["cgroup memory"].startswith("refused")
    shm = report["layers"]["sysv shm limit"]
    assert shm.startswith(f"refused: writing {memory.SHMALL}: "), shm
    assert f"sysv shm limit refused by this host: writing {memory.SHMALL}" in proc.stderr, proc.stderr
    assert REFUSED_LAYER_THREATS["sysv shm limit"] in report["threats"]
    assert report["layers"]["memory watch"].startswith("refused: "), report["layers"]
    assert REFUSED_LAYER_THREATS["memory watch"] in report["threats"]
    assert report["honest"] == 1.0, "a refused layer is said; honest jobs still run"


def test_a_failed_shmall_write_returns_why() -> None:
    """The write itself, refused to a uid without the right to it: the reason comes back, never silence."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            if os.geteuid() == 0:
                os.setresuid(65534, 65534, 65534)
            os.write(w, memory.limit_ipc_namespace(64).encode())
        finally:
            os._exit(0)
    os.close(w)
    why = os.read(r, 4096).decode()
    os.waitpid(pid, 0)
    assert why == f"writing {memory.SHMALL}: Permission denied", why


@needs_root
def test_clean_up_records_only_what_it_removed_and_says_what_it_could_not() -> None:
    """A job's uid left a file and a directory where the cleaning process may not unlink (a directory it cannot
    write), and a file where it may: only the latter is ``removed``; the others are ``left``, with why."""
    job, cleaner = 54321, 54322
    tmp_path = Path(tempfile.mkdtemp(prefix="grpo_sbx_cleanup_"))  # the cleaner's uid must reach it
    try:
        _clean_as_another_uid(tmp_path, job, cleaner)
    finally:
        shutil.rmtree(tmp_path)


def _clean_as_another_uid(tmp_path: Path, job: int, cleaner: int) -> None:
    locked, open_ = tmp_path / "locked", tmp_path / "open"
    locked.mkdir(mode=0o755)
    open_.mkdir()
    open_.chmod(0o777)
    tmp_path.chmod(0o755)
    for path in (locked / "f", locked / "d", locked / "d" / "g", open_ / "f"):
        path.mkdir() if path.name == "d" else path.write_text("left")
        os.chown(path, job, job)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.setresuid(cleaner, cleaner, cleaner)
            os.write(w, json.dumps(cleanup.remove_owned(job, (str(locked), str(open_)))).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        removed, left = json.loads(f.read())
    os.waitpid(pid, 0)
    assert removed == [str(open_ / "f")] and not (open_ / "f").exists()
    assert sorted(left) == [f"{locked / 'd'} (Permission denied)", f"{locked / 'f'} (Permission denied)"], left
    assert (locked / "f").exists() and (locked / "d" / "g").exists()


@needs_root
@pytest.mark.parametrize("inotify", [True, False], ids=["names-made-since", "whole-directory-scans"])
def test_clean_up_by_uid_finds_what_each_job_uid_left(tmp_path: Path, inotify: bool) -> None:
    """``cleanup.Leftovers`` (a forker's clean-up where jobs share the host's directories) removes every entry a
    job's uid owns: one it owned before the pool started, files and directories made or renamed in since, in the
    watched directories (inotify) as in those scanned whole; another job's entries stay until its own clean-up,
    the host's always."""
    shared, scanned, elsewhere = tmp_path / "shared", tmp_path / "scanned", tmp_path / "elsewhere"
    for d in (shared, scanned, elsewhere):
        d.mkdir()
    one, two = 0x40000001, 0x40000002
    (shared / "before").write_text("x")
    os.chown(shared / "before", one, one)
    found = cleanup.Leftovers(lambda uid: uid in (one, two), (str(shared), str(scanned)),
                              (str(shared),) if inotify else ())
    for path, uid in ((shared / "file", one), (shared / "dir", one), (shared / "dir" / "in", one),
                      (scanned / "file", one), (shared / "other", two), (shared / "host", 0), (elsewhere / "r", one)):
        path.mkdir() if path.name in ("dir", "other") else path.write_text("x")
        os.chown(path, uid, uid)
    (elsewhere / "r").rename(shared / "renamed")
    removed, left = found.remove_owned(one)
    assert not left and sorted(removed) == sorted(str(p) for p in (shared / "before", shared / "file", shared / "dir",
                                                                   scanned / "file", shared / "renamed"))
    assert sorted(p.name for p in shared.iterdir()) == ["host", "other"]
    assert found.remove_owned(two) == ([str(shared / "other")], [])
    assert [p.name for p in shared.iterdir()] == ["host"] and found.remove_owned(one) == ([], [])
