"""The catalog: the SQLite half of the sidecar in `.index/` (`catalog.sqlite`).

One row per memory file (id, file signature, text hash, the columns filters read, the record as
JSON, its vector), the unreadable files (`bad`) and `meta`. The connection, its directory (the
store's `.index/`, or a fallback in the user's cache for a store that cannot be written) and every
read are here; sync, vectors and keyword write through `Catalog.db` in their own transactions.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from memcli.core.errors import IndexUnavailable
from memcli.core.memory import Memory
from memcli.core.vocab import SortKey
from memcli.index.keyword import IN_JSON, KeywordIndex, json_list
from memcli.storage import safety
from memcli.storage.files import Files

SCHEMA_VERSION = "5"  # 2: the keyword index of memcli/index/keyword.py replaced FTS5; 3: digits split from letters;
# 4: short forms written out; 5: camel-case names also as their words
VECTOR_FILE = r"vectors-\d+\.hnsw"  # the only names a catalog's hnsw_file may give (see safety.own_file)
SORT_KEYS = SortKey.values()

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS mem (
    label INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT UNIQUE NOT NULL,
    fname TEXT UNIQUE NOT NULL,
    mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL,
    hash TEXT NOT NULL,
    norm TEXT NOT NULL,
    type TEXT, user TEXT, project TEXT, created TEXT, updated TEXT, confidence REAL,
    tags TEXT,
    record TEXT NOT NULL,
    vec BLOB
);
CREATE INDEX IF NOT EXISTS mem_norm ON mem(norm);
-- covers sync()'s reads of the catalog, so that it reads this index instead of every row
CREATE INDEX IF NOT EXISTS mem_sync ON mem(fname, mtime_ns, size, hash);
CREATE INDEX IF NOT EXISTS mem_tail ON mem(substr(upper(id), -8));  -- short ids (memcli/storage/ids.py)
CREATE TABLE IF NOT EXISTS bad (fname TEXT PRIMARY KEY, mtime_ns INTEGER, size INTEGER, error TEXT);
-- rows whose vector is provisional (a bulk curation commit's stand-in: memcli/ops/changes.py
-- PROVISIONAL_MIN): an entry means something only while its label's row still has that text hash
CREATE TABLE IF NOT EXISTS provisional (label INTEGER PRIMARY KEY, hash TEXT NOT NULL);
"""


@dataclass(frozen=True)
class Filters:
    """Row filters shared by search, list, export, prune. Times are ISO strings (UTC, `Z`)."""

    tags: tuple[str, ...] = ()
    type: str | None = None
    user: str | None = None
    project: str | None = None
    since: str | None = None
    until: str | None = None
    current: bool = False  # only memories not replaced by a newer one (no `superseded_by`)

    def sql(self) -> tuple[str, list[Any]]:
        where, args = [], []
        if self.current:
            where.append("json_extract(record, '$.superseded_by') IS NULL")
        for t in self.tags:
            where.append("tags LIKE ?")
            args.append(f"%|{t.lower()}|%")
        for col in ("type", "user", "project"):
            value = getattr(self, col)
            if value is not None:
                where.append(f"{col} = ?")
                args.append(value)
        if self.since:
            where.append("created >= ?")
            args.append(self.since)
        if self.until:
            where.append("created <= ?")
            args.append(self.until)
        return (" AND ".join(where) or "1"), args

    @property
    def active(self) -> bool:
        return bool(self.tags or self.type or self.user or self.project or self.since or self.until)


def tags_col(tags: Iterable[str]) -> str:
    return "|" + "|".join(t.lower() for t in tags) + "|"


def fts_body(m: Memory) -> str:
    """What keyword search sees: the text, the tags, the domain and any code pattern."""
    parts = [m.text, " ".join(m.tags)]
    if m.domain:
        parts.append(m.domain)
    if m.code_pattern and m.code_pattern not in m.text:
        parts.append(m.code_pattern)
    return "\n".join(parts)


class RankFields(NamedTuple):
    """What `search.rank` reads of a candidate, named as `Memory`'s fields: a `Memory` each would
    cost a JSON parse for five columns."""

    id: str
    created: str | None
    updated: str | None
    confidence: float
    superseded: bool


