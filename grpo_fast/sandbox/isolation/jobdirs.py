"""Job directories in the host's temporary directory (the levels without mount namespaces: a container), reused
by a slot's forker from job to job. Removing a directory waits on the host's disk (ext4 mounted with ``discard``
here: ``rmdir`` ~0.5 ms on average, at times tens of ms, twice a job, in the forker between two jobs); emptying one
and handing it on does not. A directory is handed on only when it is provably as new: the inode the forker made
(never a name a job put in its place), nothing in it, owned by the forker again, mode 0700, no extended attribute
(ACLs included), as many links as when made; anything else and it is removed as before, and the next job gets a
new one; a directory a job used under the forker's own uid is never reused. Every name starts with the pool's
prefix: the janitor removes what the pool held when it is killed.
"""

from __future__ import annotations

import fcntl
import os
import struct
from collections.abc import Callable
from stat import S_IMODE, S_ISDIR

from .cleanup import empty_tree, remove_tree
from .janitor import after_pool

PREFIX = "grpo_fast_sbx_"
# the inode's own attributes, which its owner (the job) may set and keep no matter what the directory holds: chattr's
# flags (FS_IOC_GETFLAGS/SETFLAGS: nodump, noatime, sync, dirsync...) and the fsxattr (project id, extent hints)
_GETFLAGS, _SETFLAGS = 0x80086601, 0x40086602
_FSGETXATTR, _FSSETXATTR = 0x801C581F, 0x401C5820
_FSXATTR = struct.Struct("5I8x")  # xflags, extsize, nextents, projid, cowextsize
# the flags an owner or root may set (FS_FL_USER_MODIFIABLE, journal data, nocompress, nocow, dax, projinherit,
# casefold); the others are the filesystem's own (an ext4 directory grown large keeps its index flag when emptied)
_SETTABLE = 0x000380FF | 0x4000 | 0x400 | 0x800000 | 0x2000000 | 0x20000000 | 0x40000000


class JobDirs:
    """One forker's job directories in ``parent``: ``take`` one for a job, ``release`` it once every process of
    that job is gone."""

    def __init__(self, parent: str, prefix: str, made: Callable[[str], None] = lambda path: None,
                 gone: Callable[[str], None] = lambda path: None) -> None:
        """``made``, ``gone``: told of each directory made and removed (e.g. what is built once for each)."""
        self.parent, self.prefix, self.on_made, self.gone = parent, prefix, made, gone
        self.made: dict[str, tuple] = {}  # path -> (device, inode, links, attributes) when made
        self.free: list[str] = []  # emptied and reset: the next jobs'
        # taken by a job running as the forker's own uid: never reused. Where a job has a uid of its own, a process
        # of it that outlived the clean-up cannot write into the directory once it is the forker's again (0700); one
        # of the forker's uid could, and its Landlock layer allows it that directory: the next job's, were it reused
        self.own_uid: set[str] = set()

    def take(self, uid: int | None) -> str:
        """An empty directory, mode 0700, owned by ``uid`` (None: the forker's own uid, and never reused)."""
        path = self.free.pop() if self.free else self._make()
        if uid is None:
            self.own_uid.add(path)
        else:
            try:
                os.chown(path, uid, uid)
            except OSError:
                self.discard(path)
                raise
        return path

    def _make(self) -> str:
        for _ in range(100):
            path = os.path.join(self.parent, self.prefix + os.urandom(6).hex())
            try:
                os.mkdir(path, 0o700)  # as ``tempfile.mkdtemp`` does, without its random generator to seed
            except FileExistsError:
                continue
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                st = os.fstat(fd)
                self.made[path] = (st.st_dev, st.st_ino, st.st_nlink, _attributes(fd))
            finally:
                os.close(fd)
            self.on_made(path)
            return path
        raise FileExistsError(f"no free directory name in {self.parent}")

    def release(self, path: str) -> list[str]:
        """After the job that used ``path`` (``""``: none) is over, every process of its uid gone: emptied and
        kept for the next job where it is provably as new, else removed. Returns it, with why, when it could not
        all go."""
        if not path:
            return []
        if path in self.made and path not in self.own_uid and _reset(path, self.made[path]):
            self.free.append(path)
            return []
        return self.discard(path)

    def discard(self, path: str) -> list[str]:
        """Removed, never reused (a job's process may still be running in it); ``""``: none."""
        if not path:
            return []
        if self.made.pop(path, None) is not None:
            self.gone(path)
        if path in self.free:
            self.free.remove(path)
        self.own_uid.discard(path)
        try:  # a name a job put in the directory's place goes too (a link: never followed)
            why = remove_tree(path) if S_ISDIR(os.lstat(path).st_mode) else os.unlink(path) or ""
        except FileNotFoundError:
            why = ""
        except OSError as err:
            why = err.strerror or str(err)
        return [f"{path} ({why})"] if why else []

    def remove_all(self) -> None:
        """The forker is ending: every directory it made goes."""
        for path in list(self.made):
            self.discard(path)


