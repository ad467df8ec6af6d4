"""Containment of a job's process, one ordered list of steps per role, read top to bottom like nsjail's
``containProc``: ``PROGRAM`` for the candidate's process, ``JUDGE`` for the job's judge.

Each step is a mechanism of ``isolation`` applied as the job's ``Policy`` says; the forker forks the process and
calls ``run_program`` or ``run_judge``, which never return.
"""

from __future__ import annotations

import _signal
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..isolation import kernel, limits, mounts, namespaces
from ..policy import Policy
from ..verdict import judge, scratch
from ..verdict.runner import serve
from ..verdict.script import run_main

JOB_CPU_COUNT = min(os.cpu_count() or 1, limits.CPU_COUNT)  # read once: in a job's mount namespace it costs a file read
JUDGE_MEMORY_MB = 2048  # the dataset's tests get room; a runaway test fails its own job only
PROGRAM_CPU_EXTRA_S = 2  # a program's CPU-time limit past its timeout
JUDGE_CPU_EXTRA_S = 5
_environment_of = ""  # the working directory that os.environ was last set up for
_host_tempdir = ""  # the host's temporary directory, found once (``tempdir``)


@dataclass
class Job:
    """One job's process as the steps see it: set by the forker, ``workdir`` (and ``shared``) filled in by them."""

    desc: dict[str, Any]
    fds: list[int]
    policy: Policy
    uid: int
    workdir: str
    site_dirs: list[str]
    layers: kernel.Kernel
    private_root: bool = False
    shared: bool = False  # a pytest file's judge works in the program's own directory (``scratch``)


def quiet_signals(job: Job) -> None:
    """No wake-up descriptor and SIGCHLD's default: the forker's own signal handling is not the job's."""
    signal.set_wakeup_fd(-1)
    _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)  # the C function: signal.signal's enum wrapping costs more


def new_session(job: Job) -> None:
    os.setsid()


def enter_program_cgroups(job: Job) -> None:
    job.layers.enter()


def enter_judge_cgroups(job: Job) -> None:
    job.layers.enter(judge=True)


def program_workdir(job: Job) -> None:
    """Its own mount namespace with a private /proc and /tmp where the policy has namespaces."""
    if job.policy.namespaces:
        job.workdir = mounts.private_workdir(job.policy, job.uid, job.workdir, kernel.root_view(job.site_dirs)[0])


def judge_workdir(job: Job) -> None:
    """In the minimal root (read-only, root-owned, an empty /proc) the judge needs no mounts of its own: it can
    write nowhere and see no process. Elsewhere it gets a private /proc and /tmp like a program; without
    namespaces a pytest file's judge works in the program's own directory (``scratch.shared_directory``), another
    under a uid of its own in the one the forker made it (``jobdirs``), and as the user's uid in the host's."""
    policy, desc = job.policy, job.desc
    job.shared = scratch.shared_directory(desc, policy)
    if policy.namespaces:  # a fresh /tmp of its own (JOB_WORKDIR): the read-only minimal root has no writable one
        job.workdir = "/" if job.private_root and not desc.get("scratch") else mounts.private_workdir(
            policy, job.uid, mounts.JOB_WORKDIR, kernel.root_view(job.site_dirs)[0])
    else:
        job.workdir = desc["workdir"] if job.shared else job.workdir or tempdir()


def program_descriptors(job: Job) -> None:
    """stdin, stdout, stderr, then fd 3: the channel to the judge and fd 4: the program and setup code to load;
    for a stdin test, stdin is the test's input and fd 3 the program's source."""
    if job.desc.get("io"):
        stdin, out, err, rpc = job.fds
        places: tuple[tuple[int, int], ...] = ((stdin, 0), (out, 1), (err, 2), (rpc, 3))
    else:
        rpc, out, err, load = job.fds
        stdin = os.open(os.devnull, os.O_RDONLY)
        places = ((stdin, 0), (out, 1), (err, 2), (rpc, 3), (load, 4))
    for fd, target in places:
        os.dup2(fd, target + 100)  # out of the way first: the descriptors may be numbered 0-4 already
    for _, target in places:
        os.dup2(target + 100, target)
    os.closerange(len(places), 1 << 16)


def judge_descriptors(job: Job) -> None:
    """Nothing on stdin, stdout or stderr; fd 3: its line to the zygote; fd 4: the channel to the program."""
    chan, ctl = job.fds
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.dup2(ctl, 3)
    os.dup2(chan, 4)
    os.closerange(5, 1 << 16)


def enter_workdir(job: Job) -> None:
    os.chdir(job.workdir)


def drop_program_privileges(job: Job) -> None:
    namespaces.drop_privileges(job.policy, job.uid, int(job.desc["memory_mb"]),
                               int(float(job.desc["timeout"])) + PROGRAM_CPU_EXTRA_S)


