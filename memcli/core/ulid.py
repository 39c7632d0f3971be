"""The one id generator: ULIDs (a 48-bit millisecond timestamp + 80 random bits, Crockford base32).

Memories, inbox items and anything else memcli names by time use it, so every name sorts in
creation order. Standard library only: a git hook spools an input with it on a < 100 ms budget.
"""

from __future__ import annotations

import os
import threading
import time

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
    value = (ms << 80) | (rand & ((1 << 80) - 1))
    return "".join(_CROCKFORD[(value >> (5 * i)) & 31] for i in range(25, -1, -1))
