"""Short ids of ULIDs, as pure string functions (the store-aware part is memcli/storage/ids.py;
`shortest_prefix`, for other ids, is in memcli/core/text.py).

A ULID's first 10 characters are a millisecond clock that ids share; its last 16 are random. A
short id is the shortest tail (at least `MIN_ID_CHARS`) that no other id ends or starts with.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from memcli.core.text import MIN_ID_CHARS  # the shortest id shown: 40 random bits of a ULID

_ULID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")


def is_ulid(mid: str) -> bool:
    return _ULID.fullmatch(mid.upper()) is not None


def shortest_tail(mid: str, others: Iterable[str], minimum: int = MIN_ID_CHARS) -> str:
    """The shortest tail of `mid` (at least `minimum` characters) that no other id ends or
    starts with, case-insensitively; the whole id when none is."""
    u = mid.upper()
    rivals = [o.upper() for o in others if o.upper() != u]
    for n in range(minimum, len(u)):
        tail = u[-n:]
        if not any(o.endswith(tail) or o.startswith(tail) for o in rivals):
            return mid[-n:]
    return mid
