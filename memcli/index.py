"""The sidecar in `.index/`: a SQLite catalog (+ the BM25 keyword index) and an hnswlib vector index.

Derived from `facts/` and rebuildable at any time. Every command calls `sync()` first: it compares
the directory listing (name, mtime, size) with the catalog, re-reads only files that changed,
re-embeds only text whose hash is not in the embedding cache, and updates hnswlib in place
(replace / `mark_deleted`, resize when full). When nothing changed it costs one `scandir` and one
query. Writes take the store's writer lock; the vector file is written under a new generation
name and switched in the same SQLite transaction that records it, so readers never load a vector
file that disagrees with the catalog.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from memcli import safety
from memcli.embed import Embedder, text_hash
from memcli.errors import IndexUnavailable, MemcliError
from memcli.files import Files
from memcli.keyword_index import KeywordIndex
from memcli.memory import MalformedMemory, Memory
from memcli.vocab import SortKey

SCHEMA_VERSION = "2"  # 2: the keyword index of memcli/keyword_index.py replaced FTS5
SORT_KEYS = SortKey.values()
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 200
HNSW_EF_SEARCH = 512  # at least; a query for k neighbours searches with max(this, 2k). 512: recall@10
# 0.987 on 100k realistic vectors at p50 1.3 ms (was 200: 0.93 at 0.5 ms); see bench/search_latency.py

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
-- covers sync()'s reads of the catalog: ~1 MB instead of every row (bench/sync_nochange.py)
CREATE INDEX IF NOT EXISTS mem_sync ON mem(fname, mtime_ns, size, hash);
CREATE TABLE IF NOT EXISTS bad (fname TEXT PRIMARY KEY, mtime_ns INTEGER, size INTEGER, error TEXT);
"""


IndexError_ = IndexUnavailable  # the old name

@dataclass
class SyncReport:
    added: int = 0
    changed: int = 0
    removed: int = 0
    embedded: int = 0
    rebuilt: str | None = None  # why everything was rebuilt, if it was
    new_bad: list[tuple[str, str]] = field(default_factory=list)

    @property
    def touched(self) -> bool:
        return bool(self.added or self.changed or self.removed or self.rebuilt or self.new_bad)


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


def _tags_col(tags: Iterable[str]) -> str:
    return "|" + "|".join(t.lower() for t in tags) + "|"


def fts_body(m: Memory) -> str:
    """What keyword search sees: the text, the tags, the domain and any code pattern."""
    parts = [m.text, " ".join(m.tags)]
    if m.domain:
        parts.append(m.domain)
    if m.code_pattern and m.code_pattern not in m.text:
        parts.append(m.code_pattern)
    return "\n".join(parts)


