"""Emptying the trash: memories deleted for good, chosen under the writer lock that deletes them.

The trash is the one place a memory leaves for good, so the choice (all of it, or what was trashed
before a time) is made under the lock: a memory restored and trashed again meanwhile is judged by
its new trash time, never purged on the strength of its old one.
"""

from __future__ import annotations

from memcli.core.memory import Memory, iso
from memcli.ops.handle import Store


def empty_trash(store: Store, *, older_than: str | None = None, dry_run: bool = False) -> list[Memory]:
    """Delete trashed memories for good: all of them, or those trashed before `older_than` (ISO,
    UTC; one whose trash time cannot be read is kept). Returns them as they were in the trash;
    `dry_run` deletes nothing."""

    def choose() -> list[Memory]:
        return [m for m in store.trashed() if older_than is None or _trashed_before(m, older_than)]

    if dry_run:
        return choose()
    with store.lock():
        chosen = choose()
        purged = set(store.purge_trash([m.id for m in chosen]))
    return [m for m in chosen if m.id in purged]


def _trashed_before(memory: Memory, cutoff: str) -> bool:
    """Whether a trashed memory (`Files.trashed`) went to the trash before `cutoff` (ISO, UTC)."""
    try:
        at = iso(str(memory.extra["trashed"].get("at") or ""))
    except ValueError:
        return False
    return at is not None and at < cutoff
