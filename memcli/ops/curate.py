"""Curation: merge, prune, rollback. Nothing is erased: what leaves `facts/` goes to the trash
with a reason, and merged texts stay in the survivor's `history`."""

from __future__ import annotations

import contextlib
import gc
import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from memcli.core.errors import InvalidInput, LLMNotConfigured, StoreError
from memcli.core.memory import Memory, derived_ulid, new_ulid, now_iso
from memcli.index import Filters
from memcli.ops.changes import ChangeSet, Detach, Link, Supersede
from memcli.ops.handle import Store
from memcli.services.background import background, can_fork

NEIGHBOURS = 8  # per memory, for curation's one kNN pass (groups, contradictions, episodes)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(\[])")


@dataclass
class MergeResult:
    merged: Memory
    sources: list[str]
    method: str  # "llm" | "heuristic"
    note: str | None = None  # e.g. the LLM's reply was unusable and the heuristic merge was used
    texts: list[str] = field(default_factory=list)  # the sources' texts, in `sources` order

    def to_dict(self) -> dict[str, Any]:
        d = {"id": self.merged.id, "text": self.merged.text, "merged_from": self.sources, "method": self.method}
        if self.note:
            d["note"] = self.note
        return d


def heuristic_merge(texts: list[str]) -> str:
    """Keep the newest text whole, then add each older sentence it does not already contain.

    Texts come oldest first; newer wording wins, and no unique sentence is dropped, except an
    older code block that a newer one for the same command or config replaces ("line-length = 100"
    then "line-length = 110": the old block would state the stale value as current).
    """
    from memcli.services.llm.checks import without_superseded_code

    if any("`" in t or "~~~" in t for t in texts[1:]):  # (no newer code, no block to drop)
        texts = without_superseded_code(texts)
    base = texts[-1].strip()
    seen = {_key(s) for s in _SENTENCE.split(base)}
    words = f" {_key(base)} "  # containment by whole words: "port 80" is not in "port 8080"
    extra = []
    for t in reversed(texts[:-1]):
        for s in _SENTENCE.split(t.strip()):
            k = _key(s)
            if k and k not in seen and f" {k} " not in words:
                seen.add(k)
                extra.append(s.strip())
    return base if not extra else base + "\n\n" + " ".join(extra)


def _key(s: str) -> str:
    return " ".join(_WORD.findall(s.lower()))


_WORD = re.compile(r"\w+")


def plan_merge(store: Store, ids: list[str], *, use_llm: bool | None = None, llm_model: str | None = None,
               changes: ChangeSet | None = None, merged_id: str | None = None) -> tuple[ChangeSet, MergeResult]:
    """Plan merging memories into a new one: the originals to the trash, their texts into history.

    With an LLM (`use_llm` True, or None and a model configured; `llm_model` overrides the
    configured one for this call) the merge prompt writes the text (every unique fact kept, newer
    values win, the Markdown kept). The request is made here, while planning, never under the
    writer lock; `commit()` then re-checks that no original changed meanwhile (else `Conflict`).
    A reply that is unusable falls back to the heuristic merge, with a note; an unreachable LLM
    raises LLMError and plans nothing. `merged_id`: the new memory's id, when the caller chose it
    ahead (a new ULID otherwise).
    """
    if len(set(ids)) < 2:
        raise InvalidInput("merge needs at least two different memories")
    cs = changes if changes is not None else ChangeSet(store)
    mems = _oldest_first(cs.peek(i) for i in dict.fromkeys(ids))  # read, trashed as is
    texts = [m.text for m in mems]
    method = "heuristic"
    note = None
    model = llm_model or store.config.llm_model
    if (use_llm is None and model) or use_llm:
        if not model:
            raise LLMNotConfigured("no LLM configured: set MEMCLI_LLM_MODEL (or llm_model in config.toml)")
        from memcli.ops.add import llm_client
        from memcli.services.llm.client import LLMFormatError

        try:
            with _gc_running():  # an HTTP request and its reply make cyclic garbage: collected as usual
                text = llm_client(store, model=model).merge(texts)
            method = "llm"
        except LLMFormatError as e:
            text = heuristic_merge(texts)
            note = f"LLM merge unusable ({e}); used the heuristic merge"
    else:
        text = heuristic_merge(texts)
    at = merged_at(mems)
    merged = Memory(
        id=merged_id or merged_id_for(store, mems), text=text, type=_merged_type(mems),
        tags=list(dict.fromkeys(t for m in mems for t in m.tags)),
        domain=next((m.domain for m in reversed(mems) if m.domain), None),
        confidence=max(m.confidence for m in mems), source="llm" if method == "llm" else mems[-1].source,
        origins=list(dict.fromkeys(o for m in mems for o in m.origins)), user=mems[-1].user,
        project=mems[-1].project, created=min(m.created for m in mems), updated=at,
        code_pattern=next((m.code_pattern for m in reversed(mems) if m.code_pattern), None),
        flags={k: True for m in mems for k, v in m.flags.items() if v},
        history=[dict(h) for m in mems for h in m.history]  # copies: the sources are the plan's reads
        + [{"event": "MERGE", "at": at, "id": m.id, "old": m.text} for m in mems],
        links=[dict(link) for m in mems for link in m.links],
        extra={k: v for m in mems for k, v in m.extra.items() if k not in ("declared_id", "trashed")},
    )
    cs.add(merged, event="MERGE", sources=[m.id for m in mems], method=method)
    for m in mems:
        cs.trash(m.id, f"merged into {merged.id}", event="MERGED")
    return cs, MergeResult(merged, [m.id for m in mems], method, note, [m.text for m in mems])