class Catalog:
    """The catalog of one store, opened on the first query; its reads return `Memory` objects, never
    the JSON records."""

    def __init__(self, store: Files, dim: Callable[[], int]) -> None:
        self.store = store
        self._dim = dim  # the embedder's dimension, asked only when a vector is read (loads the model)
        self.dir: Path = store.index_dir
        self._db: sqlite3.Connection | None = None
        self._kw: KeywordIndex | None = None
        self._count: tuple[int, int] | None = None  # (catalog data_version, rows) of the last count()
        self.readonly = False  # the store cannot be written: the sidecar lives in the user's cache
        # what else holds state derived from this catalog (the loaded vector file): told on a drop
        self._on_drop: list[Callable[[], None]] = []

    # ------------------------------------------------------------ connections
    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            self._prepare_dir()
            path = self.dir / "catalog.sqlite"
            deadline = time.monotonic() + 60
            while True:
                db = sqlite3.connect(path, timeout=60, isolation_level=None, check_same_thread=False)
                try:
                    db.execute("PRAGMA journal_mode=WAL")
                    db.execute("PRAGMA synchronous=NORMAL")
                    # mapped reads: a search touches scattered rows
                    db.execute("PRAGMA mmap_size=1073741824")
                    # zeroing freed pages would multiply a prune's writes, for a copy of facts/
                    db.execute("PRAGMA secure_delete=0")
                    db.executescript(SCHEMA)
                    break
                except sqlite3.OperationalError as e:
                    db.close()
                    if not safety.is_busy(e):  # read-only, full, cannot open: waiting will not help
                        raise IndexUnavailable(f"cannot open the index {path}: {e}") from None
                    # another process is creating or switching it: wait, it is not corrupt
                    if time.monotonic() > deadline:
                        raise IndexUnavailable(f"the index {path} stayed busy for 60 s") from None
                    time.sleep(0.05)
                except sqlite3.DatabaseError:
                    db.close()  # corrupt ("not a database"): derived data, so rebuilt from facts/
                    self.drop()
                    safety.notice("the index catalog was unreadable: rebuilt from facts/")
            self._db = db
        return self._db

    @property
    def kw(self) -> KeywordIndex:
        """The BM25 keyword index, kept in the catalog (memcli/index/keyword.py)."""
        if self._kw is None:
            self._kw = KeywordIndex(self.db)
        return self._kw

    def _prepare_dir(self) -> None:
        """Make sure `.index/` is a directory this process can write (a file or link there is moved
        aside), else use a fallback in the user's cache, seeded from the store's catalog: a store
        that cannot be written keeps working for reads."""
        store_dir = self.store.path
        if not self.readonly and not (
            safety.writable(store_dir) and (not self.dir.is_dir() or safety.writable(self.dir))
        ):
            self.readonly = True
            own = self.dir
            self.dir = safety.fallback_index_dir(store_dir)
            self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            if not (self.dir / "catalog.sqlite").exists() and (own / "catalog.sqlite").is_file():
                _seed_catalog(own, self.dir)
            return
        if not self.readonly and (self.dir.is_symlink() or (self.dir.exists() and not self.dir.is_dir())):
            with self.store.lock():
                if self.dir.is_symlink() or (self.dir.exists() and not self.dir.is_dir()):
                    safety.move_aside(self.dir, ".index (not a directory)")
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)

    def writer_lock(self) -> AbstractContextManager[Any]:
        """The lock that serialises writes to this sidecar: the store's, or the fallback's own."""
        if self.readonly:
            return safety.file_lock(self.dir / ".lock")
        return self.store.lock()

    def on_drop(self, forget: Callable[[], None]) -> None:
        """Call `forget` whenever the catalog is closed or emptied: state derived from it is stale."""
        self._on_drop.append(forget)

    def drop(self) -> None:
        """Delete an unreadable catalog (and its WAL); the next sync rebuilds it from `facts/`."""
        Catalog.close(self)  # the connection only (an `Index` keeps its embedder)
        path = self.dir / "catalog.sqlite"
        with self.writer_lock():
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{path}{suffix}")

    def close(self) -> None:
        self._kw, self._count = None, None
        if self._db is not None:
            self._db.close()
            self._db = None
        for forget in self._on_drop:
            forget()

    def meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, **kv: object) -> None:
        self.db.executemany(
            "INSERT OR REPLACE INTO meta VALUES (?, ?)", [(k, str(v)) for k, v in kv.items()]
        )

    def data_version(self) -> int:
        """Changes whenever another connection commits to the catalog (SQLite's data_version)."""
        return int(self.db.execute("PRAGMA data_version").fetchone()[0])

    def forget_count(self) -> None:
        """Before a write: the remembered row count is about to be wrong."""
        self._count = None

    def reset(self) -> None:
        """Empty every table (a full rebuild follows), in one transaction."""
        db = self.db
        kw = self.kw
        self._count = None
        db.execute("BEGIN IMMEDIATE")
        db.execute("DROP TABLE IF EXISTS fts")  # the FTS5 keyword index of schema 1
        for table in ("near", "near_crowded", "close_pairs", "close_crowded"):  # the close-pair table's, retired
            db.execute(f"DROP TABLE IF EXISTS {table}")
        for table in ("mem", "bad", "meta", "provisional"):
            db.execute(f"DELETE FROM {table}")
        kw.reset()
        db.execute("DELETE FROM sqlite_sequence WHERE name='mem'")
        db.execute("COMMIT")
        for forget in self._on_drop:
            forget()

    # ------------------------------------------------------------ reads
    def signatures(self) -> dict[str, tuple[int, int]]:
        """(mtime_ns, size) of every file the catalog has read, good or bad, by file name."""
        return {
            fname: (mtime, size)
            for fname, mtime, size in self.db.execute(
                "SELECT fname, mtime_ns, size FROM mem UNION ALL SELECT fname, mtime_ns, size FROM bad"
            )
        }

    def vector_rows(self) -> tuple[list[int], np.ndarray]:
        """Every stored vector with its label, in label order: what a vector file is rebuilt from."""
        rows = self.db.execute("SELECT label, vec FROM mem WHERE vec IS NOT NULL ORDER BY label").fetchall()
        if not rows:
            return [], np.zeros((0, 0), np.float32)
        vecs = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
        return [int(r[0]) for r in rows], vecs

    def vector_ids(self) -> list[tuple[int, str]]:
        """(label, id) of every memory that has a vector, in label order."""
        return [(int(lab), str(mid)) for lab, mid in
                self.db.execute("SELECT label, id FROM mem WHERE vec IS NOT NULL ORDER BY label")]

    def has_id(self, mid: str) -> bool:
        return self.db.execute("SELECT 1 FROM mem WHERE id = ?", (mid,)).fetchone() is not None

    def with_prefix(self, prefix: str, limit: int) -> list[tuple[str, str]]:
        """(id, text) of the memories whose id starts with `prefix` (upper-cased), in id order."""
        return self._id_texts("upper(id) >= ? AND upper(id) < ?", (prefix, prefix + "\uffff", limit))

    def with_suffix(self, suffix: str, limit: int) -> list[tuple[str, str]]:
        """(id, text) of the memories whose id ends with `suffix` (upper-cased): short ids are tails
        of the ULID's random part (memcli/storage/ids.py)."""
        if not suffix:
            return []
        if len(suffix) >= 8:  # through the index on the last 8 characters, then the whole tail
            return self._id_texts("substr(upper(id), -8) = ? AND substr(upper(id), -?) = ?",
                                  (suffix[-8:], len(suffix), suffix, limit))
        return self._id_texts("substr(upper(id), -?) = ?", (len(suffix), suffix, limit))

    def _id_texts(self, where: str, args: tuple[Any, ...]) -> list[tuple[str, str]]:
        rows = self.db.execute(f"SELECT id, record FROM mem WHERE {where} ORDER BY id LIMIT ?", args)
        return [(str(mid), str(json.loads(rec).get("text") or "")) for mid, rec in rows]

    def ids_sharing(self, heads_or_tails: Iterable[str], n: int) -> list[str]:
        """Every id whose first or last `n` characters (upper-cased) are one of `heads_or_tails`:
        the only ids a short id of that length could be confused with. One scan for a listing."""
        keys = list(dict.fromkeys(heads_or_tails))
        out: list[str] = []
        for i in range(0, len(keys), 400):
            chunk = keys[i : i + 400]
            marks = ",".join("?" * len(chunk))
            q = (f"SELECT id FROM mem WHERE substr(upper(id), -{int(n)}) IN ({marks}) "  # mem_tail, for n = 8
                 f"UNION SELECT id FROM mem WHERE substr(upper(id), 1, {int(n)}) IN ({marks})")
            out.extend(str(r[0]) for r in self.db.execute(q, [*chunk, *chunk]))
        return list(dict.fromkeys(out))

    def id_neighbours(self, mid: str) -> list[str]:
        """The ids just before and after `mid` in id order (for shortest unique prefixes)."""
        before = self.db.execute("SELECT id FROM mem WHERE id < ? ORDER BY id DESC LIMIT 1", (mid,)).fetchone()
        after = self.db.execute("SELECT id FROM mem WHERE id > ? ORDER BY id LIMIT 1", (mid,)).fetchone()
        return [str(r[0]) for r in (before, after) if r]

    def next_label(self) -> int:
        """The label AUTOINCREMENT gives the next row inserted without one: past the largest label
        the table ever held (so a removed memory's label is never handed to another)."""
        seq = self.db.execute("SELECT seq FROM sqlite_sequence WHERE name='mem'").fetchone()
        top = self.db.execute("SELECT max(label) FROM mem").fetchone()[0]
        return max(int(seq[0]) if seq else 0, int(top or 0)) + 1

    def vector_count(self) -> int:
        """Memories that have a vector (every indexed one, when the index is consistent)."""
        return int(self.db.execute("SELECT count(*) FROM mem WHERE vec IS NOT NULL").fetchone()[0])

    def count(self) -> int:
        """Memories in the catalog; remembered until the catalog changes (a count is a full scan)."""
        version = self.data_version()
        if self._count is None or self._count[0] != version:
            self._count = (version, int(self.db.execute("SELECT count(*) FROM mem").fetchone()[0]))
        return self._count[1]

    def provisional_count(self) -> int:
        """Memories whose vector is provisional (not yet their own text's): an entry counts only
        while its row still has the text it was recorded for."""
        return int(self.db.execute("SELECT count(*) FROM provisional p JOIN mem m"
                                   " ON m.label = p.label AND m.hash = p.hash").fetchone()[0])

    def provisional_texts(self) -> list[tuple[int, str, str]]:
        """(label, text hash, text) of every memory whose vector is provisional, in label order."""
        q = ("SELECT m.label, m.hash, json_extract(m.record, '$.text') FROM provisional p JOIN mem m"
             " ON m.label = p.label AND m.hash = p.hash ORDER BY m.label")
        return [(int(lab), str(h), str(text or "")) for lab, h, text in self.db.execute(q)]

    def bad_files(self) -> list[tuple[str, str]]:
        return [(r[0], r[1]) for r in self.db.execute("SELECT fname, error FROM bad ORDER BY fname")]

    def records(self, labels: Iterable[int]) -> dict[int, Memory]:
        """Memories by label, in one query."""
        q = f"SELECT label, record FROM mem WHERE label {IN_JSON}"
        return {label: _memory(rec) for label, rec in self.db.execute(q, (json_list(labels),))}

    def rank_fields(self, labels: Iterable[int], vectors: dict[int, np.ndarray] | None = None
                    ) -> dict[int, RankFields]:
        """`RankFields` by label, in one query. `vectors`, if given, receives each memory's vector
        from the same rows (zeros if none), saving two more lookups."""
        q = ("SELECT label, id, created, updated, confidence, json_extract(record, '$.superseded_by') IS NOT NULL, "
             + ("vec" if vectors is not None else "NULL") + f" FROM mem WHERE label {IN_JSON}")
        out: dict[int, RankFields] = {}
        zero = None
        for label, mid, created, updated, conf, sup, vec in self.db.execute(q, (json_list(labels),)):
            out[label] = RankFields(mid, created, updated, 0.8 if conf is None else conf, bool(sup))
            if vectors is not None:
                if vec is None:
                    zero = np.zeros(self._dim(), np.float32) if zero is None else zero
                vectors[label] = zero if vec is None else np.frombuffer(vec, dtype=np.float32)
        return out

    def vectors(self, labels: list[int]) -> np.ndarray:
        """The vectors of `labels`, in that order (zeros for a label not in the catalog), in one query."""
        dim = self._dim()
        if not labels:
            return np.zeros((0, dim), np.float32)
        q = f"SELECT label, vec FROM mem WHERE label {IN_JSON}"
        found = dict(self.db.execute(q, (json_list(labels),)).fetchall())
        zero = bytes(4 * dim)
        blob = b"".join(found.get(lab) or zero for lab in labels)
        return np.frombuffer(blob, dtype=np.float32).reshape(len(labels), dim)

    def select(self, filters: Filters | None = None, *, order: str = "created", limit: int | None = None,
               desc: bool = False) -> list[Memory]:
        """Memories matching `filters`, sorted — for list, export, prune."""
        where, args = (filters or Filters()).sql()
        if order not in SORT_KEYS:
            raise ValueError(f"cannot sort by {order!r}; use one of {', '.join(SORT_KEYS)}")
        q = f"SELECT record FROM mem WHERE {where} ORDER BY {order} {'DESC' if desc else 'ASC'}, id"
        if limit:
            q += f" LIMIT {min(int(limit), 2**63 - 1)}"  # SQLite's integers are 64-bit
        return [_memory(r[0]) for r in self.db.execute(q, args)]

    def select_entries(self, filters: Filters | None = None) -> dict[str, tuple[Memory, tuple[int, int]]]:
        """`select(filters)` by id with each file signature, as `catalog_entries` gives them, in one
        query (prune hands them to its change set)."""
        where, args = (filters or Filters()).sql()
        q = f"SELECT id, record, mtime_ns, size FROM mem WHERE {where} ORDER BY created ASC, id"
        return {str(mid): (_memory(rec), (int(mtime), int(size))) for mid, rec, mtime, size in self.db.execute(q, args)}

    def iter_select(self, filters: Filters | None = None) -> Iterator[Memory]:
        """Memories matching `filters`, by id, from a cursor (an export never holds them all)."""
        where, args = (filters or Filters()).sql()
        for (rec,) in self.db.execute(f"SELECT record FROM mem WHERE {where} ORDER BY id", args):
            yield _memory(rec)

    def filtered_labels(self, filters: Filters) -> list[int]:
        where, args = filters.sql()
        return [r[0] for r in self.db.execute(f"SELECT label FROM mem WHERE {where}", args)]

    def labels_of(self, ids: Iterable[str]) -> dict[str, int]:
        q = f"SELECT id, label FROM mem WHERE id {IN_JSON}"
        return dict(self.db.execute(q, (json_list(ids),)).fetchall())

    def find_exact(self, text: str) -> str | None:
        """The id of a memory whose normalised text equals this text's."""
        row = self.db.execute("SELECT id FROM mem WHERE norm = ? LIMIT 1", (norm_hash(text),)).fetchone()
        return row[0] if row else None

    def catalog_entries(self, ids: Iterable[str]) -> dict[str, tuple[Memory, tuple[int, int]]]:
        """Memories by id with the file signature (mtime_ns, size) they were read from."""
        q = f"SELECT id, record, mtime_ns, size FROM mem WHERE id {IN_JSON}"
        return {str(mid): (_memory(rec), (int(mtime), int(size)))
                for mid, rec, mtime, size in self.db.execute(q, (json_list(ids),))}

    def records_of(self, ids: Iterable[str]) -> dict[str, Memory]:
        """Memories by id (`catalog_entries` without the file signatures)."""
        return {mid: entry[0] for mid, entry in self.catalog_entries(ids).items()}


def _memory(rec: str) -> Memory:
    """A row's record as a `Memory`: validated when its file was indexed, so not again."""
    return Memory.from_catalog(json.loads(rec))


def _seed_catalog(src: Path, dst: Path) -> None:
    """Copy a read-only store's catalog and vector file into the fallback sidecar: the first read
    costs a copy, not a re-index (best effort: sync rebuilds what is missing)."""
    try:
        source = sqlite3.connect(f"file:{src / 'catalog.sqlite'}?immutable=1", uri=True)
        try:
            target = sqlite3.connect(dst / "catalog.sqlite")
            try:
                source.backup(target)
                row = target.execute("SELECT value FROM meta WHERE key='hnsw_file'").fetchone()
            finally:
                target.close()
        finally:
            source.close()
        vec = safety.own_file(src, row[0], VECTOR_FILE) if row and row[0] else None
        if vec is not None:
            shutil.copyfile(vec, dst / vec.name)
    except (sqlite3.Error, OSError):
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                os.unlink(f"{dst / 'catalog.sqlite'}{suffix}")


def norm_hash(text: str) -> str:
    from memcli.services.extract import normalise  # here, not at the top: search never needs it

    return hashlib.sha256(normalise(text).encode("utf-8")).hexdigest()
