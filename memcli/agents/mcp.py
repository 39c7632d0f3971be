"""`memcli mcp`: a long-lived stdio MCP server, so an agent's recall costs milliseconds, not a start-up.

Built on the official `mcp` Python SDK (its high-level server: `MCPServer` in mcp 2.x, `FastMCP`
in 1.x). The store, its index and the embedding model are loaded once; every call then runs on
one worker thread (SQLite connections and hnswlib are not shared across threads), so calls are
serialised and never see a half-updated index.

Hand edits, other memcli processes and git pulls between calls are seen: before each call the
`facts/` directory's mtime is compared with the last sync (a rename, a new or deleted file: synced
at once), and a full sync (which also catches a file edited in place) runs at least every
`FULL_SYNC_SECONDS`. stdout belongs to the protocol: nothing else is ever printed there.
"""

from __future__ import annotations

import asyncio
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any, Literal

from pydantic import Field

from memcli.api import Store
from memcli.core.memory import Memory as Record

FULL_SYNC_SECONDS = 2.0

INSTRUCTIONS = """\
memcli is the long-term memory of this developer and their projects: decisions, conventions,
commands, gotchas and facts from earlier sessions, commits and notes. Use `recall` before you
answer a question about how this project or its team does something, or before you repeat work
that may have been done; use `remember` when the user states a lasting fact, decision or rule
(not for chit-chat, questions, or things true only for this task). Each memory has an id; cite it
when you rely on it, and correct a wrong one with `forget` (and `remember` the right version)."""


class Memory:
    """The store behind the tools: one Store, synced cheaply before each call."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._facts_mtime: int | None = None
        self._last_full = 0.0

    def warm(self) -> None:
        """Load the model and the index now, not on the agent's first question."""
        self.store.index.sync()
        self.store.index.embedder.embed(["warm up"])
        self._mark()

    def _mark(self) -> None:
        self._facts_mtime = self._dir_mtime()
        self._last_full = time.monotonic()

    def _dir_mtime(self) -> int | None:
        try:
            return os.stat(self.store.facts_dir).st_mtime_ns
        except FileNotFoundError:
            return None

    def fresh(self) -> Store:
        """Sync with what changed on disk since the last call (see the module docstring)."""
        if self._dir_mtime() != self._facts_mtime or time.monotonic() - self._last_full >= FULL_SYNC_SECONDS:
            self.store.index.sync()
            self._mark()
        return self.store

    def after_write(self) -> None:
        self.store.index.sync()
        self._mark()

    def short_id(self, mid: str) -> str:
        """The shortest prefix (8 characters or more) that names only this memory."""
        index = self.store.index
        for n in (8, 10, 12, 16):
            try:
                if index.resolve_id(mid[:n]) == mid:
                    return mid[:n]
            except LookupError:
                continue
        return mid

    def resolve(self, ref: str) -> str:
        try:
            return self.store.index.resolve_id(ref.strip())
        except LookupError as e:
            raise ValueError(str(e.args[0]) if e.args else f"no memory {ref!r}") from None

    def brief(self, rec: Record, score: float | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.short_id(rec.id), "date": str(rec.created)[:10],
                               "text": rec.text, "origins": list(rec.origins)}
        if rec.tags:
            out["tags"] = list(rec.tags)
        if score is not None:
            out["score"] = round(score, 3)
        return out


