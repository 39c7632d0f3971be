"""`memcli mcp`: a long-lived stdio MCP server (the official SDK's `MCPServer`) over `memcli.Store`, so
an agent's recall costs milliseconds, not a start-up.

Every call runs on one worker thread (SQLite connections and hnswlib are not shared across
threads), so calls are serialised and never see a half-updated index. Before each call the store is
synced if `facts/` changed (its mtime), and fully at least every `FULL_SYNC_SECONDS` (a file edited
in place). A user error is a `ToolError` with the CLI's one line, never a traceback. stdout belongs
to the protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any, Literal

from pydantic import Field
from typing_extensions import NotRequired, TypedDict

from memcli import __version__
from memcli.api import Filters, Store
from memcli.core.errors import MemcliError
from memcli.core.memory import Memory as Record

FULL_SYNC_SECONDS = 2.0
MAX_TEXT = 65_536  # characters a `remember` / `update` takes (a statement, not a document)
MAX_QUERY = 4_096
MAX_SHORT = 2_000  # a reason, an origin, a date
MAX_TAGS = 50
MemoryId = Annotated[str, Field(description="The memory's short id, full id or unique prefix.")]

INSTRUCTIONS = """\
memcli is the long-term memory of this developer and their projects: decisions, conventions,
commands, gotchas and facts from earlier sessions, commits and notes. Use `recall` before you
answer a question about how this project or its team does something, or before you repeat work
that may have been done; use `remember` when the user states a lasting fact, decision or rule
(not for chit-chat, questions, or things true only for this task). Each memory has a short id;
cite it when you rely on it, fix a wrong one with `update`, or `forget` it. A result with a
`conflict` is an unresolved contradiction: ask the user which statement holds."""


class UserError(Exception):
    """A failure the client caused or can fix; its text is what the client reads."""


class Brief(TypedDict):
    id: str
    date: str
    text: str
    origins: list[str]
    tags: NotRequired[list[str]]
    score: NotRequired[float]
    conflict: NotRequired[list[dict[str, str]]]


class Results(TypedDict):
    results: list[Brief]


class Decision(TypedDict):
    event: str
    id: str | None
    text: str
    was: NotRequired[str]
    why: NotRequired[str]


class Remembered(TypedDict):
    decisions: list[Decision]
    skipped: NotRequired[int]
    queued: NotRequired[str]
    notes: NotRequired[list[str]]


class Updated(TypedDict):
    id: str
    text: str
    was: str


class Forgotten(TypedDict):
    forgotten: str
    text: str


class Rated(TypedDict):
    id: str
    confidence: float
    feedback: str


def _bounded(name: str, value: str | None, limit: int) -> str | None:
    if value is not None and len(value) > limit:
        raise UserError(f"{name} is {len(value):,} characters; the most this tool takes is {limit:,}")
    return value


def _tags(tags: list[str] | None) -> list[str]:
    tags = list(tags or ())
    if len(tags) > MAX_TAGS:
        raise UserError(f"{len(tags)} tags; the most is {MAX_TAGS}")
    for t in tags:
        _bounded("a tag", t, 100)
    return [t.strip().lower() for t in tags if t.strip()]


def _message(e: BaseException) -> str:
    """The CLI's one line (and its hint) for an expected failure."""
    text = " ".join(str(e).split()) or type(e).__name__
    hint = getattr(e, "hint", None)
    return f"{text} (hint: {' '.join(hint.split())})" if hint else text


class Memory:
    """The store behind the tools: one Store, synced cheaply before each call."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._facts_mtime: int | None = None
        self._last_full = 0.0

    def warm(self) -> None:
        """Load the model and the index now, not on the agent's first question."""
        if self.store.exists():
            self.sync()
            self.store.index.embedder.embed(["warm up"])

    def sync(self) -> None:
        self.store.index.sync()
        self._facts_mtime = self._dir_mtime()
        self._last_full = time.monotonic()

    def _dir_mtime(self) -> int | None:
        try:
            return os.stat(self.store.facts_dir).st_mtime_ns
        except FileNotFoundError:
            return None

    def fresh(self) -> Store:
        """The store, synced with what changed on disk since the last call."""
        if not self.store.exists():
            raise UserError(f"no memcli store at {self.store.path} (create one with `memcli init`, "
                            "or point `memcli mcp` at one with --store DIR)")
        if self._dir_mtime() != self._facts_mtime or time.monotonic() - self._last_full >= FULL_SYNC_SECONDS:
            self.sync()
        return self.store

    def briefs(self, items: list[Any]) -> list[Brief]:
        shorts = self.store.short_ids([m.id for it in items for m in (it.memory, *it.conflicts)])
        out = []
        for it in items:
            m: Record = it.memory
            b: Brief = {"id": shorts.get(m.id, m.id), "date": str(m.created)[:10], "text": m.text,
                        "origins": list(m.origins)}
            if m.tags:
                b["tags"] = list(m.tags)
            if it.score is not None:
                b["score"] = round(it.score, 3)
            if it.conflicts:
                b["conflict"] = [{"id": shorts[c.id], "text": c.text} for c in it.conflicts]
            out.append(b)
        return out


