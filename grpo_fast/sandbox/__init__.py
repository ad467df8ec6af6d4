"""Run untrusted Python programs against a dataset's tests without letting them touch the trainer or the verdict.

A one-way stack, lowest first (details in docs/sandbox.md); each module imports only modules above it in this list:

* ``limits``, ``cgroups`` -- the kernel's limits: rlimits, a seccomp filter, kernel keys; a cgroup per worker slot.
* ``userns``, ``landlock`` -- a normal user's way to the same namespaces (a user namespace for the pool, one per
  job process); where namespaces are refused (a container, a host refusing user namespaces), Landlock's layers.
* ``isolation`` -- namespaces, private mounts, uid drop: capabilities are taken away, Python is not.
* ``kernel``, ``cleanup``, ``memory`` -- the layers a job's processes enter; clean-up by uid where jobs share the
  host's directories; a job's memory where cgroups are refused.
* ``wire``, ``decoder``, ``channel``, ``mutables`` -- frames and the data-only value codec, requests and replies
  nested in both directions, and the containers a test hands over kept in step.
* ``scratch`` -- the working directory a pytest job's test and program share, kept in step file by file.
* ``script``, ``lent``, ``program_state``, ``runner`` -- the candidate's process: a program run as a script (stdin
  tests, checkers, tool cells), or as module ``solution`` answering the judge's requests about its objects (data or
  handles), using what the test lent it, and taking on what a pytest test changed in its own process.
* ``proxy``, ``connection``, ``shared_state``, ``pytest_run``, ``judge`` -- the judge's process: the proxies the
  tests see instead of the candidate's objects, its end of the channel (for a pytest job, one that brings the
  test's process state along), pytest files run by pytest, and the tests and their verdict.
* ``stdio`` -- stdin/stdout tests: one run per test, the output judged as data outside the program.
* ``warmup`` -- the template runs its own channel code once on built-in data, so no fork has to specialise it.
* ``forker``, ``zygote`` -- the warm pool: a fresh judge and a fresh program process per job (per stdin test).
* ``startup`` -- what the host allows (level, kernel layers, refusals), said in the pool's hello; then it serves.
* ``client`` -- the trainer's side: ``Sandbox``, ``run_program``, ``run_many``, ``make_job``.

Only the standard library is imported: the zygote loads this package on its own, without grpo_fast.
"""

from .client import (
    Sandbox,
    SandboxResult,
    default_sandbox,
    describe_isolation,
    isolation_level,
    make_cells_job,
    make_io_job,
    make_job,
    remaining_threats,
    run_many,
    run_program,
    weaker_than,
)
from .isolation.namespaces import LEVELS

__all__ = ["LEVELS", "Sandbox", "SandboxResult", "default_sandbox", "describe_isolation", "isolation_level",
           "make_cells_job", "make_io_job", "make_job", "remaining_threats", "run_many", "run_program", "weaker_than"]
