"""Run untrusted Python programs against a dataset's tests without letting them touch the trainer or the verdict.

A one-way stack, lowest first (details in docs/sandbox.md); each module imports only modules above it in this list:

* ``policy`` -- the isolation levels as data: one frozen ``Policy`` per level (its fields are the layers: namespaces,
  uid drop, Landlock, the filter's confinement, rlimits, cgroups), what each leaves open, which layer closes what.
* ``isolation/`` -- the host's mechanisms, each in a file: ``limits`` (rlimits, seccomp, kernel keys), ``cgroups``,
  ``userns`` (a normal user's namespaces), ``landlock``, ``namespaces`` (namespaces, uid drop, a job's fork),
  ``mounts`` (private mounts, the minimal root, the readable interpreter), ``kernel`` (the layers a job's processes
  enter), ``cleanup`` (by uid, where jobs share the host's directories), ``janitor`` (a process that outlives the
  pool and removes what it left), ``jobdirs`` (their directories there, reused from job to job), ``memory`` (a
  job's memory where cgroups are refused), ``probe`` (the strongest policy this host allows, and which layer holds).
* ``verdict/`` -- the judge<->program protocol: ``wire``, ``encoder``, ``decoder``, ``abcs``, ``channel``,
  ``mutables`` (frames, the data-only codec, the container ABCs a program class may declare, nested requests and
  replies, the containers a test hands over); ``scratch`` (the working directory a test and its program share);
  ``script``, ``lent``, ``program_state``, ``exports``, ``runner`` (the candidate's process); ``iteration``,
  ``proxy``, ``classes``, ``names``, ``connection``, ``shared_state``, ``pytest_run``, ``judge`` (the judge's process
  and its verdict); ``stdio`` (stdin/stdout tests, the output judged as data outside the program).
* ``pool/`` -- the warm pool: ``warmup`` (the channel code run once on built-in data), ``contain`` (the ordered
  containment steps of a program and of a judge), ``aftercare`` (the clean-up after each job's process where jobs
  share the host's directories), ``template`` (a slot's template, set up once: its layers, its code warm),
  ``forker`` (the slot's serving loop), ``compiled`` (the test sets compiled for judges, remembered), ``jobs`` (a
  job as the zygote tracks it, and the result it makes of a verdict and an exit report), ``zygote`` (schedules jobs
  onto slots), ``startup`` (the probe's answer said in the hello; then it serves).
* ``client`` -- the trainer's side: ``Sandbox``, ``run_program``, ``run_many``, ``make_job``.

Only the standard library is imported: the zygote loads this package on its own, without grpo_fast (and without
this file: ``client`` boots ``pool.startup`` under a private package name).
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
    run_many,
    run_program,
)
from .policy import LEVELS, POLICIES, STOPPED_BY, Policy, remaining_threats, weaker_than

__all__ = ["LEVELS", "POLICIES", "STOPPED_BY", "Policy", "Sandbox", "SandboxResult", "default_sandbox",
           "describe_isolation", "isolation_level", "make_cells_job", "make_io_job", "make_job", "remaining_threats",
           "run_many", "run_program", "weaker_than"]