def _reset(path: str, made: tuple) -> bool:
    """``path`` emptied and given back to this process's uid, mode 0700, no extended attribute; True only if it is
    then exactly as made (the same inode, as many links, nothing in it)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if _identity(os.fstat(fd)) != made[:2]:
            return False  # not the directory made: a job's name in its place
        empty_tree(fd)
        os.fchown(fd, os.geteuid(), os.getegid())
        os.fchmod(fd, 0o700)
        os.utime(fd)  # its times are the next job's own: never a value the job set (os.utime on its directory)
        _restore(fd, made[3])
        for attr in os.listxattr(fd):
            os.removexattr(fd, attr)
        st = os.fstat(fd)
        return (S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid() and st.st_nlink == made[2]
                and not os.listdir(fd) and not os.listxattr(fd) and _attributes(fd) == made[3]
                and _identity(os.lstat(path)) == made[:2])
    except OSError:
        return False
    finally:
        os.close(fd)


def _attributes(fd: int) -> tuple[int | None, tuple[int, ...] | None]:
    """The directory's settable chattr flags, its fsxattr but the extent count (None: not on this filesystem)."""
    try:
        flags: int | None = struct.unpack("i", fcntl.ioctl(fd, _GETFLAGS, bytes(8))[:4])[0] & _SETTABLE
    except OSError:
        flags = None
    try:
        xflags, extsize, _, projid, cowextsize = _FSXATTR.unpack(fcntl.ioctl(fd, _FSGETXATTR, bytes(_FSXATTR.size)))
        fsx: tuple[int, ...] | None = (xflags, extsize, projid, cowextsize)
    except OSError:
        fsx = None
    return flags, fsx


def _restore(fd: int, made: tuple[int | None, tuple[int, ...] | None]) -> None:
    """The attributes as when made, where the job changed them (chattr +d +A +S +D on its directory: bits that
    would reach the next job). Raises OSError where they cannot be set back."""
    flags, fsx = _attributes(fd)
    if made[0] is not None and flags != made[0]:
        kept = struct.unpack("i", fcntl.ioctl(fd, _GETFLAGS, bytes(8))[:4])[0] & ~_SETTABLE
        fcntl.ioctl(fd, _SETFLAGS, struct.pack("i4x", kept | made[0]))
    if made[1] is not None and fsx != made[1]:
        xflags, extsize, projid, cowextsize = made[1]
        fcntl.ioctl(fd, _FSSETXATTR, _FSXATTR.pack(xflags, extsize, 0, projid, cowextsize))


def _identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def start_janitor(parent: str) -> str:
    """A small process that outlives the pool and removes every entry of ``parent`` whose name starts with the
    returned prefix (the pool's own: its zygote's pid and a random part) once every process of the pool is gone:
    the trainer ends a pool by killing it, so its forkers cannot remove the directories they keep for the next
    jobs."""
    prefix = f"{PREFIX}{os.getpid()}_{os.urandom(4).hex()}_"

    def remove() -> None:
        for entry in os.scandir(parent):
            if entry.name.startswith(prefix):
                remove_tree(entry.path)

    after_pool(remove)
    return prefix
