"""`add --batch` at import speed: decide each line as its own `add` would, write a chunk at once.

A commit per line (lock, journal, fsyncs, index update) ran ~24 lines/s. Here a chunk's lines are
planned into ONE `ChangeSet`, each against a `PendingView` (the index as the lines before it leave
it), so every decision is the one it would get after the previous lines were committed.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from memcli.core.errors import InvalidInput
from memcli.core.memory import Memory, iso
from memcli.index import Index
from memcli.ops.add import IngestError, add, plan_add
from memcli.ops.changes import ChangeSet, commit_planned
from memcli.ops.handle import Store

#: lines planned per commit: big enough that the per-commit cost (fsyncs, vector file, index
#: update) is small per line, small enough that results of a piped input appear promptly
CHUNK = 64


class PendingView:
    """What `_decide` reads of the index (`knn`, `records`, `find_exact`, `labels_of`), as the plan so
    far leaves it: memories it added or changed come from the plan (exact cosine), the rest from
    the index, synced once."""

    def __init__(self, index: Index, cs: ChangeSet) -> None:
        self.index = index
        self.cs = cs
        self.embedder = index.embedder
        self._ids: list[str] = []  # pending memories, in the order first seen
        self._pos: dict[str, int] = {}
        self._recs: dict[str, Memory] = {}  # as the plan leaves them (a snapshot, not its working copy)
        self._vecs: dict[str, np.ndarray] = {}
        self._store_labels: set[int] = set()  # index labels the plan shadows (changed memories)

    def _label(self, mid: str) -> int:
        """A label of our own for a pending memory: negative, never an index label (nor -1)."""
        return -2 - self._pos[mid]

    def note(self, ids: Iterable[str]) -> None:
        """Refresh the view for memories a planned line added or changed."""
        for mid in dict.fromkeys(i for i in ids if i):
            try:
                m = self.cs.memory(mid)
            except Exception:  # trashed by the plan (DELETE): no longer a candidate
                self._recs.pop(mid, None)
                self._vecs.pop(mid, None)
                continue
            rec = m.clone()
            old = self._recs.get(mid)
            if mid not in self._pos:
                self._pos[mid] = len(self._ids)
                self._ids.append(mid)
                self._store_labels.update(self.index.labels_of([mid]).values())
            if old is None or old.text != rec.text:
                self._vecs[mid] = self.embedder.embed([m.text])[0]
            self._recs[mid] = rec

    # ------------------------------------------------------------ the index's reading interface
    def knn(self, qvecs: np.ndarray, k: int, allowed: list[int] | None = None) -> list[list[tuple[int, float]]]:
        base = self.index.knn(qvecs, k + len(self._store_labels), allowed)
        live = [mid for mid in self._ids if mid in self._recs]
        mat = np.stack([self._vecs[mid] for mid in live]) if live else None
        out = []
        for q, row in zip(qvecs, base):
            hits = [(lab, s) for lab, s in row if lab not in self._store_labels]
            if mat is not None:
                sims = mat @ q
                hits += [(self._label(mid), float(s)) for mid, s in zip(live, sims)]
            hits.sort(key=lambda h: -h[1])
            out.append(hits[:k])
        return out

    def records(self, labels: Iterable[int]) -> dict[int, Memory]:
        labels = list(labels)
        out = self.index.records([lab for lab in labels if lab >= 0 and lab not in self._store_labels])
        for lab in labels:
            if lab < -1 and -2 - lab < len(self._ids):
                rec = self._recs.get(self._ids[-2 - lab])
                if rec is not None:
                    out[lab] = rec
        return out

    def find_exact(self, text: str) -> str | None:
        from memcli.services.extract import normalise

        mid = self.index.find_exact(text)
        if mid and mid not in self._recs:
            return mid  # a memory the plan did not touch: as the index says
        norm = normalise(text)
        if mid and normalise(self._recs[mid].text) == norm:
            return mid
        return next((i for i in self._ids if i in self._recs and normalise(self._recs[i].text) == norm), None)

    def labels_of(self, ids: Iterable[str]) -> dict[str, int]:
        ids = list(ids)
        out = {mid: self._label(mid) for mid in ids if mid in self._recs}
        rest = [mid for mid in ids if mid not in out]
        if rest:
            out.update(self.index.labels_of(rest))
        return out

    def sync(self) -> None:
        """Synced once, when the view was made."""


def _plan_chunk(store: Store, items: list[tuple[int, Any]]
                ) -> tuple[ChangeSet, list[tuple[int, Any]], BaseException | None]:
    """Plan every line of a chunk into one change set; returns it, the per-line outputs, and an error
    that stopped the chunk early (an unreachable LLM: the lines before it are still written)."""
    index = store.index
    index.sync()
    cs = ChangeSet(store)
    view = PendingView(index, cs)
    outputs: list[tuple[int, Any]] = []
    for n, item in items:
        if isinstance(item, str):
            outputs.append((n, item))
            continue
        kw = dict(item)
        text = kw.pop("text")
        try:
            _, result = plan_add(store, text, changes=cs, view=view, **kw)
        except (ValueError, InvalidInput, IngestError) as e:
            outputs.append((n, f"line {n}: {e}"))
            continue
        except Exception as e:  # noqa: BLE001 - written up to here, then raised by the caller
            return cs, outputs, e
        view.note(i for ev in result.events for i in (ev.id, getattr(ev, "supersedes", None)))
        outputs.append((n, result))
    return cs, outputs, None


def add_chunks(store: Store, items: Iterable[tuple[int, Any]], chunk: int = CHUNK) -> Iterator[tuple[int, Any]]:
    """Plan and commit `batch_items` a chunk at a time, yielding each line's output once written; a
    chunk whose memories changed on disk meanwhile is planned again."""
    it = iter(items)
    while part := list(itertools.islice(it, chunk)):
        def plan(part: list = part) -> tuple[ChangeSet, tuple[list, BaseException | None]]:
            cs, outputs, error = _plan_chunk(store, part)
            return cs, (outputs, error)

        outputs, error = commit_planned(plan)
        yield from outputs
        if error is not None:
            raise error


def add_batch(store: Store, lines: Any, **options: Any) -> Any:
    """`add --batch`: JSON lines `{"text", "origins"?, "created"?, "tags"?, "type"?}`, each decided as
    one `add` after the other; yields `(line_number, AddResult)`, or `(line_number, message)` for a
    line that cannot be used (one bad line never stops the others). `options` are `add`'s."""
    if options.get("dry_run") and store.exists():  # one plan for the whole input, never committed
        _, outputs, error = _plan_chunk(store, list(batch_items(lines, options)))
        yield from outputs
        if error is not None:
            raise error
        return
    if options.get("dry_run"):  # a store still to be created: nothing to decide against but the input
        for n, item in batch_items(lines, options):
            if isinstance(item, str):
                yield n, item
                continue
            try:
                yield n, add(store, **item)
            except (ValueError, InvalidInput, IngestError) as e:
                yield n, f"line {n}: {e}"
        return
    yield from add_chunks(store, batch_items(lines, options))


def batch_items(lines: Any, options: dict[str, Any]) -> Any:
    """`(line_number, add's keyword arguments)` per usable line, or `(line_number, message)`."""
    options = dict(options)
    base_tags = list(options.pop("tags", ()) or ())
    base_origins = list(options.pop("origins", ()) or ())
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as e:
            yield n, f"line {n}: not JSON ({e.msg})"
            continue
        if not isinstance(item, dict) or not isinstance(item.get("text"), str) or not item["text"].strip():
            yield n, f"line {n}: needs a non-empty \"text\""
            continue
        try:
            tags = item.get("tags") or []
            origins = item.get("origins") or []
            if isinstance(tags, str):
                tags = [tags]
            if isinstance(origins, str):
                origins = [origins]
            if not all(isinstance(x, str) for x in [*tags, *origins]):
                raise InvalidInput("tags and origins must be strings")
            created = iso(item["created"]) if item.get("created") else None
        except (ValueError, InvalidInput) as e:
            yield n, f"line {n}: {e}"
            continue
        kw = {**options, "text": item["text"], "created": created, "tags": [*base_tags, *tags],
              "origins": [*base_origins, *origins]}
        if item.get("type"):
            kw["type"] = item["type"]
        yield n, kw
