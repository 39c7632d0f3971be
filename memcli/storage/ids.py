"""Ids as people type them and as memcli shows them: short, unique, and always resolvable.

A ULID's first 10 characters are its clock, which the ids of one second (and one `add`) share, so a
short id is the shortest unique *tail*, at least `MIN_ID_CHARS` long (8 characters: 40 random bits).
A reference resolves as the full id, a unique prefix or a unique tail, case-insensitively; an
ambiguous one names its candidates, and a trashed one says how to bring it back.
"""

from __future__ import annotations

from collections.abc import Iterable

from memcli.core.errors import NotFound
from memcli.core.shortid import is_ulid, shortest_tail
from memcli.core.text import MIN_ID_CHARS, clip, shortest_prefix

__all__ = ["IdError", "resolve", "resolve_trashed", "short_ids"]
MIN_TAIL_REF = 4  # a typed reference shorter than this is matched as a prefix only
MAX_ID_CHARS = 128  # ids are file names of at most 128 characters (core.memory.valid_id)
MAX_CANDIDATES = 10  # fetched to tell one match from several; the hint names five


class IdError(NotFound):
    """An id that does not resolve (unknown, ambiguous, trashed); `hint` says what to do."""


def _candidates(index: object, ref: str, limit: int) -> tuple[list[tuple[str, str]], bool]:
    """(id, text) of the memories whose id starts or ends with `ref`, and whether there may be more
    than `limit`."""
    p = ref.strip().upper()
    if not p:
        return [], False
    heads = index.with_prefix(p, limit)  # type: ignore[attr-defined]
    tails = index.with_suffix(p, limit) if len(p) >= MIN_TAIL_REF else []  # type: ignore[attr-defined]
    return sorted(dict([*heads, *tails]).items()), len(heads) >= limit or len(tails) >= limit


def _trash_matches(store: object, ref: str) -> list[str]:
    p = ref.strip().upper()
    trash = store.trash_dir  # type: ignore[attr-defined]
    if not p or not trash.is_dir():
        return []
    return [i for i in sorted(f.stem for f in trash.glob("*.md"))
            if i.upper().startswith(p) or (len(p) >= MIN_TAIL_REF and i.upper().endswith(p))]


def _checked(ref: str) -> str:
    """`ref` stripped; an empty or impossible one is an IdError at once, without a query (a
    100,000-character id is answered as fast as a short one)."""
    r = ref.strip() if isinstance(ref, str) else ""
    if not r:
        raise IdError("no memory id given", hint="memcli list shows the ids")
    if len(r) > MAX_ID_CHARS:
        raise IdError(f"no memory with id {clip(r, 40)} (ids are at most {MAX_ID_CHARS} characters)")
    return r


def resolve(store: object, ref: str) -> str:
    """The full id of a memory from its id, a unique prefix or a unique tail; else IdError."""
    index = store.index  # type: ignore[attr-defined]
    r = _checked(ref)
    if index.has_id(r):
        return r
    found, more = _candidates(index, r, MAX_CANDIDATES + 1)
    if len(found) == 1:
        return found[0][0]
    if found:
        shown = found[:5]
        listing = "; ".join(f"{mid} {clip(text, 30)}" for mid, text in shown)
        n = f"more than {len(found) - 1}" if more else str(len(found))
        rest = f"; and {len(found) - len(shown)}{'+' if more else ''} more" if len(found) > len(shown) else ""
        raise IdError(f"id {r} is ambiguous: it matches {n} memories", hint=f"candidates: {listing}{rest}")
    in_trash = _trash_matches(store, r)
    if len(in_trash) == 1:
        raise IdError(f"memory {in_trash[0]} is in the trash", hint=f"memcli restore {in_trash[0]}")
    raise IdError(f"no memory with id {r}", hint="memcli list shows the ids; memcli trash shows the trash"
                  if not in_trash else f"several trashed memories match: {', '.join(in_trash[:5])}")


def resolve_trashed(store: object, ref: str) -> str:
    """The full id of a trashed memory from its id, a unique prefix or a unique tail."""
    r = _checked(ref)
    matches = _trash_matches(store, r)
    exact = [i for i in matches if i.upper() == r.upper()]
    if exact:
        return exact[0]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise IdError(f"id {r} is ambiguous in the trash: {len(matches)} memories match",
                      hint=f"candidates: {', '.join(matches[:MAX_CANDIDATES])}")
    if _candidates(store.index, r, 1)[0]:  # type: ignore[attr-defined]
        raise IdError(f"memory {r} is not in the trash (it is in the store)", hint=f"memcli show {r}")
    raise IdError(f"no memory with id {r} in the trash", hint="memcli trash lists the trash")


def short_ids(store: object, ids: Iterable[str], minimum: int = MIN_ID_CHARS) -> dict[str, str]:
    """The short id of each of `ids`: one catalog scan for the ULIDs (the ids sharing their first or
    last `minimum` characters with one of them), two indexed lookups for any other id."""
    index = store.index  # type: ignore[attr-defined]
    wanted = list(dict.fromkeys(ids))
    ulids = [i for i in wanted if is_ulid(i)]
    out: dict[str, str] = {}
    if ulids:
        pool = index.ids_sharing([u.upper()[-minimum:] for u in ulids], minimum)
        by_tail: dict[str, list[str]] = {}
        for o in pool:
            for key in {o.upper()[-minimum:], o.upper()[:minimum]}:
                by_tail.setdefault(key, []).append(o)
        for mid in ulids:
            out[mid] = shortest_tail(mid, by_tail.get(mid.upper()[-minimum:], ()), minimum)
    for mid in wanted:
        if mid not in out:
            out[mid] = shortest_prefix(mid, index.id_neighbours(mid), minimum)
    return out