def merged_at(mems: Iterable[Memory]) -> str:
    """A merged memory's `updated` (and its history's MERGE time): its newest source's, not the
    clock's, so that the same merge made in two clones writes the same file (see merged_id_for)."""
    return max((m.updated for m in mems if m.updated), default=None) or now_iso()


def merged_id_for(store: Store, mems: list[Memory]) -> str:
    """The id of the merge of `mems`: derived from their ids and `merged_at`, so two clones that
    merge the same pair make the same memory and a sync converges (issue 24). A new ULID when
    that id is taken already (the same sources restored and merged again)."""
    mid = derived_ulid(merged_at(mems), [m.id for m in mems])
    if os.path.lexists(store.fact_file(mid)) or os.path.lexists(store.trash_dir / f"{mid}.md"):
        return new_ulid()
    return mid


def _oldest_first(mems: Iterable[Memory]) -> list[Memory]:
    """A merge's sources in the order its text and fields are taken: by `updated`, then id."""
    return sorted(mems, key=lambda m: (m.updated, m.id))


def _merged_type(mems: list[Memory]) -> str:
    """A merged memory's type: its sources' most common one, the newest of a tie."""
    types = [m.type for m in mems]
    return max(reversed(types), key=types.count)


def merge(store: Store, ids: list[str], *, use_llm: bool | None = None, dry_run: bool = False,
          llm_model: str | None = None) -> MergeResult:
    """Merge memories into a new one (see `plan_merge`); a dry run plans and writes nothing."""
    cs, result = plan_merge(store, ids, use_llm=use_llm, llm_model=llm_model, changes=ChangeSet(store, preview=dry_run))
    if not dry_run:
        cs.commit()
    return result


def merge_groups(store: Store, groups: list[list[str]], *, use_llm: bool | None = None, dry_run: bool = False,
                 llm_model: str | None = None,
                 known: dict[str, tuple[Memory, tuple[int, int]]] | None = None) -> list[MergeResult]:
    """Merge each group into one memory; every merge is planned first, then one commit. `known`:
    catalog entries already read for the members (see `similar_groups`), else they are read here."""
    cs = ChangeSet(store, preview=dry_run)
    with _gc_paused():
        cs.known(store.index.catalog_entries(mid for g in groups for mid in g) if known is None else known)
        results = [plan_merge(store, g, use_llm=use_llm, llm_model=llm_model, changes=cs)[1] for g in groups]
    if not dry_run:
        cs.commit()
    return results


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a pass is planned: planning over 10k memories makes
    hundreds of thousands of long-lived objects (records, parsed texts, working copies) and almost
    no reference cycles (a few hundred), so the collector's repeated scans of them cost ~15% of the
    planning time and freed nothing; reference counting frees the rest as usual."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if not gc.get_freeze_count():  # (a caller that froze objects itself keeps them frozen)
                # what the plan made and still holds goes to the oldest generation as it is;
                # otherwise the first young collection after the pause traverses all of it
                gc.freeze()
                gc.unfreeze()
            gc.enable()


@contextlib.contextmanager
def _gc_running() -> Iterator[None]:
    """The collector on for a while inside `_gc_paused` (an LLM request: one consolidate may make
    a thousand, each leaving cycles behind), paused again after."""
    paused = not gc.isenabled()
    if paused:
        gc.enable()
    try:
        yield
    finally:
        if paused:
            gc.disable()


