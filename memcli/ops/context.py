"""`memcli context`: a compact Markdown block of what a coding agent should know at session start:
the project's memories (or those relevant to a query), rules and how-tos first, one line each, cut
to a token budget. Showing a memory here does not count as using it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memcli.core.text import clip
from memcli.index import Filters
from memcli.ops.visible import Item, visible
from memcli.storage.ids import short_ids

if TYPE_CHECKING:
    from memcli.ops.handle import Store

CHARS_PER_TOKEN = 4  # the usual rule of thumb for English and code
MAX_ITEM_CHARS = 400
_TYPE_ORDER = {"procedural": 0, "semantic": 1, "episodic": 2}


def select(store: Store, query: str | None, project: str | None, limit: int = 60) -> list[Item]:
    """Candidates, best first: search hits for a query, else the project's memories (procedural
    first, then the latest); the whole store when the project has none (a new repository)."""
    index = store.index
    index.sync()
    scopes = [Filters(project=project, current=True), Filters(current=True)] if project else [Filters(current=True)]
    for filters in scopes:
        if query:
            from memcli.ops.search import search_many

            hits = search_many(store, [query], k=min(limit, 50), filters=filters, record_usage=False,
                               sync=False)[0].hits
            records = [h.memory for h in hits]
        else:
            records = index.select(filters, order="updated", desc=True, limit=limit * 4)
            records.sort(key=lambda r: _TYPE_ORDER.get(r.type, 3))
            records = records[:limit]
        items = visible(store, records)
        if items:
            return items
    return []


def _line(item: Item, shorts: dict[str, str]) -> str:
    r = item.memory
    if not item.conflicts:
        return f"- {clip(r.text, MAX_ITEM_CHARS)} ({r.type}, {str(r.created)[:10]}, `{shorts[r.id]}`)"
    sides = [r, *item.conflicts]
    said = " — or — ".join(f"{clip(m.text, MAX_ITEM_CHARS // len(sides))} (`{shorts[m.id]}`)" for m in sides)
    return f"- UNRESOLVED, flagged as contradicting (ask which holds): {said}"


def render(records: list[Item], *, project: str | None, query: str | None, budget: int,
           shorts: dict[str, str] | None = None) -> str:
    """Markdown within `budget` tokens (empty when there is nothing to say); `shorts`: the ids shown."""
    if not records:
        return ""
    shorts = shorts or {m.id: m.id for it in records for m in (it.memory, *it.conflicts)}
    head = f"## What memcli remembers{f' about {project}' if project else ''}"
    if query:
        head += f" (for: {clip(query, 80)})"
    lines = [head, ""]
    used = len(head) + 2
    cap = max(budget, 0) * CHARS_PER_TOKEN
    shown = 0
    more = "- … {n} more: `memcli search` or the memcli MCP tools"
    for i, r in enumerate(records):
        line = _line(r, shorts)
        reserve = 0 if i == len(records) - 1 else len(more) + 6  # room to say that more exist
        if used + len(line) + 1 + reserve > cap:
            break
        lines.append(line)
        used += len(line) + 1
        shown += 1
    if not shown:
        return ""
    if shown < len(records):
        lines.append(more.format(n=len(records) - shown))
    return "\n".join(lines) + "\n"


def build(store: Store, query: str | None = None, *, project: str | None = None, budget: int = 1500) -> str:
    items = select(store, query, project)
    shorts = short_ids(store, [m.id for it in items for m in (it.memory, *it.conflicts)])
    return render(items, project=project, query=query, budget=budget, shorts=shorts)
