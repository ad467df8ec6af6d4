"""Run untrusted Python programs against a dataset's tests without letting them touch the trainer or the verdict.

Layers (details in docs/sandbox.md):

* ``isolation`` -- namespaces, private mounts, uid drop, rlimits: capabilities are taken away, Python is not.
* ``runner``, ``encoding`` -- the program's process: runs it as module ``solution``, answers requests about its
  objects, and sends them as data, by name, or as handles.
* ``wire``, ``channel``, ``connection``, ``proxy`` -- the verdict channel: frames, restricted value codecs,
  nested requests, and the proxies the tests see instead of the candidate's objects.
* ``judge`` -- a separate, trusted process that runs the tests and counts passes.
* ``forker``, ``zygote`` -- the warm pool: one fork per program, long-lived judges.
* ``client`` -- the trainer's side: ``Sandbox``, ``run_program``, ``run_many``, ``make_job``.

Only the standard library is imported: the zygote loads this package on its own, without grpo_fast.
"""

from .client import (
    Sandbox,
    SandboxResult,
    default_sandbox,
    describe_isolation,
    isolation_level,
    make_job,
    run_many,
    run_program,
)
from .isolation import LEVELS

__all__ = ["LEVELS", "Sandbox", "SandboxResult", "default_sandbox", "describe_isolation", "isolation_level",
           "make_job", "run_many", "run_program"]
