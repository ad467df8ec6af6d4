"""Iterating a program's iterators and generators from the test: items fetched ahead, generators as generators.

A loop over a program iterator fetches growing batches (``Batched``); what it fetched and did not take stays on the
iterator's proxy (``buffer_of``), for the next ``next(it)`` or loop, as in one interpreter. A program's generator
reaches a test as a generator of the judge's (``as_generator``: ``types.GeneratorType``, ``inspect.isgenerator``),
whose ``send``, ``throw`` and ``close`` go to the program's.
"""

from __future__ import annotations

import collections
from collections.abc import Generator
from typing import Any


class Batched:
    """Iterator over a candidate iterator that fetches growing batches (1, 2, 4 ... 64 items per request).

    The items fetched ahead belong to the iterator's proxy (``buffer_of``), not to this loop: a loop that stops
    early (``break``, ``islice``, ``zip``) leaves them to the next ``next(it)`` or loop, as in one interpreter."""

    def __init__(self, it: Any) -> None:
        self.it, self.buf, self.n, self.done, self.exc = it, buffer_of(it), 1, False, None

    def __iter__(self) -> Batched:
        return self

    def __next__(self) -> Any:
        if not self.buf and not self.done and self.exc is None:
            items, self.done, self.exc = self.it._sbx_conn.next_items(self.it, self.n)
            self.buf.extend(items)
            self.n = min(self.n * 2, 64)
        if self.buf:
            return self.buf.popleft()
        if self.exc is not None:
            exc, self.exc = self.exc, None
            self.done = True
            raise exc
        raise StopIteration


def buffer_of(it: Any) -> collections.deque:
    """The items of a program iterator (its proxy ``it``) fetched but not yet taken."""
    try:
        return object.__getattribute__(it, "_sbx_buf")
    except AttributeError:
        buf: collections.deque = collections.deque()
        object.__setattr__(it, "_sbx_buf", buf)
        return buf


async def anext_of(it: Any) -> Any:
    """One step of a program's async generator, run in the program's own event loop."""
    reply = it._sbx_conn.request("anext", it)
    if type(reply) is not tuple or len(reply) != 2 or type(reply[0]) is not bool:
        raise TypeError("malformed async iterator reply")
    if reply[0]:
        raise StopAsyncIteration
    return reply[1]


class ProgramStopped(RuntimeError):
    """The program's StopIteration (or StopAsyncIteration) at a request: never the test's own, so it cannot end a
    test's loop (PEP 479); its ``value`` is a generator's return value, which ``send``/``throw`` pass on."""

    def __init__(self, kind: str, value: Any = None) -> None:
        super().__init__(f"the program raised {kind}")
        self.value = value


def as_generator(it: Any, conn: Any) -> Generator:
    """The program's generator ``it`` (a proxy) as a generator of the judge's. While the job's tests send or throw
    into generators (``conn.steps``) it is stepped one item at a time, so that what is sent meets the item just
    taken; otherwise a loop over it fetches ahead (``Batched``)."""
    loop = Batched(it)
    while True:
        try:
            value = next(it) if conn.steps else next(loop)
        except StopIteration as stop:
            return stop.value
        while True:
            try:
                sent = yield value
            except GeneratorExit:
                it.close()
                raise
            except BaseException as exc:  # noqa: BLE001 - thrown in by the test: the program's generator gets it
                try:
                    value = it.throw(exc)
                except ProgramStopped as stop:  # it returned: its value is the test's StopIteration.value
                    return stop.value
                continue
            if sent is None:
                break
            try:
                value = it.send(sent)
            except ProgramStopped as stop:
                return stop.value
