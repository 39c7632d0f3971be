"""The vector half of the sidecar: an hnswlib graph over the catalog's vectors, saved in generations.

The catalog holds every vector (the truth); the graph is a file derived from it. Each save writes
`vectors-<gen>.hnsw` under a new name and records it in the catalog's `meta` in the same SQLite
transaction as the rows it indexes, so a reader never loads a vector file that disagrees with the
catalog; the file before the current one is kept for a reader that is still opening it. A missing
or unreadable file is rebuilt from the catalog's vectors. Labels (the catalog's integer keys) are
the graph's ids; only ids and scores leave this module.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from memcli.index.catalog import Catalog
from memcli.storage import safety

if TYPE_CHECKING:
    import threading

HNSW_M = 16
VECTOR_FILE = r"vectors-\d+\.hnsw"  # the only names a catalog's hnsw_file may give (see safety.own_file)
HNSW_EF_CONSTRUCTION = 200
HNSW_EF_SEARCH = 512  # at least; a query for k neighbours searches with max(this, 2k). 512: recall@10
# 0.987 on 100k realistic vectors at p50 1.3 ms (was 200: 0.93 at 0.5 ms); see bench/search_latency.py
# M = 32 buys nothing there: on gauss-100k (part 1's realistic set) M=32/ef=200 gave recall@10 0.989 at
# the CPU time of M=16/ef=512 (0.9865), and its graph is ~8% larger and took 1.7x as long to build.
# Why a query costs more at 100k than at 10k at the same ef (0.8 -> 1.4 ms CPU, the largest share of
# search_many's growth): the search is memory-bound. The 10k graph (17 MB) fits the 32 MB L3 cache,
# the 100k one (168 MB) does not, and every distance a query computes reads a 1.5 kB vector.
# Transparent huge pages on the graph cut 100k queries by ~20% (fewer TLB misses), but hnswlib
# allocates the graph itself, so they can only be had by MADV_COLLAPSE after loading: ~380 ms CPU at
# 100k per process, more than a batch of 200 queries saves.
CURATION_EF = 48  # curation's kNN pass (k=9). On the 10k curation bench store the pairs it finds at
# >= 0.95, >= 0.9 and >= 0.8 are exactly an exact (brute-force) kNN's, as at 64, for 25% less CPU
# (0.54 s against 0.72 s, one thread); at 40 three extra pairs appear at >= 0.8, at 32 four.
# Below 0.8 (no default threshold of curation) it misses 8 of 48,346 pairs at >= 0.7, 64 misses 4.
# Dense clusters larger than k (3 seeded sets of 4,000 vectors in clusters of up to 40 near-copies):
# 48, 64 and 128 each differ from the exact top-8 pairs at >= 0.95/0.9/0.8 by the same 1-2 pairs.

NEAR_EF = 16  # the close-pairs pass (`neighbour_arrays(threshold=t)`, merge --auto's groups, t >= NEAR_FROM):
# every row is searched at 16 first and searched again at CURATION_EF only when its k-th neighbour is at
# >= t - NEAR_MARGIN (a cluster larger than k, or a crowd, whose top k the wide search picks) or its search
# did not return its own vector (it went astray). On the 10k curation bench store its pairs at >= 0.95,
# 0.9 and 0.85 (3,271 / 5,946 / 13,489) are exactly the wide pass's and an exact kNN's; at 0.9 it searches
# 272 rows again and takes 0.25 s CPU against 0.51-0.66 s (one thread); same on the 1k store (269/297/377
# pairs). Seeded sets (/tmp/lead/efdense.py's 3 x 4,000 vectors in clusters of up to 40 near-copies, 8
# graph builds each; "nested" topics of notes ~0.7-0.85 alike holding groups of 1-9 copies, 6 x 3 builds):
# the same pairs as the wide pass in every case at 0.95/0.9/0.85 (the wide pass itself differs from the
# exact top 8 in the large clusters, 742 pairs over the 72 dense cases: which k of >k equally close copies).
# A crowded 128-d seeded set (2,000 vectors, 46% of rows in clusters larger than k): 1-2 of 135-180 (graph,
# threshold) cases differ from the wide pass, by 2-3 pairs (the wide pass differs from exact in 2-8 cases, by
# 5-68 pairs); with no margin 8 cases (17 pairs). Without the own-vector check the dense sets lost 48 pairs in
# 6 cases (searches stranded in another cluster); at ef 12 or 9 they differ by 7 and 39. Below NEAR_FROM the
# pass is the wide one: at 0.8 the margin sends 5,417 of the 9,936 rows of the 10k store to the wide search
# again, and the two together cost about what it does alone (0.50 s against 0.55 s). Where most rows of a
# batch need the wide search again (the dense sets: 80-95%), the later batches get only the wide search
# (the same pairs): there the pass costs 0.87-0.96 s CPU against the wide pass's 0.73 s (6 graphs of 4,000;
# without this, 1.05-1.24 s against 0.81 s). bench/knn_pass.py prints all of this in one run.
NEAR_FROM = 0.85
NEAR_MARGIN = 0.03

NEAR_FLOOR = NEAR_FROM  # the close-pair table (catalog `close_pairs`): every pair at >= this found when a vector
# enters the graph. Each new or changed vector is searched once, right after its insertion (its NEAR_K
# nearest at CURATION_EF, as the wide pass searches; NEAR_CROWD if those are all close), and its pairs at
# >= NEAR_FLOOR are recorded, each once; a row that leaves, or whose vector changes, takes its pairs along.
# So a pair is found from its later end whatever came after, and from its earlier end while that end had
# fewer close neighbours than the search returns. `neighbour_arrays(threshold=t)` for t >= NEAR_FLOOR
# (merge --auto's groups) then reads each row's k nearest at >= t from the table instead of searching the
# graph: on the 10k curation bench store 0.03 s against the pass's 0.3 s of CPU, the pass's groups, and an
# exact kNN's pairs but for 1 of 5,946 at >= 0.9 and 5 of 13,489 at >= 0.85 that the approximate search
# missed from both ends (the wide pass misses 0 and 1; bench/knn_pass.py). The cost moved to the writes:
# one search per vector written, and the verdicts on the pairs' texts (sync.py `_keep_near`).
NEAR_K = 16  # twice curation's k: a row's k nearest are still recorded after some of them leave
NEAR_CROWD = 4 * (NEAR_K + 1)  # a vector whose NEAR_K nearest are all close is searched again for this
# many. A vector that has more close neighbours still is in a crowd of near-copies (thousands of alike
# hook notes, or the hash test embedder's 100k bench store: 4,554 of its rows): there the table keeps
# ~NEAR_CROWD pairs per memory, not every pair (quadratic), and marks the row (`close_crowded`). Its
# later members do not list a memory older than the crowd, so while any row is marked the table is
# not complete and `neighbour_arrays` searches the graph; once none is left (each remaining vector
# found every close one there was when it came) it is complete again.
NEAR_VERSION = f"{NEAR_FLOOR}/{NEAR_K}/{NEAR_CROWD}/2"  # in the catalog's meta once the table is complete
# (the last part: the table's format; 2: `close_pairs` with the texts' verdicts)
NEAR_BUILD_MAX = 20_000  # a catalog indexed before the table existed gets it built whole on its next
# write up to this many vectors (~1.5 s at 10k, once); a larger one by `memcli reindex`


def positions(labels: np.ndarray, found: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each of `found` (labels) is in the sorted `labels`, and whether it is there at all."""
    at = np.minimum(np.searchsorted(labels, found), len(labels) - 1)
    return at, labels[at] == found


