"""The public Python API: `memcli.Store`, one method per thing a user does.

Every method is a thin, typed call into the planning modules (ingest, curate, io, search, ask);
every write goes through one `ChangeSet` commit, exactly as the CLI's. Per-call options (an LLM
model, LLM on or off, a threshold) are parameters: the store's configuration never changes once
loaded.

    from memcli import Store
    store = Store("~/.memcli")
    store.add("We pin numpy below 3 until the wheels land.", tags=["deps"])
    for hit in store.search("numpy version pin", k=3):
        print(f"{hit.score:.2f}", hit.memory.text)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from memcli.core.memory import Memory
from memcli.core.vocab import ExportFormat, MemoryType, SortKey
from memcli.index import Filters
from memcli.ops.handle import Store as _StoreHandle

if TYPE_CHECKING:  # each method imports the module it calls: `list` or `export` never loads extraction
    from memcli.ops.add import AddResult
    from memcli.ops.ask import Answer
    from memcli.ops.curate import ConsolidateReport, MergeResult, PruneResult, RollbackResult
    from memcli.ops.io import ImportReport
    from memcli.ops.search import SearchResponse

__all__ = ["Filters", "Store"]


class Store(_StoreHandle):
    """A memcli store directory. Cheap to construct; nothing is read until needed."""

    def add(
        self, text: str, *, raw: bool = False, llm: bool | None = None, llm_model: str | None = None,
        tags: Sequence[str] = (), type: MemoryType | str | None = None, origins: Sequence[str] = (),
        user: str | None = None, project: str | None = None, session: str | None = None,
        threshold: float | None = None, allow_delete: bool = False, dry_run: bool = False, redact: bool = True,
        **options: Any,
    ) -> AddResult:
        """Turn text into memories: extract facts, decide ADD / UPDATE / NONE / DELETE against
        what is stored, write (unless `dry_run`). `llm`: None = use the configured LLM if any,
        False = heuristic only, True = require one; `llm_model` picks a model for this call."""
        from memcli.ops.add import add

        return add(self, text, raw=raw, llm=llm, llm_model=llm_model, tags=tags,
                   type=None if type is None else str(type), origins=origins, user=user, project=project,
                   session=session, threshold=threshold, allow_delete=allow_delete, dry_run=dry_run, redact=redact,
                   **options)

    def import_conversations(self, conversations: Any, name: str, *, redact: bool = True) -> list[dict[str, Any]]:
        """Agent sessions / chat conversations (memcli.services.transcripts.Conversation, any
        iterable: a streamed export is read one at a time) to memories: a few per session, dated
        with their turns' own times, plus one summary each (memcli/ops/sessions.py)."""
        from memcli.ops.sessions import import_conversations

        return import_conversations(self, conversations, name, redact=redact)

    def search(self, query: str, *, k: int = 5, threshold: float | None = None, filters: Filters | None = None,
               record_usage: bool = True, **options: Any) -> SearchResponse:
        """Ranked memories for a query; each hit has `.memory`, `.score` and `.parts`."""
        from memcli.ops.search import search

        return search(self, query, k=k, threshold=threshold, filters=filters, record_usage=record_usage, **options)

    def ask(self, question: str, *, k: int = 8, llm_model: str | None = None, redact: bool = True) -> Answer:
        """Answer from the top `k` memories with the LLM; iterate `answer.stream()` for the text,
        then `answer.cited()` for the memory ids it relies on."""
        from memcli.ops.ask import ask

        return ask(self, question, k=k, llm_model=llm_model, redact=redact)

    def get(self, memory_id: str) -> Memory:
        """One memory, read from its file (a unique id prefix is enough)."""
        self.index.sync()
        return self.read(self.index.resolve_id(memory_id))

    def list(self, filters: Filters | None = None, *, sort: SortKey | str = SortKey.CREATED, desc: bool = False,
             limit: int | None = None) -> list[Memory]:
        """Memories matching `filters`, sorted (from the catalog, no file read)."""
        self.index.sync()
        return self.index.select(filters, order=str(sort), limit=limit, desc=desc)

    def remove(self, ids: Iterable[str], *, reason: str = "removed by user", dry_run: bool = False) -> list[str]:
        """Move memories to the trash (restorable); returns their ids."""
        from memcli.ops.changes import ChangeSet

        cs = ChangeSet(self)
        done = [cs.trash(mid, reason, event="RM").id for mid in ids]
        if not dry_run:
            cs.commit()
        return done

    def restore(self, ids: Iterable[str] | str) -> list[str]:
        """Bring memories back from the trash, exactly as they were."""
        from memcli.ops.changes import ChangeSet

        cs = ChangeSet(self)
        done = [cs.restore(mid).id for mid in ([ids] if isinstance(ids, str) else ids)]
        cs.commit()
        return done

    def empty_trash(self, *, older_than: str | None = None, dry_run: bool = False) -> list[Memory]:
        """Delete trashed memories for good (they cannot be restored): all of them, or those
        trashed before `older_than` (an age such as `30d`, or a date; one whose trash time cannot
        be read is kept). Returns them as they were in the trash (`extra["trashed"]`: at, reason);
        `dry_run` deletes nothing."""
        from memcli.core.memory import parse_when

        cutoff = parse_when(older_than) if older_than else None

        def choose() -> list[Memory]:
            return [m for m in self.trashed() if cutoff is None or _trashed_before(m, cutoff)]

        if dry_run:
            return choose()
        # chosen under the writer lock that purges them: a memory restored and trashed again
        # meanwhile is judged by its new trash time, never purged on the strength of its old one
        with self.lock():
            chosen = choose()
            purged = set(self.purge_trash([m.id for m in chosen]))
        return [m for m in chosen if m.id in purged]

    def merge(self, ids: Sequence[str], *, use_llm: bool | None = None, llm_model: str | None = None,
              dry_run: bool = False) -> MergeResult:
        """Merge memories into one; the originals go to the trash, their texts into history."""
        from memcli.ops.curate import merge

        return merge(self, list(ids), use_llm=use_llm, llm_model=llm_model, dry_run=dry_run)

    def consolidate(self, *, use_llm: bool | None = None, llm_model: str | None = None,
                    dry_run: bool = False) -> ConsolidateReport:
        """Merge near-duplicates, flag contradictions, distil recurring episodes (one commit)."""
        from memcli.ops.curate import consolidate

        return consolidate(self, use_llm=use_llm, llm_model=llm_model, dry_run=dry_run)

    def prune(self, *, older_than: str | None = None, unused: bool = False, min_confidence: float | None = None,
              type: MemoryType | str | None = None, dry_run: bool = False) -> PruneResult:
        """Trash stale memories (criteria combine with AND; at least one)."""
        from memcli.core.memory import parse_when
        from memcli.ops.curate import prune

        cutoff = parse_when(older_than) if older_than else None
        return prune(self, older_than=cutoff, unused=unused, min_confidence=min_confidence,
                     type=None if type is None else str(type), dry_run=dry_run)

    def rollback(self, origin: str, *, dry_run: bool = False) -> RollbackResult:
        """Undo one origin: what only it vouched for goes to the trash; others just lose it."""
        from memcli.ops.curate import rollback

        return rollback(self, origin, dry_run=dry_run)

    def export(self, fmt: ExportFormat | str = ExportFormat.JSONL, filters: Filters | None = None) -> str:
        """The memories as json, jsonl, md or csv text (what `memcli export` writes)."""
        from memcli.ops.io import export

        self.index.sync()
        return export(self.index.select(filters, order="id"), str(fmt))

    def import_records(self, records: list[dict[str, Any]], *, name: str = "records") -> ImportReport:
        """Load records (export's shape; `text` required): validated first, then one commit."""
        from memcli.ops.io import import_memories, to_memories

        self.ensure()
        self.index.sync()
        return import_memories(self, to_memories(records, name, f"import:{name}"))


def _trashed_before(memory: Memory, cutoff: str) -> bool:
    """Whether a trashed memory (`Files.trashed`) went to the trash before `cutoff` (ISO, UTC)."""
    from memcli.core.memory import iso

    try:
        at = iso(str(memory.extra["trashed"].get("at") or ""))
    except ValueError:
        return False
    return at is not None and at < cutoff
