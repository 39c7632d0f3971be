"""Curation: merge, prune, rollback. Nothing is erased: what leaves `facts/` goes to the trash
with a reason, and merged texts stay in the survivor's `history`."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memcli.errors import Conflict, InvalidInput, LLMNotConfigured, StoreError
from memcli.index import Filters
from memcli.memory import Memory, new_ulid, now_iso
from memcli.store import Store

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(\[])")


@dataclass
class MergeResult:
    merged: Memory
    sources: list[str]
    method: str  # "llm" | "heuristic"
    note: str | None = None  # e.g. the LLM's reply was unusable and the heuristic merge was used

    def to_dict(self) -> dict[str, Any]:
        d = {"id": self.merged.id, "text": self.merged.text, "merged_from": self.sources, "method": self.method}
        if self.note:
            d["note"] = self.note
        return d


def heuristic_merge(texts: list[str]) -> str:
    """Keep the newest text whole, then add each older sentence it does not already contain.

    Texts come oldest first; newer wording wins, and no unique sentence is dropped.
    """
    base = texts[-1].strip()
    seen = {_key(s) for s in _SENTENCE.split(base)}
    words = f" {_key(base)} "  # containment by whole words: "port 80" is not in "port 8080"
    extra = []
    for t in reversed(texts[:-1]):
        for s in _SENTENCE.split(t.strip()):
            if _key(s) and _key(s) not in seen and f" {_key(s)} " not in words:
                seen.add(_key(s))
                extra.append(s.strip())
    return base if not extra else base + "\n\n" + " ".join(extra)


def _key(s: str) -> str:
    return " ".join(re.findall(r"\w+", s.lower()))


def merge(store: Store, ids: list[str], *, use_llm: bool | None = None, dry_run: bool = False) -> MergeResult:
    """Merge memories into a new one; the originals go to the trash, their texts into history.

    With an LLM the merge prompt writes the text (every unique fact kept, newer values win, the
    Markdown kept). The request is made outside the writer lock (it can take seconds and other
    writers must not wait); the originals are re-read under the lock and, had one changed
    meanwhile, the merge stops with an error rather than lose that change. A reply that is
    unusable falls back to the heuristic merge, with a note; an unreachable LLM raises LLMError
    and changes nothing.
    """
    if len(set(ids)) < 2:
        raise InvalidInput("merge needs at least two different memories")
    unique = list(dict.fromkeys(ids))

    def load() -> list[Memory]:
        return sorted((store.read(i) for i in unique), key=lambda m: (m.updated, m.id))

    mems = load()
    texts = [m.text for m in mems]
    method = "heuristic"
    note = None
    cfg = store.config
    if (use_llm is None and cfg.llm_model) or use_llm:
        if not cfg.llm_model:
            raise LLMNotConfigured("no LLM configured: set MEMCLI_LLM_MODEL (or llm_model in config.toml)")
        from memcli.ingest import llm_client
        from memcli.llm import LLMFormatError

        try:
            text = llm_client(store).merge(texts)
            method = "llm"
        except LLMFormatError as e:
            text = heuristic_merge(texts)
            note = f"LLM merge unusable ({e}); used the heuristic merge"
    else:
        text = heuristic_merge(texts)
    with store.lock():
        if not dry_run and [m.to_markdown() for m in load()] != [m.to_markdown() for m in mems]:
            raise Conflict("a memory changed while merging; run the merge again")
        types = [m.type for m in mems]
        merged = Memory(
            id=new_ulid(), text=text, type=max(reversed(types), key=types.count),
            tags=list(dict.fromkeys(t for m in mems for t in m.tags)),
            domain=next((m.domain for m in reversed(mems) if m.domain), None),
            confidence=max(m.confidence for m in mems), source="llm" if method == "llm" else mems[-1].source,
            origins=list(dict.fromkeys(o for m in mems for o in m.origins)), user=mems[-1].user,
            project=mems[-1].project, created=min(m.created for m in mems),
            code_pattern=next((m.code_pattern for m in reversed(mems) if m.code_pattern), None),
            flags={k: True for m in mems for k, v in m.flags.items() if v},
            history=[h for m in mems for h in m.history]
            + [{"event": "MERGE", "at": now_iso(), "id": m.id, "old": m.text} for m in mems],
            links=[link for m in mems for link in m.links],
            extra={k: v for m in mems for k, v in m.extra.items() if k not in ("declared_id", "trashed")},
        )
        if not dry_run:
            store.write(merged)
            store.log("MERGE", id=merged.id, text=merged.text, sources=[m.id for m in mems], method=method)
            for m in mems:
                store.trash(m.id, f"merged into {merged.id}", event="MERGED")
            store.index.sync()
    return MergeResult(merged, [m.id for m in mems], method, note)


def similar_groups(store: Store, threshold: float, *,
                   apart: Callable[[dict[str, Any], dict[str, Any]], bool] | None = None) -> list[list[str]]:
    """Clusters of memories whose pairwise links reach `threshold` (single linkage, union-find);
    a pair for which `apart(record, record)` is true is not linked."""
    index = store.index
    rows = index.db.execute("SELECT label, id FROM mem WHERE vec IS NOT NULL ORDER BY label").fetchall()
    if len(rows) < 2:
        return []
    labels = [r[0] for r in rows]
    ids = dict(rows)
    parent = {lab: lab for lab in labels}

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    vecs = index.vectors(labels)
    recs = index.records(labels) if apart else {}
    for i in range(0, len(labels), 512):
        for lab, hits in zip(labels[i : i + 512], index.knn(vecs[i : i + 512], 6)):
            for other, sim in hits:
                if other != lab and sim >= threshold and not (apart and apart(recs[lab], recs[other])):
                    parent[find(other)] = find(lab)
    groups: dict[int, list[str]] = {}
    for lab in labels:
        groups.setdefault(find(lab), []).append(ids[lab])
    return [g for g in groups.values() if len(g) > 1]


# ---------------------------------------------------------------- prune
@dataclass
class PruneResult:
    trashed: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"trashed": [{"id": r["id"], "text": r["text"], "reason": r["_reason"]} for r in self.trashed]}


def prune(store: Store, *, older_than: str | None = None, unused: bool = False, min_confidence: float | None = None,
          type: str | None = None, dry_run: bool = False) -> PruneResult:
    """Trash stale memories: created before `older_than` (ISO), never returned by a search
    (`unused`), or below `min_confidence`. Criteria combine with AND; at least one is needed."""
    if not (older_than or unused or min_confidence is not None):
        raise StoreError("prune needs a criterion: older than a date, unused, or below a confidence")
    from memcli.search import Usage

    records = store.index.select(Filters(type=type, until=older_than))
    used = Usage(store).get([r["id"] for r in records]) if unused else {}
    out = PruneResult()
    for r in records:
        reasons = []
        if older_than:
            reasons.append(f"created before {older_than[:10]}")
        if unused:
            if r["id"] in used:
                continue
            reasons.append("never returned by a search")
        if min_confidence is not None:
            if r.get("confidence", 0) >= min_confidence:
                continue
            reasons.append(f"confidence {r.get('confidence')} < {min_confidence}")
        out.trashed.append({**r, "_reason": "pruned: " + ", ".join(reasons)})
    if not dry_run and out.trashed:
        with store.lock():
            for r in out.trashed:
                store.trash(r["id"], r["_reason"], event="PRUNE")
            store.index.sync()
    return out


# ---------------------------------------------------------------- rollback
@dataclass
class RollbackResult:
    origin: str
    trashed: list[str] = field(default_factory=list)
    detached: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"origin": self.origin, "trashed": self.trashed, "detached": self.detached}


def rollback(store: Store, origin: str, *, dry_run: bool = False) -> RollbackResult:
    """Undo one origin: memories only it vouched for go to the trash; others just lose it."""
    out = RollbackResult(origin)
    records = [r for r in store.index.select() if origin in (r.get("origins") or [])]
    with store.lock():
        for r in records:
            if r.get("origins") == [origin]:
                out.trashed.append(r["id"])
                if not dry_run:
                    store.trash(r["id"], f"rollback of {origin}", event="ROLLBACK", origin=origin)
            else:
                out.detached.append(r["id"])
                if not dry_run:
                    m = store.read(r["id"])
                    m.origins = [o for o in m.origins if o != origin]
                    m.updated = now_iso()
                    store.write(m)
                    store.log("ROLLBACK", id=m.id, origin=origin, detail="origin removed")
        if not dry_run:
            store.index.sync()
    return out


# ---------------------------------------------------------------- consolidate
def opposing(a: str, b: str, similarity: float = 0.9) -> str | None:
    """Why two similar texts contradict, or None: only texts about the same subject whose value
    differs ("100" vs "500 requests per minute") or whose predicate is negated ("always" vs
    "never"), by the rules of `memcli.decide`. Opposed words in unrelated sentences ("paying off"
    vs "turn it on") are not a contradiction."""
    from memcli.decide import relate

    rel = relate(a, b, similarity, threshold=0.0)
    return rel.reason if rel.contradiction else None


def mergeable(a: dict[str, Any], b: dict[str, Any], similarity: float = 0.9) -> bool:
    """May two memories be merged into one? Only the same fact (a rewording or a refinement) about
    the same subject; never a superseded memory, another subject or a contradiction."""
    from memcli.decide import REFINES, SAME, relate

    if a.get("superseded_by") or b.get("superseded_by"):
        return False
    return relate(a["text"], b["text"], similarity, threshold=0.0).kind in (SAME, REFINES) and \
        relate(b["text"], a["text"], similarity, threshold=0.0).kind in (SAME, REFINES)


def _opposed(a: dict[str, Any], b: dict[str, Any]) -> bool:
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


def consolidate(store: Store, *, dry_run: bool = False, use_llm: bool | None = None) -> ConsolidateReport:
    """One maintenance pass: merge near-duplicates, flag contradictions, distil recurring episodes."""
    cfg = store.config
    report = ConsolidateReport(dry_run=dry_run)
    with store.lock():
        store.index.sync()
        for group in similar_groups(store, cfg.consolidate_threshold, apart=_opposed):
            r = merge(store, group, use_llm=use_llm, dry_run=dry_run)
            report.merged.append(r.to_dict())
        index = store.index
        rows = index.db.execute("SELECT label, id FROM mem WHERE vec IS NOT NULL ORDER BY label").fetchall()
        labels = [r[0] for r in rows]
        recs = index.records(labels)
        vecs = index.vectors(labels)
        seen: set[tuple[str, str]] = set()
        for lab, hits in zip(labels, index.knn(vecs, 6) if labels else []):
            for other, sim in hits:
                if other == lab or sim < cfg.contradiction_threshold or other not in recs:
                    continue
                ra, rb = sorted((recs[lab], recs[other]), key=lambda r: r["id"])
                a, b = ra["id"], rb["id"]
                if (a, b) in seen or ra.get("type") == rb.get("type") == "episodic":
                    continue  # events recur (on other dates, with other numbers): they are distilled
                seen.add((a, b))
                if any(lk.get("id") in (a, b) for r in (ra, rb) for lk in r.get("links") or []):
                    continue  # related already: flagged by an earlier pass, or distilled one from the other
                if ra.get("superseded_by") or rb.get("superseded_by"):
                    continue  # a replaced value is history, not a contradiction
                why = opposing(ra["text"], rb["text"], sim)
                if why:
                    report.contradictions.append({"ids": [a, b], "similarity": round(sim, 3), "why": why,
                                                  "texts": [ra["text"], rb["text"]]})
        if not dry_run:
            for c in report.contradictions:
                a, b = c["ids"]
                for mid, other in ((a, b), (b, a)):
                    m = store.read(mid)
                    if not any(lk.get("rel") == "contradicts" and lk.get("id") == other for lk in m.links):
                        m.links.append({"rel": "contradicts", "id": other})
                        store.write(m)
                store.log("CONTRADICTION", ids=[a, b], reason=c["why"])
        report.distilled = _distil_episodes(store, recs, labels, vecs, dry_run)
        if not dry_run:
            store.index.sync()
    return report


def _distil_episodes(store: Store, recs: dict[int, dict[str, Any]], labels: list[int], vecs: Any,
                     dry_run: bool) -> list[dict[str, Any]]:
    """Three or more similar episodic memories become one semantic memory linked to them."""
    epi = [i for i, lab in enumerate(labels) if recs.get(lab, {}).get("type") == "episodic"]
    if len(epi) < 3:
        return []
    sub = vecs[epi]
    sims = sub @ sub.T
    used: set[int] = set()
    out = []
    for i in range(len(epi)):
        if i in used:
            continue
        group = [j for j in range(len(epi)) if j not in used and sims[i, j] >= store.config.decide_threshold]
        if len(group) < 3:
            continue
        used.update(group)
        members = [recs[labels[epi[j]]] for j in group]
        if any(lk.get("rel") == "distilled_into" for m in members for lk in m.get("links") or []):
            continue
        centre = group[int(sims[[*group]][:, group].sum(axis=1).argmax())]
        text = recs[labels[epi[centre]]]["text"]
        distilled = Memory(
            id=new_ulid(), text=f"Recurring ({len(group)} times): {text}", type="semantic",
            tags=list(dict.fromkeys(t for m in members for t in m.get("tags") or [])),
            confidence=min(0.95, 0.6 + 0.05 * len(group)), source="heuristic",
            origins=list(dict.fromkeys(o for m in members for o in m.get("origins") or [])),
            user=members[-1].get("user") or "default", project=members[-1].get("project"),
            links=[{"rel": "derived_from", "id": m["id"]} for m in members],
        )
        out.append({"id": distilled.id, "text": distilled.text, "from": [m["id"] for m in members]})
        if not dry_run:
            store.write(distilled)
            for m in members:
                mem = store.read(m["id"])
                mem.links.append({"rel": "distilled_into", "id": distilled.id})
                store.write(mem)
            store.log("DISTIL", id=distilled.id, sources=[m["id"] for m in members])
    return out