def _close(nbr: np.ndarray, sims: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """(rows, columns) of the neighbour arrays' entries at >= `threshold`, row by row, nearest
    first (a -1 position, no neighbour, never counts): the pairs every curation pass starts from."""
    return np.nonzero((sims >= threshold) & (nbr >= 0))


def _close_positions(nbr: np.ndarray, sims: np.ndarray, threshold: float, start: int = 0
                     ) -> tuple[list[int], list[int]]:
    """The pairs at >= `threshold` of rows start.. (`nbr`/`sims` hold those rows only) as two
    lists of positions in `ids` (row, neighbour), row by row, nearest first (`_close`)."""
    rows, cols = _close(nbr, sims, threshold)
    return (rows + start).tolist(), nbr[rows, cols].tolist()


def _linked_groups(ids: list[str], nbr: np.ndarray, sims: np.ndarray, threshold: float,
                   recs: dict[str, Memory] | None = None,
                   apart: Callable[[Memory, Memory], bool] | None = None) -> list[list[str]]:
    """Single-linkage clusters (union-find) over the neighbour pairs at >= `threshold` (arrays of
    `Index.neighbour_arrays`), taken row by row, nearest first; a pair for which
    `apart(memory, memory)` is true is not linked. Groups come in the order of their first member.
    `apart` is symmetric (`_opposed` is): a pair found from both ends is judged once."""
    linker = _Linker(len(ids), threshold, recs.__getitem__ if recs and apart else None, apart)
    linker.rows(ids, 0, nbr, sims)
    return linker.groups(ids)


class _Linker:
    """`_linked_groups` fed batch by batch, in row order (the kNN pass's `on_batch`): the pairs
    come in the same order as from the whole arrays, so the groups are the same, and the linking
    is done while the graph searches the next batch instead of after the pass."""

    def __init__(self, n: int, threshold: float, memory: Callable[[str], Memory] | None,
                 apart: Callable[[Memory, Memory], bool] | None) -> None:
        self.parent = list(range(n))
        self.threshold, self.memory, self.apart = threshold, memory, apart
        self.kept_apart: set[tuple[int, int]] = set()
        #: `apart`'s verdicts judged ahead, by position pair as `rows` asks (see `_judged_ahead`)
        self.verdicts: dict[tuple[int, int], bool] = {}
        #: with `apart` = `_opposed`: the texts' verdicts the index recorded with the pairs (both
        #: orders; `Index.neighbour_arrays(verdicts=...)`), so only the memories' state is left to check
        self.recorded: dict[tuple[int, int], bool] = {}

    def find(self, x: int) -> int:
        parent = self.parent
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def rows(self, ids: list[str], start: int, nbr: np.ndarray, sims: np.ndarray) -> None:
        """Link the pairs of rows start.. (`nbr`/`sims` hold those rows only)."""
        find, parent, kept_apart, memory, apart = self.find, self.parent, self.kept_apart, self.memory, self.apart
        verdicts, recorded = self.verdicts, self.recorded
        for i, j in zip(*_close_positions(nbr, sims, self.threshold, start)):
            ri, rj = find(i), find(j)
            if ri == rj:
                continue  # linked already (each pair is seen from both ends)
            if memory is None or apart is None:
                parent[rj] = ri
            elif (j, i) not in kept_apart:  # (the pair seen from its other end: judged apart already)
                verdict = verdicts.get((i, j))
                if verdict is None:
                    a, b = memory(ids[i]), memory(ids[j])
                    text = recorded.get((i, j))
                    verdict = apart(a, b) if text is None else (text or _superseded(a, b))
                if verdict:
                    kept_apart.add((i, j))
                else:
                    parent[rj] = ri

    def pending(self, batches: list[tuple[int, np.ndarray, np.ndarray]]) -> list[tuple[int, int]]:
        """The pairs `rows` may judge when fed `batches` ((start, nbr rows, sims rows), in row order)
        after what it has linked so far: each pair once, as `rows` would first meet it (row, then
        neighbour), less those linked or kept apart already. A few more than `rows` will judge
        (pairs the links made meanwhile join), never one less."""
        find, kept_apart, seen, out = self.find, self.kept_apart, set(), []
        for start, nbr, sims in batches:
            for i, j in zip(*_close_positions(nbr, sims, self.threshold, start)):
                key = (i, j) if i < j else (j, i)
                if key in seen or (j, i) in kept_apart or (i, j) in kept_apart or find(i) == find(j):
                    continue
                seen.add(key)
                out.append((i, j))
        return out

    def groups(self, ids: list[str]) -> list[list[str]]:
        groups: dict[int, list[str]] = {}
        for i, mid in enumerate(ids):
            groups.setdefault(self.find(i), []).append(mid)
        return [g for g in groups.values() if len(g) > 1]


class _Ahead:
    """Work done on each batch of the kNN pass while the graph answers the next one (see
    `Vectors.neighbour_arrays`): the catalog entries of the memories with a neighbour at >=
    `threshold` (or of every memory, `every`), and their texts read ahead (`decide.warm`).

    With `later` (and `every`), the texts of the pairs at >= `later` that may be compared after
    the pass (not two episodes: `_may_contradict`) are read ahead too, but only while the graph
    is still searching (`idle`): the caller's thread takes on work that would otherwise be left
    for after the pass, and never makes the pass wait for it."""

    def __init__(self, store: Store, threshold: float, *, every: bool = False, later: float | None = None,
                 apart: Callable[[Memory, Memory], bool] | None = None, searched: threading.Event | None = None,
                 recorded: dict[tuple[int, int], bool] | None = None) -> None:
        self.index, self.threshold, self.every, self.later, self.apart = store.index, threshold, every, later, apart
        self.linker: _Linker | None = None  # with `apart`: the groups at >= threshold, linked batch by batch
        #: with `searched`: once it is set (the graph is done), the batches are left to link after the
        #: pass (`deferred`), their pairs judged on two cores (`_judged_ahead`)
        self.searched = searched
        self.deferred: list[tuple[int, np.ndarray, np.ndarray]] = []
        self.entries: dict[str, tuple[Memory, tuple[int, int]]] = {}
        self.warmed: set[int] = set()  # positions whose text was read ahead
        self.queue: list[int] = []  # positions to read ahead while the graph searches (`later`)
        self.queued = 0  # how many of `queue` were taken
        self.episodic: np.ndarray | None = None
        self.ids: list[str] = []
        self.recorded = {} if recorded is None else recorded  # handed to the linker (see `_Linker.recorded`)

    def __call__(self, ids: list[str], start: int, nbr: np.ndarray, sims: np.ndarray) -> None:
        # sorted distinct positions, as np.union1d gave; not union1d: numpy 2's unique imports numpy.ma
        close = sorted({p for side in _close_positions(nbr, sims, self.threshold, start) for p in side})
        if self.every:
            if not self.entries:
                self.entries = self.index.catalog_entries(ids)
                self.ids = ids
        else:
            self.entries.update(self.index.catalog_entries(ids[p] for p in close if ids[p] not in self.entries))
        if self.apart is not None and self.linker is None:
            entries = self.entries
            self.linker = _Linker(len(ids), self.threshold, lambda mid: entries[mid][0], self.apart)
            self.linker.recorded = self.recorded
        if self.deferred or (self.searched is not None and self.searched.is_set()):
            self.deferred.append((start, nbr, sims))  # judged and linked after the pass
            return
        if self.every:  # (consolidate: the texts go on to the forked contradiction judge; for
            # merge --auto, `rows` parses right here the texts it judges, and only those)
            for p in close:
                self._warm(p, ids)
        if self.linker is not None:
            self.linker.rows(ids, start, nbr, sims)
        if self.later is not None and self.every:
            if self.episodic is None:
                self.episodic = np.array([self.entries[mid][0].type == "episodic" for mid in ids], dtype=bool)
            rows, cols = _close(nbr, sims, self.later)
            a, b = rows + start, nbr[rows, cols]
            keep = ~(self.episodic[a] & self.episodic[b])
            self.queue += sorted({*a[keep].tolist(), *b[keep].tolist()})  # (not union1d: see above)

    def idle(self) -> bool:
        """Read ahead a few of the texts queued by `later`; False when none is left for now."""
        queue, done = self.queue, 0
        while self.queued < len(queue) and done < 16:
            p = queue[self.queued]
            self.queued += 1
            done += self._warm(p, self.ids)
        return self.queued < len(queue)

    def _warm(self, p: int, ids: list[str]) -> bool:
        """Read the text at position `p` ahead (`decide.warm`) unless it was, or the limit is
        reached; whether it was read now."""
        from memcli.rules.relate import WARM_LIMIT, warm

        if p in self.warmed or len(self.warmed) >= WARM_LIMIT:
            return False
        self.warmed.add(p)
        warm(self.entries[ids[p]][0].text)
        return True


@_gc_paused()
def similar_groups(store: Store, threshold: float, *, apart: Callable[[Memory, Memory], bool] | None = None,
                   known: dict[str, tuple[Memory, tuple[int, int]]] | None = None) -> list[list[str]]:
    """Clusters of memories whose pairwise links reach `threshold` (single linkage, union-find);
    a pair for which `apart(memory, memory)` is true is not linked. Only the memories
    with a neighbour that close are read; their catalog entries are added to `known` when given
    (for `merge_groups`, which would otherwise read them again)."""
    # the candidates read, and linked, while the kNN pass runs; once the graph has searched every
    # row (it is faster than the judging), the rows left are judged on two cores after the pass
    searched = threading.Event() if apart and can_fork() else None
    # the veto's verdicts on the texts, as the index recorded them with the close pairs
    recorded: dict[tuple[int, int], bool] | None = {} if apart is _opposed else None
    ahead = _Ahead(store, threshold, apart=apart, searched=searched, recorded=recorded) if apart else None
    ids, _, nbr, sims = store.index.neighbour_arrays(NEIGHBOURS, on_batch=ahead, threshold=threshold,
                                                     searched=searched, verdicts=recorded)
    if len(ids) < 2:
        return []
    if ahead is None:
        return _linked_groups(ids, nbr, sims, threshold)
    if known is not None:
        known.update(ahead.entries)  # every memory with a neighbour at >= threshold
    # no linker: the pass handed out no rows (no graph to search), so there was no pair to link;
    # never the unvetoed `_linked_groups`, which would join memories `apart` keeps apart
    if ahead.linker is None:
        return []
    if ahead.deferred:
        _judged_ahead(ahead.linker, ids, ahead.deferred)
        for start, rows_nbr, rows_sims in ahead.deferred:  # linked in row order, as during the pass
            ahead.linker.rows(ids, start, rows_nbr, rows_sims)
    return ahead.linker.groups(ids)


#: from this many pairs left to judge after the kNN pass, half of them are judged in a forked process
FORK_PAIRS = 400


def _judged_ahead(linker: _Linker, ids: list[str], batches: list[tuple[int, np.ndarray, np.ndarray]]) -> None:
    """Judge the pairs `linker.rows` may ask about when fed `batches` (`_Linker.pending`) into
    `linker.verdicts`: the later half in a forked child (`background`), the first half here
    meanwhile. `apart` is a pure function of the two memories, so a verdict is the same whichever
    process gives it and whenever; `rows` then links in the same order, with the same verdicts,
    as it would judging one pair at a time (a pair it asks about that was not judged ahead, it
    judges itself). Where no child can run, or the child fails, the parent judges its half too.
    Fewer than `FORK_PAIRS` pairs are left to `rows`."""
    memory, apart = linker.memory, linker.apart
    assert memory is not None and apart is not None
    pairs = [p for p in linker.pending(batches) if p not in linker.recorded]  # (those are cheap to decide)
    if len(pairs) < FORK_PAIRS:
        return  # not worth a fork: `rows` judges them as it meets them (no more than it needs)
    half = len(pairs) // 2

    def judge(part: list[tuple[int, int]]) -> dict[tuple[int, int], bool]:
        return {(i, j): bool(apart(memory(ids[i]), memory(ids[j]))) for i, j in part}

    with background(lambda: judge(pairs[half:])) as theirs:
        linker.verdicts.update(judge(pairs[:half]))
        linker.verdicts.update(theirs())


def _close_pairs(ids: list[str], nbr: np.ndarray, sims: np.ndarray, threshold: float,
                 survivor: dict[str, str]) -> list[tuple[str, str, float]]:
    """Each pair (a, b), a < b, of neighbours at >= `threshold` once, with the similarity of its
    first occurrence in the neighbour lists (row by row, nearest first). A merged memory stands for
    its sources (`survivor`: source id -> merged id); a pair inside one merge is left out. Numpy
    picks and de-duplicates the pairs; only the pairs themselves reach Python."""
    rows, cols = _close(nbr, sims, threshold)
    if not len(rows):
        return []
    names = ids + list(dict.fromkeys(survivor.values()))
    rep = np.arange(len(ids))
    if survivor:
        at = {name: k for k, name in enumerate(names)}
        rep[[at[s] for s in survivor]] = [at[m] for m in survivor.values()]
    a, b, sim = rep[rows], rep[nbr[rows, cols]], sims[rows, cols]
    apart_ = a != b
    a, b, sim = a[apart_], b[apart_], sim[apart_]
    rank = np.empty(len(names), np.int64)
    rank[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names))
    lo = np.where(rank[a] < rank[b], a, b)
    hi = a + b - lo
    _, first = np.unique(lo * len(names) + hi, return_index=True)
    first.sort()
    return [(names[x], names[y], s) for x, y, s in zip(lo[first].tolist(), hi[first].tolist(), sim[first].tolist())]