class Index:
    """The sidecar of one store. Open lazily; `sync()` before reading."""

    def __init__(self, store: Files) -> None:
        self.store = store
        self.dir: Path = store.index_dir
        self._db: sqlite3.Connection | None = None
        self._hnsw: Any = None
        self._hnsw_file: str | None = None
        self._embedder: Embedder | None = None
        self._kw: KeywordIndex | None = None
        self._count: tuple[int, int] | None = None  # (catalog data_version, rows) of the last count()
        self.synced = False
        self.readonly = False  # the store cannot be written: the sidecar lives in the user's cache
        self._saw_tmp = False  # the last scan met `.*.tmp` files in facts/ (a killed writer's)

    # ------------------------------------------------------------ connections
    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = Embedder(self.store.config.embed_model)
        return self._embedder

    @embedder.setter
    def embedder(self, value: Embedder) -> None:
        self._embedder = value

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
                    # Reads through a memory map: a search touches ~200 scattered rows and a few
                    # posting lists; mapped, that is half the time of one read() per page at 100k.
                    db.execute("PRAGMA mmap_size=1073741824")
                    db.executescript(SCHEMA)
                    break
                except sqlite3.OperationalError as e:
                    db.close()
                    if not safety.is_busy(e):  # read-only, full, cannot open: waiting will not help
                        raise IndexUnavailable(f"cannot open the index {path}: {e}") from None
                    # Another process is creating or switching the catalog (locked / busy): wait,
                    # never mistake a busy catalog for a corrupt one.
                    if time.monotonic() > deadline:
                        raise IndexUnavailable(f"the index {path} stayed busy for 60 s") from None
                    time.sleep(0.05)
                except sqlite3.DatabaseError:
                    db.close()  # corrupt ("not a database"): derived data, so rebuilt from facts/
                    self._drop_catalog()
                    safety.notice("the index catalog was unreadable: rebuilt from facts/")
            self._db = db
        return self._db

    @property
    def kw(self) -> KeywordIndex:
        """The BM25 keyword index, kept in the catalog (memcli/keyword_index.py)."""
        if self._kw is None:
            self._kw = KeywordIndex(self.db)
        return self._kw

    def _prepare_dir(self) -> None:
        """Make sure `.index/` is a directory this process can write, or use the fallback.

        A store that cannot be written (read-only mount, no permission) keeps working for reads:
        its sidecar is built in the user's cache instead (seeded from the store's own catalog), and
        nothing is written to the store. A `.index` that is a file or a link is moved aside.
        """
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

    def _writer_lock(self) -> Any:
        """The lock that serialises writes to this sidecar: the store's, or the fallback's own."""
        if self.readonly:
            return safety.file_lock(self.dir / ".lock")
        return self.store.lock()

    def _drop_catalog(self) -> None:
        """Delete an unreadable catalog (and its WAL); the next sync rebuilds it from `facts/`."""
        self._kw, self._count = None, None
        if self._db is not None:
            self._db.close()
            self._db = None
        self._hnsw, self._hnsw_file = None, None
        path = self.dir / "catalog.sqlite"
        with self._writer_lock():
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{path}{suffix}")

    def close(self) -> None:
        self._kw, self._count = None, None
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._embedder is not None:
            self._embedder.close()
        self._hnsw = None

    def meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def _set_meta(self, **kv: object) -> None:
        self.db.executemany(
            "INSERT OR REPLACE INTO meta VALUES (?, ?)", [(k, str(v)) for k, v in kv.items()]
        )

    # ------------------------------------------------------------ sync
    def _scan(self) -> dict[str, tuple[int, int]]:
        out = {}
        try:
            entries = os.scandir(self.store.facts_dir)
        except FileNotFoundError:
            return out
        with entries:
            for e in entries:
                name = e.name
                if not name.endswith(".md") or name.startswith("."):
                    self._saw_tmp = self._saw_tmp or (name.startswith(".") and name.endswith(".tmp"))
                    continue
                try:
                    st = e.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    out[name] = (st.st_mtime_ns, st.st_size)
                else:  # a symlink, directory or FIFO: a bad file, reported, never opened or followed
                    out[name] = (st.st_mtime_ns, -1)
        return out

    def _clean_temp_files(self) -> None:
        """Remove `.*.tmp` files a killed writer left in facts/: under the writer lock no write is
        in flight, so every one found then is stale."""
        if self.readonly:
            return
        try:
            names = [n for n in os.listdir(self.store.facts_dir) if n.startswith(".") and n.endswith(".tmp")]
        except OSError:
            return
        if not names:
            return
        # never wait: a writer holding the lock may own these; the next command cleans them
        with contextlib.suppress(MemcliError, OSError), self.store.lock(timeout=0):
            for n in os.listdir(self.store.facts_dir):
                if n.startswith(".") and n.endswith(".tmp"):
                    with contextlib.suppress(OSError):
                        os.unlink(self.store.facts_dir / n)

    def _plan(self) -> tuple[dict[str, tuple[int, int]], list[str], list[str], str | None]:
        disk = self._scan()
        known = {}
        for fname, mtime, size in self.db.execute(
            "SELECT fname, mtime_ns, size FROM mem UNION ALL SELECT fname, mtime_ns, size FROM bad"
        ):
            known[fname] = (mtime, size)
        todo = [n for n, sig in disk.items() if known.get(n) != sig]
        gone = [n for n in known if n not in disk]
        return disk, todo, gone, self._rebuild_reason(bool(known))

    def _rebuild_reason(self, known: bool) -> str | None:
        """Why the whole sidecar must be rebuilt (format, model, vector file), or None."""
        why = None
        model, dim = self.meta("model"), self.meta("dim")
        if self.meta("schema") != SCHEMA_VERSION and known:
            why = "the index format changed"
        elif model is not None and (model != self.store.config.embed_model):
            why = f"the embedding model changed ({model} -> {self.store.config.embed_model})"
        elif known and model is None:
            why = "the index has no model record"
        elif self.meta("hnsw_file") and not (self.dir / str(self.meta("hnsw_file"))).is_file():
            why = "the vector file is missing"
        elif dim is not None and model == self.store.config.embed_model and int(dim) != self.embedder.dim:
            why = "the vector dimension changed"
        return why

    def apply_files(self, fresh: dict[str, Memory], gone: Iterable[str]) -> SyncReport:
        """Record what a commit has just written (`fresh`: file name -> memory) and removed
        (`gone`: file names), without scanning `facts/`: one catalog transaction and one vector
        file for the whole commit. When the sidecar needs a rebuild anyway this is a full sync.
        Files changed by others meanwhile are left to the next `sync()` (their signatures differ)."""
        with self.store.lock():
            if self._rebuild_reason(bool(self.count())):
                return self.sync()
            disk = {}
            for name in fresh:
                st = os.stat(self.store.facts_dir / name)
                disk[name] = (st.st_mtime_ns, st.st_size)
            report = SyncReport()
            self._apply(disk, list(fresh), list(gone), report, None, fresh)
        return report

    def sync(
        self, on_progress: Callable[[int, int], None] | None = None, *, force: bool = False,
        fresh: dict[str, Memory] | None = None,
    ) -> SyncReport:
        """Bring the sidecar in step with `facts/`; cheap when nothing changed.

        `fresh` maps file names to the memories the caller has just written, so a bulk import
        does not parse back the thousands of files it wrote a moment ago. A catalog that turns out
        to be corrupt past its header ("malformed") is dropped and rebuilt.
        """
        if not self.readonly and (self.store.path / ".journal.json").exists() and not self.store.locked:
            # a commit was cut short: the writer lock finishes it (memcli/journal.py); never wait
            with contextlib.suppress(MemcliError, OSError), self.store.lock(timeout=0):
                pass
        try:
            report = self._sync(on_progress, force=force, fresh=fresh)
            if self._saw_tmp:
                self._saw_tmp = False
                self._clean_temp_files()
            return report
        except sqlite3.DatabaseError as e:
            if isinstance(e, sqlite3.OperationalError):  # busy, locked, disk full: not corruption
                raise
            self._drop_catalog()
            report = self._sync(on_progress, force=force, fresh=fresh)
            report.rebuilt = "the catalog was unreadable"
            return report

    def _sync(
        self, on_progress: Callable[[int, int], None] | None, *, force: bool, fresh: dict[str, Memory] | None,
    ) -> SyncReport:
        report = SyncReport()
        version = self._catalog_version()
        disk, todo, gone, why = self._plan()
        if force:
            why = "reindex requested"
        if not (todo or gone or why):
            self.synced = True
            return report
        with self._writer_lock():
            if force or self._catalog_version() != version:  # another process synced meanwhile
                disk, todo, gone, why2 = self._plan()
                why = "reindex requested" if force else why2
            if why:
                self._reset()
                todo, gone = list(disk), []
                report.rebuilt = why
            self._apply(disk, todo, gone, report, on_progress, fresh or {})
        self.synced = True
        return report

    def _catalog_version(self) -> int:
        """Changes whenever another connection commits to the catalog (SQLite's data_version)."""
        return int(self.db.execute("PRAGMA data_version").fetchone()[0])

    def _reset(self) -> None:
        db = self.db
        kw = self.kw
        self._count = None
        db.execute("BEGIN IMMEDIATE")
        db.execute("DROP TABLE IF EXISTS fts")  # the FTS5 keyword index of schema 1
        for table in ("mem", "bad", "meta"):
            db.execute(f"DELETE FROM {table}")
        kw.reset()
        db.execute("DELETE FROM sqlite_sequence WHERE name='mem'")
        db.execute("COMMIT")
        self._hnsw = None
        self._hnsw_file = None

    def _apply(
        self,
        disk: dict[str, tuple[int, int]],
        todo: list[str],
        gone: list[str],
        report: SyncReport,
        on_progress: Callable[[int, int], None] | None,
        fresh: dict[str, Memory],
    ) -> None:
        db = self.db
        existing = {
            fname: (label, h)
            for fname, label, h in db.execute("SELECT fname, label, hash FROM mem")
        }
        old_bad = {r[0]: r[1] for r in db.execute("SELECT fname, error FROM bad")}
        parsed: list[tuple[str, Memory]] = []
        bad: list[tuple[str, str]] = []
        for fname in sorted(todo):
            if fname in fresh:
                parsed.append((fname, fresh[fname]))
                continue
            path = self.store.facts_dir / fname
            try:
                memory = Memory.parse(safety.read_regular(path), file_id=fname[:-3])
            except safety.NotRegular as e:
                bad.append((fname, f"{e.strerror}, not a regular file: skipped"))
                continue
            except MalformedMemory as e:
                bad.append((fname, str(e)))
                continue
            except OSError as e:
                bad.append((fname, f"unreadable ({e.strerror})"))
                continue
            parsed.append((fname, memory))
        # A new file whose text is that of a file removed in the same batch (a merge keeps the
        # newest wording; a restore brings back a text) takes over that row and its vector: no
        # embedding, no hnswlib insertion, which is most of a curation commit's index cost.
        reused: set[int] = set()
        if gone:
            free: dict[str, list[int]] = {}
            for fname in gone:
                row = existing.get(fname)
                if row:
                    free.setdefault(row[1], []).append(row[0])
            for fname, m in parsed:
                labels = free.get(text_hash(m.text)) if fname not in existing else None
                if labels:
                    label = labels.pop()
                    existing[fname] = (label, text_hash(m.text))
                    reused.add(label)
        need = [m.text for f, m in parsed if f not in existing or existing[f][1] != text_hash(m.text)]
        vectors: dict[str, np.ndarray] = {}
        if need:
            total = len(need)
            done = [0]

            def tick(n: int) -> None:
                done[0] += n
                if on_progress:
                    on_progress(done[0], total)

            before = self.embedder.computed  # cumulative per embedder: report this sync's share
            vecs = self.embedder.embed(need, on_progress=tick)
            vectors = {text_hash(t): v for t, v in zip(need, vecs)}
            report.embedded = self.embedder.computed - before
        hnsw = self._load_hnsw(create=True)
        hnsw_saved = self._hnsw_file is not None  # loaded as is from its file, not built here
        kw = self.kw
        kw_removed: list[int] = []
        kw_docs: dict[int, str] = {}
        self._count = None
        db.execute("BEGIN IMMEDIATE")
        try:
            for fname in gone:
                row = existing.get(fname)
                if row and row[0] in reused:
                    report.removed += 1
                    row = None
                if row:
                    db.execute("DELETE FROM mem WHERE label=?", (row[0],))
                    kw_removed.append(row[0])
                    with contextlib.suppress(RuntimeError):
                        hnsw.mark_deleted(row[0])
                    report.removed += 1
                db.execute("DELETE FROM bad WHERE fname=?", (fname,))
            new_labels: list[int] = []
            new_vecs: list[np.ndarray] = []
            for fname, m in parsed:
                h = text_hash(m.text)
                mtime, size = disk[fname]
                cols = (
                    m.id, fname, mtime, size, h, _norm_hash(m.text), m.type, m.user, m.project,
                    m.created, m.updated, m.confidence, _tags_col(m.tags),
                    json.dumps(m.to_dict(), ensure_ascii=False),
                )
                db.execute("DELETE FROM bad WHERE fname=?", (fname,))
                if fname in existing:
                    label, old_hash = existing[fname]
                    db.execute(
                        "UPDATE mem SET id=?, fname=?, mtime_ns=?, size=?, hash=?, norm=?, type=?, user=?,"
                        " project=?, created=?, updated=?, confidence=?, tags=?, record=? WHERE label=?",
                        (*cols, label),
                    )
                    report.changed += 1
                    if old_hash == h:
                        kw_docs[label] = fts_body(m)
                        continue
                else:
                    cur = db.execute(
                        "INSERT INTO mem (id, fname, mtime_ns, size, hash, norm, type, user, project,"
                        " created, updated, confidence, tags, record) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                        cols,
                    )
                    label = int(cur.lastrowid)
                    report.added += 1
                vec = vectors[h]
                db.execute("UPDATE mem SET vec=? WHERE label=?", (vec.astype(np.float32).tobytes(), label))
                kw_docs[label] = fts_body(m)
                new_labels.append(label)
                new_vecs.append(vec)
            for fname, error in bad:
                mtime, size = disk[fname]
                row = existing.get(fname)
                if row:  # a good file turned bad: it leaves the index until it is fixed
                    db.execute("DELETE FROM mem WHERE label=?", (row[0],))
                    kw_removed.append(row[0])
                    with contextlib.suppress(RuntimeError):
                        hnsw.mark_deleted(row[0])
                    report.removed += 1
                db.execute("INSERT OR REPLACE INTO bad VALUES (?,?,?,?)", (fname, mtime, size, error))
                if old_bad.get(fname) != error or row:
                    report.new_bad.append((fname, error))
            kw.update(kw_removed, kw_docs)
            if new_labels:
                hnsw = self._add_vectors(hnsw, np.stack(new_vecs), new_labels)
            if new_labels or report.removed or not hnsw_saved:  # else the vector file is still right
                self._save_hnsw(hnsw)
            self._set_meta(schema=SCHEMA_VERSION, model=self.store.config.embed_model, dim=self.embedder.dim)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            self._hnsw = None
            raise
        self._cleanup_hnsw_files()

    # ------------------------------------------------------------ hnswlib
    def _new_hnsw(self, capacity: int) -> Any:
        import hnswlib

        h = hnswlib.Index(space="ip", dim=self.embedder.dim)
        h.init_index(max_elements=max(capacity, 1024), ef_construction=HNSW_EF_CONSTRUCTION, M=HNSW_M)
        h.set_ef(HNSW_EF_SEARCH)
        return h

    def _load_hnsw(self, *, create: bool = False) -> Any:
        name = self.meta("hnsw_file")
        if self._hnsw is not None and self._hnsw_file == name:
            return self._hnsw
        import hnswlib

        path = self.dir / name if name else None
        if path is not None and path.is_file():
            h = hnswlib.Index(space="ip", dim=int(self.meta("dim") or self.embedder.dim))
            try:
                h.load_index(str(path), max_elements=0)
                h.set_ef(HNSW_EF_SEARCH)
                self._hnsw, self._hnsw_file = h, name
                return h
            except RuntimeError:
                pass  # unreadable: rebuilt below from the catalog's vectors
        rows = self.db.execute("SELECT label, vec FROM mem WHERE vec IS NOT NULL").fetchall()
        if not rows and not create:
            return None
        h = self._new_hnsw(len(rows) * 2)
        if rows:
            labels = [r[0] for r in rows]
            vecs = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
            h.add_items(vecs, labels)
        self._hnsw, self._hnsw_file = h, None
        return h

    def _add_vectors(self, h: Any, vecs: np.ndarray, labels: list[int]) -> Any:
        need = h.element_count + len(labels)
        deleted = h.element_count - self.db.execute("SELECT count(*) FROM mem WHERE vec IS NOT NULL").fetchone()[0]
        if deleted > max(1000, h.element_count // 2):  # too many tombstones: rebuild compactly
            self._hnsw = None
            self._hnsw_file = None
            self.db.execute("UPDATE meta SET value='' WHERE key='hnsw_file'")
            return self._load_hnsw(create=True)  # catalog already holds the new vectors
        if need > h.get_max_elements():
            h.resize_index(max(need, h.get_max_elements() * 2))
        for lab in labels:
            with contextlib.suppress(RuntimeError):
                h.unmark_deleted(lab)
        h.add_items(vecs, labels)
        return h

    def _save_hnsw(self, h: Any) -> None:
        gen = int(self.meta("hnsw_gen") or 0) + 1
        name = f"vectors-{gen}.hnsw"
        tmp = self.dir / f".{name}.tmp"
        h.save_index(str(tmp))
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, self.dir / name)
        self._set_meta(hnsw_file=name, hnsw_gen=gen)
        self._hnsw, self._hnsw_file = h, name

    def _cleanup_hnsw_files(self) -> None:
        """Keep the current vector file and the one before it (a reader may still be opening it)."""
        current = self.meta("hnsw_file")
        files = sorted(self.dir.glob("vectors-*.hnsw"), key=lambda p: int(p.stem.split("-")[1]))
        for p in files[:-2]:
            if p.name != current:
                with contextlib.suppress(OSError):
                    p.unlink()
        for p in self.dir.glob(".vectors-*.tmp"):
            with contextlib.suppress(OSError):
                p.unlink()

    # ------------------------------------------------------------ reads
    def has_id(self, mid: str) -> bool:
        return self.db.execute("SELECT 1 FROM mem WHERE id = ?", (mid,)).fetchone() is not None

    def with_prefix(self, prefix: str, limit: int) -> list[tuple[str, str]]:
        """(id, text) of the memories whose id starts with `prefix` (upper-cased), in id order."""
        rows = self.db.execute(
            "SELECT id, record FROM mem WHERE upper(id) >= ? AND upper(id) < ? ORDER BY id LIMIT ?",
            (prefix, prefix + "\uffff", limit),
        ).fetchall()
        return [(str(r[0]), str(json.loads(r[1]).get("text") or "")) for r in rows]

    def count_prefix(self, prefix: str) -> int:
        return int(self.db.execute("SELECT count(*) FROM mem WHERE upper(id) >= ? AND upper(id) < ?",
                                   (prefix, prefix + "\uffff")).fetchone()[0])

    def id_neighbours(self, mid: str) -> list[str]:
        """The ids just before and after `mid` in id order (for shortest unique prefixes)."""
        before = self.db.execute("SELECT id FROM mem WHERE id < ? ORDER BY id DESC LIMIT 1", (mid,)).fetchone()
        after = self.db.execute("SELECT id FROM mem WHERE id > ? ORDER BY id LIMIT 1", (mid,)).fetchone()
        return [str(r[0]) for r in (before, after) if r]

    def vector_count(self) -> int:
        """Memories that have a vector (every indexed one, when the index is consistent)."""
        return int(self.db.execute("SELECT count(*) FROM mem WHERE vec IS NOT NULL").fetchone()[0])

    def count(self) -> int:
        """Memories in the catalog; remembered until the catalog changes (a count is a scan at 100k)."""
        version = self._catalog_version()
        if self._count is None or self._count[0] != version:
            self._count = (version, int(self.db.execute("SELECT count(*) FROM mem").fetchone()[0]))
        return self._count[1]

    def bad_files(self) -> list[tuple[str, str]]:
        return [(r[0], r[1]) for r in self.db.execute("SELECT fname, error FROM bad ORDER BY fname")]

    def records(self, labels: Iterable[int]) -> dict[int, dict[str, Any]]:
        """Full records by label, in one query."""
        q = "SELECT label, record FROM mem WHERE label IN (SELECT value FROM json_each(?))"
        return {label: json.loads(rec) for label, rec in self.db.execute(q, (_json_ints(labels),))}

    def rank_fields(self, labels: Iterable[int]) -> dict[int, dict[str, Any]]:
        """What `search.rank` reads of each memory (id, times, confidence), in one query and without
        parsing whole records: a search ranks ~100-200 candidates to return a handful."""
        q = ("SELECT label, id, created, updated, confidence, json_extract(record, '$.superseded_by') IS NOT NULL"
             " FROM mem WHERE label IN (SELECT value FROM json_each(?))")
        return {
            label: {"id": mid, "created": created, "updated": updated, "confidence": conf, "superseded": bool(sup)}
            for label, mid, created, updated, conf, sup in self.db.execute(q, (_json_ints(labels),))
        }

    def vectors(self, labels: list[int]) -> np.ndarray:
        """The vectors of `labels`, in that order (zeros for a label not in the catalog), in one query."""
        dim = self.embedder.dim
        if not labels:
            return np.zeros((0, dim), np.float32)
        q = "SELECT label, vec FROM mem WHERE label IN (SELECT value FROM json_each(?))"
        found = dict(self.db.execute(q, (_json_ints(labels),)).fetchall())
        zero = bytes(4 * dim)
        blob = b"".join(found.get(lab) or zero for lab in labels)
        return np.frombuffer(blob, dtype=np.float32).reshape(len(labels), dim)

    def select(self, filters: Filters | None = None, *, order: str = "created", limit: int | None = None,
               desc: bool = False) -> list[dict[str, Any]]:
        """Catalog records matching `filters`, sorted — for list, export, prune."""
        where, args = (filters or Filters()).sql()
        if order not in SORT_KEYS:
            raise ValueError(f"cannot sort by {order!r}; use one of {', '.join(SORT_KEYS)}")
        col = order
        q = f"SELECT record FROM mem WHERE {where} ORDER BY {col} {'DESC' if desc else 'ASC'}, id"
        if limit:
            q += f" LIMIT {min(int(limit), 2**63 - 1)}"  # SQLite's integers are 64-bit
        return [json.loads(r[0]) for r in self.db.execute(q, args)]

    def iter_select(self, filters: Filters | None = None) -> Iterator[dict[str, Any]]:
        """Catalog records matching `filters`, by id, from a cursor: an export of 100k memories
        never holds them all (`select` returns a list)."""
        where, args = (filters or Filters()).sql()
        for (rec,) in self.db.execute(f"SELECT record FROM mem WHERE {where} ORDER BY id", args):
            yield json.loads(rec)

    def filtered_labels(self, filters: Filters) -> list[int]:
        where, args = filters.sql()
        return [r[0] for r in self.db.execute(f"SELECT label FROM mem WHERE {where}", args)]

    def labels_of(self, ids: Iterable[str]) -> dict[str, int]:
        ids = list(ids)
        out = {}
        for i in range(0, len(ids), 900):
            chunk = ids[i : i + 900]
            q = f"SELECT id, label FROM mem WHERE id IN ({','.join('?' * len(chunk))})"
            out.update(self.db.execute(q, chunk).fetchall())
        return out

    def resolve_id(self, prefix: str) -> str:
        """A full id from a unique prefix (like git's short SHAs); case-insensitive.

        Raises LookupError with a message for the user when there is no match or several."""
        exact = self.db.execute("SELECT id FROM mem WHERE id = ?", (prefix,)).fetchone()
        if exact:
            return str(exact[0])
        p = prefix.strip().upper()
        rows = self.db.execute(
            "SELECT id FROM mem WHERE upper(id) >= ? AND upper(id) < ? LIMIT 2", (p, p + "\uffff")
        ).fetchall() if p else []
        if len(rows) == 1:
            return str(rows[0][0])
        raise LookupError(f"id prefix {prefix} is ambiguous" if rows else f"no memory with id {prefix}")

    def find_exact(self, text: str) -> str | None:
        """The id of a memory whose normalised text equals this text's."""
        row = self.db.execute("SELECT id FROM mem WHERE norm = ? LIMIT 1", (_norm_hash(text),)).fetchone()
        return row[0] if row else None

    def neighbours(self, k: int, *, ef: int = 64, batch: int = 1024
                   ) -> tuple[list[str], np.ndarray, list[list[tuple[str, float]]]]:
        """Every memory's `k` nearest others, by id: (ids, their vectors, neighbour lists).

        For curation (near-duplicate groups, contradiction candidates, recurring episodes): one
        approximate kNN pass over the vector index in batches, never an n x n matrix. `ef` is
        lower than search's: pairs at >= 0.8 cosine are found at any reasonable ef.
        """
        rows = self.db.execute("SELECT label, id FROM mem WHERE vec IS NOT NULL ORDER BY label").fetchall()
        labels = [r[0] for r in rows]
        ids = {lab: str(mid) for lab, mid in rows}
        vecs = self.vectors(labels)
        h = self._load_hnsw() if labels else None
        out: list[list[tuple[str, float]]] = []
        if h is None or len(labels) < 2:
            return [ids[lab] for lab in labels], vecs, [[] for _ in labels]
        kk = min(k + 1, len(labels))
        h.set_ef(max(ef, kk))
        try:
            for i in range(0, len(labels), batch):
                found, dists = h.knn_query(vecs[i : i + batch], k=kk)
                for lab, lrow, drow in zip(labels[i : i + batch], found, dists):
                    out.append([(ids[int(o)], float(1.0 - d)) for o, d in zip(lrow, drow)
                                if int(o) != lab and int(o) in ids])
        finally:
            h.set_ef(HNSW_EF_SEARCH)
        return [ids[lab] for lab in labels], vecs, out

    def catalog_entries(self, ids: Iterable[str]) -> dict[str, tuple[dict[str, Any], tuple[int, int]]]:
        """Records by id with the file signature (mtime_ns, size) they were read from."""
        ids = list(ids)
        out: dict[str, tuple[dict[str, Any], tuple[int, int]]] = {}
        for i in range(0, len(ids), 900):
            chunk = ids[i : i + 900]
            q = f"SELECT id, record, mtime_ns, size FROM mem WHERE id IN ({','.join('?' * len(chunk))})"
            for mid, rec, mtime, size in self.db.execute(q, chunk):
                out[str(mid)] = (json.loads(rec), (int(mtime), int(size)))
        return out

    def records_of(self, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Catalog records (Memory.to_dict shape) by memory id."""
        ids = list(ids)
        out: dict[str, dict[str, Any]] = {}
        for i in range(0, len(ids), 900):
            chunk = ids[i : i + 900]
            q = f"SELECT id, record FROM mem WHERE id IN ({','.join('?' * len(chunk))})"
            for mid, rec in self.db.execute(q, chunk):
                out[str(mid)] = json.loads(rec)
        return out

    def knn(self, qvecs: np.ndarray, k: int, allowed: list[int] | None = None) -> list[list[tuple[int, float]]]:
        """Nearest neighbours by cosine for each query row; exact over `allowed` when given."""
        n = self.count()
        if n == 0 or k <= 0:
            return [[] for _ in range(len(qvecs))]
        if allowed is not None:
            if not allowed:
                return [[] for _ in range(len(qvecs))]
            mat = self.vectors(allowed)
            sims = qvecs @ mat.T
            out = []
            for row in sims:
                top = np.argsort(-row)[:k]
                out.append([(allowed[i], float(row[i])) for i in top])
            return out
        h = self._load_hnsw()
        if h is None:
            return [[] for _ in range(len(qvecs))]
        k = min(k, n)
        h.set_ef(max(HNSW_EF_SEARCH, k * 2))
        labels, dists = h.knn_query(qvecs, k=k)
        return [
            [(int(lab), float(1.0 - d)) for lab, d in zip(lrow, drow)] for lrow, drow in zip(labels, dists)
        ]

    def keyword(
        self, terms: list[str], k: int, postings: dict[str, Any] | None = None
    ) -> list[tuple[int, float, float]]:
        """BM25 of the OR of the terms, top `k`, plus each hit's share of the query.

        Returns (label, bm25, coverage): bm25 higher is better; coverage is the IDF-weighted share
        of the query's terms the memory contains (0-1), so that a memory sharing one incidental
        word with a long question does not pass for a keyword match. Decoded posting lists are
        kept for the next query (until the catalog changes); `postings`, if given, holds them
        instead. See memcli/keyword_index.py.
        """
        return self.kw.search(terms, k, postings)


def _json_ints(labels: Iterable[int]) -> str:
    """Labels as one JSON array: a single bound parameter for `IN (SELECT value FROM json_each(?))`,
    whatever the number of labels (SQLite caps bound parameters, so no chunking either)."""
    return json.dumps(list(labels), default=int)  # default: numpy integers


def _seed_catalog(src: Path, dst: Path) -> None:
    """Copy a read-only store's catalog (and its vector file) into the fallback sidecar, so the
    first read costs a copy, not a re-index. Best effort: anything missing is rebuilt by sync."""
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
        if row and row[0] and (src / row[0]).is_file():
            shutil.copyfile(src / row[0], dst / row[0])
    except (sqlite3.Error, OSError):
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                os.unlink(f"{dst / 'catalog.sqlite'}{suffix}")


def _norm_hash(text: str) -> str:
    from memcli.extract import normalise  # here, not at the top: search never needs it (~15 ms of import)

    return hashlib.sha256(normalise(text).encode("utf-8")).hexdigest()
