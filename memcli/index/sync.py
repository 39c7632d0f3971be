"""Sync: keep the catalog and the vector file in step with `facts/`.

`sync()` compares the directory listing (name, mtime, size) with the catalog, re-reads only the
files that changed, re-embeds only text whose hash is not in the embedding cache, and updates the
vector graph in place (replace / `mark_deleted`, resize when full), all in one catalog transaction
that also records the new vector file. When nothing changed it costs one `scandir` and one query.
`apply_files()` is the same for a commit that knows exactly which files it wrote or removed.
"""

from __future__ import annotations

import contextlib
import json
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
from memcli.index.catalog import SCHEMA_VERSION, Catalog, _json_ints, fts_body, norm_hash, tags_col
from memcli.index.vectors import NEAR_BUILD_MAX, NEAR_K, NEAR_VERSION, VECTOR_FILE, Vectors, ranked
from memcli.services.background import in_thread
from memcli.services.embed import Embedder, text_hash
from memcli.storage import safety
from memcli.storage.files import Files, json_text


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




REFRESH_BATCH = 16  # the model's batch in `refresh_provisional`: merged texts are long, and onnxruntime
# keeps its largest batch's buffers. 400 merged texts of the 10k bench store, one thread: batch 64
# peaked at 563 MB RSS for 8.2 s CPU, 16 at 369 MB for 6.3 s (less padding), 8 at 307 MB for 6.1 s.


FORGET_AFTER = 1000  # pairs judged at once from which the texts read for them are let go (`decide.forget_parsed`)


def _judged(catalog: Catalog, pairs: list[tuple[int, int, float]]) -> dict[int, int]:
    """The texts' verdicts (1 apart, 0 mergeable: `decide.texts_mergeable`) of the pairs ((a, b,
    similarity)) among each memory's NEAR_K nearest, by position in `pairs`; in a crowd the others
    are left unjudged (merge --auto reads 8 a memory, and judges any it meets unjudged itself)."""
    from memcli.rules.relate import forget_parsed, texts_mergeable

    judge = _nearest(pairs, NEAR_K)
    texts = catalog.texts({x for i in judge for x in pairs[i][:2]})
    verdicts = {i: int(not texts_mergeable(texts[pairs[i][0]], texts[pairs[i][1]]))
                for i in judge if pairs[i][0] in texts and pairs[i][1] in texts}
    if len(judge) >= FORGET_AFTER:
        forget_parsed()
    return verdicts