def _since(value: str | None) -> str | None:
    from memcli.core.memory import parse_when

    if not value:
        return None
    _bounded("since", value, 100)
    try:
        return parse_when(value)
    except ValueError as e:
        raise UserError(f"since: {e}") from None


def _query(query: str) -> str:
    _bounded("query", query, MAX_QUERY)
    if not query.strip():
        raise UserError("the query is empty")
    return query


def _filters(tags: list[str] | None = None, since: str | None = None, project: str | None = None,
             type: str | None = None) -> Filters:
    return Filters(tags=tuple(_tags(tags)), since=_since(since), project=_bounded("project", project, 300),
                   type=type)


def build_server(store: Store, *, warm: bool = True) -> Any:
    """The MCP server for `store` (not started)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    mem = Memory(store)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memcli-store")
    log = logging.getLogger("memcli.mcp")

    def warm_up() -> None:
        try:
            mem.warm()
        except Exception as e:  # noqa: BLE001 - the first call reports it, with its message
            log.warning("memcli: warming up failed: %s", _message(e))

    if warm:
        pool.submit(warm_up)  # loads while the client connects; calls queue behind it

    pending: set[Any] = set()

    def synced(fn: Callable[[Store], Any], write: bool) -> Any:
        out = fn(mem.fresh())
        if write:
            mem.sync()
        return out

    async def call(fn: Callable[[Store], Any], *, write: bool = False) -> Any:
        """`fn(store)` on the store's thread, synced before (and after a write); every failure is a
        ToolError with one readable line."""
        try:
            future = pool.submit(synced, fn, write)
            pending.add(future)
            future.add_done_callback(pending.discard)
            return await asyncio.wrap_future(future)
        except (UserError, MemcliError, ValueError, LookupError) as e:
            raise ToolError(_message(e)) from None
        except Exception as e:  # noqa: BLE001 - never a traceback for a client's call
            if isinstance(e, RuntimeError) and "shutdown" in str(e):  # the client left: the pool stops
                raise ToolError("the server is shutting down") from None
            log.warning("memcli: internal error: %s: %s", type(e).__name__, _message(e))
            raise ToolError(f"internal error: {type(e).__name__}: {_message(e)}") from None

    server = MCPServer("memcli", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")

    def writes(*, destructive: bool = False, idempotent: bool = True) -> Any:
        return ToolAnnotations(readOnlyHint=False, destructiveHint=destructive, idempotentHint=idempotent,
                               openWorldHint=False)

    read_only = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)

    @server.tool(description=(
        "Store something worth remembering across sessions: a decision, convention, command, fix or fact "
        "about this project or its people. memcli splits the text into facts, skips chit-chat and questions, "
        "and for each fact decides ADD (new), UPDATE (a stored memory said less; the old text is kept in "
        "history) or NONE (already known). Returns each decision with the memory's short id, so you can fix "
        "one with `update` or `forget`. Write self-contained statements (name the service, file or command). "
        "When memcli uses an LLM, the text is queued instead and this returns at once with `queued` and no "
        "decisions: a background worker decides, and the memories appear in `recall`/`recent` when done."),
        annotations=writes())
    async def remember(
        text: Annotated[str, Field(description="What to remember: one or more self-contained statements.")],
        tags: Annotated[list[str] | None, Field(description="Optional tags, e.g. ['deploy', 'postgres'].")] = None,
        type: Annotated[Literal["semantic", "episodic", "procedural"] | None, Field(
            description="semantic: a fact; procedural: a rule or how-to; episodic: an event. Default: inferred."
        )] = None,
        origin: Annotated[str | None, Field(
            description="Who vouches for it, e.g. 'session:<id>' or 'git:<sha>'. Default: 'mcp'.")] = None,
    ) -> Remembered:
        def work(s: Store) -> Remembered:
            _bounded("text", text, MAX_TEXT)
            _bounded("origin", origin, MAX_SHORT)
            tag_list = _tags(tags)
            if not text.strip():
                raise UserError("nothing to remember: the text is empty")
            origins = [origin.strip()] if origin and origin.strip() else ["mcp"]
            if s.config.llm_model:  # never block the agent on a slow model: spool, a worker decides
                name = s.queue(text, source="mcp", tags=tag_list, type=type, origins=origins)
                return {"queued": name, "decisions": [],
                        "notes": ["queued for the background worker (an LLM decides); the memories appear in "
                                  "recall once it is done"]}
            result = s.add(text, tags=tag_list, type=type, origins=origins)
            shorts = s.short_ids([e.id for e in result.events if e.id])
            out: Remembered = {
                "decisions": [
                    {"event": e.event, "id": shorts.get(e.id, e.id) if e.id else None, "text": e.text,
                     **({"was": e.old_memory} if e.old_memory is not None else {}),
                     **({"why": e.reasoning} if e.reasoning else {})}  # type: ignore[typeddict-item]
                    for e in result.events
                ],
                "skipped": int(result.extraction.skipped or 0),
            }
            if result.notes:
                out["notes"] = list(result.notes)
            return out

        return await call(work, write=True)

    @server.tool(description=(
        "Search long-term memory by meaning and keywords. Returns the best matches, each with a short id, "
        "the date it was recorded, its text and origins (git:<sha> commits, session:<id> conversations). "
        "Ask a focused question ('how do we deploy the API?', 'postgres connection pool size'); an empty "
        "result means nothing relevant is known. Superseded memories are never returned; a result with a "
        "`conflict` is an unresolved contradiction."), annotations=read_only)
    async def recall(
        query: Annotated[str, Field(description="What you want to know, in a few words or a question.")],
        k: Annotated[int, Field(ge=1, le=50, description="How many results (default 5).")] = 5,
        tags: Annotated[list[str] | None, Field(description="Only memories with all these tags.")] = None,
        since: Annotated[str | None, Field(
            description="Only memories created since: 2026-01-01, 7d, 2w, 3m, 1y, yesterday.")] = None,
        project: Annotated[str | None, Field(
            description="Only this project (e.g. github.com/acme/ledger). Default: every project.")] = None,
    ) -> Results:
        return await call(lambda s: {"results": mem.briefs(s.recall(_query(query), k=k,
                                                                     filters=_filters(tags, since, project)))})

    @server.tool(description="One memory in full (text, type, tags, origins, confidence, history, links), by "
                             "its short id as returned by recall/recent/list, its full id, or a unique prefix.",
                 annotations=read_only)
    async def get(id: MemoryId) -> dict[str, Any]:
        return await call(lambda s: s.read(s.resolve(id)).to_dict())

    @server.tool(description="The most recently recorded current memories, newest first: what happened lately.",
                 annotations=read_only)
    async def recent(n: Annotated[int, Field(ge=1, le=100, description="How many (default 10).")] = 10,
                     ) -> Results:
        return await call(lambda s: {"results": mem.briefs(s.recent(n))})

    @server.tool(name="list", description=(
        "List current memories by filter, without a query: by tags, type, project and creation date, "
        "newest first (or by last update). Use `recall` to search by meaning."), annotations=read_only)
    async def list_(
        tags: Annotated[list[str] | None, Field(description="Only memories with all these tags.")] = None,
        type: Annotated[Literal["semantic", "episodic", "procedural"] | None, Field(
            description="Only this type.")] = None,
        since: Annotated[str | None, Field(description="Created since: 2026-01-01, 7d, 2w, 3m, 1y.")] = None,
        project: Annotated[str | None, Field(description="Only this project.")] = None,
        sort: Annotated[Literal["created", "updated"], Field(description="Newest first by this date.")] = "created",
        n: Annotated[int, Field(ge=1, le=200, description="How many (default 20).")] = 20,
    ) -> Results:
        return await call(lambda s: {"results": mem.briefs(s.recent(n, _filters(tags, since, project, type),
                                                                    sort=sort))})

    @server.tool(description=(
        "Correct a memory: replace its text with the right statement (the old text is kept in its "
        "history, so nothing is lost). Tags given are added. Use it when a recalled memory is out of date "
        "or imprecise; use `forget` when it is simply wrong."), annotations=writes())
    async def update(
        id: MemoryId,
        text: Annotated[str, Field(description="The corrected, self-contained statement.")],
        tags: Annotated[list[str] | None, Field(description="Tags to add.")] = None,
    ) -> Updated:
        def work(s: Store) -> Updated:
            _bounded("text", text, MAX_TEXT)
            tag_list = _tags(tags)
            mid = s.resolve(id)
            old = s.read(mid).text
            m = s.update(mid, text, tags=tag_list, origins=["mcp"])
            return {"id": s.short_ids([m.id])[m.id], "text": m.text, "was": old}

        return await call(work, write=True)

    @server.tool(description=(
        "Remove a memory that is wrong or obsolete. It goes to the trash with your reason (a person can "
        "restore it with `memcli restore`); nothing is erased. If it was replaced by a better statement, "
        "`remember` that one too (or use `update`)."), annotations=writes(destructive=True))
    async def forget(
        id: MemoryId,
        reason: Annotated[str, Field(description="Why it is wrong or obsolete (kept with it in the trash).")],
    ) -> Forgotten:
        def work(s: Store) -> Forgotten:
            _bounded("reason", reason, MAX_SHORT)
            mid = s.resolve(id)
            text = s.read(mid).text
            s.remove([mid], reason=" ".join(reason.split()) or "forgotten by an agent")
            return {"forgotten": mid, "text": text}

        return await call(work, write=True)

    @server.tool(description=(
        "Tell memcli whether a memory you used was useful or wrong. 'useful' raises its confidence and counts "
        "as a use (it ranks higher next time); 'wrong' lowers its confidence. For a memory that is plainly "
        "false or obsolete, use `update` or `forget` instead."), annotations=writes(idempotent=False))
    async def feedback(
        id: MemoryId,
        verdict: Annotated[Literal["useful", "wrong"], Field(description="useful | wrong")],
    ) -> Rated:
        def work(s: Store) -> Rated:
            m = s.feedback(s.resolve(id), useful=verdict == "useful")
            return {"id": s.short_ids([m.id])[m.id], "confidence": m.confidence, "feedback": verdict}

        return await call(work, write=True)

    # ------------------------------------------------------------ resources and prompts (real ones)
    @server.resource("memcli://recent", name="recent", mime_type="text/markdown",
                     description="The 20 most recent current memories, one a line with its short id.")
    async def recent_resource() -> str:
        def work(s: Store) -> str:
            return "".join(f"- {b['text']} ({b['date']}, `{b['id']}`)\n" for b in mem.briefs(s.recent(20))) or (
                "(no memories yet)\n")

        return await call(work)

    @server.resource("memcli://context", name="context", mime_type="text/markdown",
                     description="What `memcli context` gives a session at start: this project's memories.")
    async def context_resource() -> str:
        return await call(lambda s: s.context() or "(nothing remembered yet)\n")

    @server.resource("memcli://memory/{id}", name="memory", mime_type="application/json",
                     description="One memory in full, by short id.")
    async def memory_resource(id: str) -> dict[str, Any]:
        return await call(lambda s: s.read(s.resolve(id)).to_dict())

    @server.prompt(name="memcli-context", description=(
        "Start a task with what memcli remembers about it: the project's memories (or those relevant to "
        "the topic), with short ids to cite."))
    async def context_prompt(topic: str = "") -> str:
        def work(s: Store) -> str:
            _bounded("topic", topic, MAX_QUERY)
            block = s.context(topic.strip() or None)
            return (block or "memcli remembers nothing relevant yet.\n") + (
                "\nUse these memories where they apply, cite their ids, and `remember` lasting decisions.")

        return await call(work)

    server._memcli_pool = pool  # type: ignore[attr-defined]  # shut down by serve()
    server._memcli_pending = pending  # type: ignore[attr-defined]
    return server


def serve(store: Store) -> None:
    """Run over stdio until the client leaves; then queued calls are dropped and a running one is
    not waited for (its write is atomic)."""
    server = build_server(store)
    pool, pending = server._memcli_pool, server._memcli_pending
    with contextlib.suppress(BaseException):  # the client went away, mid-call or not: nothing to say
        server.run()
    for f in list(pending):
        f.cancel()
    try:  # the index's SQLite connection belongs to the worker thread: close it there
        pool.submit(store.close).result(timeout=5)
        clean = True
    except BaseException:  # noqa: BLE001 - a call still running
        clean = False
    pool.shutdown(wait=False, cancel_futures=True)
    if not clean:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(0)
