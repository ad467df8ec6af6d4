"""A slot's clean-up after each of its jobs' processes, where jobs share the host's directories (no mount or PID
namespace: a container): the exited process's uid loses every process it left, its job directories are emptied
for the next job (or removed: ``jobdirs``), and what the uid left in the host's shared directories goes
(``cleanup``). The forker (``forker.Slot.reap``) calls it at each exit; its serving loop stays there.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..isolation import cleanup, jobdirs
from ..policy import Policy


@dataclass
class Aftercare:
    """One slot's clean-up: the policy, and the jobs' directories and leftovers where the slot keeps them."""

    policy: Policy
    dirs: jobdirs.JobDirs | None = None  # the jobs' directories in the host's, reused (no mount namespaces)
    leftovers: cleanup.Leftovers | None = None  # what a job's uid left in the host's shared directories

    def after_exit(self, uid: int, paths: list[str], live: set[int]) -> tuple[list[str], list[tuple[int, int]]]:
        """A job's process of ``uid`` exited: its uid's processes killed (``live``: the forker's children that are
        other jobs' processes, still running), its directories ``paths`` released, its uid's leftovers removed.
        Returns what could not be removed (with why) and the exits reaped meanwhile (other jobs' among them)."""
        if not self.policy.shares_host_dirs:
            return [], []
        exits = cleanup.kill_leftovers(self.policy, uid, live)
        left = []
        if self.dirs is not None:  # emptied for the next job, or removed
            left += [why for path in paths for why in self.dirs.release(path)]
        if self.leftovers is not None:  # its files, IPC objects and queues: none reaches the next job
            left += self.leftovers.remove_owned(uid).left
        return left, exits

    def program_dir(self, desc: dict, uid: int | None) -> str:
        """A kept directory for a job's program, owned by ``uid`` (None: the forker's own uid, never reused), also
        noted as ``desc["workdir"]``; ``""`` where none is kept here or none could be made."""
        if self.dirs is None:
            return ""
        try:
            desc["workdir"] = self.dirs.take(uid)
        except OSError:
            return ""
        return desc["workdir"]

    def never_started(self, *paths: str) -> None:
        """A job that could not start: its directories, where made (``""``: none), removed and never reused (one
        of its processes may still be there)."""
        if self.dirs is not None:
            for path in paths:
                self.dirs.discard(path)

    def forker_ending(self, killed: list[int]) -> None:
        """The forker ends (its zygote is gone): once ``killed``, every job's process, are gone, its directories
        go."""
        if self.dirs is not None:
            for pid in killed:
                os.waitpid(pid, 0)
            self.dirs.remove_all()
