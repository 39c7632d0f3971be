"""The index: the sidecar in `.index/`, derived from `facts/` and rebuildable at any time.

`catalog` (the SQLite rows and every query), `vectors` (the hnswlib graph, saved in generations),
`keyword` (BM25, kept in the catalog) and `sync` (in step with `facts/`), put together by `Index`.
Only ids, labels, `Memory` objects, `RankFields` and vectors cross this package's boundary: nobody
outside runs SQL against the catalog (tests/test_layering.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from memcli.core.errors import IndexUnavailable
from memcli.core.memory import Memory
from memcli.index.catalog import SCHEMA_VERSION, SORT_KEYS, Catalog, Filters, RankFields, fts_body
from memcli.index.sync import Sync, SyncReport
from memcli.index.vectors import HNSW_EF_CONSTRUCTION, HNSW_EF_SEARCH, HNSW_M, Vectors
from memcli.services.embed import Embedder
from memcli.storage.files import Files

__all__ = [
    "HNSW_EF_CONSTRUCTION", "HNSW_EF_SEARCH", "HNSW_M", "SCHEMA_VERSION", "SORT_KEYS", "Filters", "Index",
    "IndexError_", "RankFields", "SyncReport", "fts_body",
]

IndexError_ = IndexUnavailable  # the old name


class Index(Catalog):
    """The sidecar of one store: its catalog (the reads), with the vector graph and the sync.
    Opened lazily; `sync()` before reading."""

    def __init__(self, store: Files) -> None:
        store.guard()  # a store holding a link out of it is refused before its sidecar opens
        super().__init__(store, dim=lambda: self.embedder.dim)
        self._embedder: Embedder | None = None
        self.vec = Vectors(self, dim=lambda: self.embedder.dim)
        self._sync = Sync(store, self, self.vec, lambda: self.embedder)

    @property
    def embedder(self) -> Embedder:
        """The store's embedding model, loaded on first use (a sync that embeds nothing never loads it)."""
        if self._embedder is None:
            self._embedder = Embedder(self.store.config.embed_model)
        return self._embedder

    @embedder.setter
    def embedder(self, value: Embedder) -> None:
        self._embedder = value

    @property
    def synced(self) -> bool:
        """This process has synced the sidecar at least once (a later read need not sync again)."""
        return self._sync.synced

    def close(self) -> None:
        super().close()
        if self._embedder is not None:
            self._embedder.close()

    def sync(
        self, on_progress: Callable[[int, int], None] | None = None, *, force: bool = False,
        fresh: dict[str, Memory] | None = None,
    ) -> SyncReport:
        """See `Sync.sync`."""
        return self._sync.sync(on_progress, force=force, fresh=fresh)

    def apply_files(self, fresh: dict[str, Memory], gone: Iterable[str], *,
                    signatures: Mapping[str, tuple[int, int]] | None = None,
                    vectors: Mapping[str, np.ndarray] | None = None,
                    provisional: Mapping[str, str] | None = None,
                    before_commit: Callable[[], object] | None = None) -> SyncReport:
        """See `Sync.apply_files`."""
        return self._sync.apply_files(fresh, gone, signatures=signatures, vectors=vectors,
                                      provisional=provisional, before_commit=before_commit)

    def refresh_provisional(self, on_progress: Callable[[int, int], None] | None = None) -> int:
        """See `Sync.refresh_provisional`."""
        return self._sync.refresh_provisional(on_progress)

    def neighbour_arrays(self, k: int, *, ef: int | None = None, batch: int = 1024,
                         threshold: float | None = None) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
        """See `Vectors.neighbour_arrays`."""
        return self.vec.neighbour_arrays(k, ef=ef, batch=batch, threshold=threshold)

    def knn(self, qvecs: np.ndarray, k: int, allowed: list[int] | None = None) -> list[list[tuple[int, float]]]:
        """See `Vectors.knn`."""
        return self.vec.knn(qvecs, k, allowed)

    def keyword(
        self, terms: list[str], k: int, postings: dict[str, Any] | None = None
    ) -> list[tuple[int, float, float]]:
        """See `KeywordIndex.search`: (label, bm25, coverage) of the top `k`."""
        return self.kw.search(terms, k, postings)
