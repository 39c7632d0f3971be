"""The trash as it is listed, and emptying it for good."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memcli.core.memory import Memory, iso
from memcli.core.shortid import short_ids
from memcli.ops.handle import Store


@dataclass
class TrashItem:
    """One trashed memory as `memcli trash` lists it; `short` is its short id among the trash."""

    id: str
    trashed_at: str
    reason: str
    text: str
    short: str

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "trashed_at": self.trashed_at, "reason": self.reason, "text": self.text}


def listing(store: Store) -> list[TrashItem]:
    """What is in the trash, most recently trashed first."""
    items = []
    trashed = store.trashed()
    shorts = short_ids([m.id for m in trashed])
    for m in trashed:
        info = m.extra.get("trashed") if isinstance(m.extra.get("trashed"), dict) else {}
        items.append(TrashItem(m.id, str(info.get("at") or ""), str(info.get("reason") or ""), m.text, shorts[m.id]))
    return sorted(items, key=lambda i: i.trashed_at, reverse=True)


def empty_trash(store: Store, *, older_than: str | None = None, dry_run: bool = False) -> list[Memory]:
    """Delete trashed memories for good: all, or those trashed before `older_than` (ISO, UTC; an
    unreadable trash time is kept). Chosen under the lock that deletes them: a memory restored and
    trashed again meanwhile is judged by its new trash time."""

    def choose() -> list[Memory]:
        return [m for m in store.trashed() if older_than is None or _trashed_before(m, older_than)]

    if dry_run:
        return choose()
    with store.lock():
        chosen = choose()
        purged = set(store.purge_trash([m.id for m in chosen]))
    return [m for m in chosen if m.id in purged]


def _trashed_before(memory: Memory, cutoff: str) -> bool:
    """Whether a trashed memory went to the trash before `cutoff` (ISO, UTC)."""
    try:
        at = iso(str(memory.extra["trashed"].get("at") or ""))
    except ValueError:
        return False
    return at is not None and at < cutoff
