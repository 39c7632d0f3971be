"""The version chain of one memory (`memcli show --history`), oldest first: the memories linked by
`supersedes` / `superseded_by` (a changed value) and the earlier texts in each one's `history`.
"""

from __future__ import annotations

from typing import Any

from memcli.core.errors import NotFound
from memcli.core.memory import Memory


def chain(store: Any, memory: Memory) -> list[dict[str, Any]]:
    """Steps `{id, event, at, text, current}` from the oldest version to the newest."""
    seen = {memory.id}
    first = memory
    while (prev := _supersedes(first)) and prev not in seen:  # back to the oldest
        try:
            first = store.read(str(prev))
        except NotFound:
            break
        seen.add(first.id)
    steps: list[dict[str, Any]] = []
    m: Memory | None = first
    visited: set[str] = set()
    while m is not None and m.id not in visited:
        visited.add(m.id)
        for h in m.history:
            if isinstance(h, dict) and h.get("old"):
                steps.append({"id": h.get("id") or m.id, "event": str(h.get("event", "UPDATE")),
                              "at": h.get("at"), "text": str(h["old"]), "current": False})
        newer = m.superseded_by
        steps.append({"id": m.id, "event": "SUPERSEDED" if newer else "CURRENT", "at": m.updated,
                      "text": m.text, "current": not newer})
        try:
            m = store.read(str(newer)) if newer else None
        except NotFound:
            m = None
    return steps


def _supersedes(m: Memory) -> str | None:
    """The memory `m` replaced: `supersedes` (set by add) or a `supersedes` link (consolidate)."""
    if m.extra.get("supersedes"):
        return str(m.extra["supersedes"])
    return next((str(lk["id"]) for lk in m.links if isinstance(lk, dict) and lk.get("rel") == "supersedes"), None)
