"""Ids as people type them: unique prefixes (like git's short hashes), in the store or in the trash.

A prefix resolves case-insensitively; an ambiguous one names its candidates (id and the start of
the text) so the user can pick; a trashed id is told apart from an unknown one, with the command
that brings it back. Short ids shown in listings are the shortest prefixes that resolve, at least
eight characters.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from memcli.core.errors import NotFound
from memcli.core.text import MIN_ID_CHARS, clip, shortest_prefix

MAX_CANDIDATES = 10  # fetched to tell one match from several; the hint names five


class IdError(NotFound):
    """An id that does not resolve (unknown, ambiguous, trashed); `hint` says what to do."""


@dataclass
class Candidate:
    id: str
    text: str


def _candidates(index: object, prefix: str, limit: int) -> list[Candidate]:
    p = prefix.strip().upper()
    if not p:
        return []
    return [Candidate(mid, text) for mid, text in index.with_prefix(p, limit)]  # type: ignore[attr-defined]


def trashed_ids(store: object) -> list[str]:
    trash = store.trash_dir  # type: ignore[attr-defined]
    return sorted(p.stem for p in trash.glob("*.md")) if trash.is_dir() else []


def _trash_matches(store: object, prefix: str) -> list[str]:
    p = prefix.strip().upper()
    return [i for i in trashed_ids(store) if p and i.upper().startswith(p)]


def resolve(store: object, prefix: str) -> str:
    """The full id of a memory in the store from its id or a unique prefix; IdError otherwise
    (ambiguous: the candidates; in the trash: how to restore it; unknown: say so)."""
    index = store.index  # type: ignore[attr-defined]
    if index.has_id(prefix):
        return prefix
    found = _candidates(index, prefix, MAX_CANDIDATES + 1)
    if len(found) == 1:
        return found[0].id
    if found:
        p = prefix.strip().upper()
        n = index.count_prefix(p)
        shown = found[:5]
        listing = "; ".join(f"{c.id} {clip(c.text, 30)}" for c in shown)
        more = f"; and {n - len(shown)} more" if n > len(shown) else ""
        raise IdError(f"id prefix {prefix} is ambiguous: it matches {n} memories",
                      hint=f"candidates: {listing}{more}")
    in_trash = _trash_matches(store, prefix)
    if len(in_trash) == 1:
        raise IdError(f"memory {in_trash[0]} is in the trash", hint=f"memcli restore {in_trash[0]}")
    raise IdError(f"no memory with id {prefix}", hint="memcli list shows the ids; memcli trash shows the trash"
                  if not in_trash else f"several trashed memories match: {', '.join(in_trash[:5])}")


def resolve_trashed(store: object, prefix: str) -> str:
    """The full id of a trashed memory from its id or a unique prefix."""
    matches = _trash_matches(store, prefix)
    exact = [i for i in matches if i.upper() == prefix.strip().upper()]
    if exact:
        return exact[0]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise IdError(f"id prefix {prefix} is ambiguous in the trash: {len(matches)} memories match",
                      hint=f"candidates: {', '.join(matches[:MAX_CANDIDATES])}")
    index = store.index  # type: ignore[attr-defined]
    if _candidates(index, prefix, 1):
        raise IdError(f"memory {prefix} is not in the trash (it is in the store)", hint=f"memcli show {prefix}")
    raise IdError(f"no memory with id {prefix} in the trash", hint="memcli trash lists the trash")


def short_ids(store: object, ids: Iterable[str], minimum: int = MIN_ID_CHARS) -> dict[str, str]:
    """Shortest unique prefixes (>= `minimum` chars) among the store's memories, from each id's
    neighbours in the catalog's id order: two indexed lookups an id, whatever the store's size."""
    index = store.index  # type: ignore[attr-defined]
    out = {}
    for mid in ids:
        out[mid] = shortest_prefix(mid, index.id_neighbours(mid), minimum)
    return out
