"""A job as the zygote tracks it (``Job``), and the one result it makes of the judge's verdict and the forker's exit
report (``result``): what the trainer reads back for every program."""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field
from typing import Any

from ..verdict.stdio import IoRow

OUT_CAP = 64 * 1024  # kept per stream; the rest is read and dropped, so printing never blocks or fails


@dataclass
class Job:
    """One run of a program: a whole job (judged through the channel), or one stdin test of an ``IoRow``."""

    spec: dict[str, Any]
    slot: int
    t0: float
    run_id: int = 0  # the forker's id for this run: the job's own id, or a fresh one per stdin test
    row: IoRow | None = None
    cap: int = OUT_CAP  # stdout bytes kept
    overflow: bool = False  # a stdin test printed more than ``cap``: stopped, failed
    check: bool = False  # this run is the dataset's checker judging the previous run's output
    judge: socket.socket | None = None  # the zygote's line to this job's judge
    judge_buf: bytearray = field(default_factory=bytearray)
    verdict: dict[str, Any] | None = None
    report: dict[str, Any] | None = None
    report_at: float = 0.0
    out: dict[int, bytearray] = field(default_factory=dict)  # open read end -> captured bytes

    @property
    def timeout(self) -> float:
        return float(self.spec["timeout"])


def result(job: Job) -> dict[str, Any]:
    """The judge's verdict merged with the forker's exit report: a verdict counts only for the tests the job has."""
    v, r, spec = job.verdict or {}, job.report or {}, job.spec
    n = len(spec.get("tests") or [])
    if spec.get("pytest") and type(v.get("n")) is int and v["n"] >= 0:  # a pytest file: as many as pytest ran
        n = v["n"]
    rc = r.get("returncode")
    status = v.get("status", "exited")
    if status == "lost":
        status = "killed" if rc is not None and rc < 0 else "exited"
    elif status not in ("ok", "error", "timeout"):
        status = "exited"
    passed = v.get("passed") if v.get("n") == n else None
    error = v.get("error") or (f"sandbox fault: {r['fault']}" if r.get("fault") else "")
    outs = list(job.out.values())
    return {"id": spec["id"], "status": status, "returncode": rc, "wall_s": time.monotonic() - job.t0,
            "stdout": bytes(outs[0]).decode(errors="replace"), "stderr": bytes(outs[1]).decode(errors="replace"),
            "passed": passed if isinstance(passed, list) else [], "n_tests": n, "error": error,
            "failures": v.get("failures") or [], "left": [str(p) for p in r.get("left") or ()]}
