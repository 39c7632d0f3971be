"""Curation: merge, prune, rollback. Nothing is erased: what leaves `facts/` goes to the trash
with a reason, and merged texts stay in the survivor's `history`."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from memcli.core.errors import InvalidInput, LLMNotConfigured, StoreError
from memcli.core.memory import Memory, new_ulid, now_iso, parse_time
from memcli.core.ulid import derived_ulid
from memcli.index import Filters
from memcli.ops.changes import ChangeSet, Detach, Link, Supersede
from memcli.ops.handle import Store

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
    """Keep the newest text whole (texts come oldest first), then add each older sentence it does not
    contain; an older code block a newer one replaces is dropped (it would state a stale value)."""
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
               changes: ChangeSet | None = None) -> tuple[ChangeSet, MergeResult]:
    """Plan merging memories into a new one: the originals to the trash, their texts into history.
    With an LLM (`use_llm` True, or None and a model configured) the merge prompt writes the text,
    here while planning, never under the lock; an unusable reply falls back to the heuristic merge."""
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
            text = llm_client(store, model=model).merge(texts)
            method = "llm"
        except LLMFormatError as e:
            text = heuristic_merge(texts)
            note = f"LLM merge unusable ({e}); used the heuristic merge"
    else:
        text = heuristic_merge(texts)
    at = merged_at(mems)
    merged = Memory(
        id=merged_id_for(store, mems), text=text, type=_merged_type(mems),
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
    """A merged memory's `updated`: its newest source's, not the clock's, so that the same merge made
    in two clones writes the same file."""
    return max((m.updated for m in mems if m.updated), default=None) or now_iso()


def merged_id_for(store: Store, mems: list[Memory]) -> str:
    """The id of the merge of `mems`, derived from their ids and `merged_at` so that two clones make
    the same memory; a new ULID when that id is taken (the sources restored and merged again)."""
    ms = int(parse_time(merged_at(mems)).timestamp() * 1000)
    mid = derived_ulid(ms, [m.id for m in mems])
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
    """Merge each group into one memory, all planned, then one commit. `known`: catalog entries
    already read for the members (`similar_groups`)."""
    cs = ChangeSet(store, preview=dry_run)
    cs.known(store.index.catalog_entries(mid for g in groups for mid in g) if known is None else known)
    results = [plan_merge(store, g, use_llm=use_llm, llm_model=llm_model, changes=cs)[1] for g in groups]
    if not dry_run:
        cs.commit()
    return results


def _close(nbr: np.ndarray, sims: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """(rows, columns) of the neighbour arrays' entries at >= `threshold`, row by row, nearest first
    (-1: no neighbour): the pairs every curation pass starts from."""
    return np.nonzero((sims >= threshold) & (nbr >= 0))


def _linked_groups(ids: list[str], nbr: np.ndarray, sims: np.ndarray, threshold: float,
                   recs: dict[str, Memory] | None = None,
                   apart: Callable[[Memory, Memory], bool] | None = None) -> list[list[str]]:
    """Single-linkage clusters (union-find) over the neighbour pairs at >= `threshold`, nearest first;
    a pair `apart(memory, memory)` (symmetric: judged once) is not linked. Groups come in the order
    of their first member."""
    parent = list(range(len(ids)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    kept_apart: set[tuple[int, int]] = set()
    rows, cols = _close(nbr, sims, threshold)
    for i, j in zip(rows.tolist(), nbr[rows, cols].tolist()):
        ri, rj = find(i), find(j)
        if ri == rj or (j, i) in kept_apart:  # linked already, or judged apart from the other end
            continue
        if apart is not None and recs is not None and apart(recs[ids[i]], recs[ids[j]]):
            kept_apart.add((i, j))
        else:
            parent[rj] = ri
    groups: dict[int, list[str]] = {}
    for i, mid in enumerate(ids):
        groups.setdefault(find(i), []).append(mid)
    return [g for g in groups.values() if len(g) > 1]


def similar_groups(store: Store, threshold: float, *, apart: Callable[[Memory, Memory], bool] | None = None,
                   known: dict[str, tuple[Memory, tuple[int, int]]] | None = None) -> list[list[str]]:
    """`_linked_groups` of the whole index. Only memories with a neighbour that close are read; their
    catalog entries are added to `known` (for `merge_groups`, which would read them again)."""
    ids, _, nbr, sims = store.index.neighbour_arrays(NEIGHBOURS, threshold=threshold)
    if len(ids) < 2:
        return []
    if apart is None:
        return _linked_groups(ids, nbr, sims, threshold)
    rows, cols = _close(nbr, sims, threshold)
    close = sorted({*rows.tolist(), *nbr[rows, cols].tolist()})
    entries = store.index.catalog_entries(ids[p] for p in close)
    if known is not None:
        known.update(entries)
    return _linked_groups(ids, nbr, sims, threshold, {mid: e[0] for mid, e in entries.items()}, apart)


def _close_pairs(ids: list[str], nbr: np.ndarray, sims: np.ndarray, threshold: float,
                 survivor: dict[str, str]) -> list[tuple[str, str, float]]:
    """Each pair (a, b), a < b, of neighbours at >= `threshold` once, with its first similarity met.
    A merged memory stands for its sources (`survivor`); a pair inside one merge is left out. Numpy
    picks and de-duplicates them: only the pairs reach Python."""
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


def plan_prune(store: Store, *, older_than: str | None = None, unused: bool = False,
               min_confidence: float | None = None, type: str | None = None) -> tuple[ChangeSet, PruneResult]:
    """Plan trashing memories created before `older_than` (ISO) AND never returned by a search
    (`unused`) AND below `min_confidence`, of those criteria given (at least one)."""
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
    texts: dict[str, str] = field(default_factory=dict)  # the text of each memory involved, by id

    def to_dict(self) -> dict[str, Any]:
        return {"origin": self.origin, "trashed": self.trashed, "detached": self.detached}


def plan_rollback(store: Store, origin: str) -> tuple[ChangeSet, RollbackResult]:
    """Plan undoing one origin: memories only it vouched for go to the trash; others just lose it."""
    out = RollbackResult(origin)
    cs = ChangeSet(store)
    for r in store.index.select():
        if origin not in r.origins:
            continue
        out.texts[r.id] = r.text
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
    """Why two similar texts contradict (the same subject with another value or a negated predicate,
    by `memcli.rules.relate`), or None."""
    from memcli.rules.relate import relate

    rel = relate(a, b, similarity, threshold=0.0)
    return rel.reason if rel.contradiction else None


def mergeable(a: Memory, b: Memory) -> bool:
    """Only the same fact about the same subject is merged; never a superseded memory."""
    from memcli.rules.relate import texts_mergeable

    return not (a.superseded_by or b.superseded_by) and texts_mergeable(a.text, b.text)


def _opposed(a: Memory, b: Memory) -> bool:
    """`similar_groups`' veto: only mergeable pairs are linked."""
    return not mergeable(a, b)


