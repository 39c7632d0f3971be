"""The one id generator: ULIDs (48-bit milliseconds + 80 random bits, Crockford base32), so every
name sorts in creation order. Standard library only: a git hook spools with it on a < 100 ms budget.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Iterable

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_lock = threading.Lock()
_last = [0, 0]


def new_ulid(at: float | None = None) -> str:
    """A ULID, monotonic within a process: many ids made in the same millisecond still sort in
    the order they were made."""
    ms = int((time.time() if at is None else at) * 1000)
    with _lock:
        if ms == _last[0] or (at is None and ms < _last[0]):
            ms, rand = _last[0], _last[1] + 1
        else:
            rand = int.from_bytes(os.urandom(10), "big")
        _last[:] = [ms, rand]
    return _encode((ms << 80) | (rand & ((1 << 80) - 1)))


def derived_ulid(ms: int, sources: Iterable[str]) -> str:
    """A ULID of `ms` and 80 bits of the SHA-256 of the sorted `sources`: a merge of the same
    memories in two clones gets the same id, so syncing them converges (issue 24)."""
    ms = max(0, ms) & ((1 << 48) - 1)
    digest = hashlib.sha256("\n".join(sorted(set(sources))).encode("utf-8", "surrogateescape")).digest()
    return _encode((ms << 80) | int.from_bytes(digest[:10], "big"))


def _encode(value: int) -> str:
    return "".join(_CROCKFORD[(value >> (5 * i)) & 31] for i in range(25, -1, -1))
