"""A slot's job directories, reused from job to job where jobs share the host's /tmp (``isolation.jobdirs``): what
one job leaves in its directory never reaches the next, and a name a job put in the directory's place is never
handed on."""

from __future__ import annotations

import fcntl
import os
import select
import shutil
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

import pytest

from grpo_fast.sandbox.isolation import cleanup, jobdirs

JOB_UID = 0x4000_1234 if os.geteuid() == 0 else None  # a job's uid where the forker may drop to one
reused = pytest.mark.skipif(JOB_UID is None, reason="directories are reused only where jobs have uids of their own")


def _as_job(uid: int | None, act) -> None:
    """``act()`` in a child under the job's uid (as the job's own processes would run)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            if uid is not None:
                os.setgroups([])
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)
            act()
            code = 0
        finally:
            os._exit(code)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0, "the job's actions failed"


def _leave_everything(path: str) -> None:
    with open(os.path.join(path, "answers.txt"), "w") as f:
        f.write("planted")
    os.makedirs(os.path.join(path, "sub", "deeper"))
    with open(os.path.join(path, "sub", "deeper", "x"), "w") as f:
        f.write("x")
    os.link(os.path.join(path, "answers.txt"), os.path.join(path, "sub", "link"))
    os.symlink("/etc", os.path.join(path, "etc"))
    os.chmod(path, 0o777)
    try:
        os.setxattr(path, "user.planted", b"1")
    except OSError:
        pass  # no user xattrs on this filesystem


@pytest.fixture
def parent():
    """A directory a job's uid can reach (pytest's own ``tmp_path`` lies below one only its user may enter)."""
    path = tempfile.mkdtemp(prefix="grpo_jobdirs_")
    os.chmod(path, 0o755)
    yield Path(path)
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def dirs(parent):
    kept = jobdirs.JobDirs(str(parent), "grpo_fast_sbx_test_")
    yield kept
    kept.remove_all()


@reused
def test_a_reused_directory_is_empty_and_reset(dirs) -> None:
    path = dirs.take(JOB_UID)
    _as_job(JOB_UID, lambda: _leave_everything(path))
    assert dirs.release(path) == []
    again = dirs.take(JOB_UID)
    assert again == path  # handed on: nothing of the previous job's is in it
    st = os.lstat(again)
    assert os.listdir(again) == [] and st.st_mode & 0o7777 == 0o700 and os.listxattr(again) == []
    assert st.st_uid == (JOB_UID if JOB_UID is not None else os.geteuid())


def test_a_name_put_in_a_directorys_place_is_never_handed_on(dirs, parent) -> None:
    path = dirs.take(JOB_UID)
    elsewhere = parent / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep").write_text("the host's")
    moved = str(parent / "moved")

    def swap() -> None:  # the job moves its directory away and puts a link to another directory in its place
        os.rename(path, moved)
        os.symlink(str(elsewhere), path)

    os.chmod(parent, 0o1777)
    _as_job(JOB_UID, swap)
    assert dirs.release(path) == []
    assert not os.path.lexists(path) and (elsewhere / "keep").read_text() == "the host's"
    assert dirs.take(JOB_UID) != path


def test_a_directory_released_while_its_job_may_still_run_is_removed(dirs) -> None:
    path = dirs.take(JOB_UID)
    assert dirs.discard(path) == [] and not os.path.lexists(path)
    assert dirs.take(JOB_UID) != path


def test_the_janitor_removes_the_pools_directories_once_the_pool_is_gone(tmp_path) -> None:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the pool: starts its janitor, keeps directories, is killed
        try:
            prefix = jobdirs.start_janitor(str(tmp_path))
            kept = jobdirs.JobDirs(str(tmp_path), prefix)
            kept.take(None)
            kept.release(kept.take(JOB_UID))  # kept for the next job where jobs have uids of their own
            os.write(w, prefix.encode())
            time.sleep(60)
        finally:
            os._exit(0)
    os.close(w)
    prefix = os.read(r, 200).decode()
    os.close(r)
    (tmp_path / "not_the_pools").mkdir()
    assert len([p for p in os.listdir(tmp_path) if p.startswith(prefix)]) == (2 if JOB_UID is not None else 1)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    for _ in range(500):  # the janitor works once the pool is gone: a bounded wait, not a timing
        if not any(p.startswith(prefix) for p in os.listdir(tmp_path)):
            break
        time.sleep(0.01)
    assert os.listdir(tmp_path) == ["not_the_pools"]


def _nest(path: str, depth: int) -> None:
    """A job's tree deeper than Python's recursion limit, each level with a file, a fifo and a socket's name."""
    fd = os.open(path, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        below = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = below
    os.mkfifo("fifo", dir_fd=fd)
    os.close(os.open("f", os.O_CREAT | os.O_WRONLY, dir_fd=fd))
    os.close(fd)
    for i in range(3000):  # and wide
        os.mkdir(os.path.join(path, f"w{i}"))
    server = socket.socket(socket.AF_UNIX)
    server.bind(os.path.join(path, "sock"))
    server.close()


@reused
def test_a_tree_nested_past_the_recursion_limit_is_emptied_and_the_directory_reused(dirs) -> None:
    path = dirs.take(JOB_UID)
    _as_job(JOB_UID, lambda: _nest(path, 3 * sys.getrecursionlimit()))
    assert dirs.release(path) == []  # shutil.rmtree raised RecursionError here: the forker died
    assert dirs.take(JOB_UID) == path and os.listdir(path) == []


def test_a_tree_nested_past_the_recursion_limit_is_removed(parent) -> None:
    path = str(parent / "deep")
    os.mkdir(path)
    _nest(path, 3 * sys.getrecursionlimit())
    assert cleanup.remove_tree(path) == "" and not os.path.lexists(path)


@reused
def test_the_times_a_job_set_on_its_directory_never_reach_the_next(dirs) -> None:
    path = dirs.take(JOB_UID)
    planted = 4_000_000_000 + 1234  # an answer, in the seconds of an empty directory's times
    _as_job(JOB_UID, lambda: os.utime(path, (planted, planted)))
    assert dirs.release(path) == []
    again = dirs.take(JOB_UID)
    st = os.stat(again)
    assert again == path and planted not in (int(st.st_atime), int(st.st_mtime))


@reused
def test_the_attributes_a_job_set_on_its_directory_never_reach_the_next(dirs) -> None:
    path = dirs.take(JOB_UID)
    made = fcntl.ioctl(os.open(path, os.O_RDONLY), 0x80086601, bytes(8))[:4]  # FS_IOC_GETFLAGS

    def chattr() -> None:  # nodump, noatime, sync, dirsync: its owner's to set (chattr +dASD), four bits to leave
        fd = os.open(path, os.O_RDONLY)
        flags = struct.unpack("i", fcntl.ioctl(fd, 0x80086601, bytes(8))[:4])[0] | 0x40 | 0x80 | 0x8 | 0x10000
        fcntl.ioctl(fd, 0x40086602, struct.pack("i4x", flags))  # FS_IOC_SETFLAGS

    try:
        _as_job(JOB_UID, chattr)
    except AssertionError:
        pytest.skip("this filesystem keeps no such flags")
    assert dirs.release(path) == []
    again = dirs.take(JOB_UID)
    fd = os.open(again, os.O_RDONLY)
    try:
        assert fcntl.ioctl(fd, 0x80086601, bytes(8))[:4] == made
    finally:
        os.close(fd)


@reused
def test_a_process_of_the_job_that_outlived_it_writes_nothing_into_the_next_jobs_directory(dirs) -> None:
    """The worst case (kill_leftovers gives up on a process): it holds the directory open, opened it to all, and
    writes before, while and after the directory is emptied and handed on."""
    path = dirs.take(JOB_UID)
    go_r, go_w = os.pipe()
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the survivor, under the job's uid
        try:
            if JOB_UID is not None:
                os.setgroups([])
                os.setresgid(JOB_UID, JOB_UID, JOB_UID)
                os.setresuid(JOB_UID, JOB_UID, JOB_UID)
            os.chmod(path, 0o777)
            fd = os.open(path, os.O_RDONLY)
            os.close(go_w)
            os.close(os.open("first", os.O_CREAT | os.O_WRONLY, 0o666, dir_fd=fd))
            os.write(ready_w, b"1")
            n = 0
            while not select.select([go_r], [], [], 0)[0] or n < 2000:  # until told, then 2000 more tries
                n += 1
                try:
                    os.close(os.open(f"planted{n % 7}", os.O_CREAT | os.O_WRONLY, 0o666, dir_fd=fd))
                except OSError:
                    pass
        finally:
            os._exit(0)
    os.close(go_r)
    assert os.read(ready_r, 1) == b"1"  # writing away in the directory
    left = dirs.release(path)
    again = dirs.take(None if JOB_UID is None else JOB_UID + 1)  # the next job's uid is another
    os.close(go_w)
    os.waitpid(pid, 0)
    if again == path:
        assert left == [] and os.listdir(again) == []
    else:  # it wrote while the directory was being emptied: removed, never handed on
        assert path not in dirs.free


def test_a_directory_used_under_the_forkers_own_uid_is_never_reused(dirs) -> None:
    """A process of that job that outlived it would be the next job's owner too, and its Landlock layer would
    still let it write there."""
    path = dirs.take(None)
    assert dirs.release(path) == [] and not os.path.lexists(path)
    assert dirs.take(None) != path
