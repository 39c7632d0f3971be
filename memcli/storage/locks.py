"""Exclusive `flock`s, taken at once or within a timeout: the writer lock, the inbox worker's and
each inbox item's. Standard library only: a hook imports it on a < 100 ms budget.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from pathlib import Path

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: importing typing costs a hook ~10 ms

if TYPE_CHECKING:
    from collections.abc import Iterator


def try_flock(fd: int) -> bool:
    """An exclusive flock on `fd` without waiting: False if another process holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def flock_within(fd: int, timeout: float) -> bool:
    """An exclusive flock on `fd` within `timeout` seconds: False if another still holds it."""
    deadline = time.monotonic() + timeout
    while not try_flock(fd):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def lock_fd(fd: int, wait: float = 0) -> int | None:
    """`fd` once exclusively flocked within `wait` seconds (0: at once); else it is closed: None."""
    try:
        taken = flock_within(fd, wait) if wait > 0 else try_flock(fd)
    except OSError:
        os.close(fd)
        raise
    if not taken:
        os.close(fd)
        return None
    return fd


def try_lock(path: Path, wait: float = 0) -> int | None:
    """The fd of an exclusive flock on `path` (created) within `wait` seconds, or None."""
    return lock_fd(os.open(path, os.O_RDWR | os.O_CREAT, 0o644), wait)


@contextlib.contextmanager
def item_lock(path: Path) -> Iterator[int | None]:
    """Yields the fd of a non-blocking lock on the file still at `path`, or None (held, or gone)."""
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
