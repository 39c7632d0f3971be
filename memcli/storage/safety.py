"""Safety nets for the parts of a store memcli derives or owns: read-only stores, damaged sidecar
files, paths that are not what they should be.

Why a module of its own: the index, the usage counts and the store all need the same few rules
(never wait on a store that cannot be written, never trust a derived file that does not open,
never write through a symlink), and a repair must be reported once, to the user, whichever layer
made it. Layers call `notice()`; the CLI prints what `drain()` returns after each command.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import sqlite3
import stat
import time
from collections.abc import Iterator
from pathlib import Path

from memcli.core.config import cache_dir
from memcli.core.notices import drain, notice  # noqa: F401 - `safety.drain` kept for its callers
from memcli.storage.locks import flock_within


def writable(path: Path) -> bool:
    """Whether this process may create files in `path` (the nearest existing directory above it
    when it does not exist yet). `os.access` reports a read-only mount (EROFS) and honours root's
    override of permission bits, which is what a write would do."""
    p = path
    while not p.exists():
        if p.parent == p:
            return False
        p = p.parent
    return os.access(p, os.W_OK | os.X_OK)


def is_busy(error: sqlite3.OperationalError) -> bool:
    """SQLITE_BUSY / SQLITE_LOCKED: another process is writing, worth waiting for. Anything else
    (read-only, cannot open, disk full, I/O error) will not get better by waiting."""
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (5, 6)
    text = str(error).lower()
    return "locked" in text or "busy" in text


def is_corrupt(error: sqlite3.DatabaseError) -> bool:
    """A database file that is damaged or not a database at all (derived data: rebuild it)."""
    if isinstance(error, sqlite3.OperationalError):
        return False
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB
    text = str(error).lower()
    return "malformed" in text or "not a database" in text


def move_aside(path: Path, what: str) -> Path:
    """Rename a damaged derived file out of the way (kept for inspection), and say so."""
    dest = path.with_name(f"{path.name}.broken-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
    os.replace(path, dest)
    notice(f"{what} was unreadable: moved aside to {dest.name}")
    return dest


def fallback_index_dir(store_path: Path) -> Path:
    """Where the sidecar of a store that cannot be written lives: in the user's cache, keyed by the
    store's path, so a read-only store still searches (and stays fast across runs)."""
    key = hashlib.sha256(str(store_path).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return cache_dir() / "readonly-index" / key


@contextlib.contextmanager
def file_lock(path: Path, timeout: float = 60.0) -> Iterator[None]:
    """An exclusive flock on `path` (created 0600), for sidecars that live outside the store."""
    fd = open_no_follow(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if not flock_within(fd, timeout):
            raise BlockingIOError(errno.EAGAIN, f"{path} is locked by another process")
        yield
    finally:
        os.close(fd)


def open_no_follow(path: Path, flags: int, mode: int = 0o600) -> int:
    """os.open that refuses a symlink at `path` (ELOOP becomes a clear message): the store's own
    files are never written through a link someone planted."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "refusing to write through a symbolic link", str(path)) from None
        raise


class NotRegular(OSError):
    """A path that is a symlink, directory, FIFO or device where a regular file was expected."""


def read_regular(path: Path) -> bytes:
    """The bytes of a regular file, refusing anything else without following or blocking on it:
    a symlink planted in facts/ (`passwd.md -> /etc/passwd`) is not read, a FIFO does not hang."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise NotRegular(errno.ELOOP, "a symbolic link (never followed)", str(path)) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "not a regular file"
            raise NotRegular(errno.EINVAL, kind, str(path))
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


def regular_file(path: Path) -> bool:
    """True for a regular file that is not a symlink (lstat: the link itself, never its target)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False