# ---------------------------------------------------------------- prune
class Pruned(NamedTuple):
    """A memory prune trashes (or would, in a dry run), and why."""

    memory: Memory
    reason: str


@dataclass
class PruneResult:
    trashed: list[Pruned] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"trashed": [{"id": p.memory.id, "text": p.memory.text, "reason": p.reason} for p in self.trashed]}


@_gc_paused()
def plan_prune(store: Store, *, older_than: str | None = None, unused: bool = False,
               min_confidence: float | None = None, type: str | None = None) -> tuple[ChangeSet, PruneResult]:
    """Plan trashing stale memories: created before `older_than` (ISO), never returned by a
    search (`unused`), or below `min_confidence`. Criteria combine with AND; at least one is needed."""
    if not (older_than or unused or min_confidence is not None):
        raise StoreError("prune needs a criterion: older than a date, unused, or below a confidence")
    from memcli.ops.search import Usage

    entries = store.index.select_entries(Filters(type=type, until=older_than))
    used = Usage(store).get(list(entries)) if unused else {}
    out = PruneResult()
    cs = ChangeSet(store)
    cs.known(entries)
    for r, _ in entries.values():
        reasons = []
        if older_than:
            reasons.append(f"created before {older_than[:10]}")
        if unused:
            if r.id in used:
                continue
            reasons.append("never returned by a search")
        if min_confidence is not None:
            if r.confidence >= min_confidence:
                continue
            reasons.append(f"confidence {r.confidence} < {min_confidence}")
        reason = "pruned: " + ", ".join(reasons)
        out.trashed.append(Pruned(r, reason))
        cs.trash(r.id, reason, event="PRUNE")
    return cs, out


