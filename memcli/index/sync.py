"""Sync: keep the catalog and the vector file in step with `facts/`.

`sync()` compares the directory listing (name, mtime, size) with the catalog and re-reads, embeds
and indexes only what changed, in one catalog transaction that also records the new vector file:
when nothing changed it costs one `scandir` and one query. `apply_files()` is the same for a
commit that knows which files it wrote or removed.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memcli.core.errors import MemcliError
from memcli.core.memory import MalformedMemory, Memory
from memcli.index.catalog import SCHEMA_VERSION, Catalog, fts_body, norm_hash, tags_col
from memcli.index.keyword import IN_JSON, json_list
from memcli.index.vectors import VECTOR_FILE, Vectors
from memcli.services.embed import Embedder, text_hash
from memcli.services.threads import in_thread
from memcli.storage import safety
from memcli.storage.files import Files, json_text

REFRESH_BATCH = 16  # the model's batch in `refresh_provisional`: merged texts are long


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


class Sync:
    """Brings one catalog and its vector file in step with a store's `facts/`."""

    def __init__(self, store: Files, catalog: Catalog, vectors: Vectors, embedder: Callable[[], Embedder]) -> None:
        self.store = store
        self.catalog = catalog
        self.vec = vectors
        self._embedder = embedder  # asked only when a text must be embedded (loads the model)
        self.synced = False
        self._saw_tmp = False  # the last scan met `.*.tmp` files in facts/ (a killed writer's)

    @property
    def embedder(self) -> Embedder:
        return self._embedder()

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
        if self.catalog.readonly:
            return
        # never wait: a writer holding the lock may own these; the next command cleans them
        with contextlib.suppress(MemcliError, OSError), self.store.lock(timeout=0):
            for n in os.listdir(self.store.facts_dir):
                if n.startswith(".") and n.endswith(".tmp"):
                    with contextlib.suppress(OSError):
                        os.unlink(self.store.facts_dir / n)

    def _plan(self) -> tuple[dict[str, tuple[int, int]], list[str], list[str], str | None]:
        disk = self._scan()
        known = self.catalog.signatures()
        todo = [n for n, sig in disk.items() if known.get(n) != sig]
        gone = [n for n in known if n not in disk]
        return disk, todo, gone, self._rebuild_reason(bool(known))

    def _rebuild_reason(self, known: bool) -> str | None:
        """Why the whole sidecar must be rebuilt (format, model, vector file), or None."""
        model, dim = self.catalog.meta("model"), self.catalog.meta("dim")
        if self.catalog.meta("schema") != SCHEMA_VERSION and known:
            return "the index format changed"
        if model is not None and (model != self.store.config.embed_model):
            return f"the embedding model changed ({model} -> {self.store.config.embed_model})"
        if known and model is None:
            return "the index has no model record"
        vector_file = self.catalog.meta("hnsw_file")
        if vector_file and safety.own_file(self.catalog.dir, vector_file, VECTOR_FILE) is None:
            return "the vector file is missing"
        if dim is not None and model == self.store.config.embed_model and int(dim) != self.embedder.dim:
            return "the vector dimension changed"
        return None

    def apply_files(self, fresh: dict[str, Memory], gone: Iterable[str], *,
                    signatures: Mapping[str, tuple[int, int]] | None = None,
                    vectors: Mapping[str, np.ndarray] | None = None,
                    provisional: Mapping[str, str] | None = None,
                    before_commit: Callable[[], object] | None = None) -> SyncReport:
        """Record what a commit has just written (`fresh`: file name -> memory) and removed (`gone`)
        without scanning `facts/`, in one transaction (a full sync when a rebuild is due anyway).

        `signatures` (file name -> (mtime_ns, size)) are the files' as staged (else each is
        stat'ed); `vectors` (text hash -> vector) what the commit embedded before the lock;
        `provisional` (file name -> a source's file name) the new memories the source's vector
        stands in for (`_stand_ins`). `before_commit` is called once before the transaction commits
        (or a full sync reads `facts/`): a commit whose renames are still running waits there."""
        with self.store.lock():
            if self._rebuild_reason(bool(self.catalog.count())):
                if before_commit is not None:
                    before_commit()
                return self.sync()
            disk = {}
            for name in fresh:
                sig = signatures.get(name) if signatures is not None else None
                if sig is None:
                    st = os.stat(self.store.facts_dir / name)
                    sig = (st.st_mtime_ns, st.st_size)
                disk[name] = sig
            report = SyncReport()
            self._apply(disk, list(fresh), list(gone), report, None, fresh, embedded=vectors,
                        provisional=provisional, before_commit=before_commit)
        return report

    def sync(
        self, on_progress: Callable[[int, int], None] | None = None, *, force: bool = False,
        fresh: dict[str, Memory] | None = None,
    ) -> SyncReport:
        """Bring the sidecar in step with `facts/`; cheap when nothing changed. `fresh` maps file names
        to memories the caller just wrote (not parsed back); a corrupt catalog is dropped and rebuilt."""
        if not self.catalog.readonly and (self.store.path / ".journal.json").exists() and not self.store.locked:
            # a commit was cut short: the writer lock finishes it (memcli/storage/journal.py); never wait
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
            self.catalog.drop()
            report = self._sync(on_progress, force=force, fresh=fresh)
            report.rebuilt = "the catalog was unreadable"
            return report

    def _sync(
        self, on_progress: Callable[[int, int], None] | None, *, force: bool, fresh: dict[str, Memory] | None,
    ) -> SyncReport:
        report = SyncReport()
        version = self.catalog.data_version()
        disk, todo, gone, why = self._plan()
        if force:
            why = "reindex requested"
        if not (todo or gone or why):
            self.synced = True
            return report
        with self.catalog.writer_lock():
            if force or self.catalog.data_version() != version:  # another process synced meanwhile
                disk, todo, gone, why2 = self._plan()
                why = "reindex requested" if force else why2
            if why:
                self.catalog.reset()
                todo, gone = list(disk), []
                report.rebuilt = why
            self._apply(disk, todo, gone, report, on_progress, fresh or {})
        self.synced = True
        return report

    def _apply(
        self,
        disk: dict[str, tuple[int, int]],
        todo: list[str],
        gone: list[str],
        report: SyncReport,
        on_progress: Callable[[int, int], None] | None,
        fresh: dict[str, Memory],
        *,
        embedded: Mapping[str, np.ndarray] | None = None,
        provisional: Mapping[str, str] | None = None,
        before_commit: Callable[[], object] | None = None,
    ) -> None:
        """Index the files `todo` (re-read unless in `fresh`) and drop the files `gone`, in one
        catalog transaction that also records the new vector file."""
        existing = self._rows_of([*todo, *gone])
        parsed, bad = self._read(todo, fresh)
        reused = _take_over(existing, gone, parsed)
        known = embedded or {}
        taken, borrowed = self._stand_ins(parsed, existing, gone, reused, known, provisional or {})
        vectors = self._embed([p for p in parsed if p[0] not in taken and p[0] not in borrowed], existing, known,
                              report, on_progress)
        hnsw = self.vec.load(create=True)
        hnsw_saved = self.vec.from_file  # loaded as is from its file, not built here
        db = self.catalog.db
        kw = self.catalog.kw  # (opened before the transaction: a first open creates its tables)
        old_bad = {r[0]: r[1] for r in db.execute("SELECT fname, error FROM bad")}
        self.catalog.forget_count()
        db.execute("BEGIN IMMEDIATE")
        adding: Future[Any] | None = None
        try:
            removed = self._remove(gone, existing, reused, hnsw, report)
            cleared = [(f,) for f in (*gone, *(f for f, _ in parsed)) if f in old_bad]
            db.executemany("DELETE FROM bad WHERE fname=?", cleared)
            removed += self._record_bad(bad, disk, existing, old_bad, hnsw, report)
            labels, vecs, kw_docs, stand_ins = self._write_rows(parsed, disk, existing, vectors, taken, borrowed,
                                                                report)
            self._note_provisional(stand_ins, [*removed, *labels])
            compact = bool(labels) and self.vec.compacts(hnsw, self.catalog.vector_count())
            if labels and not compact:
                # hnswlib releases the GIL while it inserts: the keyword postings are written
                # meanwhile, and the graph is joined before it is saved (same transaction)
                adding = in_thread("memcli-graph", self.vec.insert, hnsw, vecs, labels)
            kw.update(removed, kw_docs)
            if adding is not None:
                adding.result()
            elif compact:  # too many tombstones: rebuilt from the catalog, which holds the new rows
                hnsw = self.vec.rebuild()
            if labels or report.removed or not hnsw_saved:  # else the vector file is still right
                self.vec.save(hnsw)
            self.catalog.set_meta(schema=SCHEMA_VERSION, model=self.store.config.embed_model, dim=self.embedder.dim)
            if before_commit is not None:
                before_commit()
            db.execute("COMMIT")
        except BaseException:
            if adding is not None:  # the graph is being changed in the thread: let it finish first
                with contextlib.suppress(BaseException):
                    adding.result()
            db.execute("ROLLBACK")
            self.vec.forget()
            raise
        self.vec.cleanup()

    def _rows_of(self, wanted: list[str]) -> dict[str, tuple[int, str]]:
        """(label, text hash) by file name of the catalog rows among `wanted` (asked for by name
        unless that is most rows)."""
        db = self.catalog.db
        if len(wanted) * 4 < self.catalog.count():
            q = f"SELECT fname, label, hash FROM mem WHERE fname {IN_JSON}"
            rows = db.execute(q, (json_list(wanted),))
        else:
            rows = db.execute("SELECT fname, label, hash FROM mem")
        return {fname: (label, h) for fname, label, h in rows}

    def _read(self, todo: list[str], fresh: dict[str, Memory],
              ) -> tuple[list[tuple[str, Memory]], list[tuple[str, str]]]:
        """The memories of `todo` (from `fresh`, else parsed), in file name order, and the unreadable
        files, with why."""
        parsed: list[tuple[str, Memory]] = []
        bad: list[tuple[str, str]] = []
        for fname in sorted(todo):
            if fname in fresh:
                parsed.append((fname, fresh[fname]))
                continue
            try:
                memory = Memory.parse(safety.read_regular(self.store.facts_dir / fname), file_id=fname[:-3])
            except safety.NotRegular as e:
                bad.append((fname, f"{e.strerror}, not a regular file: skipped"))
            except MalformedMemory as e:
                bad.append((fname, str(e)))
            except OSError as e:
                bad.append((fname, f"unreadable ({e.strerror})"))
            else:
                parsed.append((fname, memory))
        return parsed, bad

    def _embed(self, parsed: list[tuple[str, Memory]], existing: dict[str, tuple[int, str]],
               known: Mapping[str, np.ndarray], report: SyncReport,
               on_progress: Callable[[int, int], None] | None) -> dict[str, np.ndarray]:
        """The vectors (by text hash) of the parsed texts the catalog lacks: `known`, else embedded."""
        need = [m.text for f, m in parsed if f not in existing or existing[f][1] != text_hash(m.text)]
        vectors = {h: known[h] for h in map(text_hash, need) if h in known}
        need = [t for t in need if text_hash(t) not in vectors]
        if need:
            total, done = len(need), [0]

            def tick(n: int) -> None:
                done[0] += n
                if on_progress:
                    on_progress(done[0], total)

            before = self.embedder.computed  # cumulative per embedder: report this sync's share
            vectors.update((text_hash(t), v) for t, v in zip(need, self.embedder.embed(need, on_progress=tick)))
            report.embedded = self.embedder.computed - before
        return vectors

    def _remove(self, gone: list[str], existing: dict[str, tuple[int, str]], reused: set[int], hnsw: Any,
                report: SyncReport) -> list[int]:
        """Delete the rows and graph nodes of the files `gone` but those a new file took over
        (`reused`), in one statement; returns their labels."""
        dead: list[int] = []
        for fname in gone:
            row = existing.get(fname)
            if not row:
                continue
            report.removed += 1
            if row[0] not in reused:
                dead.append(row[0])
                with contextlib.suppress(RuntimeError):
                    hnsw.mark_deleted(row[0])
        if dead:
            self.catalog.db.execute(f"DELETE FROM mem WHERE label {IN_JSON}", (json_list(dead),))
        return dead

    def _record_bad(self, bad: list[tuple[str, str]], disk: dict[str, tuple[int, int]],
                    existing: dict[str, tuple[int, str]], old_bad: dict[str, str], hnsw: Any,
                    report: SyncReport) -> list[int]:
        """Record the unreadable files; a good file turned bad leaves the index (its label is
        returned). A file newly bad, or bad in a new way, is reported."""
        db = self.catalog.db
        dropped: list[int] = []
        for fname, error in bad:
            mtime, size = disk[fname]
            row = existing.get(fname)
            if row:
                db.execute("DELETE FROM mem WHERE label=?", (row[0],))
                dropped.append(row[0])
                with contextlib.suppress(RuntimeError):
                    hnsw.mark_deleted(row[0])
                report.removed += 1
            db.execute("INSERT OR REPLACE INTO bad VALUES (?,?,?,?)", (fname, mtime, size, error))
            if old_bad.get(fname) != error or row:
                report.new_bad.append((fname, error))
        return dropped

    def _write_rows(self, parsed: list[tuple[str, Memory]], disk: dict[str, tuple[int, int]],
                    existing: dict[str, tuple[int, str]], vectors: dict[str, np.ndarray], taken: set[str],
                    borrowed: dict[str, np.ndarray], report: SyncReport,
                    ) -> tuple[list[int], np.ndarray, dict[int, str], list[tuple[int, str]]]:
        """Insert or update the rows of `parsed` in bulk. Returns the labels whose vector is new or
        changed with those vectors, each row's keyword document by label, and the (label, text
        hash) of the rows given a provisional vector (`taken` over, or `borrowed`)."""
        next_label = self.catalog.next_label()  # AUTOINCREMENT's, known before the rows are written
        labels: list[int] = []
        vecs: list[np.ndarray] = []
        inserts: list[tuple[Any, ...]] = []
        updates: list[tuple[Any, ...]] = []
        vec_updates: list[tuple[bytes, int]] = []
        kw_docs: dict[int, str] = {}
        stand_ins: list[tuple[int, str]] = []
        for fname, m in parsed:
            h = text_hash(m.text)
            mtime, size = disk[fname]
            cols = (m.id, fname, mtime, size, h, norm_hash(m.text), m.type, m.user, m.project,
                    m.created, m.updated, m.confidence, tags_col(m.tags), json_text(m.to_dict()))
            if fname in existing:
                label, old_hash = existing[fname]
                updates.append((*cols, label))
                report.changed += 1
                kw_docs[label] = fts_body(m)
                if fname in taken:
                    stand_ins.append((label, h))
                if old_hash == h or fname in taken:
                    continue
                vec = vectors[h]
                vec_updates.append((vec.astype(np.float32).tobytes(), label))
            else:
                vec = borrowed[fname] if fname in borrowed else vectors[h]
                label, next_label = next_label, next_label + 1
                if fname in borrowed:
                    stand_ins.append((label, h))
                inserts.append((label, *cols, vec.astype(np.float32).tobytes()))
                report.added += 1
                kw_docs[label] = fts_body(m)
            labels.append(label)
            vecs.append(vec)
        db = self.catalog.db
        db.executemany(
            "INSERT INTO mem (label, id, fname, mtime_ns, size, hash, norm, type, user, project,"
            " created, updated, confidence, tags, record, vec) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            inserts)
        db.executemany(
            "UPDATE mem SET id=?, fname=?, mtime_ns=?, size=?, hash=?, norm=?, type=?, user=?,"
            " project=?, created=?, updated=?, confidence=?, tags=?, record=? WHERE label=?", updates)
        db.executemany("UPDATE mem SET vec=? WHERE label=?", vec_updates)
        stacked = np.stack(vecs).astype(np.float32, copy=False) if vecs else np.zeros((0, 0), np.float32)
        return labels, stacked, kw_docs, stand_ins

    def _stand_ins(self, parsed: list[tuple[str, Memory]], existing: dict[str, tuple[int, str]], gone: list[str],
                   reused: set[int], known: Mapping[str, np.ndarray], provisional: Mapping[str, str],
                   ) -> tuple[set[str], dict[str, np.ndarray]]:
        """The new memories given a provisional vector (`provisional`: file -> the source whose vector
        stands in, memcli/ops/changes.py): those taking over the row and graph node of a source that
        leaves in this batch (a merge; recorded in `existing`), and the others' copies of the
        source's vector (a distillation). `refresh_provisional` makes them exact later."""
        taken: set[str] = set()
        lend: dict[str, str] = {}
        leaving = set(gone)
        for fname, m in parsed if provisional else ():
            src = provisional.get(fname)
            if src is None or fname in existing or text_hash(m.text) in known:
                continue
            row = existing.get(src)
            if src in leaving and row and row[0] not in reused:
                existing[fname] = row
                reused.add(row[0])
                taken.add(fname)
            else:
                lend[fname] = src
        if not lend:
            return taken, {}
        q = f"SELECT fname, vec FROM mem WHERE vec IS NOT NULL AND fname {IN_JSON}"
        have = dict(self.catalog.db.execute(q, (json_list(sorted(set(lend.values()))),)))
        return taken, {f: np.frombuffer(have[src], dtype=np.float32) for f, src in lend.items() if src in have}

    def _note_provisional(self, stand_ins: list[tuple[int, str]], exact: list[int]) -> None:
        """Record the rows given a provisional vector; forget those of rows that left or got an exact
        one (a stale entry means nothing anyway: this keeps the table small)."""
        db = self.catalog.db
        if exact and db.execute("SELECT 1 FROM provisional LIMIT 1").fetchone():
            db.execute(f"DELETE FROM provisional WHERE label {IN_JSON}", (json_list(exact),))
        if stand_ins:
            db.executemany("INSERT OR REPLACE INTO provisional VALUES (?,?)", stand_ins)

    def refresh_provisional(self, on_progress: Callable[[int, int], None] | None = None, *,
                            batch: int = 256) -> int:
        """Give every memory whose vector is provisional its exact one; returns how many. The texts
        are embedded first, with no lock held, `batch` at a time; then, under the writer lock in one
        transaction, only rows that still have the embedded text are updated (a commit meanwhile
        wins) and the graph is saved anew. Killed before that, it changes nothing (the vectors are
        in the embedding cache)."""
        self.sync()
        rows = self.catalog.provisional_texts()
        computed: dict[int, tuple[str, np.ndarray]] = {}
        for i in range(0, len(rows), batch):
            chunk = rows[i : i + batch]
            vecs = self.embedder.embed([text for _, _, text in chunk], batch_size=REFRESH_BATCH)
            computed.update((label, (h, v)) for (label, h, _), v in zip(chunk, vecs))
            if on_progress:
                on_progress(len(computed), len(rows))
        db = self.catalog.db
        labels: list[int] = []
        with self.catalog.writer_lock():
            hnsw = self.vec.load(create=True)
            db.execute("BEGIN IMMEDIATE")
            try:
                still = dict(db.execute("SELECT p.label, p.hash FROM provisional p JOIN mem m"
                                        " ON m.label = p.label AND m.hash = p.hash"))
                labels = [label for label, (h, _) in computed.items() if still.get(label) == h]
                if labels:
                    vecs = np.stack([computed[label][1] for label in labels]).astype(np.float32)
                    db.executemany("UPDATE mem SET vec=? WHERE label=?",
                                   [(v.tobytes(), label) for label, v in zip(labels, vecs)])
                    db.execute(f"DELETE FROM provisional WHERE label {IN_JSON}", (json_list(labels),))
                    self.vec.insert(hnsw, vecs, labels)
                    self.vec.save(hnsw)
                db.execute("DELETE FROM provisional WHERE NOT EXISTS (SELECT 1 FROM mem m"
                           " WHERE m.label = provisional.label AND m.hash = provisional.hash)")
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                self.vec.forget()
                raise
        self.vec.cleanup()
        return len(labels)


def _take_over(existing: dict[str, tuple[int, str]], gone: list[str], parsed: list[tuple[str, Memory]]) -> set[int]:
    """A new file with the text of a file removed in the same batch (a merge, a restore) takes over
    its row and vector: no embedding, no graph insertion. Recorded in `existing`; returns the labels."""
    free: dict[str, list[int]] = {}
    for fname in gone:
        row = existing.get(fname)
        if row:
            free.setdefault(row[1], []).append(row[0])
    reused: set[int] = set()
    for fname, m in parsed if free else ():
        labels = free.get(text_hash(m.text)) if fname not in existing else None
        if labels:
            label = labels.pop()
            existing[fname] = (label, text_hash(m.text))
            reused.add(label)
    return reused
