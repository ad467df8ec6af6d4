"""A process that outlives the pool: what a pool leaves (its cgroups, its kept job directories) is removed once
every process of it is gone. Standard library only: imported before the pool's layers are set."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable


def after_pool(work: Callable[[], None]) -> None:
    """Run ``work`` in a small process that outlives the pool, once every process of it is gone: the trainer ends a
    pool by killing it, so the pool cannot clean up after itself. Call it from the zygote before its forkers start:
    the pipe's write end stays open in the zygote and every forker, and its EOF is the signal."""
    r, w = os.pipe()
    if os.fork() == 0:
        try:
            os.close(w)
            os.setsid()
            if os.fork():  # a grandchild, adopted by init: nobody has to wait for it
                os._exit(0)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            while os.read(r, 1):
                pass
            work()
        finally:
            os._exit(0)
    os.close(r)
    os.set_inheritable(w, False)
    os.wait()  # the intermediate child exits at once