def drop_judge_privileges(job: Job) -> None:
    namespaces.drop_privileges(job.policy, job.uid, JUDGE_MEMORY_MB,
                               int(float(job.desc["timeout"])) + JUDGE_CPU_EXTRA_S)


def nondumpable(job: Job) -> None:
    namespaces.set_nondumpable()


def confine_files(job: Job) -> None:
    job.layers.confine_files(job.workdir)


def seal_program(job: Job) -> None:
    job.layers.seal(program=True)


def seal_judge(job: Job) -> None:
    job.layers.seal()


def job_environment(job: Job) -> None:
    enter_environment(mounts.JOB_WORKDIR if job.policy.namespaces else job.workdir)


def program_interpreter(job: Job) -> None:
    """What the program's Python sees: its stdin, ``solution.py`` as argv, the CPUs it may size pools by, and
    site-packages only where the job allows them."""
    if job.desc.get("io"):  # the test's input (a memory file: seekable); otherwise fd 0 is empty
        sys.stdin = open(0, closefd=False)  # noqa: SIM115
    sys.argv = ["solution.py"]
    os.cpu_count = lambda: JOB_CPU_COUNT  # pools sized to fit the process limit
    if not job.desc.get("packages", True):
        sys.path[:] = [p for p in sys.path if p not in job.site_dirs]
        for name, mod in list(sys.modules.items()):
            if any(str(getattr(mod, "__file__", "") or "").startswith(d) for d in job.site_dirs):
                del sys.modules[name]


Step = Callable[[Job], None]
PROGRAM: Sequence[Step] = (quiet_signals, new_session, enter_program_cgroups, program_workdir, confine_files,
                           program_descriptors, enter_workdir, drop_program_privileges, seal_program,
                           job_environment, program_interpreter)
JUDGE: Sequence[Step] = (quiet_signals, new_session, enter_judge_cgroups, judge_workdir, confine_files,
                         judge_descriptors, enter_workdir, drop_judge_privileges, nondumpable, seal_judge,
                         job_environment)


def contain(steps: Sequence[Step], job: Job) -> None:
    for step in steps:
        step(job)


def run_program(job: Job) -> None:
    """The program's process: contained, then the runner (or, for a stdin test, the script). Never returns."""
    try:
        contain(PROGRAM, job)
        if job.desc.get("io"):
            run_main(3, checker=bool(job.desc.get("check")), cells=bool(job.desc.get("cells")))
        serve(3, 4)
    finally:
        os._exit(1)


def run_judge(job: Job) -> None:
    """The job's judge, contained under its own uid; then ``judge.main``. Never returns."""
    try:
        contain(JUDGE, job)
        judge.main(3, 4, shared_workdir=job.shared)
    finally:
        os._exit(1)


def enter_environment(workdir: str) -> None:
    """A job's environment: no variable of the trainer's, numeric libraries on one thread. The template sets it
    once (clearing and refilling ``os.environ`` in a fresh process costs ~0.3 ms); where every job's working
    directory is the same (the strongest level) a job's process has nothing left to do, elsewhere it sets its own
    ``HOME`` and ``TMPDIR``."""
    global _environment_of
    if _environment_of == workdir:
        return
    if not _environment_of:
        os.environ.clear()
        os.environ.update({"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "OPENBLAS_NUM_THREADS": "1",
                           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    os.environ["HOME"] = workdir
    os.environ["TMPDIR"] = workdir
    _environment_of = workdir
    if "tempfile" in sys.modules:  # the forker's own (the host's /tmp) is not the job's: found again from TMPDIR
        sys.modules["tempfile"].tempdir = None


def tempdir() -> str:
    """The host's temporary directory, found once (by the template, before Landlock's layer: finding it tries a
    write there); the weaker levels' job directories are made in it (``jobdirs``)."""
    global _host_tempdir
    if not _host_tempdir:
        _host_tempdir = _writable_tempdir()
    return _host_tempdir


def _writable_tempdir() -> str:
    """What ``tempfile.gettempdir()`` finds (the same places in the same order, each tried with a file written and
    removed), without importing ``tempfile``: it brings ``shutil`` and its compression modules, six shared
    libraries that every judge and program would inherit (each mapping is copied at every fork and unmapped at
    every exit)."""
    places = [d for d in (os.environ.get(name) for name in ("TMPDIR", "TEMP", "TMP")) if d]
    places += ["/tmp", "/var/tmp", "/usr/tmp"]
    try:
        places.append(os.getcwd())
    except OSError:
        places.append(os.curdir)
    for place in places:
        place = os.path.abspath(place) if place != os.curdir else place
        for _ in range(100):
            name = os.path.join(place, f"tmp{os.urandom(6).hex()}")
            try:
                fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
                try:
                    os.write(fd, b"blat")
                finally:
                    os.close(fd)
                    os.unlink(name)
                return os.path.abspath(place)
            except FileExistsError:
                continue
            except OSError:
                break  # not writable here: the next place
    raise FileNotFoundError(f"no usable temporary directory in {places}")
