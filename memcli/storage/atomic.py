"""Atomic writes: a temp file beside the target, fsynced, renamed into place, the directory fsynced,
so a reader sees the old file or the new one. Standard library only: a git hook imports it.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: importing typing costs a hook ~10 ms
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

__all__ = ["Staged", "atomic_write", "atomic_write_chunks", "file_mode", "flush_files", "fsync_dir", "stage_file",
           "stage_many"]


# a temp file: created here and now (never an existing file, never through a symlink)
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)

# Read once, at import (single-threaded): reading the umask means setting it, and `import` writes
# files from several threads, where a set-and-restore could hand another thread the wrong mask.
_UMASK = os.umask(0o022)
os.umask(_UMASK)


def file_mode(path: Path, new_mode: dict[str, int] | None = None) -> tuple[int, bool]:
    """(the mode `path` is written with, whether it exists). An existing file keeps its mode; a new
    one is 0600, or 0640 in a group-readable (shared store's) directory. `new_mode` caches per directory."""
    try:
        return os.stat(path).st_mode & 0o7777, True
    except FileNotFoundError:
        pass
    parent = os.path.dirname(path)
    if new_mode is not None and parent in new_mode:
        return new_mode[parent], False
    try:
        shared = os.stat(parent).st_mode & 0o050 == 0o050
    except OSError:
        shared = False
    mode = (0o640 if shared else 0o600) & ~_UMASK
    if new_mode is not None:
        new_mode[parent] = mode
    return mode, False


def _fill(fd: int, data: bytes, mode: int, *, sync: bool) -> tuple[int, int]:
    """Write all of `data` to a new temp file with its final `mode`, and close it; returns its
    (mtime_ns, size), which a rename keeps: the file's signature for the index."""
    try:
        if mode != 0o600:
            os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if sync:
            os.fsync(fd)
        st = os.fstat(fd)
        return st.st_mtime_ns, st.st_size
    finally:
        os.close(fd)


def _temp_name(path: Path) -> str:
    return f"{path.parent}/.{path.name}.{os.getpid():x}{os.urandom(4).hex()}.tmp"


@contextlib.contextmanager
def _removed_on_failure(tmp: str) -> Iterator[None]:
    try:
        yield
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def stage_file(path: Path, data: bytes) -> tuple[str, tuple[int, int]]:
    """Write `data` to a fsynced temp file next to `path`; returns its name and signature, for a
    later `os.replace(tmp, path)` (a change set stages all its files before renaming any)."""
    mode = file_mode(path)[0]
    tmp = _temp_name(path)
    fd = os.open(tmp, _NEW_FILE, 0o600)
    with _removed_on_failure(tmp):
        return tmp, _fill(fd, data, mode, sync=True)


class Staged:
    """What staging learnt: each path's signature once renamed there, and (a batch) the paths that
    exist now, which the renames will replace. A plain class: `typing` costs a hook ~10 ms."""

    __slots__ = ("replaced", "signatures")

    def __init__(self, replaced: list[Path], signatures: dict[Path, tuple[int, int]]) -> None:
        self.replaced = replaced
        self.signatures = signatures


def stage_many(writes: list[tuple[Path, bytes]], staged: list[tuple[str, Path]]) -> Staged:
    """`stage_file` for a batch without an fsync per file (thousands were most of a large curation's
    cost): the caller makes them durable with one `flush_files` before renaming any. Appends each
    (temp, final) pair to `staged` as it goes, for the caller to remove on failure."""
    token = f"{os.getpid():x}{os.urandom(3).hex()}"
    new_mode: dict[str, int] = {}  # per directory: the mode of a file that does not exist yet
    out = Staged([], {})
    for path, data in writes:
        mode, exists = file_mode(path, new_mode)
        if exists:
            out.replaced.append(path)
        tmp = f"{path.parent}/.{path.name}.{token}.tmp"
        fd = os.open(tmp, _NEW_FILE, 0o600)
        staged.append((tmp, path))
        out.signatures[path] = _fill(fd, data, mode, sync=False)
    return out


def flush_files(staged: list[tuple[str, Path]]) -> None:
    """Make the staged temp files durable with one `syncfs` per filesystem they are on (Linux);
    where that is unavailable or reports an error, fsync each file (which raises the error)."""
    devices: dict[int, str] = {}
    try:
        for parent in {str(path.parent) for _, path in staged}:
            devices.setdefault(os.stat(parent).st_dev, parent)
    except OSError:
        devices = {}  # cannot tell the filesystems apart: fsync each file below
    if _syncfs(list(devices.values())):
        return
    for tmp, _ in staged:
        fd = os.open(tmp, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _syncfs(dirs: list[str]) -> bool:
    """syncfs(2) of the filesystem of each directory; False when any could not be synced so."""
    if not dirs or not hasattr(os, "sched_getaffinity"):  # Linux only (syncfs is Linux's)
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        syncfs = libc.syncfs
    except (OSError, AttributeError):
        return False
    for d in dirs:
        try:
            fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            if syncfs(fd) != 0:  # since Linux 5.8 a writeback error is reported here
                return False
        finally:
            os.close(fd)
    return True


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see the old file or the new one, never a mix."""
    tmp, _ = stage_file(path, data)
    with _removed_on_failure(tmp):
        os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        dfd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def atomic_write_chunks(path: Path, chunks: Iterable[str]) -> None:
    """`atomic_write` for text made in pieces (an export is never held whole); private (0600)."""
    tmp = _temp_name(path)
    fd = os.open(tmp, _NEW_FILE, 0o600)
    with _removed_on_failure(tmp):
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    fsync_dir(path.parent)
