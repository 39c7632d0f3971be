"""The inbox's per-item lock, shared by the hooks' worker (`memcli inbox process`, memcli.agents.spool)
and `memcli inbox retry` (memcli.ops.add): two processes never work on one item.

Standard library only: the spooling side imports it on a hook's < 100 ms budget.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: importing typing costs a hook ~10 ms

if TYPE_CHECKING:
    from collections.abc import Iterator


def try_flock(fd: int) -> bool:
    """Take an exclusive flock on `fd` without waiting: False if another process holds it; any
    other failure (EBADF, ENOLCK...) raises, since it is not "someone else is working on it"."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


@contextlib.contextmanager
def item_lock(path: Path) -> Iterator[int | None]:
    """An exclusive non-blocking lock on `path`: yields the fd, or None if someone else holds it
    (or the file is gone). The lock is checked to be on the file still at `path`."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        yield None
        return
    try:
        if not try_flock(fd):
            yield None
            return
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        yield fd if same else None
    finally:
        os.close(fd)
