"""Search: candidates (vector + keyword) -> one ranking function (`rank`) -> filters -> MMR -> results.
A search never rewrites a fact file: usage counts go to `<store>/.state.sqlite`.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from memcli.core.config import Ranking
from memcli.core.memory import Memory, now_iso, parse_time
from memcli.core.text import camel_parts
from memcli.index import Filters, RankFields
from memcli.rules.subjects import (
    gives_version,
    headline,
    project_release,
    range_end_asked,
    release_asked,
    spellings,
    stated_version,
    states_floor,
    subject_keys,
    version_asked,
    version_key,
)
from memcli.storage import safety

if TYPE_CHECKING:
    from memcli.ops.handle import Store

_TOKEN = re.compile(r"[\w][\w.+#-]*[\w+#]|[\w]", re.UNICODE)
# Function words carry no evidence for BM25; the list is English because the model is.
STOPWORDS = frozenset(
    """a about above after again all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has
    have having he her here hers herself him himself his how i if in into is it its itself just me
    more most my myself no nor not now of off on once only or other our ours ourselves out over own
    same she should so some such than that the their theirs them themselves then there these they
    this those through to too under until up very was we were what when where which while who whom
    why will with would you your yours yourself yourselves ever did does""".split()
)


def query_terms(query: str) -> list[str]:
    """Keyword terms of a query: lower-cased tokens without function words, deduplicated."""
    seen: dict[str, None] = {}
    # a camel-case name is also its words ("IterationSpeedColumn": iteration, speed, column), as indexed
    words = [w for tok in _TOKEN.findall(query) for w in (tok, *camel_parts(tok))]
    for tok in (w.lower() for w in words):
        tok = tok.strip(".-")
        if tok and tok not in STOPWORDS and (len(tok) > 1 or tok.isdigit()):
            seen.setdefault(tok, None)
    return list(seen)


@dataclass
class Hit:
    """One ranked memory (`hit.memory.text`) and the parts of its score."""

    memory: Memory
    score: float
    similarity: float
    parts: dict[str, float] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.memory.id

    def to_dict(self, explain: bool = False) -> dict[str, Any]:
        d = {**self.memory.to_dict(), "score": round(self.score, 4), "similarity": round(self.similarity, 4)}
        if explain:
            d["explain"] = {k: round(v, 4) for k, v in self.parts.items()}
        return d


@dataclass
class SearchResponse:
    query: str
    hits: list[Hit]
    metadata: dict[str, Any]

    def __iter__(self):  # noqa: ANN204 - `for hit in store.search(...)` reads naturally
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)


# ---------------------------------------------------------------- usage state
class Usage:
    """Per-memory counts beside the index: `usage`, how often a search *returned* a memory (for
    `prune --unused` only), and `uses`, how often it was *used* (feedback, an `ask` citing it, the
    fact observed again). Only `uses` ranks, so the same query on an unchanged store scores the same."""

    def __init__(self, store: Store) -> None:
        self.path = store.path / ".state.sqlite"
        self._db: sqlite3.Connection | None = None
        self._ready = False
        self.immutable = False  # opened read-only (no lock, no journal): never kept open for reuse

    def _conn(self, create: bool) -> sqlite3.Connection | None:
        """A connection; only a write pays for WAL mode and the tables. On a store that cannot be
        written the file is opened immutable (no lock, no wait) and nothing is counted."""
        if self._db is None:
            if not create and not self.path.exists():
                return None
            if not safety.writable(self.path.parent) or (self.path.exists() and not os.access(self.path, os.W_OK)):
                if create or not self.path.is_file():
                    return None
                try:
                    self._db = sqlite3.connect(f"file:{self.path}?immutable=1", uri=True, isolation_level=None)
                except sqlite3.Error:
                    return None
                self._ready = self.immutable = True  # read-only: never set up, never written
                return self._db
            self._db = sqlite3.connect(self.path, timeout=5, isolation_level=None)
        if create and not self._ready:
            self._db.execute("PRAGMA journal_mode=WAL")
            for table, last in (("usage", "last_used"), ("uses", "last")):
                self._db.execute(f"CREATE TABLE IF NOT EXISTS {table} (id TEXT PRIMARY KEY, count INTEGER NOT NULL, "
                                 f"{last} TEXT)")
            self._ready = True
        return self._db

    def _heal(self, error: BaseException) -> None:
        """A damaged usage file is derived data: move it aside (counts start again), with a notice."""
        if not (isinstance(error, sqlite3.DatabaseError) and safety.is_corrupt(error)):
            return
        self.close()
        if not safety.writable(self.path.parent):
            return
        with contextlib.suppress(OSError):
            safety.move_aside(self.path, ".state.sqlite (usage counts; they start again)")

    def get(self, ids: Sequence[str]) -> dict[str, tuple[int, str | None]]:
        """How often each memory was returned by a search (for `prune --unused`)."""
        return self._counts("SELECT id, count, last_used FROM usage", ids)

    def uses(self, ids: Sequence[str]) -> dict[str, tuple[int, str | None]]:
        """How often each memory was used (feedback, citations, re-observation): what ranks."""
        return self._counts("SELECT id, count, last FROM uses", ids)

    def _counts(self, select: str, ids: Sequence[str]) -> dict[str, tuple[int, str | None]]:
        ids = list(ids)
        out: dict[str, tuple[int, str | None]] = {}
        try:
            db = self._conn(create=False)
            # most state files have no count of this kind yet: one probe instead of a lookup each
            if db is None or not ids or db.execute(f"{select} LIMIT 1").fetchone() is None:
                return out
            for i in range(0, len(ids), 900):
                chunk = ids[i : i + 900]
                out.update({r[0]: (r[1], r[2]) for r in db.execute(
                    f"{select} WHERE id IN ({','.join('?' * len(chunk))})", chunk)})
        except sqlite3.Error as e:  # no table yet, busy, or damaged (moved aside)
            self._heal(e)
            return {}
        return out

    def use(self, ids: Sequence[str], delta: int = 1) -> None:
        """Count a use of each memory (never below zero)."""
        at = now_iso()
        try:
            self._add("INSERT INTO uses VALUES (?, max(?, 0), ?) ON CONFLICT(id) DO UPDATE "
                      "SET count=max(count+?, 0), last=?", [(i, delta, at, delta, at) for i in ids])
        finally:
            self.close()

    def bump(self, ids: Sequence[str]) -> None:
        """Count each memory as returned by a search."""
        at = now_iso()
        self._add("INSERT INTO usage VALUES (?, 1, ?) ON CONFLICT(id) DO UPDATE SET count=count+1, last_used=?",
                  [(i, at, at) for i in ids])

    def _add(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        """One transaction for all rows. Counts are a ranking hint: failing to count, or a store
        that cannot be written, never fails the command."""
        if not rows:
            return
        try:
            db = self._conn(create=True)
            if db is not None:
                with db:
                    db.execute("BEGIN")
                    db.executemany(sql, rows)
        except (sqlite3.Error, OSError) as e:
            self._heal(e)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
            self._ready = False


_READERS: dict[tuple[int, str], tuple[tuple[int, int, int], Usage]] = {}


def _usage_reader(store: Any) -> Usage:
    """A `Usage` kept open for this thread's searches of a store (opening it costs as much as
    ranking), reopened when the file is replaced; not kept while there is none or it is read-only."""
    key = (threading.get_ident(), str(store.path))
    try:
        st = os.stat(store.path / ".state.sqlite")
    except OSError:
        old = _READERS.pop(key, None)
        if old is not None:
            old[1].close()
        return Usage(store)
    sig = (st.st_dev, st.st_ino, st.st_ctime_ns)  # ctime: a new file on a reused inode is a new file
    held = _READERS.get(key)
    if held is not None and held[0] == sig and held[1]._db is not None and not held[1].immutable:
        return held[1]
    if held is not None:
        held[1].close()
    if len(_READERS) > 64:  # a long-lived process that searched many stores
        for _, (_, u) in list(_READERS.items()):
            u.close()
        _READERS.clear()
    usage = Usage(store)
    _READERS[key] = (sig, usage)
    return usage


# ---------------------------------------------------------------- ranking
def recency(updated: str | None, now: float, days: float) -> float:
    stamp = _timestamp(updated) if updated else None
    if stamp is None:
        return 0.0
    return math.exp(-max(0.0, (now - stamp) / 86400.0) / days)


@functools.lru_cache(maxsize=65536)
def _timestamp(value: str) -> float | None:
    """Seconds since the epoch of an ISO time; remembered, as a process ranks the same memories
    again and again (a batch, a server)."""
    try:
        return parse_time(value).timestamp()
    except ValueError:
        return None


def reliability(confidence: float, usage_count: int) -> float:
    return min(float(confidence) * math.sqrt(usage_count / 10.0), 1.0)


#: a superseded memory's score factor (`search --all`): the current value ranks above those it
#: replaced, which recency cannot tell apart once both are months old
SUPERSEDED_FACTOR = 0.5


def rank(
    sims: np.ndarray, keyword: np.ndarray, records: Sequence[RankFields | Memory],
    usage: dict[str, tuple[int, str | None]], weights: Ranking, now: float, versioned: np.ndarray | None = None,
) -> tuple[np.ndarray, list[dict[str, float]]]:
    """The one scoring function. `keyword` is BM25 already scaled to [0, 1] within the query;
    `records` are the candidates' `RankFields` (what the catalog reads for ranking) or memories;
    `versioned`: 1 where a candidate gives a version of what a "Which X version?" query asks about."""
    scores = np.zeros(len(records))
    parts = []
    for i, rec in enumerate(records):
        superseded = rec.superseded if isinstance(rec, RankFields) else bool(rec.superseded_by)
        # currency: a replaced value is no longer current, whatever its dates say (the supersede
        # mark touches `updated`); it keeps its relevance, halved, and no recency
        rec_ = 0.0 if superseded else recency(rec.updated or rec.created, now, weights.recency_days)
        rel = reliability(rec.confidence, usage.get(rec.id, (0, None))[0])
        currency = SUPERSEDED_FACTOR if superseded else 1.0
        p = {
            "similarity": float(sims[i]), "keyword": float(keyword[i]), "recency": rec_, "reliability": rel,
            "currency": currency,
        }
        if versioned is not None:
            p["version"] = float(versioned[i])
        scores[i] = currency * (
            weights.similarity * p["similarity"] + weights.keyword * p["keyword"]
            + weights.recency * rec_ + weights.reliability * rel + weights.version * p.get("version", 0.0)
        )
        parts.append(p)
    return scores, parts


def mmr_pool(scores: np.ndarray, k: int) -> list[int]:
    """The candidates MMR picks from: the best max(4k, 20) by score, in their original order
    (so only their vectors need reading)."""
    return sorted(np.argsort(-scores)[: max(k * 4, 20)].tolist())


def mmr(scores: np.ndarray, vecs: np.ndarray, k: int, lam: float) -> tuple[list[int], list[float]]:
    """Maximal marginal relevance: trade a little score for not repeating what is already picked.
    Returns the picks and the values they were picked with (lam * score - (1 - lam) * similarity
    to the picks before), which greedy picking makes non-increasing: what `search` shows."""
    order = list(np.argsort(-scores))
    if lam >= 1.0 or len(order) <= 1:
        return order[:k], [float(scores[i]) for i in order[:k]]
    pool = order[: max(k * 4, 20)]
    picked: list[int] = []
    values: list[float] = []
    max_sim = np.full(len(scores), -1.0)
    while pool and len(picked) < k:
        value = {i: lam * scores[i] - (1 - lam) * max(max_sim[i], 0.0) for i in pool}
        best = max(pool, key=value.__getitem__)
        picked.append(best)
        values.append(float(value[best]) / lam)  # in the units of `scores` (the first pick: its own score)
        pool.remove(best)
        sims = vecs @ vecs[best]
        max_sim = np.maximum(max_sim, sims)
    return picked, values


def keyword_evidence(kw: dict[int, tuple[float, float]], labels: list[int]) -> np.ndarray:
    """Keyword evidence in [0, 1]: BM25 relative to the query's best hit, times the (IDF-weighted)
    share of the query the memory contains: relative BM25 alone gives the best of a bad lot full marks."""
    kmax = max((s for s, _ in kw.values()), default=0.0)
    if kmax <= 0:
        return np.zeros(len(labels))
    return np.array([(kw[lab][0] / kmax) * kw[lab][1] if lab in kw else 0.0 for lab in labels])


# ---------------------------------------------------------------- search
# A benchmark's hook: called with each step's name as it ends
STEP_HOOK: Callable[[str], None] | None = None


def _step(name: str) -> None:
    if STEP_HOOK is not None:
        STEP_HOOK(name)


def search(
    store: Store, query: str, *, k: int = 5, threshold: float | None = None, filters: Filters | None = None,
    record_usage: bool = True, sync: bool = True, include_superseded: bool = False,
) -> SearchResponse:
    """Ranked memories for one query. See `search_many` for the options."""
    return search_many(store, [query], k=k, threshold=threshold, filters=filters,
                       record_usage=record_usage, sync=sync, include_superseded=include_superseded)[0]


def search_many(
    store: Store, queries: Sequence[str], *, k: int = 5, threshold: float | None = None,
    filters: Filters | None = None, record_usage: bool = True, sync: bool = True,
    include_superseded: bool = False,
) -> list[SearchResponse]:
    """Ranked memories for each query, embedded in one batch. A memory below `threshold` (cosine,
    0.3 by default) is still returned when its keyword evidence is 0.5 or more: an exact identifier
    is evidence a small embedding model misses. Superseded memories only with `include_superseded`."""
    _step("start")
    index = store.index
    if sync and not index.synced:
        index.sync()
    weights: Ranking = store.config.ranking
    floor = weights.threshold if threshold is None else threshold
    filters = filters or Filters()
    t0 = time.perf_counter()
    qvecs = index.embedder.embed(list(queries)) if queries else np.zeros((0, 1))
    embed_time = time.perf_counter() - t0
    _step("query vectors (embedding cache)")
    allowed = index.filtered_labels(filters) if filters.active else None
    allowed_set = set(allowed) if allowed is not None else None
    per_query_embed = embed_time / max(1, len(queries))
    n_cand = max(weights.candidates, k * 4)
    t1 = time.perf_counter()
    knn = index.knn(qvecs, n_cand, allowed)
    _step("Index.knn")
    kws: list[dict[int, tuple[float, float]]] = []
    for query in queries:
        kw = {lab: (s, cov) for lab, s, cov in index.keyword(query_terms(query), n_cand)}
        if allowed_set is not None:
            kw = {lab: v for lab, v in kw.items() if lab in allowed_set}
        kws.append(kw)
    _step("Index.keyword")
    # one read of every candidate's ranking fields and vector (keyword-only ones and MMR need it)
    cands, sims_of = [], []
    # a question for the latest release reads every release statement: among a hundred and more
    # near-identical "Version X was released on ..." the current one is no nearer than the others
    # (simonw/sqlite-utils, Textualize/rich), and `_version_evidence` orders them by version
    releases: list[int] | None = None  # read once per batch, for the first such question
    for qi, query in enumerate(queries):
        known = dict(knn[qi])
        latest = release_asked(query)
        if latest and releases is None:
            releases = [lab for lab, *_ in index.keyword(["released"], 2000)
                        if allowed_set is None or lab in allowed_set]
        cands.append(list(dict.fromkeys([*known, *kws[qi], *(releases if latest else ())])))
        sims_of.append(known)
    vec_of: dict[int, np.ndarray] = {}
    fields = index.rank_fields(list(dict.fromkeys(lab for c in cands for lab in c)), vectors=vec_of)
    _step("candidates' fields and vectors (Index.rank_fields)")
    zero = np.zeros(qvecs.shape[1], np.float32)
    passed = []
    for qi, labels in enumerate(cands):
        known = sims_of[qi]
        sims = np.array([known[lab] if lab in known else float(vec_of.get(lab, zero) @ qvecs[qi]) for lab in labels])
        kwe = keyword_evidence(kws[qi], labels)
        keep = [i for i in range(len(labels)) if sims[i] >= floor or kwe[i] >= 0.5]
        passed.append(([labels[i] for i in keep], sims[keep], kwe[keep]))
    _step("similarities, keyword evidence, threshold")
    usage = _usage_reader(store)
    use = usage.uses(list(dict.fromkeys(f.id for f in fields.values())))
    _step("uses (Usage.uses)")
    now = time.time()
    ranked = []
    for query, (labels, sims, kwe) in zip(queries, passed):
        asked = _asked_values(index, query, labels, fields)
        keep = [i for i, lab in enumerate(labels)
                if lab in fields and (include_superseded or not fields[lab].superseded or lab in asked)]
        labels, sims, kwe = [labels[i] for i in keep], sims[keep], kwe[keep]
        cand = [fields[lab]._replace(superseded=False) if lab in asked else fields[lab] for lab in labels]
        scores, parts = rank(sims, kwe, cand, use, weights, now, _version_evidence(index, query, labels))
        pool = mmr_pool(scores, k)
        ranked.append((labels, sims, scores, parts, pool))
    _step("rank")
    picks = []
    full = weights.similarity + weights.keyword + weights.recency + weights.reliability
    for labels, sims, scores, parts, pool in ranked:
        vecs = np.stack([vec_of[labels[i]] for i in pool]) if pool else np.zeros((0, 1), np.float32)
        sub, values = mmr(scores[pool], vecs, k, weights.mmr_lambda)
        picked = [pool[i] for i in sub]
        for i, value in zip(picked, values):
            # shown: the value it was ordered by, scaled by the best possible score; --explain splits it
            parts[i]["relevance"] = float(scores[i])
            parts[i]["diversity_penalty"] = float(scores[i]) - value
        picks.append([(labels[i], min(1.0, max(0.0, value / full)) if full > 0 else 0.0, float(sims[i]), parts[i])
                      for i, value in zip(picked, values)])
    _step("MMR")
    records = index.records(lab for p in picks for lab, *_ in p)
    _step("results' records (Index.records)")
    per_query = (time.perf_counter() - t1) / max(1, len(queries))
    out = []
    returned: list[str] = []
    for query, p in zip(queries, picks):
        hits = [Hit(records[lab], score, sim, parts) for lab, score, sim, parts in p if lab in records]
        returned.extend(h.id for h in hits)
        out.append(SearchResponse(query, hits, _metadata(hits, per_query_embed, per_query)))
    if record_usage:
        writer = Usage(store)
        writer.bump(returned)
        writer.close()
    _step("hits, metadata, usage counts")
    return out


_VALUE_RE = re.compile(r"(?<![\w.])v?\d+(?:\.\d+)+(?![\w.])")
# an acronym or identifier a question names ("Which CVE prompted the protobuf upgrade?")
_ACRONYM_RE = re.compile(r"(?<![\w-])[A-Z][A-Z0-9]{2,}(?![\w])")


def _asked_values(index: Any, query: str, labels: list[int], fields: dict[int, RankFields]) -> set[int]:
    """The superseded candidates that hold what the query asks about: a value it names ("Why did
    CI move PyPy to 3.10?" when 3.11 is current), or an acronym that only superseded candidates
    hold among the memories of a subject the query names (gin-gonic/gin's "upgrade Protobuf for
    CVE-2024-24786", replaced by later protobuf bumps, for "Which CVE prompted the protobuf upgrade?").
    The question is about that memory, so it is shown (marked superseded) and ranked as if current;
    nothing is read for a query naming neither."""
    values = {v.lstrip("v") for v in _VALUE_RE.findall(query)}
    acronyms = set(_ACRONYM_RE.findall(query))
    superseded = [lab for lab in labels if lab in fields and fields[lab].superseded] if values or acronyms else []
    if not superseded:
        return set()
    recs = index.records(superseded)
    asked = {lab for lab in superseded if lab in recs
             and values & {v.lstrip("v") for v in _VALUE_RE.findall(recs[lab].text)}}
    if not acronyms:
        return asked
    says = re.compile(rf"\b(?:{'|'.join(sorted(acronyms))})\b")
    holders: dict[int, set[str]] = {}  # superseded memories saying an acronym: the subjects the query names
    for lab in superseded:
        if lab in recs and says.search(recs[lab].text):
            keys = {k for k in subject_keys(recs[lab].text) if re.search(rf"\b{re.escape(k)}\b", query, re.I)}
            if keys:
                holders[lab] = keys
    if holders:  # ... unless a live memory of that subject says the acronym too ("What is the MSRV?")
        live = index.records([lab for lab in labels if lab in fields and not fields[lab].superseded])
        held = {k for r in live.values() if says.search(r.text) for k in subject_keys(r.text)}
        asked |= {lab for lab, keys in holders.items() if not keys & held}
    return asked


def _version_evidence(index: Any, query: str, labels: list[int]) -> np.ndarray | None:
    """For a question about a version ("Which rich version does typer use?"): 1 for the candidates
    that give that package a version, 1.5 for the newest of those about it alone, else 0; for one
    end of a runtime's range ("the oldest Python version supported") only the statements of that
    end, the older ones -1 (older values, below what gives no version); None (and no text read)
    for any other query. In a project where "rich" is also a feature, its bumps rank
    below the features' memories otherwise (fastapi/typer: "Bump rich from 14.3.3 to 15.0.0" was not
    in the top 10). A question for the latest release ("What is the latest httpx release?") gets the
    project's release statements the same way, the highest version first: "Version 0.28.1 was
    released ..." names no project, and a docs commit about a release shares more of its words."""
    key, latest = version_asked(query), release_asked(query)
    end = range_end_asked(query, key) if key else None
    latest = latest and not end  # "the newest Python version supported" asks no release of the project
    if key is None and not latest or not labels:
        return None
    recs = index.records(labels)
    out = np.zeros(len(labels))
    if key is not None:
        names = spellings(key)
        givers = [lab for lab in labels if lab in recs and any(gives_version(k, recs[lab].text) for k in names)]
        if end:  # "the newest Python version it supports": the range's end asked, not its other end
            givers = _range_end(end, names, labels, givers, recs)
        # the newest statement of that version is its current value: the others are older values, or
        # lines that list many packages and that no one bump replaces (expressjs/express's 2014 "deps:
        # connect@2.22.0; ...; deps: serve-static@~1.3.0" ranked above the current `serve-static@^2.2.0`)
        # (a range's end is moved in texts that say more: "``sqlite-utils`` now requires Python 3.10")
        alone = givers if end else [lab for lab in givers if len(subject_keys(recs[lab].text)) == 1
                                    and subject_keys(recs[lab].text) <= names]  # about that package only
        newest = max(alone, key=lambda lab: recs[lab].created or "", default=None)
        # (one end of a range asked: its older statements are its older values, below the memories
        # that give no version: "Add support for Python 3.13" after "bump for Python3.14")
        # (the same value said again, a commit and its release's item, is no older value)
        current = {stated_version(k, recs[newest].text) for k in names} - {None} if newest is not None else set()

        def older(lab: int) -> float:
            return 1.0 if not end or {stated_version(k, recs[lab].text) for k in names} & current else -1.0

        out = np.array([1.5 if lab == newest else older(lab) if lab in givers else 0.0 for lab in labels])
    if latest:
        released = {lab: v for lab in labels if lab in recs and (v := project_release(recs[lab].text))}
        top = max(released, key=lambda lab: version_key(released[lab]), default=None)
        out = np.maximum(out, [1.5 if lab == top else 1.0 if lab in released else 0.0 for lab in labels])
    return out if out.any() else None


def _range_end(end: str, names: frozenset[str], labels: list[int], givers: list[int], recs: dict) -> list[int]:
    """The candidates that move the asked end ("floor" / "ceiling") of a runtime's range, read from
    their first lines: a statement of the other end answers no question about this one."""
    named = "(?<![\\w.])(?:" + "|".join(map(re.escape, sorted(names))) + ")"
    # (the first line gives the runtime the version: not "Removed support for using ``sqlean.py`` as a
    # drop-in replacement for the Python standard library ``sqlite3``", simonw/sqlite-utils 4.0rc3)
    versioned = re.compile(named + r"[\s@]*v?\d", re.I)
    ends = [lab for lab in givers if states_floor(recs[lab].text) == (end == "floor")
            and versioned.search(headline(recs[lab].text))] or givers
    if end == "floor":  # and a floor moved without its number: "drop end of life python versions",
        # "Drop support for Node.js below 4"
        said = re.compile(named + r"\s+(?:versions?\b|(?:below|under|before|older than|prior to)\s+v?\d)", re.I)
        ends += [lab for lab in labels if lab in recs and lab not in ends and states_floor(recs[lab].text)
                 and said.search(headline(recs[lab].text))]
    return ends


def _metadata(hits: list[Hit], embed_time: float, search_time: float) -> dict[str, Any]:
    """Times are per query: a batch's shared work is divided among its queries."""
    sims = [h.similarity for h in hits]
    return {
        "total_results": len(hits),
        "search_time_ms": round(search_time * 1000 + embed_time * 1000, 2),
        "embedding_time_ms": round(embed_time * 1000, 2),
        "max_similarity": round(max(sims), 4) if sims else None,
        "min_similarity": round(min(sims), 4) if sims else None,
        "average_similarity": round(sum(sims) / len(sims), 4) if sims else None,
    }