def prune(store: Store, *, older_than: str | None = None, unused: bool = False, min_confidence: float | None = None,
          type: str | None = None, dry_run: bool = False) -> PruneResult:
    """Trash stale memories (see `plan_prune`); a dry run plans and writes nothing."""
    cs, out = plan_prune(store, older_than=older_than, unused=unused, min_confidence=min_confidence, type=type)
    if not dry_run:
        cs.commit()
    return out


# ---------------------------------------------------------------- rollback
@dataclass
class RollbackResult:
    origin: str
    trashed: list[str] = field(default_factory=list)
    detached: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"origin": self.origin, "trashed": self.trashed, "detached": self.detached}


def plan_rollback(store: Store, origin: str) -> tuple[ChangeSet, RollbackResult]:
    """Plan undoing one origin: memories only it vouched for go to the trash; others just lose it."""
    out = RollbackResult(origin)
    cs = ChangeSet(store)
    for r in store.index.select():
        if origin not in r.origins:
            continue
        if r.origins == [origin]:
            out.trashed.append(r.id)
            cs.trash(r.id, f"rollback of {origin}", event="ROLLBACK", origin=origin)
        else:
            out.detached.append(r.id)
            cs.edit(r.id, Detach(origin), origin=origin, detail="origin removed")
    return cs, out