def _nearest(pairs: list[tuple[int, int, float]], k: int) -> list[int]:
    """The positions in `pairs` ((a, b, similarity)) of the pairs among the `k` most similar of
    either of their ends."""
    if not pairs:
        return []
    n = len(pairs)
    a, b, sim = (np.fromiter((p[c] for p in pairs), dtype, n) for c, dtype in ((0, np.int64), (1, np.int64),
                                                                              (2, np.float64)))
    ends, which, sims = np.concatenate([a, b]), np.tile(np.arange(n), 2), np.concatenate([sim, sim])
    order, rank = ranked(ends, sims, np.arange(2 * n))
    return sorted(set(which[order][rank < k].tolist()))


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
        known = self.catalog.signatures()
        todo = [n for n, sig in disk.items() if known.get(n) != sig]
        gone = [n for n in known if n not in disk]
        return disk, todo, gone, self._rebuild_reason(bool(known))

    def _rebuild_reason(self, known: bool) -> str | None:
        """Why the whole sidecar must be rebuilt (format, model, vector file), or None."""
        why = None
        model, dim = self.catalog.meta("model"), self.catalog.meta("dim")
        if self.catalog.meta("schema") != SCHEMA_VERSION and known:
            why = "the index format changed"
        elif model is not None and (model != self.store.config.embed_model):
            why = f"the embedding model changed ({model} -> {self.store.config.embed_model})"
        elif known and model is None:
            why = "the index has no model record"
        elif self.catalog.meta("hnsw_file") and safety.own_file(self.catalog.dir, self.catalog.meta("hnsw_file"),
                                                                 VECTOR_FILE) is None:
            why = "the vector file is missing"
        elif dim is not None and model == self.store.config.embed_model and int(dim) != self.embedder.dim:
            why = "the vector dimension changed"
        return why

    def apply_files(self, fresh: dict[str, Memory], gone: Iterable[str], *,
                    signatures: Mapping[str, tuple[int, int]] | None = None,
                    vectors: Mapping[str, np.ndarray] | None = None,
                    provisional: Mapping[str, str] | None = None,
                    before_commit: Callable[[], object] | None = None) -> SyncReport:
        """Record what a commit has just written (`fresh`: file name -> memory) and removed
        (`gone`: file names), without scanning `facts/`: one catalog transaction and one vector
        file for the whole commit. When the sidecar needs a rebuild anyway this is a full sync.
        Files changed by others meanwhile are left to the next `sync()` (their signatures differ).

        `signatures` (file name -> (mtime_ns, size)) are the written files' as the commit staged
        them (else each is stat'ed); `vectors` (text hash -> vector) the embeddings the commit
        already has. `provisional` (file name -> a source's file name) names the new memories whose
        vector is provisional: the source's stands in (see `_apply`). `before_commit` is called
        once before the transaction commits (and before a full sync reads `facts/`): a commit whose
        renames are still running waits for them there."""
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
        """Bring the sidecar in step with `facts/`; cheap when nothing changed.

        `fresh` maps file names to the memories the caller has just written, so a bulk import
        does not parse back the thousands of files it wrote a moment ago. A catalog that turns out
        to be corrupt past its header ("malformed") is dropped and rebuilt.
        """
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
        db = self.catalog.db
        # the rows of the files involved only: a commit at 100k touches a few thousand of them
        wanted = [*todo, *gone]
        if len(wanted) * 4 < self.catalog.count():
            q = "SELECT fname, label, hash FROM mem WHERE fname IN (SELECT value FROM json_each(?))"
            rows = db.execute(q, (json.dumps(wanted),))
        else:
            rows = db.execute("SELECT fname, label, hash FROM mem")
        existing = {fname: (label, h) for fname, label, h in rows}
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
        # the vectors the caller has (a commit embedded its new texts before taking the lock)
        known = embedded or {}
        # A new memory given a provisional vector (`provisional`: its file -> the source whose
        # vector stands in, see memcli/ops/changes.py PROVISIONAL_MIN) takes over the source's row the
        # same way when the source leaves in this batch (a merge): the row is rewritten for the
        # new memory, its vector and graph node are kept. Otherwise (a distillation: the sources
        # stay) it is inserted with a copy of the source's vector. Either is recorded in the
        # `provisional` table, for `refresh_provisional` to make exact.
        taken: set[str] = set()
        borrowed: dict[str, np.ndarray] = {}
        if provisional:
            lend: dict[str, str] = {}
            leaving = set(gone)
            for fname, m in parsed:
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
            if lend:
                q = "SELECT fname, vec FROM mem WHERE vec IS NOT NULL AND fname IN (SELECT value FROM json_each(?))"
                have = dict(db.execute(q, (json.dumps(sorted(set(lend.values()))),)))
                borrowed = {f: np.frombuffer(have[src], dtype=np.float32) for f, src in lend.items() if src in have}
        need = [m.text for f, m in parsed if (f not in existing or existing[f][1] != text_hash(m.text))
                and f not in taken and f not in borrowed]
        vectors = {h: known[h] for h in map(text_hash, need) if h in known}
        need = [t for t in need if text_hash(t) not in vectors]
        if need:
            total = len(need)
            done = [0]

            def tick(n: int) -> None:
                done[0] += n
                if on_progress:
                    on_progress(done[0], total)

            before = self.embedder.computed  # cumulative per embedder: report this sync's share
            vecs = self.embedder.embed(need, on_progress=tick)
            vectors.update((text_hash(t), v) for t, v in zip(need, vecs))
            report.embedded = self.embedder.computed - before
        hnsw = self.vec.load(create=True)
        hnsw_saved = self.vec.from_file  # loaded as is from its file, not built here
        kw = self.catalog.kw
        kw_removed: list[int] = []
        kw_docs: dict[int, str] = {}
        self.catalog.forget_count()
        db.execute("BEGIN IMMEDIATE")
        adding: Future[Any] | None = None
        try:
            empty = db.execute("SELECT 1 FROM mem LIMIT 1").fetchone() is None
            # In bulk: one statement per kind of row change, not one per file (a prune removes
            # thousands; a curation commit writes thousands).
            dead: list[int] = []
            for fname in gone:
                row = existing.get(fname)
                if row and row[0] in reused:
                    report.removed += 1
                    row = None
                if row:
                    dead.append(row[0])
                    with contextlib.suppress(RuntimeError):
                        hnsw.mark_deleted(row[0])
                    report.removed += 1
            if dead:  # one statement (a prune removes thousands)
                db.execute("DELETE FROM mem WHERE label IN (SELECT value FROM json_each(?))", (_json_ints(dead),))
            kw_removed += dead
            cleared = [(f,) for f in (*gone, *(f for f, _ in parsed)) if f in old_bad]
            if cleared:
                db.executemany("DELETE FROM bad WHERE fname=?", cleared)
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
            # A new row gets the label AUTOINCREMENT would give it (inserted one by one, in this
            # order), known before the rows are written: the graph takes the vectors meanwhile.
            next_label = self.catalog.next_label()
            new_labels: list[int] = []
            new_vecs: list[np.ndarray] = []
            inserts: list[tuple[Any, ...]] = []
            updates: list[tuple[Any, ...]] = []
            vec_updates: list[tuple[bytes, int]] = []
            stand_ins: list[tuple[int, str]] = []  # (label, text hash) given a provisional vector
            for fname, m in parsed:
                h = text_hash(m.text)
                mtime, size = disk[fname]
                cols = (
                    m.id, fname, mtime, size, h, norm_hash(m.text), m.type, m.user, m.project,
                    m.created, m.updated, m.confidence, tags_col(m.tags),
                    json_text(m.to_dict()),
                )
                if fname in existing:
                    label, old_hash = existing[fname]
                    updates.append((*cols, label))
                    report.changed += 1
                    if old_hash == h or fname in taken:
                        kw_docs[label] = fts_body(m)
                        if fname in taken:
                            stand_ins.append((label, h))
                        continue
                    vec = vectors[h]
                    vec_updates.append((vec.astype(np.float32).tobytes(), label))
                else:
                    vec = borrowed.get(fname)
                    if vec is None:
                        vec = vectors[h]
                    label, next_label = next_label, next_label + 1
                    if fname in borrowed:
                        stand_ins.append((label, h))
                    inserts.append((label, *cols, vec.astype(np.float32).tobytes()))
                    report.added += 1
                kw_docs[label] = fts_body(m)
                new_labels.append(label)
                new_vecs.append(vec)
            stacked = np.stack(new_vecs).astype(np.float32, copy=False) if new_vecs else np.zeros((0, 0), np.float32)
            compact = bool(new_labels) and self.vec.compacts(hnsw, self.catalog.vector_count() + len(inserts))
            if new_labels and not compact:
                # hnswlib releases the GIL while it inserts: the rows and the keyword postings are
                # written meanwhile, and the graph is joined before it is saved (same transaction)
                adding = in_thread("memcli-graph", self.vec.insert, hnsw, stacked, new_labels)
            db.executemany(
                "INSERT INTO mem (label, id, fname, mtime_ns, size, hash, norm, type, user, project,"
                " created, updated, confidence, tags, record, vec) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                inserts)
            db.executemany(
                "UPDATE mem SET id=?, fname=?, mtime_ns=?, size=?, hash=?, norm=?, type=?, user=?,"
                " project=?, created=?, updated=?, confidence=?, tags=?, record=? WHERE label=?", updates)
            db.executemany("UPDATE mem SET vec=? WHERE label=?", vec_updates)
            self._note_provisional(stand_ins, [*kw_removed, *(lab for _, lab in vec_updates)])
            kw.update(kw_removed, kw_docs)
            if adding is not None:
                adding.result()
            elif compact:  # too many tombstones: rebuilt from the catalog, which holds the new rows
                hnsw = self.vec.rebuild()
            self._keep_near(hnsw, empty, new_labels, stacked, kw_removed, [existing[f][0] for f in taken])
            if new_labels or report.removed or not hnsw_saved:  # else the vector file is still right
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

    def _keep_near(self, hnsw: Any, empty: bool, labels: list[int], vecs: np.ndarray, gone: list[int],
                   retexted: Iterable[int] = ()) -> None:
        """Keep the close-pair table (`vectors.NEAR_FLOOR`) in step, in the caller's transaction,
        once the graph holds the new vectors: the pairs of the rows that left (`gone`) or whose
        vector changed (`labels`, `vecs`) forgotten, those of the new vectors found, each with the
        texts' verdict (`decide.texts_mergeable`: `merge --auto`'s veto, recorded so that it need
        not parse the texts again); the verdicts of the pairs of rows whose text changed under a
        kept vector (`retexted`: a merge's provisional takeover) forgotten, left to whoever reads
        them (the refresh that gives those rows their exact vectors finds and judges their pairs
        again; judging them here cost a bulk merge ~0.2 s under the lock). Rows whose search was
        cut in a crowd of near-copies are marked (`vectors.NEAR_CROWD`): while there is one, the
        table is not complete and not read. A catalog that started empty gets a complete table; one indexed
        before the table existed (or by an older memcli since) gets it built whole here while it
        is small (`NEAR_BUILD_MAX`), else it goes on without one (the kNN pass) until `memcli
        reindex`."""
        from memcli.rules.relate import rules_version

        catalog = self.catalog
        search, stacked = np.asarray(labels, np.int64), vecs
        rules = rules_version()
        rejudge = False
        if not empty and self.vec.near_ready():
            catalog.near_forget([*gone, *labels])
            # of a text no longer the row's: judged when read; given by other rules (an upgrade):
            # judged again here while the store is small, else when read
            other_rules = catalog.meta("pairs_rules") != rules
            rejudge = other_rules and bool(rules) and catalog.count() <= NEAR_BUILD_MAX
            catalog.near_unjudge(None if other_rules else retexted)
        elif empty or (catalog.meta("near") != "off" and catalog.count() <= NEAR_BUILD_MAX):
            catalog.near_clear()
            if not empty:
                every, stacked = catalog.vector_rows()
                search = np.asarray(every, np.int64)
        else:
            return
        try:
            pairs, crowded = self.vec.close_pairs(hnsw, search.tolist(), stacked) if len(search) else ([], [])
        except RuntimeError:  # the graph could not answer: no table (the kNN pass) until a reindex
            catalog.near_clear()
            catalog.set_meta(near="off")
            return
        verdicts = _judged(catalog, pairs) if rules and not rejudge else {}
        catalog.near_put([(a, b, s, verdicts.get(i)) for i, (a, b, s) in enumerate(pairs)], crowded)
        if rejudge:  # every pair, the new ones with them
            every = catalog.near_all()
            verdicts = _judged(catalog, every)
            catalog.near_judged([(a, b, verdicts.get(i)) for i, (a, b, _) in enumerate(every)])
        catalog.set_meta(near=NEAR_VERSION, near_gen=catalog.meta("hnsw_gen") or "0", pairs_rules=rules)

    def refresh_provisional(self, on_progress: Callable[[int, int], None] | None = None, *,
                            batch: int = 256) -> int:
        """Give every memory whose vector is provisional its exact one; returns how many were made
        exact. The texts are embedded first, with no lock held, `batch` at a time (the model's
        memory stays bounded whatever the count); then, under the writer lock, in one transaction,
        only the rows that still have the text that was embedded are updated (a commit that
        rewrote or removed one meanwhile wins: its row is left as it is), the graph takes the new
        vectors under their labels and is saved as a new generation, and the entries are cleared
        (stale ones too). A refresh killed before its transaction changes nothing; the vectors it
        computed are in the embedding cache, so the next one is quick."""
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
                    db.execute("DELETE FROM provisional WHERE label IN (SELECT value FROM json_each(?))",
                               (_json_ints(labels),))
                    self.vec.insert(hnsw, vecs, labels)
                    self._keep_near(hnsw, False, labels, vecs, [])
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

    def _note_provisional(self, stand_ins: list[tuple[int, str]], exact: list[int]) -> None:
        """Record the rows given a provisional vector, and forget the entries of rows that left
        or were given an exact vector (an entry whose row has another text means nothing anyway:
        this only keeps the table small)."""
        db = self.catalog.db
        if exact and db.execute("SELECT 1 FROM provisional LIMIT 1").fetchone():
            db.execute("DELETE FROM provisional WHERE label IN (SELECT value FROM json_each(?))", (_json_ints(exact),))
        if stand_ins:
            db.executemany("INSERT OR REPLACE INTO provisional VALUES (?,?)", stand_ins)

