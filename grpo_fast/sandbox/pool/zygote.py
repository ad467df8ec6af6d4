"""The zygote: the warm pool behind one ``Sandbox``. It schedules jobs onto worker slots and never runs any code
of a job itself.

    trainer ──pipe──> zygote (python -I -S, scrubbed env, empty network namespace, root or you)
                       └─ forker, one per slot (forked first: holds no program, test or output; on the slot's CPU)
                            ├──fork──> judge, per job (own uid, namespaces, read-only root; exits after its verdict)
                            └──fork──> program, per job  <──socketpair──> that judge

Per job the zygote creates the judge-program socketpair, the program's stdout/stderr pipes and a line to the judge,
gives the slot's forker the limits and the descriptors, sends the job to the judge, reads the output, and merges the
judge's verdict with the forker's exit report into one result for the trainer.
"""

from __future__ import annotations

import json
import marshal
import os
import re
import select
import socket
import struct
import time
from typing import Any

from ..isolation import cgroups, cleanup, jobdirs, kernel, limits
from ..policy import Policy
from ..verdict import decoder, wire
from ..verdict.stdio import IoRow
from . import forker
from .compiled import CompiledTests
from .contain import tempdir
from .jobs import OUT_CAP, Job, result

JUDGE_EXTRA_S = 1.5  # past the timeout, a judge that has not answered is killed
REPORT_EXTRA_S = 4.0  # past the timeout, a missing exit report is a sandbox fault
_NUMPY = re.compile(r"^\s*(?:import|from)\s+numpy\b", re.M)


def _frames(buf: bytearray) -> list[bytes]:
    out = []
    while len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from("<I", buf)[0]:
        n = struct.unpack_from("<I", buf)[0]
        out.append(bytes(buf[4:4 + n]))
        del buf[:4 + n]
    return out