def rollback(store: Store, origin: str, *, dry_run: bool = False) -> RollbackResult:
    """Undo one origin (see `plan_rollback`); a dry run plans and writes nothing."""
    cs, out = plan_rollback(store, origin)
    if not dry_run:
        cs.commit()
    return out


# ---------------------------------------------------------------- consolidate
def opposing(a: str, b: str, similarity: float = 0.9) -> str | None:
    """Why two similar texts contradict, or None: only texts about the same subject whose value
    differs ("100" vs "500 requests per minute") or whose predicate is negated ("always" vs
    "never"), by the rules of `memcli.rules.relate`. Opposed words in unrelated sentences ("paying off"
    vs "turn it on") are not a contradiction."""
    from memcli.rules.relate import relate

    rel = relate(a, b, similarity, threshold=0.0)
    return rel.reason if rel.contradiction else None


def mergeable(a: Memory, b: Memory) -> bool:
    """May two memories be merged into one? Only the same fact (a rewording or a refinement) about
    the same subject (`decide.texts_mergeable`); never a superseded memory, another subject or a
    contradiction."""
    from memcli.rules.relate import texts_mergeable

    return not _superseded(a, b) and texts_mergeable(a.text, b.text)


def _opposed(a: Memory, b: Memory) -> bool:
    """`similar_groups`' veto: only mergeable pairs are linked."""
    return not mergeable(a, b)


def _superseded(a: Memory, b: Memory) -> bool:
    """What `_opposed` adds to the texts' verdict (`decide.texts_mergeable`): the memories' state."""
    return bool(a.superseded_by or b.superseded_by)


@dataclass
class ConsolidateReport:
    merged: list[dict[str, Any]] = field(default_factory=list)
    contradictions: list[dict[str, Any]] = field(default_factory=list)
    distilled: list[dict[str, Any]] = field(default_factory=list)
    dry_run: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"merged": self.merged, "contradictions": self.contradictions, "distilled": self.distilled,
                "dry_run": self.dry_run}


