"""Short ids of ULIDs, as pure string functions (the store-aware part is memcli/storage/ids.py).

A ULID's first 10 characters are a clock that ids share, its last 16 random: a short id is the
shortest tail (at least `MIN_ID_CHARS`) that no other id ends or starts with.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from memcli.core.text import MIN_ID_CHARS, shortest_prefix  # MIN_ID_CHARS: 40 random bits of a ULID

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


def short_ids(ids: Sequence[str], universe: Iterable[str] | None = None, minimum: int = MIN_ID_CHARS) -> dict[str, str]:
    """Short ids for `ids`, unique among `universe` (default: `ids`), at least `minimum` long: for
    lists that are not in the catalog (the trash). A ULID gets its shortest tail, another id its
    shortest prefix."""
    pool = sorted({i.upper() for i in (universe if universe is not None else ids)} | {i.upper() for i in ids})
    pos = {u: n for n, u in enumerate(pool)}
    by_key: dict[str, list[str]] = {}
    for o in pool:
        for key in {o[-minimum:], o[:minimum]}:
            by_key.setdefault(key, []).append(o)
    out: dict[str, str] = {}
    for i in ids:
        if is_ulid(i):
            out[i] = shortest_tail(i, by_key.get(i.upper()[-minimum:], ()), minimum)
            continue
        n = pos[i.upper()]
        near = [pool[j] for j in (n - 1, n + 1) if 0 <= j < len(pool)]
        out[i] = shortest_prefix(i, near, minimum)
    return out
