"""The template's warm-up: its own channel code, run once on built-in data before any job exists.

Every judge and program is a fresh fork of the template. CPython 3.11 specialises code as it runs it (quickened
bytecode, inline caches, the method cache, dict-key versions); done in each fresh process, that work cost ~0.5 ms
of CPU and ~60 copy-on-write page faults there, per process. Done here once, on constant data (builtins called
through the real channel: no program, no test, no job), the forks inherit it. What stays behind is the
interpreter's caches; the objects made here are garbage before the template forks anything.
"""

from __future__ import annotations

import select
import socket
import time
import types

from ..verdict.connection import Connection
from ..verdict.runner import Runner
from ..verdict.wire import Stream

ROUNDS = 12  # CPython quickens a function after 8 calls; the loops below run every path this often


class _Pumped(Stream):
    """The judge's end of the warm-up channel: before it waits for a frame, the program's end, in this same
    thread, answers what it has been sent. No second thread, so no waiting on the scheduler."""

    def __init__(self, fd: int, program: Runner) -> None:
        super().__init__(fd)
        self.program = program

    def recv(self) -> bytes:
        theirs = self.program.channel.stream
        while readable([theirs.fd]) and not readable([self.fd]):
            frame = self.program.loads(theirs.recv())  # a request: (REQUEST, id, op, args)
            self.program.channel.answer(frame[1], frame[2], frame[3])
        return super().recv()


def readable(fds: list[int], timeout: float | None = 0) -> set[int]:
    """The descriptors of ``fds`` readable (or hung up) within ``timeout`` seconds (None: until one is). poll, not
    select: the template holds a descriptor per Landlock rule (hundreds where the interpreter lives below /tmp), so
    the forker's own descriptors may be numbered past select's 1024."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    return {fd for fd, _ in poller.poll(None if timeout is None else timeout * 1000)}


def warm_up(rounds: int = ROUNDS) -> None:
    """Requests, calls and replies of the common kinds through a real channel (a socketpair)."""
    a, b = socket.socketpair()
    try:
        program = Runner(b.fileno())
        program.module = types.ModuleType("warm_up")
        program.module.__dict__.update(f=abs, g=sorted, h=dict, k=iter)
        judge = Connection(a.fileno(), time.monotonic() + 60)
        judge.channel.stream = pumped = _Pumped(a.fileno(), program)
        pumped.deadline = time.monotonic() + 60
        for i in range(rounds):
            f = judge.request("global", "f")[1]
            g = judge.request("global", "g")[1]
            h = judge.request("global", "h")[1]
            k = judge.request("global", "k")[1]
            f(-i)
            f(-0.5)
            g([3, 1, i], reverse=True)
            h(a=[1, "x"], b=(i, None, True))
            list(k(range(i % 5)))
            str(f.__name__)
            judge.request("global", "missing")
            try:
                f("x")
            except TypeError:
                pass
    finally:
        a.close()
        b.close()
