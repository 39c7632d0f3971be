"""The public Python API: `memcli.Store`, one method per thing a user does, and the only thing the
CLI and the MCP server call. It holds the operations' handle (`memcli.ops.handle.Store`) rather
than being one, so there is no public `write` or `lock`; per-call options are parameters.

    from memcli import Store
    store = Store("~/.memcli")
    store.add("We pin numpy below 3 until the wheels land.", tags=["deps"])
    for hit in store.search("numpy version pin", k=3):
        print(f"{hit.score:.2f}", hit.memory.text)
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import sqlite3
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from memcli.core.config import Config
from memcli.core.errors import InputRejected, InvalidInput, NotFound, StoreError
from memcli.core.memory import Memory, parse_when
from memcli.core.vocab import ExportFormat, MemoryType, SortKey
from memcli.index import Filters, Index, SyncReport
from memcli.ops.handle import Store as _Handle
from memcli.services.transcripts import IMPORT_KINDS
from memcli.storage import ids as _ids
from memcli.storage.safety import is_corrupt

# Imported where used: `list`, `export` and `search` never load the add pipeline or the integrations.
if TYPE_CHECKING:
    from memcli.agents.capture import Captured
    from memcli.agents.hooks import HookReport
    from memcli.agents.sharing import SyncReport as ShareReport
    from memcli.agents.spool import ProcessReport
    from memcli.ops.add import AddResult
    from memcli.ops.ask import Answer
    from memcli.ops.curate import ConsolidateReport, MergeResult, PruneResult, RollbackResult
    from memcli.ops.io import ImportReport
    from memcli.ops.search import SearchResponse
    from memcli.ops.trash import TrashItem
    from memcli.ops.visible import Item

__all__ = ["IMPORT_KINDS", "Filters", "Store", "filters", "read_stream"]


def read_stream(stream: Any, name: str = "stdin") -> str:
    """A stream's text, read up to the input limit (`add - < /dev/zero` stops there) and decoded
    strictly: binary, invalid UTF-8 and oversized input are refused in one line."""
    from memcli.ops.add import read_input, read_limited

    if hasattr(stream, "buffer"):  # a text stream over bytes (sys.stdin): read its bytes
        stream = stream.buffer
    elif isinstance(stream, io.TextIOBase):  # text only, no bytes under it: re-encoded for the same checks
        return read_input(stream.read().encode("utf-8", "surrogateescape"), name)
    return read_input(read_limited(stream, name), name)


def _when(text: str | None, *, end: bool = False) -> str | None:
    """A date or an age (`2026-01-01`, `90d`, `yesterday`) as an ISO time; unreadable, `InvalidInput`."""
    if not text:
        return None
    try:
        return parse_when(text, end=end)
    except ValueError as e:
        raise InvalidInput(str(e)) from None


def filters(*, tags: Sequence[str] = (), type: str | None = None, user: str | None = None,
            project: str | None = None, since: str | None = None, until: str | None = None,
            current: bool = False) -> Filters:
    """`Filters` from what a person types: `since`/`until` are dates or ages (`2026-01-01`, `7d`)."""
    return Filters(tags=tuple(tags), type=type, user=user, project=project, since=_when(since),
                   until=_when(until, end=True), current=current)


class Store:
    """A memcli store directory. Cheap to construct; nothing is read until needed."""

    def __init__(self, path: str | os.PathLike[str], config: Config | None = None) -> None:
        self._store = _Handle(path, config)

    # ------------------------------------------------------------ the store itself
    @property
    def path(self) -> Path:
        return self._store.path

    @property
    def config(self) -> Config:
        """The store's settings (config.toml, then the environment), read once."""
        return self._store.config

    @property
    def index(self) -> Index:
        """The sidecar (`.index/`), for reading: call `sync()` first."""
        return self._store.index

    @property
    def facts_dir(self) -> Path:
        """`facts/`: one Markdown file per memory, the source of truth."""
        return self._store.facts_dir

    @property
    def log_path(self) -> Path:
        """`log.jsonl`: every change, appended."""
        return self._store.log_path

    def exists(self) -> bool:
        """Whether the directory holds a store (`facts/`)."""
        return self._store.exists()

    def init(self) -> bool:
        """Create the store (True if new); either way write the `.gitattributes` that lets
        `log.jsonl` merge when the store is shared through git."""
        from memcli.agents.sharing import write_gitattributes

        created = self._store.init()
        write_gitattributes(self._store)
        return created

    def ensure(self) -> None:
        """Create the store's folders if they are missing (the first write does this too)."""
        self._store.ensure()

    def close(self) -> None:
        """Close the index's connections."""
        self._store.close()

    def sync(self, *, on_progress: Callable[[int, int], None] | None = None, force: bool = False) -> SyncReport:
        """Bring the index in step with `facts/` (`force`: rebuild it); returns what changed."""
        return self._store.index.sync(on_progress=on_progress, force=force)

    def count(self) -> int:
        """How many memories the index holds (as of the last sync)."""
        return self._store.index.count()

    def reindex(self, *, on_progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """Rebuild the sidecar from `facts/` (embeddings from the cache where possible)."""
        report = self.sync(on_progress=on_progress, force=True)
        index = self._store.index
        return {"memories": index.count(), "embedded": report.embedded, "skipped_files": len(report.new_bad),
                "provisional_vectors": index.provisional_count(), "new_bad": report.new_bad}

    def refresh_provisional(self, *, on_progress: Callable[[int, int], None] | None = None) -> int:
        """Make the provisional vectors of a bulk merge exact; returns how many."""
        return self._store.index.refresh_provisional(on_progress=on_progress)

    def provisional_count(self) -> int:
        """How many memories are indexed with a bulk merge's stand-in vector."""
        return self._store.index.provisional_count()

    def background_state(self) -> str:
        """How provisional vectors become exact: `on` (in the background), `off` or `failed`."""
        from memcli.services.detached import background_on, refresh_failed_recently

        if not background_on(self.config.background):
            return "off"
        return "failed" if refresh_failed_recently(self.path) else "on"

    def heal(self, error: BaseException) -> bool:
        """If `error` says the catalog is damaged, drop the index (the next read rebuilds it)."""
        if not (isinstance(error, sqlite3.DatabaseError) and is_corrupt(error)):
            return False
        self._store.index.drop()
        self._store.close()
        return True

    # ------------------------------------------------------------ ids
    def resolve(self, ref: str) -> str:
        """The full id of a memory from its id, a unique prefix or its short id; `IdError` (a
        `NotFound` whose hint names the candidates, or says it is in the trash) otherwise."""
        return _ids.resolve(self._store, ref)

    def resolve_trashed(self, ref: str) -> str:
        """The full id of a trashed memory from its id or a unique prefix."""
        return _ids.resolve_trashed(self._store, ref)

    def short_ids(self, ids: Iterable[str]) -> dict[str, str]:
        """The short id of each memory (the shortest unique tail of its ULID, 8+ characters)."""
        return _ids.short_ids(self._store, ids)

    # ------------------------------------------------------------ add
    def add(
        self, text: str, *, raw: bool = False, llm: bool | None = None, llm_model: str | None = None,
        tags: Sequence[str] = (), type: MemoryType | str | None = None, origins: Sequence[str] = (),
        user: str | None = None, project: str | None = None, session: str | None = None,
        threshold: float | None = None, allow_delete: bool = False, dry_run: bool = False, redact: bool = True,
        **options: Any,
    ) -> AddResult:
        """Turn text into memories: extract facts, decide ADD / UPDATE / NONE / DELETE against
        what is stored, write (unless `dry_run`). `llm`: None = the configured LLM if any, False =
        heuristic only, True = require one."""
        from memcli.ops.add import add

        return add(self._store, text, raw=raw, llm=llm, llm_model=llm_model, tags=tags,
                   type=None if type is None else str(type), origins=origins, user=user, project=project,
                   session=session, threshold=threshold, allow_delete=allow_delete, dry_run=dry_run, redact=redact,
                   **options)

    def add_batch(self, lines: Iterable[str] | Path, **options: Any) -> Iterator[tuple[int, AddResult | str]]:
        """JSON lines `{"text", "origins"?, "created"?, "tags"?, "type"?}` (or a file of them), each
        decided as its own `add`; yields (line number, AddResult or an unusable line's message)."""
        from memcli.ops.batch import add_batch

        if not isinstance(lines, Path):
            yield from add_batch(self._store, lines, **options)
            return
        try:
            stream = open(lines, encoding="utf-8")  # noqa: SIM115 - closed below, after the last line
        except OSError as e:
            raise InputRejected(f"cannot read {lines}: {e.strerror}") from None
        with stream:
            yield from add_batch(self._store, stream, **options)

    def uses_llm(self, *, raw: bool = False, llm: bool | None = None, llm_model: str | None = None) -> bool:
        """Whether an `add` with these options would wait on the LLM (a git hook queues it instead)."""
        return not raw and llm is not False and bool(llm_model or self.config.llm_model)

    def queue(self, text: str, *, source: str | None = None, redact: bool = True, **options: Any) -> str:
        """Park `text` (redacted) in the inbox with `add`'s `options` and start the background
        worker: an add that must not wait for an LLM. Returns the item's file name in `inbox/`."""
        from memcli.agents.spool import queue_add

        kept = {k: list(v) if isinstance(v, tuple) else v for k, v in options.items() if v is not None}
        return queue_add(self.path, text, kept, redact=redact, source=source).name

    def feedback(self, memory_id: str, *, useful: bool) -> Memory:
        """A memory was useful (confidence up, counts as a use) or wrong (confidence down)."""
        from memcli.ops.add import feedback

        self.sync()
        return feedback(self._store, self.resolve(memory_id), useful=useful)

    @staticmethod
    def conversations(kind: str, path: str | os.PathLike[str] | None = None, *,
                      text: str | None = None) -> tuple[str, Iterable[Any]]:
        """(source name, conversations) of an export (`IMPORT_KINDS`) at `path` or in `text`, read
        before any store is touched; a ChatGPT file is streamed, the rest read whole (10 MB at
        most). `InputRejected` when it cannot be read or holds none."""
        from memcli.ops.add import read_input, read_limited
        from memcli.services.transcripts import iter_chatgpt, parse_conversations

        name = "stdin" if path is None else Path(path).name
        try:
            if kind == "chatgpt" and path is not None:
                def stream() -> Iterator[Any]:
                    with open(path, encoding="utf-8-sig") as f:
                        yield from iter_chatgpt(f, name)

                found = stream()
                first = next(found, None)
                found = None if first is None else itertools.chain([first], found)
            else:
                if path is not None:
                    with open(path, "rb") as f:
                        text = read_input(read_limited(f, str(path)), name)  # /dev/zero stops at the limit
                found = parse_conversations(text or "", kind, name) or None
        except OSError as e:
            raise InputRejected(f"cannot read {path}: {e.strerror}") from None
        except UnicodeDecodeError as e:
            raise InputRejected(f"{name}: not valid UTF-8 (byte {e.start})") from None
        except ValueError as e:
            raise InputRejected(str(e)) from None
        if found is None:
            raise InputRejected(f"{name}: no conversation text found (is it a {kind} export?)")
        return name, found

    def import_conversations(self, conversations: Iterable[Any], name: str, *, redact: bool = True,
                             **options: Any) -> list[dict[str, Any]]:
        """Conversations to memories through the session step (memcli/ops/sessions.py): a few per
        session, dated with their turns' times, plus one summary each. A bad conversation further
        down a stream is `InputRejected`."""
        from memcli.ops.sessions import import_conversations

        try:
            return import_conversations(self._store, conversations, name, redact=redact, **options)
        except (ValueError, UnicodeDecodeError) as e:
            raise InputRejected(str(e) if str(e).startswith(f"{name}:") else f"{name}: {e}") from None

    # ------------------------------------------------------------ read
    def search(self, query: str, *, k: int = 5, threshold: float | None = None, filters: Filters | None = None,
               record_usage: bool = True, **options: Any) -> SearchResponse:
        """Ranked memories for a query; each hit has `.memory`, `.score` and `.parts`."""
        from memcli.ops.search import search

        return search(self._store, query, k=k, threshold=threshold, filters=filters, record_usage=record_usage,
                      **options)

    def search_many(self, queries: Sequence[str], *, k: int = 5, threshold: float | None = None,
                    filters: Filters | None = None, **options: Any) -> list[SearchResponse]:
        """`search` for several queries at once (one model load, one batch of embeddings)."""
        from memcli.ops.search import search_many

        return search_many(self._store, list(queries), k=k, threshold=threshold, filters=filters, **options)

    def ask(self, question: str, *, k: int = 8, llm_model: str | None = None, redact: bool = True) -> Answer:
        """Answer from the top `k` memories with the LLM: iterate `answer.stream()`, then
        `answer.cited()` gives the memory ids it relies on."""
        from memcli.ops.ask import ask

        return ask(self._store, question, k=k, llm_model=llm_model, redact=redact)

    def context(self, query: str | None = None, *, project: str | None = None, budget: int = 1500) -> str:
        """A compact Markdown block of the memories that matter here, for an agent's session start."""
        from memcli.ops.context import build

        return build(self._store, query, project=project, budget=budget)

    def get(self, memory_id: str) -> Memory:
        """One memory, read from its file (a unique id prefix or its short id is enough)."""
        self._store.index.sync()
        return self._store.read(self.resolve(memory_id))

    def recall(self, query: str, *, k: int = 5, filters: Filters | None = None,
               record_usage: bool = True) -> list[Item]:
        """`search` as an agent is handed it (memcli/ops/visible.py)."""
        from memcli.ops.visible import visible

        hits = self.search(query, k=k, filters=filters, record_usage=record_usage).hits
        return visible(self._store, [h.memory for h in hits], [h.score for h in hits])

    def recent(self, n: int = 10, filters: Filters | None = None, *, sort: SortKey | str = SortKey.CREATED,
               desc: bool = True) -> list[Item]:
        """The current memories matching `filters`, newest first, as an agent is handed them."""
        from dataclasses import replace

        from memcli.ops.visible import visible

        current = replace(filters or Filters(), current=True)
        return visible(self._store, self.list(current, sort=sort, desc=desc, limit=n))

    def read(self, memory_id: str) -> Memory:
        """One memory by its full id, read from its file (no index needed)."""
        return self._store.read(memory_id)

    def history(self, memory: Memory) -> list[dict[str, Any]]:
        """A memory's chain of versions, oldest first: what it superseded and its earlier texts."""
        from memcli.ops.chain import chain

        return chain(self._store, memory)

    def list(self, filters: Filters | None = None, *, sort: SortKey | str = SortKey.CREATED, desc: bool = False,
             limit: int | None = None) -> list[Memory]:
        """Memories matching `filters`, sorted (from the catalog, no file read)."""
        self._store.index.sync()
        return self._store.index.select(filters, order=str(sort), limit=limit, desc=desc)

    def trashed(self) -> list[Memory]:
        """What is in the trash (`extra["trashed"]`: when and why each went there)."""
        return self._store.trashed()

    def trash_listing(self) -> list[TrashItem]:
        """The trash, newest first, each with when and why it went there and its short id."""
        from memcli.ops.trash import listing

        return listing(self._store)

    def log(self, *, id_prefix: str | None = None, events: Sequence[str] = (), since: str | None = None,
            until: str | None = None) -> Iterator[dict[str, Any]]:
        """The change log's entries, oldest first, streamed: of memories whose id starts with
        `id_prefix` (`NotFound` when several do), of these `events`, between `since` and `until`."""
        from memcli.ops.history import LogFilter, entries, ids_in_log

        if id_prefix:
            found = ids_in_log(self.log_path, id_prefix)
            if len(found) > 1 and id_prefix.upper() not in {i.upper() for i in found}:
                raise NotFound(f"id prefix {id_prefix} is ambiguous: {len(found)} memories in the log match",
                               hint=f"candidates: {', '.join(sorted(found)[:5])}")
        window = LogFilter(id_prefix=id_prefix, events=tuple(events), since=_when(since), until=_when(until, end=True))
        return entries(self.log_path, window)

    def log_tail(self, limit: int | None = None, **window: Any) -> tuple[int, list[dict[str, Any]]]:
        """How many entries `log(**window)` yields, and the `limit` newest, newest first (only
        those are held)."""
        total = 0
        recent: deque[dict[str, Any]] = deque(maxlen=limit)
        for entry in self.log(**window):
            total += 1
            recent.append(entry)
        return total, list(reversed(recent))

    def stats(self) -> dict[str, Any]:
        """Counts and sizes: memories by type, tags, users, projects, bytes on disk."""
        from memcli.ops.admin import stats

        return stats(self._store)

    def doctor(self, *, fix: bool = False) -> list[dict[str, Any]]:
        """Every health check, each {check, ok, detail}; `fix` repairs what is damaged first."""
        from memcli.ops.admin import doctor

        return doctor(self._store, fix=fix)

    # ------------------------------------------------------------ change
    def edit(self, memory_id: str) -> tuple[Memory, bool]:
        """Open a memory's file in $EDITOR, then check and commit it; returns (memory, changed)."""
        from memcli.ops.edit import edit

        return edit(self._store, memory_id)

    def update(self, memory_id: str, text: str, *, tags: Sequence[str] = (), origins: Sequence[str] = (),
               redact: bool = True) -> Memory:
        """New (redacted) text for a memory, the old one kept in its history; `tags` and
        `origins` join its own."""
        from memcli.ops.add import MAX_INPUT_BYTES
        from memcli.ops.changes import ChangeSet, Update

        if not text.strip():
            raise InvalidInput("the new text is empty")
        if len(text.encode("utf-8", "surrogatepass")) > MAX_INPUT_BYTES:
            raise InvalidInput(f"the new text is larger than {MAX_INPUT_BYTES // (1024 * 1024)} MB")
        if redact:
            from memcli.services.redact import redact as scrub

            text = scrub(text)[0]
        self.sync()
        mid = self.resolve(memory_id)
        cs = ChangeSet(self._store)
        m = cs.edit(mid, Update(text.strip(), tags=[t.lower() for t in tags], origins=list(origins)))
        cs.commit()
        return m

    def remove(self, ids: Iterable[str], *, reason: str = "removed by user", dry_run: bool = False) -> list[str]:
        """Move memories to the trash (restorable); returns their ids."""
        from memcli.ops.changes import ChangeSet

        cs = ChangeSet(self._store)
        done = [cs.trash(mid, reason, event="RM").id for mid in ids]
        if not dry_run:
            cs.commit()
        return done

    def restore(self, ids: Iterable[str] | str) -> list[str]:
        """Bring memories back from the trash, exactly as they were."""
        from memcli.ops.changes import ChangeSet

        cs = ChangeSet(self._store)
        done = [cs.restore(mid).id for mid in ([ids] if isinstance(ids, str) else ids)]
        cs.commit()
        return done

    def empty_trash(self, *, older_than: str | None = None, dry_run: bool = False) -> list[Memory]:
        """Delete trashed memories for good: all, or those trashed before `older_than` (`30d`, a
        date). Returns them as they were in the trash."""
        from memcli.ops.trash import empty_trash

        return empty_trash(self._store, older_than=_when(older_than), dry_run=dry_run)

    def merge(self, ids: Sequence[str], *, use_llm: bool | None = None, llm_model: str | None = None,
              dry_run: bool = False) -> MergeResult:
        """Merge memories into one; the originals go to the trash, their texts into history."""
        from memcli.ops.curate import merge

        return merge(self._store, list(ids), use_llm=use_llm, llm_model=llm_model, dry_run=dry_run)

    def merge_groups(self, groups: Sequence[Sequence[str]] | None = None, *, threshold: float = 0.9,
                     use_llm: bool | None = None, llm_model: str | None = None,
                     dry_run: bool = False) -> list[MergeResult]:
        """Merge each group of ids into one memory, in one commit; with no `groups`, every group of
        the same fact at `threshold` or above (never another subject or a contradiction)."""
        from memcli.ops.curate import _opposed, merge_groups, similar_groups

        known: dict[str, Any] | None = None
        if groups is None:
            known = {}  # the catalog entries the grouping read, for the merges
            chosen = similar_groups(self._store, threshold, apart=_opposed, known=known)
        else:
            chosen = [list(g) for g in groups]
        if any(len(set(g)) < 2 for g in chosen):
            raise InvalidInput("merge needs at least two different memories")
        return merge_groups(self._store, chosen, use_llm=use_llm, dry_run=dry_run, llm_model=llm_model, known=known)

    def consolidate(self, *, use_llm: bool | None = None, llm_model: str | None = None, dry_run: bool = False,
                    supersede_older: bool = False, sync: bool = True) -> ConsolidateReport:
        """Merge near-duplicates, flag contradictions (`supersede_older`: the newer supersedes the
        older), distil recurring episodes, in one commit."""
        from memcli.ops.curate import consolidate

        return consolidate(self._store, use_llm=use_llm, llm_model=llm_model, dry_run=dry_run,
                           supersede_older=supersede_older, sync=sync)

    def prune(self, *, older_than: str | None = None, unused: bool = False, min_confidence: float | None = None,
              type: MemoryType | str | None = None, min_age: str | None = None, dry_run: bool = False) -> PruneResult:
        """Trash stale memories (criteria combine with AND); `min_age`: never a younger memory."""
        from memcli.ops.curate import prune

        cutoff, youngest = _when(older_than), _when(min_age)
        if youngest is not None and (cutoff is None or youngest < cutoff):
            cutoff = youngest  # criteria combine with AND: older than both
        return prune(self._store, older_than=cutoff, unused=unused, min_confidence=min_confidence,
                     type=None if type is None else str(type), dry_run=dry_run)

    def rollback(self, origin: str, *, dry_run: bool = False) -> RollbackResult:
        """Undo one origin: what only it vouched for goes to the trash; others just lose it.
        `NotFound` when no memory or change ever came from `origin`."""
        from memcli.ops.curate import rollback

        result = rollback(self._store, origin, dry_run=dry_run)
        if not (result.trashed or result.detached) and not self.origin_seen(origin):
            kind = origin.split(":")[0]
            known = sorted({o for m in self.list() for o in m.origins if o.split(":")[0] == kind})
            raise NotFound(f"no memory comes from {origin}",
                           hint=f"origins of that kind: {', '.join(known[:6])}{' ...' if len(known) > 6 else ''}"
                           if known else "memcli show ID lists a memory's origins")
        return result

    def origin_seen(self, origin: str) -> bool:
        """Whether any change in the log was ever made from `origin`."""
        for entry in self.log():
            o = entry.get("origin")
            if o == origin or (isinstance(o, list) and origin in o):
                return True
        return False

    # ------------------------------------------------------------ import / export
    def export(self, fmt: ExportFormat | str = ExportFormat.JSONL, filters: Filters | None = None) -> str:
        """The memories as json, jsonl, md or csv text."""
        return "".join(self.export_chunks(fmt, filters))

    def export_chunks(self, fmt: ExportFormat | str = ExportFormat.JSONL, filters: Filters | None = None, *,
                      on_memory: Callable[[Memory], None] | None = None) -> Iterator[str]:
        """The export piece by piece (never held whole); `on_memory` sees each memory written."""
        from memcli.ops.io import export_chunks

        self._store.index.sync()

        def memories() -> Iterator[Memory]:
            for m in self._store.index.iter_select(filters or Filters()):
                if on_memory is not None:
                    on_memory(m)
                yield m

        return export_chunks(memories(), str(fmt))

    def export_to(self, path: Path, fmt: ExportFormat | str = ExportFormat.JSONL,
                  filters: Filters | None = None) -> int:
        """Write the export to a file atomically; returns how many memories it holds."""
        from memcli.ops.io import write_stream

        written: list[Memory] = []  # the memories, by reference: the export is streamed, never held
        try:
            write_stream(path.absolute(), self.export_chunks(fmt, filters, on_memory=lambda m: written.append(m)))
        except OSError as e:
            raise StoreError(f"cannot write {path}: {e.strerror}") from None
        return len(written)

    def import_records(self, records: list[dict[str, Any]], *, name: str = "records") -> ImportReport:
        """Load records (export's shape; `text` required): validated first, then one commit."""
        from memcli.ops.io import import_memories, to_memories

        self.ensure()
        self._store.index.sync()
        return import_memories(self._store, to_memories(records, name, f"import:{name}"))

    def import_file(self, path: Path | BinaryIO, fmt: str | None = None, *, name: str | None = None,
                    split: bool = False, redact: bool = True, prepare: Callable[[], None] | None = None,
                    on_progress: Callable[[int, int], None] | None = None) -> ImportReport:
        """Import an export (json, jsonl, csv, md), a Markdown note or a folder of notes, or a binary
        stream (spooled to a file: it is read twice): every record is validated before `prepare`
        runs and anything is written."""
        from memcli.ops.io import import_source
        from memcli.ops.records import spool_stdin

        named = name or (path.name if isinstance(path, Path) else "stdin")
        with contextlib.nullcontext(path) if isinstance(path, Path) else spool_stdin(path) as source:
            return import_source(self._store, source, fmt, name=named, split=split, redact=redact, prepare=prepare,
                                 on_progress=on_progress)

    # ------------------------------------------------------------ the inbox and the integrations
    def inbox(self) -> list[tuple[Path, dict[str, Any]]]:
        """Inputs waiting in the inbox, oldest first."""
        from memcli.storage.inbox import inputs

        return inputs(self.path)

    def retry_inbox(self, *, model: str | None = None) -> list[tuple[str, AddResult | str]]:
        """Replay parked inputs through the LLM pipeline; each success leaves the inbox."""
        from memcli.agents.spool import retry

        return retry(self._store, model=model)

    def process_inbox(self, *, wait: float = 300) -> ProcessReport:
        """Run spooled inputs through the add pipeline; what fails waits. A worker already running is
        waited for (up to `wait` seconds)."""
        from memcli.agents.spool import process

        return process(self._store, wait=wait)

    def share(self, *, push: bool = True) -> ShareReport:
        """A store committed to git: commit its changes, pull, re-index, push."""
        from memcli.agents.sharing import sync

        return sync(self._store, push=push)

    @staticmethod
    def capture(kind: str, *, store: str | None = None, stdin: Any = b"", sha: str | None = None,
                rewrite: str | None = None, origins: Sequence[str] | None = None, text: str | None = None,
                redact: bool = True) -> Captured | None:
        """Spool input from a hook (claude-code, git, git-rewrite, text) and start the worker;
        `InputRejected` for input that cannot be captured. claude-code fails open (its host would
        report a failure every turn): the failure goes to `inbox/errors.log`, the result is None."""
        from memcli.agents.capture import CaptureError, record_hook_failure, run

        try:
            return run(kind, store=store, stdin=stdin, sha=sha, origins=list(origins) if origins else None,
                       rewrite=rewrite, text=text, redact=redact)
        except Exception as e:
            if kind == "claude-code":
                record_hook_failure(store, f"capture claude-code: {' '.join(str(e).split()) or type(e).__name__}")
                return None
            if isinstance(e, CaptureError):
                raise InputRejected(str(e)) from None
            raise

    @staticmethod
    def enter_session(payload: Any) -> None:
        """From a Claude Code hook: enter the session's directory (`cwd` in the hook's JSON), so
        that its store and project are the ones found."""
        try:
            data = json.loads((payload if isinstance(payload, bytes | str) else payload.read()) or "{}")
        except (ValueError, OSError):
            return
        cwd = Path(data["cwd"]) if isinstance(data, dict) and data.get("cwd") else None
        if cwd is not None and cwd.is_dir():
            os.chdir(cwd)

    @staticmethod
    def install_hooks(target: str, *, scope: str = "project", store: str | None = None,
                      uninstall: bool = False) -> HookReport:
        """Install (or remove) memcli's `git` hooks or `claude-code` session hooks."""
        from memcli.agents import hooks

        if target == "git":
            return hooks.install_git(store=store, uninstall=uninstall)
        return hooks.install_claude_code(scope=scope, store=store, uninstall=uninstall)
