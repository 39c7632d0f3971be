"""The handle the operations take: a store's files (`memcli.storage.files`) and its sidecar index.
The public `memcli.Store` holds one rather than being one (no public `write` or `lock`).
"""

from __future__ import annotations

import os

from memcli.core.config import Config
from memcli.index import Index
from memcli.storage.files import Files


class Store(Files):
    """A memcli store directory and its index. Cheap to construct; nothing is read until needed."""

    def __init__(self, path: str | os.PathLike[str], config: Config | None = None) -> None:
        super().__init__(path, config)
        self._index: Index | None = None

    @property
    def index(self) -> Index:
        """The sidecar (`.index/`), opened on first use; call `index.sync()` before reading."""
        if self._index is None:
            self._index = Index(self)
        return self._index

    def close(self) -> None:
        """Close the index's connections."""
        if self._index is not None:
            self._index.close()
            self._index = None
