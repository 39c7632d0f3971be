"""The rules the index, the usage counts and the store share: never wait on a store that cannot be
written, never trust a derived file that does not open, never follow a link out of the store.
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
from memcli.core.errors import StoreError
from memcli.core.notices import drain, notice  # noqa: F401 - `safety.drain` kept for its callers
from memcli.storage.locks import flock_within


def writable(path: Path) -> bool:
    """Whether this process may create files in `path` (or the nearest existing directory above it);
    `os.access` sees a read-only mount and root's override, as a write would."""
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
    """Rename a damaged derived file out of the way (kept for inspection), and say so; an SQLite
    file's `-wal` and `-shm` go with it (they belong to the old file)."""
    dest = path.with_name(f"{path.name}.broken-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
    os.replace(path, dest)
    notice(f"{what} was unreadable: moved aside to {dest.name}")
    for suffix in ("-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{path}{suffix}")
    return dest


def fallback_index_dir(store_path: Path) -> Path:
    """The sidecar of a store that cannot be written: in the user's cache, keyed by the store's path."""
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
    """os.open that refuses a symlink at `path`, with a clear message."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "refusing to write through a symbolic link", str(path)) from None
        raise


def file_kind(mode: int) -> str:
    """What a path that is not a regular file is, for a message."""
    kinds = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
             (stat.S_ISSOCK, "a socket"))
    return next((kind for test, kind in kinds if test(mode)), "not a regular file")


class NotRegular(OSError):
    """A path that is a symlink, directory, FIFO or device where a regular file was expected."""


def read_regular(path: Path) -> bytes:
    """The bytes of a regular file; a symlink (`passwd.md -> /etc/passwd`) is not followed, a FIFO
    does not hang."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise NotRegular(errno.ELOOP, "a symbolic link (never followed)", str(path)) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegular(errno.EINVAL, file_kind(mode), str(path))
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


# ------------------------------------------------------------------ containment
# A clone may hold planted links (`facts -> ~/notes`, `config.toml -> ~/.aws/credentials`): such a
# store is refused whole until `memcli doctor --fix` moves them aside.
STORE_DIRS = ("facts", ".trash", ".index", "inbox", ".capture", ".quarantine")
_SCANNED = (".index", "inbox", ".capture")  # small directories whose entries memcli opens by name


class UnsafeStore(StoreError):
    """A store holding a symbolic link (or a non-directory where a directory belongs)."""


def unsafe_entries(store: Path) -> list[tuple[str, str]]:
    """(path in the store, what it is) for each link among the store's entries or in `.index/`,
    `inbox/`, `.capture/`, and each store directory that is not one (`facts/*.md` links are
    refused where they are read). lstat only, a few dozen entries: cheap for every command."""
    out: list[tuple[str, str]] = []

    def scan(d: Path) -> list[os.DirEntry[str]]:
        try:
            with os.scandir(d) as it:
                return list(it)
        except OSError:
            return []

    for e in scan(store):
        if e.is_symlink():
            out.append((e.name, _link_kind(e.path)))
        elif e.name in STORE_DIRS and not e.is_dir(follow_symlinks=False):
            out.append((e.name, "not a directory"))
    for sub in _SCANNED:
        if any(name == sub for name, _ in out):
            continue
        for e in scan(store / sub):
            if e.is_symlink():
                out.append((f"{sub}/{e.name}", _link_kind(e.path)))
    return sorted(out)


def _link_kind(path: str) -> str:
    try:
        return f"a symbolic link (to {os.readlink(path)})"
    except OSError:
        return "a symbolic link"


def ensure_contained(store: Path) -> None:
    """Raise UnsafeStore when the store holds an entry that leads outside it (see unsafe_entries)."""
    bad = unsafe_entries(store)
    if bad:
        name, kind = bad[0]
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise UnsafeStore(f"store {store}: {name} is {kind}{more}; refusing to follow it out of the store",
                          hint="run `memcli doctor` to see them and `memcli doctor --fix` to move them aside")


def own_file(directory: Path, name: object, pattern: str) -> Path | None:
    """`directory/name` when `name` fully matches `pattern` and is a regular file (not a link), else
    None: a crafted catalog's `hnsw_file` must not open `/etc/passwd` or `../../x`."""
    import re

    if not isinstance(name, str) or not re.fullmatch(pattern, name):
        return None
    path = directory / name
    try:
        return path if stat.S_ISREG(os.lstat(path).st_mode) else None
    except OSError:
        return None