@_gc_paused()
def plan_consolidate(store: Store, *, use_llm: bool | None = None, llm_model: str | None = None,
                     supersede_older: bool = False, preview: bool = False,
                     sync: bool = True) -> tuple[ChangeSet, ConsolidateReport]:
    """One maintenance pass, planned: merge near-duplicates, flag contradictions, distil
    recurring episodes. One approximate kNN pass over the vector index feeds all three (no n x n
    matrix); LLM merges happen here, with no lock held.

    A contradiction (same subject, another value or a negated predicate) is never merged: it is
    flagged to resolve (`contradicts` links both ways), or with `supersede_older` the older memory
    is marked `superseded_by` the newer one (kept, hidden from default results).

    `preview`: the plan is only shown (a dry run; see `ChangeSet`). `sync=False`: the caller has
    just synced the index (the CLI does, with a progress bar)."""
    cfg = store.config
    report = ConsolidateReport()
    cs = ChangeSet(store, preview=preview)
    index = store.index
    if sync:
        index.sync()
    # every memory's entry and the texts of the merge decisions, read while the kNN pass runs, and
    # as many of the contradiction candidates' texts as the pass leaves time for (the rest are read
    # where they are judged: here, or in the forked child)
    ahead = _Ahead(store, cfg.consolidate_threshold, every=True, later=cfg.contradiction_threshold, apart=_opposed)
    ids, _, nbr, sims = index.neighbour_arrays(NEIGHBOURS, on_batch=ahead, on_idle=ahead.idle)
    if len(ids) < 2:
        return cs, report
    entries = ahead.entries or index.catalog_entries(ids)
    recs = {mid: e[0] for mid, e in entries.items()}
    cs.known(entries)
    survivor: dict[str, str] = {}
    groups = ahead.linker.groups(ids) if ahead.linker is not None else \
        _linked_groups(ids, nbr, sims, cfg.consolidate_threshold, recs, _opposed)
    # The contradiction candidates between memories no merge touches do not depend on the merges:
    # they are judged on another core (`background`) while the merges are planned here. With
    # heuristic merges (pure string work too), the child also judges the pairs of the last
    # `CHILD_MERGES` of the merged memories, making those merged texts itself: the ids are chosen
    # here first, and each merged memory it used is checked against the plan's (else judged here).
    merging = {mid for g in groups for mid in g}
    untouched = [(a, b, sim) for a, b, sim in _close_pairs(ids, nbr, sims, cfg.contradiction_threshold, {})
                 if a not in merging and b not in merging]
    new_ids = [merged_id_for(store, [recs[mid] for mid in g]) for g in groups]
    fork = len(untouched) >= BACKGROUND_PAIRS
    heuristic = not ((use_llm is None and (llm_model or cfg.llm_model)) or use_llm)
    share = len(groups) - int(len(groups) * CHILD_MERGES) if heuristic and fork and can_fork() else len(groups)
    theirs_ids = set(new_ids[share:])  # merged memories whose pairs the child judges

    def work() -> tuple[dict[tuple[str, str], tuple[float, str | None]],
                        dict[tuple[str, str], tuple[float, str | None]], dict[str, tuple[object, ...]]]:
        return (_judge_pairs(untouched, recs.__getitem__),
                *_judge_merged(ids, nbr, sims, cfg.contradiction_threshold, groups, new_ids, theirs_ids, recs))

    made: dict[str, Memory] = {}  # the merged memories as planned (as `cs.memory` gives them, unedited so far)
    with background(work, fork=fork) as judged:
        for group, new_id in zip(groups, new_ids):
            _, r = plan_merge(store, group, use_llm=use_llm, llm_model=llm_model, changes=cs, merged_id=new_id)
            report.merged.append(r.to_dict())
            survivor.update({mid: r.merged.id for mid in r.sources})
            made[r.merged.id] = r.merged

        # contradictions: similar pairs with opposing wording (precision over recall)
        merged_ids = set(survivor.values())

        def record(i: str) -> Memory:  # a merged memory straight from the plan
            return made.get(i) or recs[i]

        pairs = _close_pairs(ids, nbr, sims, cfg.contradiction_threshold, survivor)
        # The pairs with a merged memory are judged here first, and the child's verdicts asked for
        # only then: this process never waits for the child while it has pairs of its own to judge.
        mine: dict[tuple[str, str], str | None] = {}

        def judge_here(a: str, b: str, sim: float) -> None:
            ra, rb = record(a), record(b)
            if _may_contradict(a, b, ra, rb):
                mine[a, b] = opposing(ra.text, rb.text, sim)

        for a, b, sim in pairs:
            if (a in merged_ids or b in merged_ids) and not (a in theirs_ids or b in theirs_ids):
                judge_here(a, b, sim)
        theirs, touched, used = judged() if untouched or theirs_ids else ({}, {}, {})
        same = {mid: used.get(mid) == _merged_signature(made[mid]) for mid in used}
        flagged: list[tuple[str, str, float, str]] = []
        for a, b, sim in pairs:
            if a in merged_ids or b in merged_ids:
                if (a in theirs_ids or b in theirs_ids) and (a, b) not in mine:  # judged by the child
                    hit = touched.get((a, b))
                    if not all(same.get(x, x not in merged_ids) for x in (a, b)) or (hit and hit[0] != sim):
                        judge_here(a, b, sim)  # a merged memory the child made differs from the plan's
                    elif hit is not None:
                        mine[a, b] = hit[1]
                if (a, b) not in mine:
                    continue  # not a candidate
                why = mine[a, b]
                ra, rb = record(a), record(b)
            else:  # one of `untouched`: judged in the background, from the same texts and similarity
                hit = theirs.get((a, b))
                if hit is None:
                    continue  # not a candidate (`_may_contradict`)
                ra, rb = recs[a], recs[b]
                why = hit[1] if hit[0] == sim else opposing(ra.text, rb.text, sim)
            if why:
                flagged.append((a, b, sim, why))
                report.contradictions.append({"ids": [a, b], "similarity": round(sim, 3), "why": why,
                                              "texts": [ra.text, rb.text]})
    for (a, b, _, why), c in zip(flagged, report.contradictions):
        if supersede_older:
            older, newer = sorted((a, b), key=lambda i: (str(record(i).created), i))
            c["superseded"] = {"old": older, "new": newer}
            cs.edit(older, Supersede(newer), quiet=True)
            cs.edit(newer, Link("supersedes", older), quiet=True)
            cs.log("SUPERSEDE", id=newer, old_id=older, reason=f"consolidate: {why}")
            continue
        for mid, other in ((a, b), (b, a)):
            cs.edit(mid, Link("contradicts", other), quiet=True)
        cs.log("CONTRADICTION", ids=[a, b], reason=why)
    report.distilled = _plan_distil(store, cs, ids, nbr, sims, recs, set(survivor))
    return cs, report


#: from this many contradiction candidates outside the merges, they are judged in a forked process
BACKGROUND_PAIRS = 2000
#: the share of the (heuristic) merged memories whose contradiction candidates the forked process
#: judges too: it has the candidates outside the merges already, this process plans every merge.
#: On the 10k bench store, a quarter evens out the two processes' CPU (a half left the child the
#: slower: ~0.41 s against ~0.30 s for this process up to its wait)
CHILD_MERGES = 0.25


def _merged_signature(m: Memory) -> tuple[object, ...]:
    """What judging a merged memory's pairs reads of it (`_may_contradict`, `opposing`)."""
    return m.text, m.type, m.superseded_by, tuple(lk.get("id") for lk in m.links)