def _memfile(name: str, data: bytes) -> int:
    """An anonymous in-memory file holding ``data``, read from its start: a program's stdin or source."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _no_refs(kind: str, fields: tuple) -> Any:
    raise wire.WireError("a verdict holds data only")


def send(fd: int, obj: Any) -> None:
    data = json.dumps(obj).encode()
    data = struct.pack("<I", len(data)) + data
    while data:
        data = data[os.write(fd, data):]


class Zygote:
    def __init__(self, policy: Policy, workers: int, site_dirs: list[str], private_root: bool,
                 slot_cgroups: cgroups.Cgroups, seccomp: limits.Filters | None, limit_shm: bool) -> None:
        self.policy, self.workers, self.site_dirs = policy, workers, site_dirs
        uid_base = 0x40000000 + int.from_bytes(os.urandom(2), "little") % 1024 * 0x100000
        uid_bases = (uid_base, uid_base + 0x80000000)  # a judge's uid is never a program's: none can signal it
        self.uid_bases = uid_bases
        self.free = list(range(workers))
        self.next_run = 1 << 40  # ids of stdin test runs, never a client's job id
        self.runs = 0  # every run's uid comes from this count: no two live runs (of any slot) share a uid
        self.queue: list[dict[str, Any]] = []
        self.running: dict[int, Job] = {}
        self.reports = bytearray()
        self.compiled = CompiledTests()
        rep_r, rep_w = os.pipe()  # every forker's exit reports
        cpus = kernel.job_cpus(workers)
        # jobs work in the host's temporary directory: their directories, kept by the forkers, go with the pool
        dirs_prefix = jobdirs.start_janitor(tempdir()) if policy.shares_host_dirs else ""
        self.forkers: list[socket.socket] = []  # slot -> the line to its forker (which only reads it: EOF = died)
        for slot in range(workers):
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            if os.fork() == 0:  # a forker: forked now, before any job reaches this process
                try:
                    for line in (*self.forkers, ours):
                        line.close()
                    os.close(rep_r)
                    devnull = os.open(os.devnull, os.O_RDWR)
                    os.dup2(devnull, 0)
                    os.dup2(devnull, 1)
                    forker.main(theirs, rep_w, policy, uid_bases, site_dirs, private_root, slot,
                                cpus[slot % len(cpus)] if cpus else None, slot_cgroups, seccomp, limit_shm, dirs_prefix)
                except BaseException:  # noqa: BLE001 - a sandbox fault: say why on the trainer's stderr
                    import traceback  # noqa: PLC0415 - only on a fault

                    traceback.print_exc()
                finally:
                    os._exit(1)
            theirs.close()
            self.forkers.append(ours)
        os.close(rep_w)
        self.report_fd = rep_r

    def _start(self, spec: dict[str, Any], slot: int) -> None:
        if spec.get("kind") == "io":
            self._start_io(IoRow(spec, t0=time.monotonic()), slot)
            return
        job = self.running[spec["id"]] = Job(spec, slot, time.monotonic(), spec["id"])
        judge_end, program_end = socket.socketpair()
        ours, theirs = socket.socketpair()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        for fd in (out_r, err_r):
            os.set_blocking(fd, False)
            job.out[fd] = bytearray()
        keys = ("setup", "tests", "timeout", "expose", "trusted", "pytest")  # never the program's source
        fields = {k: spec.get(k) for k in keys}
        compiled = self.compiled.get(fields)
        payload = marshal.dumps({**fields, "compiled": compiled})  # to the judge (trusted)
        load = _memfile("load", marshal.dumps((spec.get("source") or "", spec.get("setup") or "")))
        desc = {"op": "run", "id": spec["id"], "uid": self._next_uid(), "timeout": spec["timeout"],
                "memory_mb": spec["memory_mb"], "packages": spec.get("packages", True),
                # a pytest judge, or one whose asserts use files, gets a working directory (sandbox.scratch)
                "scratch": bool(spec.get("pytest") or compiled.get("files")), "pytest": bool(spec.get("pytest")),
                "preload": ["numpy"] if _NUMPY.search(spec.get("source") or "") else []}
        self._to_forker(slot, desc, [program_end.fileno(), out_w, err_w, load, judge_end.fileno(), theirs.fileno()])
        for fd in (out_w, err_w, load):
            os.close(fd)
        for sock in (program_end, judge_end, theirs):
            sock.close()
        job.judge = ours
        try:  # the judge reads its job at once; a judge that never started cannot hold the pool up for long
            ours.settimeout(5.0)
            ours.sendall(struct.pack("<I", len(payload)) + payload)
            ours.setblocking(False)
        except OSError:
            job.verdict = {"status": "judge-error", "error": "judge unavailable", "passed": [], "n": -1}
            self._close_judge(job)

    def _next_uid(self) -> int:
        self.runs += 1
        return self.runs

    def _to_forker(self, slot: int, message: dict[str, Any], fds: list[int] | None = None) -> None:
        data = json.dumps(message).encode()
        try:
            if fds:
                socket.send_fds(self.forkers[slot], [data], fds)
            else:
                self.forkers[slot].send(data)
        except OSError:  # the forker is gone: its slot could never run a job again
            raise SystemExit("forker died") from None

    def _start_io(self, row: IoRow, slot: int) -> None:
        """The row's next stdin test (or the checker on the last one's output): the input and the program in
        memory files, no judge (the verdict is made here from the output bytes or the checker's status)."""
        kind, i = row.next_run()
        spec = row.spec
        self.next_run += 1
        checking = kind == "check"
        job = Job(spec, slot, time.monotonic(), self.next_run, row, row.cap(i), verdict={}, check=checking)
        self.running[job.run_id] = job
        given = row.check_input(i) if checking else row.inputs[i]
        stdin = _memfile("stdin", given.encode())
        source = _memfile("solution", (spec["checker"] if checking else spec["source"]).encode())
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        for fd in (out_r, err_r):
            os.set_blocking(fd, False)
            job.out[fd] = bytearray()
        desc = {"op": "run", "id": job.run_id, "uid": self._next_uid(), "timeout": spec["timeout"],
                "io": True, "check": checking, "cells": bool(spec.get("cells")), "memory_mb": spec["memory_mb"],
                "packages": spec.get("packages", True),
                "preload": ["numpy"] if _NUMPY.search(spec.get("source") or "") else []}
        self._to_forker(slot, desc, [stdin, out_w, err_w, source])
        for fd in (stdin, source, out_w, err_w):
            os.close(fd)

    def _io_done(self, job: Job) -> None:
        """A stdin test ended: judge its output, then run the row's next test in the same slot, or answer."""
        del self.running[job.run_id]
        row = job.row
        out, err = (bytes(b) for b in job.out.values())
        if job.check:
            row.record_check(err, job.report or {})
        else:
            row.record(out, err, job.report or {}, job.overflow)
        if row.next_run() is not None:
            self._start_io(row, job.slot)
            return
        self.free.append(job.slot)
        send(1, {"id": row.spec["id"], **row.result(time.monotonic() - row.t0)})

    def _close_judge(self, job: Job) -> None:
        if job.judge is not None:
            job.judge.close()
            job.judge = None

    def _stop(self, job: Job) -> None:
        self._to_forker(job.slot, {"op": "stop", "id": job.run_id})

    def _on_verdict(self, job: Job) -> None:
        try:
            chunk = job.judge.recv(1 << 16) if job.judge else b""
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            job.verdict = job.verdict or {"status": "judge-error", "error": "judge died", "passed": [], "n": -1}
        else:
            job.judge_buf += chunk
            frames = _frames(job.judge_buf)
            if not frames:
                return
            try:
                job.verdict = decoder.decode(frames[-1], _no_refs)
            except wire.Lost:
                job.verdict = {"status": "judge-error", "error": "unreadable verdict", "passed": [], "n": -1}
        self._close_judge(job)  # the judge exits after its verdict: then the forker stops the program

    def _on_output(self, job: Job, fd: int) -> None:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        buf = job.out[fd]
        if not chunk:
            os.close(fd)
            job.out[fd] = bytes(buf)  # closed: bytes marks it done
            return
        stdout = fd == next(iter(job.out))
        cap = job.cap if stdout else OUT_CAP
        if stdout and job.row is not None and len(buf) + len(chunk) > cap and not job.overflow:  # stderr: kept apart
            job.overflow = True  # a stdin test flooding stdout: fails now, without waiting for its time limit
            self._stop(job)
        buf += chunk[: max(0, cap - len(buf))]

    def _on_reports(self) -> None:
        chunk = os.read(self.report_fd, 1 << 16)
        if not chunk:
            raise SystemExit("forker died")
        self.reports += chunk
        for frame in _frames(self.reports):
            rep = json.loads(frame)
            job = self.running.get(rep["id"])
            if job is not None:
                job.report, job.report_at = rep, time.monotonic()

    def _check_deadlines(self, now: float) -> None:
        for job in self.running.values():
            if job.verdict is None and now > job.t0 + job.timeout + JUDGE_EXTRA_S:
                job.verdict = {"status": "timeout", "error": "the judge did not finish in time", "passed": [], "n": -1}
                self._close_judge(job)  # wedged in test code: the forker kills it with the program
                self._stop(job)
            if job.report is None and now > job.t0 + job.timeout + REPORT_EXTRA_S:
                job.report, job.report_at = {"returncode": None, "fault": "no exit report"}, now
            if job.report is not None and now > job.report_at + 1.0:
                for fd, buf in list(job.out.items()):  # something still holds the pipes: stop waiting
                    if isinstance(buf, bytearray):
                        os.close(fd)
                        job.out[fd] = bytes(buf)

    def serve(self) -> None:
        """Jobs from stdin, results to stdout (4-byte length + JSON frames), until stdin closes."""
        inbuf = bytearray()
        stdin_open = True
        while stdin_open or self.running or self.queue:
            while self.queue and self.free:
                self._start(self.queue.pop(0), self.free.pop())
            readers: dict[int, Any] = {line.fileno(): ("forker",) for line in self.forkers}
            readers[self.report_fd] = ("reports",)
            if stdin_open:
                readers[0] = ("stdin",)
            for job in self.running.values():
                if job.verdict is None and job.judge is not None:
                    readers[job.judge.fileno()] = ("verdict", job)
                for fd, buf in job.out.items():
                    if isinstance(buf, bytearray):
                        readers[fd] = ("out", job, fd)
            now = time.monotonic()
            due = [job.t0 + job.timeout + JUDGE_EXTRA_S for job in self.running.values() if job.verdict is None]
            due += [job.t0 + job.timeout + REPORT_EXTRA_S for job in self.running.values() if job.report is None]
            due += [job.report_at + 1.0 for job in self.running.values() if job.report is not None]
            wait = max(0.0, min(due) - now) + 0.001 if due else None
            for fd in select.select(list(readers), [], [], wait)[0]:
                what = readers[fd]
                if what[0] == "stdin":
                    chunk = os.read(0, 1 << 16)
                    stdin_open = bool(chunk)
                    inbuf += chunk
                    self.queue.extend(json.loads(f) for f in _frames(inbuf))
                elif what[0] == "reports":
                    self._on_reports()
                elif what[0] == "forker":  # a forker never writes: readable means it is gone
                    raise SystemExit("forker died")
                elif what[0] == "verdict":
                    self._on_verdict(what[1])
                else:
                    self._on_output(what[1], what[2])
            self._check_deadlines(time.monotonic())
            for jid, job in list(self.running.items()):
                if job.verdict is not None and job.report is not None and \
                        not any(isinstance(b, bytearray) for b in job.out.values()):
                    if job.row is not None:
                        self._io_done(job)
                        continue
                    del self.running[jid]
                    self.free.append(job.slot)
                    send(1, result(job))
            cleanup.reap()
