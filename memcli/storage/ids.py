"""Ids as people type them and as memcli shows them: short, unique, and always resolvable.

A memory id is a ULID: 10 characters of millisecond clock, then 16 random ones. The clock part
is what ids share (every memory of one second starts with the same 8 characters, and the facts of
one `add` are monotonic ULIDs that share 25 of 26), so a short id is taken from the *random* end:
the shortest tail, at least `MIN_ID_CHARS` long, that no other memory's id ends or starts with
(git's abbreviated-sha habit, applied to the part of the id that is actually random). Eight
characters are 40 random bits: unambiguous in any store a person keeps.

What resolves: the full id, a unique prefix (the old habit, and ids that are not ULIDs), or a
unique tail (what listings, search, context and MCP show), case-insensitively. An ambiguous one
names its candidates; a trashed id is told apart from an unknown one, with the command that
brings it back.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from memcli.core.errors import NotFound
from memcli.core.shortid import is_ulid, shortest_tail
from memcli.core.text import MIN_ID_CHARS, shortest_prefix

__all__ = ["MIN_ID_CHARS", "IdError", "is_ulid", "resolve", "resolve_trashed", "short_id", "short_ids"]
MIN_TAIL_REF = 4  # a typed reference shorter than this is matched as a prefix only
MAX_ID_CHARS = 128  # ids are file names of at most 128 characters (core.memory.valid_id)
MAX_CANDIDATES = 10  # fetched to tell one match from several; the hint names five


class IdError(NotFound):
    """An id that does not resolve (unknown, ambiguous, trashed); `hint` says what to do."""


@dataclass
class Candidate:
    id: str
    text: str


def _clip(text: str, width: int) -> str:
    one = " ".join(text.split())
    return one if len(one) <= width else one[: width - 1] + "…"


def _candidates(index: object, ref: str, limit: int) -> tuple[list[Candidate], bool]:
    """Memories whose id starts or ends with `ref`, and whether there may be more than `limit`."""
    p = ref.strip().upper()
    if not p:
        return [], False
    heads = index.with_prefix(p, limit)  # type: ignore[attr-defined]
    tails = index.with_suffix(p, limit) if len(p) >= MIN_TAIL_REF else []  # type: ignore[attr-defined]
    found = {mid: Candidate(mid, text) for mid, text in (*heads, *tails)}
    return sorted(found.values(), key=lambda c: c.id), len(heads) >= limit or len(tails) >= limit


def trashed_ids(store: object) -> list[str]:
    trash = store.trash_dir  # type: ignore[attr-defined]
    return sorted(p.stem for p in trash.glob("*.md")) if trash.is_dir() else []


def _trash_matches(store: object, ref: str) -> list[str]:
    p = ref.strip().upper()
    if not p:
        return []
    return [i for i in trashed_ids(store)
            if i.upper().startswith(p) or (len(p) >= MIN_TAIL_REF and i.upper().endswith(p))]


def _checked(ref: str) -> str:
    """`ref` stripped; an empty or impossible one (longer than any id) is an IdError at once,
    without a query: a 100,000-character id is answered as fast as a short one."""
    r = ref.strip() if isinstance(ref, str) else ""
    if not r:
        raise IdError("no memory id given", hint="memcli list shows the ids")
    if len(r) > MAX_ID_CHARS:
        raise IdError(f"no memory with id {_clip(r, 40)} (ids are at most {MAX_ID_CHARS} characters)")
    return r


def resolve(store: object, ref: str) -> str:
    """The full id of a memory in the store from its id, a unique prefix or a unique tail;
    IdError otherwise (ambiguous: the candidates; in the trash: how to restore it; unknown: say so)."""
    index = store.index  # type: ignore[attr-defined]
    r = _checked(ref)
    if index.has_id(r):
        return r
    found, more = _candidates(index, r, MAX_CANDIDATES + 1)
    if len(found) == 1:
        return found[0].id
    if found:
        shown = found[:5]
        listing = "; ".join(f"{c.id} {_clip(c.text, 30)}" for c in shown)
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
    """The short id of each of `ids` (see the module docstring): one scan of the catalog for the
    ULIDs (the ids that share their last or first `minimum` characters with one of them), two
    indexed lookups for any other id."""
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


def short_id(store: object, mid: str) -> str:
    return short_ids(store, [mid])[mid]
