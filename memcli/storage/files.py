"""A store on disk: `facts/` (the source of truth), `.trash/`, `log.jsonl`, `inbox/` and the writer
lock (an exclusive `flock` of `<store>/.lock`). Writes to `facts/` go through `ops.changes.ChangeSet`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memcli.core.config import Config, load_config
from memcli.core.errors import NotFound, StoreError
from memcli.core.memory import Memory, now_iso, valid_id
from memcli.storage import journal, safety
from memcli.storage.atomic import atomic_write, file_mode, fsync_dir
from memcli.storage.locks import lock_fd

GITIGNORE = (".index/\n.trash/\n.lock\n.state.sqlite*\ninbox/\n.capture/\n"
             ".*.tmp\n*.broken-*\n.quarantine/\n.journal.json\n.edits/\n")  # derived files and leftovers
TRASH_NOTES = "trashed.jsonl"  # in .trash/: when and why each memory moved there by a bulk commit
# one shared encoder: json.dumps builds a new one per call, a third of a bulk commit's log cost
json_text = json.JSONEncoder(ensure_ascii=False).encode


def _append(path: Path, data: bytes, *, sync: bool = False) -> None:
    """Append whole lines to `path` in one write, never through a symlink. A file whose last line
    was torn (power loss mid-append) gets a newline first, so the torn line cannot swallow ours."""
    fd = safety.open_no_follow(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, file_mode(path)[0])
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _stamp(seconds: float) -> str:
    """A file time as the trash's `at` (UTC, to the second)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


