"""Verdict channel, part 2: requests and replies over one socket, nested in both directions.

The judge asks the candidate's process to call, index, iterate... its objects; while answering, the candidate may
call back a function the test passed it, and that callback may call the candidate again. Each side therefore serves
incoming requests while it waits for its own reply. Replies are matched by request id, so a reply that arrives
while a nested request is being served is kept until its waiter gets there.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from .wire import Deadline, Lost, Stream

REQUEST, REPLY = 0, 1
LOAD = 0  # the request id of the program's load: its process answers it unasked, as soon as it has loaded


class Channel:
    """One end of a job's channel. ``dumps``/``loads`` are this side's codecs; ``dispatch(op, args)`` serves."""

    def __init__(self, stream: Stream, dumps: Callable[[Any], bytes], loads: Callable[[bytes], Any],
                 dispatch: Callable[[str, tuple], Any], shrink: Callable[[str, Any], Any] | None = None) -> None:
        """``shrink(op, value)``: a smaller stand-in for a reply too large for one frame (e.g. by handle)."""
        self.stream, self.dumps, self.loads, self.dispatch = stream, dumps, loads, dispatch
        self.shrink = shrink
        self.lock = threading.RLock()  # candidate threads may call back into the judge concurrently
        self.pid = os.getpid()
        self._next = 0
        self._stash: dict[int, tuple[bool, Any]] = {}

    def request(self, op: str | None, *args: Any) -> Any:
        """Send a request and serve the other side until its reply arrives; raise what the other side raised.
        ``op`` None: send nothing, wait for the reply to ``LOAD`` (the other side sends it unasked)."""
        if op is not None and os.getpid() != self.pid:
            raise RuntimeError("objects of the other side cannot be used from a subprocess")
        with self.lock:  # one wait loop, inline: each nested callback costs one frame here, not two
            if op is None:
                rid = LOAD
            else:
                self._next += 1
                rid = self._next
                self.stream.send(self.dumps((REQUEST, rid, op, args)))
            while rid not in self._stash:
                frame = self._read()
                if frame[0] == REPLY:
                    self._stash[frame[1]] = (frame[2], frame[3])
                else:
                    self._serve(frame)
            ok, value = self._stash.pop(rid)
        if ok:
            return value
        raise value

    def answer(self, rid: int, op: str, args: tuple) -> None:
        """Answer a request the other side did not need to send (``LOAD``: the job's program, known here)."""
        self._serve((REQUEST, rid, op, args))

    def serve_forever(self) -> None:
        """Answer requests until the other side closes the channel (then ``Lost`` is raised)."""
        while True:
            with self.lock:
                frame = self._read()
                if frame[0] == REPLY:
                    raise Lost("reply nobody asked for")
            self._serve(frame)

    def _read(self) -> tuple:
        data = self.stream.recv()
        try:
            frame = self.loads(data)
        except (Lost, Deadline):
            raise
        except BaseException as err:  # noqa: BLE001 - whatever the bytes were, the channel is no longer usable
            raise Lost(f"undecodable frame ({type(err).__name__}: {err})") from None
        if type(frame) is not tuple or len(frame) != 4 or frame[0] not in (REQUEST, REPLY) \
                or type(frame[1]) is not int:
            raise Lost("malformed frame")
        if frame[0] == REPLY and type(frame[2]) is not bool:
            raise Lost("malformed reply")
        if frame[0] == REQUEST and (type(frame[2]) is not str or type(frame[3]) is not tuple):
            raise Lost("malformed request")
        return frame

    def _serve(self, frame: tuple) -> None:
        _, rid, op, args = frame
        try:
            reply = (REPLY, rid, True, self.dispatch(op, args))
        except (Lost, Deadline):
            raise
        except BaseException as exc:  # noqa: BLE001 - SystemExit and friends are answers too
            reply = (REPLY, rid, False, exc)
        try:
            data = self.dumps(reply)
            if len(data) > self.stream.max_frame and self.shrink is not None and reply[2]:
                data = self.dumps((REPLY, rid, True, self.shrink(op, reply[3])))
            if len(data) > self.stream.max_frame:
                raise ValueError("reply larger than a frame")
        except (Lost, Deadline):
            raise
        except BaseException as err:  # noqa: BLE001 - e.g. a structure too deep to encode
            data = self.dumps((REPLY, rid, False, ValueError(f"value could not be sent: {type(err).__name__}")))
        with self.lock:
            self.stream.send(data)