def _judge_merged(ids: list[str], nbr: np.ndarray, sims: np.ndarray, threshold: float, groups: list[list[str]],
                  new_ids: list[str], theirs: set[str], recs: dict[str, Memory]
                  ) -> tuple[dict[tuple[str, str], tuple[float, str | None]], dict[str, tuple[object, ...]]]:
    """`_judge_pairs` of the contradiction candidates with a merged memory of `theirs` (ids chosen
    ahead, `new_ids[k]` for `groups[k]`), each merged memory made here as `plan_merge` makes it
    with the heuristic merge (pure string work, for `background`). Also returns the signature
    (`_merged_signature`) of each merged memory made, for the plan to check against its own."""
    if not theirs:
        return {}, {}
    survivor = {mid: new_id for group, new_id in zip(groups, new_ids) for mid in group}
    group_of = dict(zip(new_ids, groups))
    made: dict[str, Memory] = {}

    def record(i: str) -> Memory:
        group = group_of.get(i)
        if group is None:
            return recs[i]
        m = made.get(i)
        if m is None:
            mems = _oldest_first(recs[g] for g in dict.fromkeys(group))
            m = made[i] = Memory(id=i, text=heuristic_merge([x.text for x in mems]), type=_merged_type(mems),
                                 links=[dict(link) for x in mems for link in x.links])
        return m

    out = _judge_pairs([(a, b, sim) for a, b, sim in _close_pairs(ids, nbr, sims, threshold, survivor)
                        if a in theirs or b in theirs], record)
    return out, {mid: _merged_signature(m) for mid, m in made.items()}


def _may_contradict(a: str, b: str, ra: Memory, rb: Memory) -> bool:
    """Is the similar pair (a, b) a contradiction candidate at all (before reading its words)?"""
    if ra.type == rb.type == "episodic":
        return False  # events recur (on other dates, with other numbers): they are distilled
    if any(lk.get("id") in (a, b) for r in (ra, rb) for lk in r.links):
        return False  # related already: flagged by an earlier pass, or distilled one from the other
    # a replaced value is history, not a contradiction
    return not (ra.superseded_by or rb.superseded_by)


def _judge_pairs(pairs: list[tuple[str, str, float]], record: Callable[[str], Memory]
                 ) -> dict[tuple[str, str], tuple[float, str | None]]:
    """(a, b) -> (similarity, why they contradict or None) for each candidate of `pairs` (their
    memories: `record(id)`): pure string work on the memories' texts, so it can run in another
    process (`background`)."""
    out: dict[tuple[str, str], tuple[float, str | None]] = {}
    for a, b, sim in pairs:
        ra, rb = record(a), record(b)
        if _may_contradict(a, b, ra, rb):
            out[a, b] = (sim, opposing(ra.text, rb.text, sim))
    return out


def consolidate(store: Store, *, dry_run: bool = False, use_llm: bool | None = None,
                llm_model: str | None = None, supersede_older: bool = False, sync: bool = True) -> ConsolidateReport:
    """One maintenance pass (see `plan_consolidate`): planned without the lock, then one commit."""
    cs, report = plan_consolidate(store, use_llm=use_llm, llm_model=llm_model, supersede_older=supersede_older,
                                  preview=dry_run, sync=sync)
    report.dry_run = dry_run
    if not dry_run:
        cs.commit()
    return report


def _plan_distil(store: Store, cs: ChangeSet, ids: list[str], nbr: np.ndarray, sims: np.ndarray,
                 recs: dict[str, Memory], merged: set[str]) -> list[dict[str, Any]]:
    """Three or more similar episodic memories become one semantic memory linked to them.

    Greedy over the neighbour lists: each unused episode with at least two unused episodic
    neighbours at >= decide_threshold starts a group; the member most similar to the others
    gives the text."""
    threshold = store.config.decide_threshold
    epi = {mid for mid in ids if recs[mid].type == "episodic" and mid not in merged}
    if len(epi) < 3:
        return []
    rows = [i for i, mid in enumerate(ids) if mid in epi]
    near = {ids[i]: [(ids[j], s) for j, s in zip(prow, srow) if j >= 0]
            for i, prow, srow in zip(rows, nbr[rows].tolist(), sims[rows].tolist())}
    used: set[str] = set()
    out = []
    for mid in ids:
        if mid not in epi or mid in used:
            continue
        group = [mid] + [o for o, s in near[mid] if s >= threshold and o in epi and o not in used]
        if len(group) < 3:
            continue
        used.update(group)
        members = [recs[g] for g in group]
        if any(lk.get("rel") == "distilled_into" for m in members for lk in m.links):
            continue
        between = {g: {o: s for o, s in near[g]} for g in group}
        centre = max(group, key=lambda g: sum(between[g].get(o, 0.0) for o in group if o != g))
        distilled = Memory(
            id=new_ulid(), text=f"Recurring ({len(group)} times): {recs[centre].text}", type="semantic",
            tags=list(dict.fromkeys(t for m in members for t in m.tags)),
            confidence=min(0.95, 0.6 + 0.05 * len(group)), source="heuristic",
            origins=list(dict.fromkeys(o for m in members for o in m.origins)),
            user=members[-1].user or "default", project=members[-1].project,
            links=[{"rel": "derived_from", "id": m.id} for m in members],
        )
        cs.add(distilled, event="DISTIL", sources=[m.id for m in members], like=centre)
        for m in members:
            cs.edit(m.id, Link("distilled_into", distilled.id), quiet=True)
        out.append({"id": distilled.id, "text": distilled.text, "from": [m.id for m in members]})
    return out
