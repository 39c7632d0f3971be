"""The vector half of the sidecar: an hnswlib graph over the catalog's vectors, saved in generations.

The catalog holds every vector; the graph is derived. Each save writes `vectors-<gen>.hnsw` under
a new name, recorded in the same SQLite transaction as the rows it indexes, so a reader never loads
a file that disagrees with the catalog (the one before is kept for a reader still opening it). A
missing or unreadable file is rebuilt from the catalog. The graph's ids are the catalog's labels.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from memcli.index.catalog import VECTOR_FILE, Catalog
from memcli.storage import safety

HNSW_M = 16
HNSW_EF_CONSTRUCTION = 200
HNSW_EF_SEARCH = 512  # at least (max(this, 2k) for k neighbours): recall@10 0.987 at 100k (docs/performance.md)
CURATION_EF = 48  # curation's kNN pass: at >= 0.8 cosine it finds an exact kNN's pairs (docs/performance.md)


def positions(labels: np.ndarray, found: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each of `found` (labels) is in the sorted `labels`, and whether it is there at all."""
    at = np.minimum(np.searchsorted(labels, found), len(labels) - 1)
    return at, labels[at] == found


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
        """Whether the graph holds more tombstones than worth keeping beside `live` vectors (then
        `rebuild` rather than `insert`)."""
        deleted = h.element_count - live
        return bool(deleted > max(1000, h.element_count // 2))

    def rebuild(self) -> Any:
        """A compact graph built from the catalog's vectors (the caller's rows included)."""
        self.forget()
        self.catalog.set_meta(hnsw_file="")
        return self.load(create=True)

    def insert(self, h: Any, vecs: np.ndarray, labels: list[int]) -> None:
        """Put `vecs` under `labels` into `h`, replacing a label already there. No catalog access: a
        commit runs this in a thread while it writes its rows (hnswlib releases the GIL)."""
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

    # ------------------------------------------------------------ queries
    def neighbour_arrays(self, k: int, *, ef: int | None = None, batch: int = 1024,
                         threshold: float | None = None) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
        """Curation's one approximate kNN pass, `batch` rows a query (never an n x n matrix): every
        memory's `k` nearest others as (ids, vectors, nbr, sims). `nbr[i]` holds the positions in
        `ids` of row i's neighbours, nearest first, -1 for an empty slot (itself, a label gone, below
        `threshold`); `sims[i]` their cosines (float64 holding the graph's float32 values)."""
        rows = self.catalog.vector_ids()  # in label order
        labels = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        ids = [r[1] for r in rows]
        vecs = self.catalog.vectors(labels.tolist())
        h = self.load() if len(rows) >= 2 else None
        if h is None:
            return ids, vecs, np.full((len(rows), 0), -1, np.int64), np.zeros((len(rows), 0))
        found, dists = self._search(h, vecs, min(k + 1, len(rows)), ef or CURATION_EF, batch)
        nbr, sims = _to_positions(labels, found, dists, threshold)
        return ids, vecs, nbr, sims

    @staticmethod
    def _search(h: Any, vecs: np.ndarray, k: int, ef: int, batch: int) -> tuple[np.ndarray, np.ndarray]:
        """The graph's `k` nearest labels of each row of `vecs` and their distances, `batch` at a time."""
        found = np.empty((len(vecs), k), np.int64)
        dists = np.empty((len(vecs), k), np.float32)
        h.set_ef(max(ef, k))
        try:
            for i in range(0, len(vecs), batch):
                f, d = h.knn_query(vecs[i : i + batch], k=k)
                found[i : i + len(f)], dists[i : i + len(f)] = f, d
        finally:
            h.set_ef(HNSW_EF_SEARCH)
        return found, dists

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


def _to_positions(labels: np.ndarray, found: np.ndarray, dists: np.ndarray, threshold: float | None,
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The graph's answer as positions in the sorted `labels` (-1 as in `neighbour_arrays`) and cosines."""
    at, known = positions(labels, found)
    known &= found != labels[:, None]
    sims = (1.0 - dists).astype(np.float64)  # float32 arithmetic, held as float64
    if threshold is not None:
        known &= sims >= threshold
    return np.where(known, at, -1), sims