class Files:
    """A store directory's files. Cheap to construct; nothing is read until needed."""

    def __init__(self, path: str | os.PathLike[str], config: Config | None = None) -> None:
        self.path = Path(path).expanduser().absolute()
        self.facts_dir = self.path / "facts"
        self._facts = os.fspath(self.facts_dir)
        self.trash_dir = self.path / ".trash"
        self.index_dir = self.path / ".index"
        self.inbox_dir = self.path / "inbox"
        self.log_path = self.path / "log.jsonl"
        self._config = config
        self._lock_depth = 0
        self._lock_fd: int | None = None
        self._contained = False  # checked once per handle (see guard)
        self.allow_unsafe = False  # doctor opens a store holding links, to name and repair them

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"

    # ------------------------------------------------------------ setup
    @property
    def config(self) -> Config:
        if self._config is None:
            self.guard()
            self._config = load_config(self.path)
        return self._config

    def guard(self) -> None:
        """Refuse a store holding a link out of it, once per handle (config reads and the lock call this)."""
        if not self._contained and not self.allow_unsafe:
            safety.ensure_contained(self.path)
            self._contained = True

    def exists(self) -> bool:
        return self.facts_dir.is_dir()

    def init(self) -> bool:
        """Create the layout and a `.gitignore` for the derived parts. Returns True if new."""
        new = not self.exists()
        mode = 0o750 if self.config.shared else 0o700  # private unless the user shares the store
        try:
            self.path.mkdir(parents=True, exist_ok=True, mode=mode)
            self.facts_dir.mkdir(exist_ok=True, mode=mode)
        except OSError as e:
            raise StoreError(f"cannot create store at {self.path}: {e.strerror}") from None
        self.ensure_gitignore()
        return new

    def missing_ignores(self) -> list[str]:
        """GITIGNORE lines the store's `.gitignore` lacks (a store made by an older memcli)."""
        try:
            current = (self.path / ".gitignore").read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            current = []
        except (OSError, UnicodeDecodeError):
            return []  # unreadable: doctor's other checks say so; never rewrite what we cannot read
        return [line for line in GITIGNORE.splitlines() if line not in current]

    def ensure_gitignore(self) -> list[str]:
        """Append the missing GITIGNORE lines to the user's own; returns what was added."""
        missing = self.missing_ignores()
        if missing:
            path = self.path / ".gitignore"
            try:
                current = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                current = ""
            body = current + ("\n" if current and not current.endswith("\n") else "") + "\n".join(missing) + "\n"
            atomic_write(path, body.encode("utf-8"))
        return missing

    def ensure(self) -> None:
        """Writers create the store on first use."""
        if not self.exists():
            self.init()

    # ------------------------------------------------------------ lock
    @contextlib.contextmanager
    def lock(self, timeout: float | None = None) -> Iterator[None]:
        """Exclusive writer lock (re-entrant within this object)."""
        if self._lock_depth:
            self._lock_depth += 1
            try:
                yield
            finally:
                self._lock_depth -= 1
            return
        self.guard()
        self.ensure()
        timeout = float(os.environ.get("MEMCLI_LOCK_TIMEOUT", "60")) if timeout is None else timeout
        # a read-only mount or no permission fails here, at once, with the system's reason
        fd = lock_fd(safety.open_no_follow(self.path / ".lock", os.O_RDWR | os.O_CREAT, 0o600), timeout)
        if fd is None:
            raise StoreError(f"store {self.path} is locked by another memcli process") from None
        self._lock_fd, self._lock_depth = fd, 1
        try:
            journal.recover(self)  # a commit killed half way is finished before anything else
            yield
        finally:
            self._lock_depth = 0
            self._lock_fd = None
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    @property
    def locked(self) -> bool:
        return self._lock_depth > 0

    # ------------------------------------------------------------ facts
    def fact_path(self, mid: str) -> Path:
        return Path(self.fact_file(mid))

    def fact_file(self, mid: str) -> str:
        """`facts/<id>.md` as a string (a `Path` per memory costs more than a commit's file work)."""
        if not valid_id(mid):
            raise NotFound(f"invalid memory id {mid!r}")
        return f"{self._facts}/{mid}.md"

    def read(self, mid: str) -> Memory:
        """Read a memory from its file (the source of truth, not the catalog)."""
        path = self.fact_path(mid)
        try:
            raw = safety.read_regular(path)  # a symlink is never followed, a FIFO never blocks
        except FileNotFoundError:
            raise NotFound(f"no memory with id {mid}") from None
        except safety.NotRegular as e:
            raise StoreError(f"facts/{mid}.md is {e.strerror}, not a regular file; not read") from None
        return Memory.parse(raw, file_id=mid)

    def write(self, memory: Memory) -> Path:
        """Atomically write one memory file. Callers hold the lock."""
        self.ensure()
        path = self.fact_path(memory.id)
        atomic_write(path, memory.to_markdown().encode("utf-8"))
        return path

    # ------------------------------------------------------------ trash
    # A trashed memory is a copy with `trashed: {at, reason}` in its front matter (a small commit),
    # or the file moved as it was with that note in `.trash/trashed.jsonl` (a bulk commit: rewriting
    # thousands of files would cost as much as moving them).
    def trashed(self) -> list[Memory]:
        """The memories in `.trash/`, each with `extra["trashed"]` = {at, reason}: from its front
        matter, else its note, else its ctime (a rename sets it) and no reason."""
        out = []
        notes: dict[str, dict[str, str]] | None = None
        for p in sorted(self.trash_dir.glob("*.md")) if self.trash_dir.is_dir() else []:
            with contextlib.suppress(ValueError, OSError):
                m = Memory.parse(safety.read_regular(p), file_id=p.stem)
                if not isinstance(m.extra.get("trashed"), dict):
                    if notes is None:  # read once, and only for a file a bulk commit moved
                        notes = {i: note for i, (note, _) in self._read_trash_notes()[0].items()}
                    m.extra["trashed"] = dict(notes.get(m.id) or {"at": _stamp(p.stat().st_ctime), "reason": ""})
                out.append(m)
        return out

    @property
    def trash_notes_path(self) -> Path:
        return self.trash_dir / TRASH_NOTES

    def note_trashed(self, entries: list[tuple[str, str, str]]) -> None:
        """Record (id, at, reason) of memories moved to the trash, fsynced before the moves (a note
        for a move a kill prevented is never looked up, and compaction drops it)."""
        if not entries:
            return
        data = "".join(json_text({"id": mid, "at": at, "reason": reason}) + "\n"
                       for mid, at, reason in entries).encode("utf-8")
        _append(self.trash_notes_path, data, sync=True)

    def _read_trash_notes(self) -> tuple[dict[str, tuple[dict[str, str], str]], int]:
        """id -> ({at, reason}, its line), the last line of each id; and the file's line count."""
        try:
            raw = safety.read_regular(self.trash_notes_path)
        except (OSError, safety.NotRegular):
            return {}, 0
        notes: dict[str, tuple[dict[str, str], str]] = {}
        lines = raw.decode("utf-8", "replace").splitlines()
        for line in lines:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and isinstance(rec.get("id"), str):
                notes.pop(rec["id"], None)  # the last line of an id wins, and takes its place
                notes[rec["id"]] = ({"at": str(rec.get("at") or ""), "reason": str(rec.get("reason") or "")}, line)
        return notes, len(lines)

    def compact_trash_notes(self) -> None:
        """Keep only the notes of files still in the trash. Best effort: stale notes are never looked
        up, so a failed write or a lock held by another writer leaves them for the next compaction."""
        path = self.trash_notes_path
        with contextlib.suppress(StoreError, OSError), self.lock(timeout=0):
            notes, count = self._read_trash_notes()  # under the lock: no note appended meanwhile is lost
            present = {n[:-3] for n in os.listdir(self.trash_dir) if n.endswith(".md")} if count else set()
            keep = [line for mid, (_, line) in notes.items() if mid in present]
            if keep and len(keep) < count:
                atomic_write(path, "".join(line + "\n" for line in keep).encode("utf-8"))
            elif not keep and count:
                os.unlink(path)
                fsync_dir(self.trash_dir)

    def purge_trash(self, ids: list[str]) -> list[str]:
        """Delete trashed memories for good (logged first, like every change); returns the ids
        purged, skipping those not in the trash."""
        with self.lock():
            gone = [mid for mid in ids if valid_id(mid) and (self.trash_dir / f"{mid}.md").is_file()]
            self.log_many([{"event": "PURGE", "id": mid} for mid in gone])
            for mid in gone:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.trash_dir / f"{mid}.md")
            if gone:
                fsync_dir(self.trash_dir)
            self.compact_trash_notes()
        return gone

    # ------------------------------------------------------------ log
    def log(self, event: str, **fields: Any) -> None:
        """Append one line to `log.jsonl`, the history of every change."""
        self.log_many([{"event": event, **fields}])

    def log_many(self, records: list[dict[str, Any]]) -> None:
        """Append several log lines in one write (a bulk import logs each memory it writes)."""
        if not records:
            return
        at = now_iso()
        data = "".join(
            json_text({"at": at, **(r if None not in r.values() else {k: v for k, v in r.items() if v is not None})})
            + "\n" for r in records
        ).encode("utf-8")
        self.ensure()
        _append(self.log_path, data)