def build_server(store: Store, *, warm: bool = True) -> Any:
    """The MCP server for `store` (not started)."""
    try:
        from mcp.server.mcpserver import MCPServer as Server
    except ImportError:  # mcp 1.x
        from mcp.server.fastmcp import FastMCP as Server

    mem = Memory(store)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memcli-store")
    if warm:
        pool.submit(mem.warm)  # loads while the client connects; calls queue behind it

    async def run(fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)

    server = Server("memcli", instructions=INSTRUCTIONS)

    @server.tool(description=(
        "Store something worth remembering across sessions: a decision, convention, command, fix or fact "
        "about this project or its people. memcli splits the text into facts, skips chit-chat and questions, "
        "and for each fact decides ADD (new), UPDATE (a stored memory said less; the old text is kept in "
        "history) or NONE (already known). Returns each decision with the memory id, so you can correct one "
        "with `forget`. Write self-contained statements (name the service, file or command). When memcli "
        "uses an LLM (a model can take seconds to minutes), the text is queued instead and this returns at "
        "once with `queued` (the inbox item) and no decisions: a background worker decides, and the memories "
        "appear in `recall`/`recent` when it is done."))
    async def remember(
        text: Annotated[str, Field(description="What to remember: one or more self-contained statements.")],
        tags: Annotated[list[str] | None, Field(description="Optional tags, e.g. ['deploy', 'postgres'].")] = None,
        type: Annotated[Literal["semantic", "episodic", "procedural"] | None, Field(
            description="semantic: a fact; procedural: a rule or how-to; episodic: an event. Default: inferred."
        )] = None,
        origin: Annotated[str | None, Field(
            description="Who vouches for it, e.g. 'session:<id>' or 'git:<sha>'. Default: 'mcp'.")] = None,
    ) -> dict[str, Any]:
        def work() -> dict[str, Any]:
            s = mem.fresh()
            origins = [origin] if origin else ["mcp"]
            if s.config.llm_model:  # never block the agent on a slow model: spool, a worker decides
                if not text.strip():
                    raise ValueError("nothing to remember: the text is empty")
                item = s.queue(text, tags=list(tags or ()), type=type, origins=origins, source="mcp")
                return {"queued": item, "decisions": [],
                        "notes": ["queued for the background worker (an LLM decides); the memories appear in "
                                  "recall once it is done"]}
            result = s.add(text, tags=tags or (), type=type, origins=origins)
            mem.after_write()
            return {
                "decisions": [
                    {"event": e.event, "id": mem.short_id(e.id) if e.id else None, "text": e.text,
                     **({"was": e.old_memory} if e.old_memory is not None else {}),
                     **({"why": e.reasoning} if e.reasoning else {})}
                    for e in result.events
                ],
                "skipped": result.extraction.skipped,
                **({"notes": result.notes} if result.notes else {}),
            }

        return await run(work)

    @server.tool(description=(
        "Search long-term memory by meaning and keywords. Returns the best matches, each with a short id, "
        "the date it was recorded, its text and origins (git:<sha> commits, session:<id> conversations). "
        "Ask a focused question ('how do we deploy the API?', 'postgres connection pool size'); an empty "
        "result means nothing relevant is known."))
    async def recall(
        query: Annotated[str, Field(description="What you want to know, in a few words or a question.")],
        k: Annotated[int, Field(ge=1, le=50, description="How many results (default 5).")] = 5,
        tags: Annotated[list[str] | None, Field(description="Only memories with all these tags.")] = None,
        since: Annotated[str | None, Field(
            description="Only memories created since: 2026-01-01, 7d, 2w, 3m, 1y, yesterday.")] = None,
        project: Annotated[str | None, Field(
            description="Only this project (e.g. github.com/acme/ledger). Default: every project.")] = None,
    ) -> dict[str, Any]:
        def work() -> dict[str, Any]:
            from memcli.core.memory import parse_when

            s = mem.fresh()
            try:
                filters = _filters(tags, parse_when(since) if since else None, project)
            except ValueError as e:
                raise ValueError(f"since: {e}") from None
            hits = s.search_many([query], k=k, filters=filters, sync=False)[0].hits
            return {"results": [mem.brief(h.memory, h.score) for h in hits]}

        return await run(work)

    @server.tool(description="One memory in full (text, type, tags, origins, confidence, history), by id or a "
                             "unique id prefix as returned by recall/recent.")
    async def get(id: Annotated[str, Field(description="A memory id or unique prefix.")]) -> dict[str, Any]:
        def work() -> dict[str, Any]:
            mem.fresh()
            return mem.store.read(mem.resolve(id)).to_dict()

        return await run(work)

    @server.tool(description="The most recently recorded memories, newest first: what happened lately.")
    async def recent(n: Annotated[int, Field(ge=1, le=100, description="How many (default 10).")] = 10,
                     ) -> dict[str, Any]:
        def work() -> dict[str, Any]:
            s = mem.fresh()
            return {"results": [mem.brief(r) for r in s.index.select(order="created", desc=True, limit=n)]}

        return await run(work)

    @server.tool(description=(
        "Remove a memory that is wrong or obsolete. It goes to the trash with your reason (a person can "
        "restore it with `memcli restore`); nothing is erased. If it was replaced by a better statement, "
        "`remember` that one too."))
    async def forget(
        id: Annotated[str, Field(description="The memory's id or unique prefix.")],
        reason: Annotated[str, Field(description="Why it is wrong or obsolete (kept with it in the trash).")],
    ) -> dict[str, Any]:
        def work() -> dict[str, Any]:
            mem.fresh()
            mid = mem.resolve(id)
            text = mem.store.read(mid).text
            mem.store.remove([mid], reason=reason or "forgotten by an agent")
            mem.after_write()
            return {"forgotten": mid, "text": text}

        return await run(work)

    @server.tool(description=(
        "Tell memcli whether a memory you used was useful or wrong. 'useful' raises its confidence and counts "
        "as a use (it ranks higher next time); 'wrong' lowers its confidence. For a memory that is plainly "
        "false or obsolete, use `forget` instead."))
    async def feedback(
        id: Annotated[str, Field(description="The memory's id or unique prefix.")],
        verdict: Annotated[Literal["useful", "wrong"], Field(description="useful | wrong")],
    ) -> dict[str, Any]:
        def work() -> dict[str, Any]:
            mem.fresh()
            m = mem.store.feedback(mem.resolve(id), useful=verdict == "useful")
            mem.after_write()
            return {"id": mem.short_id(m.id), "confidence": m.confidence, "feedback": verdict}

        return await run(work)

    server._memcli_pool = pool  # type: ignore[attr-defined]  # shut down by serve()
    return server


def _filters(tags: list[str] | None, since: str | None, project: str | None) -> Any:
    from memcli.api import Filters

    return Filters(tags=tuple(t.lower() for t in tags or ()), since=since, project=project)


def serve(store: Store) -> None:
    """Run over stdio until the client closes the connection."""
    server = build_server(store)
    pool = server._memcli_pool
    try:
        server.run()
    finally:
        try:  # the index's SQLite connection belongs to the worker thread: close it there
            pool.submit(store.close).result(timeout=10)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
