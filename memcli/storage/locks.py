"""The one lock helper: exclusive `flock`s, taken without waiting (`try_flock`, `try_lock`,
`item_lock`) or waiting up to a timeout (`flock_within`). The store's writer lock, the inbox
worker's lock, each inbox item's lock (so the hooks' worker and `memcli inbox retry` never work on
one item) and the locks of sidecars outside the store are all taken through it.

Standard library only: the spooling side imports it on a hook's < 100 ms budget.
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
    """Take an exclusive flock on `fd` without waiting: False if another process holds it; any
    other failure (EBADF, ENOLCK...) raises, since it is not "someone else is working on it"."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def flock_within(fd: int, timeout: float) -> bool:
    """Take an exclusive flock on `fd`, waiting up to `timeout` seconds: False if another process
    still holds it then."""
    deadline = time.monotonic() + timeout
    while not try_flock(fd):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def try_lock(path: Path, wait: float = 0) -> int | None:
    """An exclusive flock on `path` (created), waiting up to `wait` seconds (0: not at all): the
    fd, or None if another still holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        taken = flock_within(fd, wait) if wait > 0 else try_flock(fd)
    except OSError:
        os.close(fd)
        raise
    if not taken:
        os.close(fd)
        return None
    return fd


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
