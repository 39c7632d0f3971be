"""What an agent is handed (`memcli context`, MCP reads): what `search` shows, no superseded memory,
and a pair flagged as contradicting each other as one item with its conflict ("unresolved: A or B"),
never as two facts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memcli.core.memory import Memory
    from memcli.ops.handle import Store

CONTRADICTS = "contradicts"


@dataclass
class Item:
    """One thing to hand over: a memory, and the current memories it is flagged as contradicting."""

    memory: Memory
    score: float | None = None
    conflicts: list[Memory] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.memory.id


def _contradicted(m: Memory) -> list[str]:
    return [str(lk.get("id")) for lk in m.links
            if isinstance(lk, dict) and lk.get("rel") == CONTRADICTS and lk.get("id")]


def visible(store: Store, records: Iterable[Memory], scores: Iterable[float | None] | None = None) -> list[Item]:
    """`records` (best first) as an agent may see them; the other side of a contradiction is looked
    up when it is not among them (a disputed memory is never handed over as settled)."""
    recs = list(records)
    score_list = list(scores) if scores is not None else [None] * len(recs)
    current = [(m, s) for m, s in zip(recs, score_list) if not m.superseded_by]
    wanted = {o for m, _ in current for o in _contradicted(m)} - {m.id for m, _ in current}
    others = {mid: m for mid, (m, _) in store.index.catalog_entries(wanted).items()} if wanted else {}
    by_id = {m.id: m for m, _ in current}
    out: list[Item] = []
    folded: set[str] = set()
    for m, s in current:
        if m.id in folded:
            continue
        item = Item(m, s)
        for oid in _contradicted(m):
            other = by_id.get(oid) or others.get(oid)
            if other is None or other.superseded_by or oid in folded:
                continue
            item.conflicts.append(other)
            folded.add(oid)
        folded.add(m.id)
        out.append(item)
    return out