@dataclass
class ConsolidateReport:
    merged: list[dict[str, Any]] = field(default_factory=list)
    contradictions: list[dict[str, Any]] = field(default_factory=list)
    distilled: list[dict[str, Any]] = field(default_factory=list)
    dry_run: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"merged": self.merged, "contradictions": self.contradictions, "distilled": self.distilled,
                "dry_run": self.dry_run}


def plan_consolidate(store: Store, *, use_llm: bool | None = None, llm_model: str | None = None,
                     supersede_older: bool = False, preview: bool = False,
                     sync: bool = True) -> tuple[ChangeSet, ConsolidateReport]:
    """One maintenance pass, planned from one kNN pass (no n x n matrix): merge near-duplicates,
    flag contradictions (`contradicts` links both ways; `supersede_older`: the newer supersedes the
    older), distil recurring episodes. `sync=False`: the caller has just synced the index."""
    cfg = store.config
    report = ConsolidateReport()
    cs = ChangeSet(store, preview=preview)
    index = store.index
    if sync:
        index.sync()
    ids, _, nbr, sims = index.neighbour_arrays(NEIGHBOURS)
    if len(ids) < 2:
        return cs, report
    entries = index.catalog_entries(ids)
    recs = {mid: e[0] for mid, e in entries.items()}
    cs.known(entries)
    survivor: dict[str, str] = {}  # source id -> the merged memory's id
    made: dict[str, Memory] = {}  # the merged memories as planned
    for group in _linked_groups(ids, nbr, sims, cfg.consolidate_threshold, recs, _opposed):
        _, r = plan_merge(store, group, use_llm=use_llm, llm_model=llm_model, changes=cs)
        report.merged.append(r.to_dict())
        survivor.update({mid: r.merged.id for mid in r.sources})
        made[r.merged.id] = r.merged

    def record(i: str) -> Memory:  # a merged memory straight from the plan
        return made.get(i) or recs[i]

    # contradictions: similar pairs with opposing wording (precision over recall)
    flagged: list[tuple[str, str, str]] = []
    for a, b, sim in _close_pairs(ids, nbr, sims, cfg.contradiction_threshold, survivor):
        ra, rb = record(a), record(b)
        why = opposing(ra.text, rb.text, sim) if _may_contradict(a, b, ra, rb) else None
        if why:
            flagged.append((a, b, why))
            report.contradictions.append({"ids": [a, b], "similarity": round(sim, 3), "why": why,
                                          "texts": [ra.text, rb.text]})
    for (a, b, why), c in zip(flagged, report.contradictions):
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


def _may_contradict(a: str, b: str, ra: Memory, rb: Memory) -> bool:
    """Whether the similar pair (a, b) may be a contradiction at all, before reading its words."""
    if ra.type == rb.type == "episodic":
        return False  # events recur (on other dates, with other numbers): they are distilled
    if any(lk.get("id") in (a, b) for r in (ra, rb) for lk in r.links):
        return False  # related already: flagged by an earlier pass, or distilled one from the other
    # a replaced value is history, not a contradiction
    return not (ra.superseded_by or rb.superseded_by)


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
    """Three or more similar episodic memories become one semantic memory linked to them: each
    unused episode with two unused episodic neighbours at >= decide_threshold starts a group, and
    the member most similar to the others gives the text."""
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