def ranked(group: np.ndarray, sims: np.ndarray, tie: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The order that sorts rows by `group`, the most similar first, then by `tie`; and each row's
    rank within its group in that order (0: the nearest)."""
    order = np.lexsort((tie, -sims, group))
    g = group[order]
    return order, np.arange(len(g)) - np.searchsorted(g, g)


class Vectors:
    """The current vector file of one catalog, loaded once per process and generation."""

    def __init__(self, catalog: Catalog, dim: Callable[[], int]) -> None:
        self.catalog = catalog
        self._dim = dim  # the embedder's dimension, for a new graph
        self._hnsw: Any = None  # hnswlib.Index (untyped C extension)
        self._file: str | None = None  # the generation `_hnsw` was loaded from; None: built here
        catalog.on_drop(self.forget)

    def forget(self) -> None:
        """Drop the loaded graph: the catalog it was read from is gone or emptied."""
        self._hnsw, self._file = None, None

    @property
    def from_file(self) -> bool:
        """The loaded graph is the current file as saved (so an unchanged graph needs no save)."""
        return self._file is not None

    def _new(self, capacity: int) -> Any:
        import hnswlib

        h = hnswlib.Index(space="ip", dim=self._dim())
        h.init_index(max_elements=max(capacity, 1024), ef_construction=HNSW_EF_CONSTRUCTION, M=HNSW_M)
        h.set_ef(HNSW_EF_SEARCH)
        return h

    def load(self, *, create: bool = False) -> Any:
        """The graph of the current generation: loaded from its file, or rebuilt from the catalog's
        vectors when the file is missing or unreadable (None if there are none and not `create`)."""
        name = self.catalog.meta("hnsw_file")
        if self._hnsw is not None and self._file == name:
            return self._hnsw
        import hnswlib

        path = safety.own_file(self.catalog.dir, name, VECTOR_FILE) if name else None
        if path is not None:
            h = hnswlib.Index(space="ip", dim=int(self.catalog.meta("dim") or self._dim()))
            try:
                h.load_index(str(path), max_elements=0)
                h.set_ef(HNSW_EF_SEARCH)
                self._hnsw, self._file = h, name
                return h
            except RuntimeError:
                pass  # unreadable: rebuilt below from the catalog's vectors
        labels, vecs = self.catalog.vector_rows()
        if not labels and not create:
            return None
        h = self._new(len(labels) * 2)
        if labels:
            h.add_items(vecs, labels)
        self._hnsw, self._file = h, None
        return h

    def compacts(self, h: Any, live: int) -> bool:
        """Whether the graph has more tombstones than is worth keeping, with `live` vectors in
        the catalog once the caller's rows are written (then `rebuild` rather than `insert`)."""
        deleted = h.element_count - live
        return bool(deleted > max(1000, h.element_count // 2))

    def rebuild(self) -> Any:
        """A compact graph built from the catalog's vectors (the caller's rows included)."""
        self.forget()
        self.catalog.set_meta(hnsw_file="")
        return self.load(create=True)

    def insert(self, h: Any, vecs: np.ndarray, labels: list[int]) -> None:
        """Put `vecs` under `labels` into `h` (a label already there is replaced). No catalog
        access: a commit runs this in a thread while it writes its rows (hnswlib releases the GIL)."""
        need = h.element_count + len(labels)
        if need > h.get_max_elements():
            h.resize_index(max(need, h.get_max_elements() * 2))
        for lab in labels:
            with contextlib.suppress(RuntimeError):
                h.unmark_deleted(lab)
        h.add_items(vecs, labels)

    def save(self, h: Any) -> None:
        """Write the graph as the next generation and record it (inside the caller's transaction)."""
        was = self.catalog.meta("hnsw_gen") or "0"
        gen = int(was) + 1
        name = f"vectors-{gen}.hnsw"
        tmp = self.catalog.dir / f".{name}.tmp"
        h.save_index(str(tmp))
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, self.catalog.dir / name)
        self.catalog.set_meta(hnsw_file=name, hnsw_gen=gen)
        if self.catalog.meta("near_gen") == was:  # the close-pair table was kept with this graph
            self.catalog.set_meta(near_gen=gen)
        self._hnsw, self._file = h, name

    def cleanup(self) -> None:
        """Keep the current vector file and the one before it (a reader may still be opening it)."""
        current = self.catalog.meta("hnsw_file")
        files = sorted(self.catalog.dir.glob("vectors-*.hnsw"), key=lambda p: int(p.stem.split("-")[1]))
        for p in files[:-2]:
            if p.name != current:
                with contextlib.suppress(OSError):
                    p.unlink()
        for p in self.catalog.dir.glob(".vectors-*.tmp"):
            with contextlib.suppress(OSError):
                p.unlink()

    # ------------------------------------------------------------ the close-pair table
    def near_ready(self) -> bool:
        """The catalog's close-pair table is complete and in step with the current graph: a
        writer that does not keep the table (an older memcli) saves a new graph generation
        without moving `near_gen` along (see `save`)."""
        meta = self.catalog.meta
        return meta("near") == NEAR_VERSION and meta("near_gen") == (meta("hnsw_gen") or "0")

    def close_pairs(self, h: Any, labels: list[int], vecs: np.ndarray,
                    ) -> tuple[list[tuple[int, int, float]], list[int]]:
        """The pairs at >= `NEAR_FLOOR` of the vectors `vecs` (in the graph `h` under `labels`)
        with any vector of `h`: (a, b, similarity), a < b, each once; and the labels whose search
        was cut at `NEAR_CROWD` close neighbours. Similarities are computed as `neighbour_arrays`
        gives them (the graph's float32 distance), so a threshold compares the same either way.
        RuntimeError: hnswlib could not find the neighbours asked for."""
        rows = np.asarray(labels, np.int64)
        live = h.element_count  # (deleted ones too: a query that asks for more is told so)
        found_a, found_b, found_s, crowded = [], [], [], []
        k = NEAR_K + 1
        try:
            while len(rows) and min(k, live) >= 2:
                kk = min(k, live)
                h.set_ef(max(CURATION_EF, kk))
                try:
                    found, dists = h.knn_query(vecs, k=kk)
                except RuntimeError:  # fewer vectors left than k (the graph counts its deleted ones)
                    fewer = min(live, self.catalog.vector_count())
                    if fewer >= live:
                        raise
                    live = fewer
                    continue
                found = found.astype(np.int64)
                sims = (1.0 - dists).astype(np.float64)  # float32 arithmetic, held as float64 (see `convert`)
                src = np.broadcast_to(rows[:, None], found.shape)
                keep = (sims >= NEAR_FLOOR) & (found != src)
                a, b = src[keep], found[keep]
                found_a.append(np.minimum(a, b))
                found_b.append(np.maximum(a, b))
                found_s.append(sims[keep])
                full = (sims[:, -1] >= NEAR_FLOOR) & (kk < live)  # its k-th nearest is still close
                if k >= NEAR_CROWD:
                    crowded += rows[full].tolist()
                    break
                rows, vecs, k = rows[full], vecs[full], NEAR_CROWD
        finally:
            h.set_ef(HNSW_EF_SEARCH)
        a = np.concatenate(found_a) if found_a else np.zeros(0, np.int64)
        if not len(a):
            return [], crowded
        b, sim = np.concatenate(found_b), np.concatenate(found_s)
        _, first = np.unique(a * (int(b.max()) + 1) + b, return_index=True)  # a pair found from both ends: once
        return list(zip(a[first].tolist(), b[first].tolist(), sim[first].tolist())), crowded

    def _near_arrays(self, k: int, threshold: float, labels: np.ndarray,
                     verdicts: dict[tuple[int, int], bool] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """`neighbour_arrays`' (nbr, sims) for `threshold` read from the close-pair table: each
        row's `k` nearest at >= threshold, nearest first, -1 (similarity 0) in the slots left; and
        into `verdicts` the texts' recorded verdicts (True: apart), by positions, both orders, when
        they were given by the rules in force (`decide.rules_version`)."""
        n = len(labels)
        nbr = np.full((n, k), -1, np.int64)
        sims = np.zeros((n, k), np.float64)
        a, b, s, apart = self.catalog.near_pairs(threshold)
        (pa, known_a), (pb, known_b) = positions(labels, a), positions(labels, b)
        known = known_a & known_b
        pa, pb, s, apart = pa[known], pb[known], s[known], apart[known]
        if verdicts is not None:
            from memcli.rules.relate import rules_version

            rules = rules_version()
            if rules and self.catalog.meta("pairs_rules") == rules:
                judged = apart >= 0
                for i, j, v in zip(pa[judged].tolist(), pb[judged].tolist(), (apart[judged] == 1).tolist()):
                    verdicts[(i, j)] = verdicts[(j, i)] = v
        row, col, sim = np.concatenate([pa, pb]), np.concatenate([pb, pa]), np.concatenate([s, s])
        order, slot = ranked(row, sim, col)  # row by row, nearest first (ties: by position)
        row, col, sim = row[order], col[order], sim[order]
        top = slot < k
        nbr[row[top], slot[top]] = col[top]
        sims[row[top], slot[top]] = sim[top]
        return nbr, sims

    # ------------------------------------------------------------ queries
    def neighbour_arrays(self, k: int, *, ef: int | None = None, batch: int = 1024,
                         on_batch: Callable[[list[str], int, np.ndarray, np.ndarray], None] | None = None,
                         on_idle: Callable[[], bool] | None = None, threshold: float | None = None,
                         searched: threading.Event | None = None,
                         verdicts: dict[tuple[int, int], bool] | None = None,
                         ) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
        """Every memory's `k` nearest others as arrays: (ids, their vectors, nbr, sims).

        `nbr[i]` holds the positions in `ids` of row i's neighbours, nearest first, -1 where a slot
        is empty (the memory itself, or a label the catalog no longer has); `sims[i]` their cosine
        similarities (float64 holding the graph's float32 values, so a threshold compares as it
        would on Python floats). For curation (near-duplicate groups, contradiction candidates,
        recurring episodes): one approximate kNN pass over the vector index in batches, never an
        n x n matrix, and the callers pick the pairs above a threshold with numpy instead of
        walking every neighbour in Python. `ef` (default `CURATION_EF`) is lower than search's:
        pairs at >= 0.8 cosine are found as an exact kNN finds them.

        `on_batch(ids, start, nbr rows, sims rows)` is called with each batch's rows as soon as
        they are known, while the graph answers the next batch in a thread (hnswlib releases the
        GIL): a caller's Python work on the first rows overlaps the rest of the kNN pass. The
        arrays returned are the same with or without it (each row is converted once, either way).
        With `on_idle`, the graph searches on one thread, leaving the caller's thread a core of its
        own (three busy threads on two cores slowed both), and `on_idle()` is called while the
        next batch is not in yet, until it returns False (nothing more to do for now): work the
        caller can do ahead in small steps, so that its thread is not idle while the graph runs.
        Once the caller is left waiting with nothing to do, the graph takes every core again.

        `threshold`: the caller wants only the neighbours at >= threshold (`merge --auto`'s
        groups); the others are given as -1. From `NEAR_FROM` up, each row is searched first at
        `NEAR_EF`, and again at `ef` only when its last neighbour is close to the threshold or
        above it (a cluster larger than k, whose top k the wide search picks) or its own vector
        was not found: the pairs at >= threshold are those of the pass at `ef` alone, for about
        half of its CPU (see `NEAR_EF`). From `NEAR_FLOOR` up, once the catalog's close-pair table
        is complete, the rows are read from it instead (no search, and no vector is read: the
        vectors returned are an (n, 0) array), and `verdicts` (when given) gets the texts' verdicts
        recorded with the pairs (`decide.texts_mergeable`, True: apart) by pair of positions, before
        `on_batch` is first called.

        `searched` (with `on_batch`) is set as soon as the graph has searched every row, while
        the caller may still be busy with earlier batches: from then on its thread alone is left.
        """
        # the close pairs recorded as the vectors came in (see `NEAR_FLOOR`): no search, no vector read
        table = threshold is not None and threshold >= NEAR_FLOOR and on_idle is None
        with self.catalog.snapshot() if table else contextlib.nullcontext():  # (one state: labels, pairs)
            rows = self.catalog.vector_ids()  # in label order
            labels = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            ids = [r[1] for r in rows]
            table = table and len(rows) >= 2 and self.near_ready() and not self.catalog.near_crowded()
            if table:
                nbr, sims = self._near_arrays(k, threshold, labels, verdicts)  # type: ignore[arg-type]
                if searched is not None:
                    searched.set()
                # (in the same snapshot: the memories the caller reads are those the verdicts judged)
                for i in range(0, len(rows), batch) if on_batch is not None else ():
                    on_batch(ids, i, nbr[i : i + batch], sims[i : i + batch])
        if table:
            return ids, np.zeros((len(rows), 0), np.float32), nbr, sims
        vecs = self.catalog.vectors(labels.tolist())
        h = self.load() if len(rows) else None
        if h is None or len(rows) < 2:
            return ids, vecs, np.full((len(rows), 0), -1, np.int64), np.zeros((len(rows), 0))
        n, kk = len(rows), min(k + 1, len(rows))
        found = np.empty((n, kk), np.int64)
        dists = np.empty((n, kk), np.float32)
        nbr = np.empty((n, kk), np.int64)
        sims = np.empty((n, kk), np.float64)
        wide = max(ef or CURATION_EF, kk)
        # the narrow first search, when only the close neighbours are wanted (see `NEAR_EF`)
        near = [max(NEAR_EF, kk) if threshold is not None and threshold >= NEAR_FROM and NEAR_EF < wide else None]

        def convert(i: int, j: int) -> None:
            """Rows i..j of `found`/`dists` into `nbr` (positions in `ids`, -1: none) and `sims`."""
            f = found[i:j]
            at, known = positions(labels, f)  # labels are sorted: label -> position
            known &= f != labels[i:j, None]
            sims[i:j] = 1.0 - dists[i:j]  # float32 arithmetic, held as float64
            if threshold is not None:
                known &= sims[i:j] >= threshold
            nbr[i:j] = np.where(known, at, -1)

        def query(i: int, threads: int = -1) -> None:
            q = vecs[i : i + batch]
            narrow = near[0]
            h.set_ef(narrow or wide)
            f, d = h.knn_query(q, k=kk, num_threads=threads)
            if narrow is not None:
                # searched again at the wide ef: a row whose k-th neighbour is still close, or nearly (a
                # cluster larger than k, or a crowd, whose top k the wide search picks; compared as
                # `convert` gives the similarity), and a row whose search did not reach its own vector
                # (it went astray in another part of the graph)
                own = (f.astype(np.int64) == labels[i : i + len(f), None]).any(axis=1)
                full = np.nonzero(((1.0 - d[:, -1]).astype(np.float64) >= threshold - NEAR_MARGIN) | ~own)[0]
                if len(full):
                    h.set_ef(wide)
                    f[full], d[full] = h.knn_query(q[full], k=kk, num_threads=threads)
                if len(full) * 2 > len(q):
                    near[0] = None  # most rows need the wide search (large clusters): the rest gets only it
            found[i : i + len(f)], dists[i : i + len(f)] = f, d

        try:
            if on_batch is None:
                for i in range(0, n, batch):
                    query(i)
                convert(0, n)
            else:
                from concurrent.futures import ThreadPoolExecutor

                starts = list(range(0, n, batch))
                # the graph's threads per batch, read as each batch starts (-1: hnswlib's default, every core)
                threads = [1 if on_idle is not None else -1]
                query(starts[0])
                # every batch queued at once on one worker: it searches them in order and never waits
                # for the caller's work on the rows before; leaving the block cancels what has not
                # started (the caller failed) and joins the worker
                pool = ThreadPoolExecutor(max_workers=1)
                try:
                    pending = [pool.submit(lambda i: query(i, threads[0]), i) for i in starts[1:]]
                    if searched is not None:  # (set by the worker after the last batch, or here)
                        if pending:
                            pending[-1].add_done_callback(lambda _: searched.set())
                        else:
                            searched.set()
                    for b, i in enumerate(starts):
                        j = min(i + batch, n)
                        convert(i, j)
                        on_batch(ids, i, nbr[i:j], sims[i:j])
                        if b < len(pending):
                            ahead = pending[b]
                            if on_idle is not None:
                                more = True
                                while more and not ahead.done():
                                    more = on_idle()
                                if not more and not ahead.done():
                                    threads[0] = -1  # the caller waits with nothing to do: every core to the graph
                            ahead.result()  # the next rows are in, or the graph's error is raised here
                finally:
                    pool.shutdown(wait=True, cancel_futures=True)
        finally:
            h.set_ef(HNSW_EF_SEARCH)
        return ids, vecs, nbr, sims

    def knn(self, qvecs: np.ndarray, k: int, allowed: list[int] | None = None) -> list[list[tuple[int, float]]]:
        """Nearest neighbours by cosine for each query row; exact over `allowed` when given."""
        n = self.catalog.count()
        if n == 0 or k <= 0:
            return [[] for _ in range(len(qvecs))]
        if allowed is not None:
            if not allowed:
                return [[] for _ in range(len(qvecs))]
            mat = self.catalog.vectors(allowed)
            sims = qvecs @ mat.T
            out = []
            for row in sims:
                top = np.argsort(-row)[:k]
                out.append([(allowed[i], float(row[i])) for i in top])
            return out
        h = self.load()
        if h is None:
            return [[] for _ in range(len(qvecs))]
        k = min(k, n)
        h.set_ef(max(HNSW_EF_SEARCH, k * 2))
        labels, dists = h.knn_query(qvecs, k=k)
        return [
            [(int(lab), float(1.0 - d)) for lab, d in zip(lrow, drow)] for lrow, drow in zip(labels, dists)
        ]
