"""The keyword (BM25) index: an inverted index in the catalog, scored in numpy with MaxScore pruning.

Why not SQLite FTS5 any more: `ORDER BY bm25() LIMIT k` scores every row that holds any query word,
one call per row, so at 100k memories the keyword part was ~60 ms of a ~70 ms search and grew with
the store. Here each term's posting list is a few numpy arrays (labels, term frequencies, document
lengths, positions) stored as blobs in the catalog, so they change in the same SQLite transaction as
the rest of `.index/` and are rebuilt with it. A query scores the rarest words first and stops
reading a word's posting list as soon as the words left could not lift an unseen memory into the
top k (MaxScore); common words are then only probed for the candidates already found.

Same results as the FTS5 index it replaces (tests/test_keyword_index.py checks it against FTS5
itself): words are split and Porter-stemmed by SQLite's own `porter unicode61` tokenizer (called on
each distinct word once, then cached), a query word with inner punctuation (`node.js`, `self-care`)
is a phrase, and the score is FTS5's BM25 (k1 = 1.2, b = 0.75, idf = ln((N - n + 0.5) / (n + 0.5)),
floored at 1e-6). Alongside BM25 each hit gets its coverage: the IDF-weighted share of the query's
words it contains (see `search.keyword_evidence`).

Only memory labels (the catalog's integer keys) and texts cross this module's boundary.
"""

from __future__ import annotations

import math
import re
import sqlite3
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

K1, B = 1.2, 0.75
CACHE_BYTES = 64 * 2**20  # decoded posting lists kept per process, at most (then dropped and reread)
IDF_FLOOR = 1e-6  # FTS5's floor for words in more than half the documents

SCHEMA = """
CREATE TABLE IF NOT EXISTS kw_term (
    term TEXT PRIMARY KEY,
    df INTEGER NOT NULL,        -- documents holding the term
    maxtf INTEGER NOT NULL,     -- largest term frequency: with mindl, the term's best possible score
    mindl INTEGER NOT NULL,     -- shortest document holding it
    labels BLOB NOT NULL,       -- int32, ascending
    tfs BLOB NOT NULL,          -- int32, per label
    dls BLOB NOT NULL,          -- int32, document length (tokens) per label
    pos BLOB NOT NULL           -- int32, token positions, tfs[i] of them per label, in label order
);
CREATE TABLE IF NOT EXISTS kw_doc (label INTEGER PRIMARY KEY, dl INTEGER NOT NULL, terms TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS kw_stat (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""
TABLES = ("kw_term", "kw_doc", "kw_stat")

# ---------------------------------------------------------------- tokenizer
# Units: runs of anything but ASCII punctuation and white space. unicode61 treats every ASCII
# character but [0-9A-Za-z] as a separator, so a unit is never finer than FTS5's tokens; SQLite
# then splits and stems each distinct unit (non-ASCII separators included) exactly as FTS5 did.
_UNIT = re.compile(r"[^\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f\s]+")
_STEM_CACHE_MAX = 1_000_000


class _Stemmer:
    """Word -> FTS5 `porter unicode61` tokens, through an in-memory FTS5 table, cached."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[str, ...]] = {}
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
            db.execute("CREATE VIRTUAL TABLE w USING fts5(x, tokenize='porter unicode61')")
            db.execute("CREATE VIRTUAL TABLE wv USING fts5vocab(w, 'instance')")
            self._db = db
        return self._db

    def units(self, units: Iterable[str]) -> dict[str, tuple[str, ...]]:
        """The tokens of each unit, stemming the ones not seen before in one round trip."""
        cache = self._cache
        new = [u for u in dict.fromkeys(units) if u not in cache]
        if new:
            with self._lock:
                if len(cache) + len(new) > _STEM_CACHE_MAX:
                    cache.clear()
                db = self._conn()
                db.execute("BEGIN")
                db.executemany("INSERT INTO w(rowid, x) VALUES (?, ?)", enumerate(new))
                found: dict[int, list[str]] = {}
                for doc, term in db.execute("SELECT doc, term FROM wv ORDER BY doc, offset"):
                    found.setdefault(doc, []).append(term)
                db.execute("DELETE FROM w")
                db.execute("COMMIT")
                for i, u in enumerate(new):
                    cache[u] = tuple(found.get(i, ()))
        return cache

    def tokens(self, text: str) -> list[str]:
        units = _UNIT.findall(text)
        try:
            return [t for u in units for t in self._cache[u]]
        except KeyError:  # a word not seen before: stem the new ones, then again
            cache = self.units(units)
            return [t for u in units for t in cache[u]]


STEMMER = _Stemmer()


def tokenize(text: str) -> list[str]:
    """The stemmed tokens of a text, in order, exactly as FTS5's `porter unicode61` yields them."""
    return STEMMER.tokens(text)


# ---------------------------------------------------------------- postings
@dataclass
class Posting:
    """One term's (or phrase's) documents, ascending by label, with what BM25 needs."""

    labels: np.ndarray  # int32 or int64, ascending
    tfs: np.ndarray  # term (or phrase) frequency per label
    dls: np.ndarray  # document length per label
    maxtf: int
    mindl: int
    _impact: tuple[float, float, np.ndarray] | None = None  # (idf, avgdl, scores) of the last use

    def impact(self, idf: float, avgdl: float) -> np.ndarray:
        """Each document's BM25 score for this term; kept, as idf and avgdl stay the same until
        the catalog changes (and then the cached posting list is dropped anyway)."""
        if self._impact is None or self._impact[:2] != (idf, avgdl):
            self._impact = (idf, avgdl, idf * _bm25_tf(self.tfs, self.dls, avgdl))
        return self._impact[2]

    @classmethod
    def empty(cls) -> Posting:
        z = np.zeros(0, np.int32)
        return cls(z, z, z, 0, 0)

    def __len__(self) -> int:
        return len(self.labels)


def _i32(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype=np.int32)


def _bm25_tf(tf: Any, dl: Any, avgdl: float) -> Any:
    return tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * dl / avgdl))


def fts5_idf(n: int, df: int) -> float:
    idf = math.log((n - df + 0.5) / (df + 0.5))
    return idf if idf > 0 else IDF_FLOOR


def coverage_idf(n: int, df: int) -> float:
    """The weight of a query word in coverage; a word no memory holds counts as a rare one."""
    df = max(df, 1)
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


class KeywordIndex:
    """BM25 over an inverted index kept in the catalog's connection `db`.

    Writes happen inside the caller's transaction (`Index._apply`), so the keyword index always
    agrees with the rest of the catalog.
    """

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        db.executescript(SCHEMA)
        # Decoded posting lists kept across searches of this process (a batch, a server), dropped
        # whenever the catalog changes (our writes, or another process's: SQLite's data_version).
        self._shared: dict[str, Any] = {}
        self._shared_bytes = 0
        self._shared_version: int | None = None

    def _shared_cache(self) -> dict[str, Any]:
        version = int(self.db.execute("PRAGMA data_version").fetchone()[0])
        if version != self._shared_version or self._shared_bytes > CACHE_BYTES:
            self._drop_cache()
            self._shared_version = version
        return self._shared

    def _drop_cache(self) -> None:
        self._shared = {}
        self._shared_bytes = 0

    # ------------------------------------------------------------ writes
    def reset(self) -> None:
        self._drop_cache()
        for table in TABLES:
            self.db.execute(f"DELETE FROM {table}")

    def stats(self) -> tuple[int, int]:
        """(documents, tokens) in the index."""
        rows = dict(self.db.execute("SELECT key, value FROM kw_stat"))
        return int(rows.get("docs", 0)), int(rows.get("tokens", 0))

    def update(self, removed: Iterable[int], docs: Mapping[int, str]) -> None:
        """Remove `removed` labels and (re)index `docs` (label -> text). A label in `docs` that is
        already indexed is replaced. Only the posting lists of the words involved are rewritten."""
        db = self.db
        self._drop_cache()
        docs = dict(docs)
        gone = set(removed) | set(docs)
        old: dict[int, tuple[int, list[str]]] = {}
        labels = list(gone)
        for i in range(0, len(labels), 900):
            chunk = labels[i : i + 900]
            q = f"SELECT label, dl, terms FROM kw_doc WHERE label IN ({','.join('?' * len(chunk))})"
            for label, dl, terms in db.execute(q, chunk):
                old[label] = (dl, terms.split(" ") if terms else [])
        drop: dict[str, list[int]] = {}
        for label, (_, terms) in old.items():
            for t in set(terms):
                drop.setdefault(t, []).append(label)

        # New documents, grouped by term with numpy: (term id, label, position) sorted.
        all_toks: list[str] = []
        doc_rows = []
        for label, text in docs.items():
            toks = tokenize(text)
            all_toks.extend(toks)
            doc_rows.append((label, len(toks), " ".join(toks)))  # its words, to find them when it leaves
        add_tokens = len(all_toks)
        vocab = list(dict.fromkeys(all_toks))
        term_ids = {t: i for i, t in enumerate(vocab)}
        new: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
        if all_toks:
            lens = np.fromiter((n for _, n, _ in doc_rows), np.int64, len(doc_rows))
            T = np.fromiter(map(term_ids.__getitem__, all_toks), np.int64, len(all_toks))
            L = np.repeat(np.fromiter((lab for lab, _, _ in doc_rows), np.int64, len(doc_rows)), lens)
            P = np.arange(len(T), dtype=np.int64) - np.repeat(np.cumsum(lens) - lens, lens)  # position in its doc
            dl_of = {lab: n for lab, n, _ in doc_rows}
            order = np.lexsort((P, L, T))
            T, L, P = T[order], L[order], P[order]
            # one posting per (term, label)
            start = np.flatnonzero(np.r_[True, (T[1:] != T[:-1]) | (L[1:] != L[:-1])])
            tf = np.diff(np.r_[start, len(T)])
            pt, pl = T[start], L[start]
            pdl = _lookup(dl_of, pl)
            tstart = np.flatnonzero(np.r_[True, pt[1:] != pt[:-1]])
            tend = np.r_[tstart[1:], len(pt)]
            pos_start = np.r_[start, len(T)]
            for a, b in zip(tstart.tolist(), tend.tolist()):
                term = vocab[int(pt[a])]
                new[term] = (pl[a:b], tf[a:b], pdl[a:b], P[pos_start[a] : pos_start[b]])

        touched = list(set(drop) | set(new))
        existing: dict[str, tuple[bytes, bytes, bytes, bytes]] = {}
        for i in range(0, len(touched), 900):
            chunk = touched[i : i + 900]
            q = f"SELECT term, labels, tfs, dls, pos FROM kw_term WHERE term IN ({','.join('?' * len(chunk))})"
            for term, *blobs in db.execute(q, chunk):
                existing[term] = tuple(blobs)  # type: ignore[assignment]
        writes, deletes = [], []
        for term in touched:
            labs, tfs, dls, pos = _merge(existing.get(term), drop.get(term), new.get(term))
            if not len(labs):
                if term in existing:
                    deletes.append((term,))
                continue
            writes.append((term, len(labs), int(tfs.max()), int(dls.min()), labs.astype(np.int32).tobytes(),
                           tfs.astype(np.int32).tobytes(), dls.astype(np.int32).tobytes(),
                           pos.astype(np.int32).tobytes()))
        db.executemany("DELETE FROM kw_term WHERE term=?", deletes)
        db.executemany("INSERT OR REPLACE INTO kw_term VALUES (?,?,?,?,?,?,?,?)", writes)
        olds = list(old)
        for i in range(0, len(olds), 900):
            chunk = olds[i : i + 900]
            db.execute(f"DELETE FROM kw_doc WHERE label IN ({','.join('?' * len(chunk))})", chunk)
        db.executemany("INSERT INTO kw_doc VALUES (?,?,?)", doc_rows)
        n_docs, n_tokens = self.stats()
        n_docs += len(doc_rows) - len(old)
        n_tokens += add_tokens - sum(dl for dl, _ in old.values())
        db.executemany("INSERT OR REPLACE INTO kw_stat VALUES (?, ?)", [("docs", n_docs), ("tokens", n_tokens)])

    # ------------------------------------------------------------ reads
    def _load(self, terms: list[str], cache: dict[str, Any]) -> None:
        need = [t for t in dict.fromkeys(terms) if t not in cache]
        for i in range(0, len(need), 900):
            chunk = need[i : i + 900]
            q = ("SELECT term, maxtf, mindl, labels, tfs, dls FROM kw_term"
                 f" WHERE term IN ({','.join('?' * len(chunk))})")
            for term, maxtf, mindl, labs, tfs, dls in self.db.execute(q, chunk):
                cache[term] = Posting(_i32(labs), _i32(tfs), _i32(dls), int(maxtf), int(mindl))
                if cache is self._shared:
                    self._shared_bytes += len(labs) * 5  # labels, tfs, dls (int32) + impacts (float64)
        for t in need:
            cache.setdefault(t, Posting.empty())

    def _positions(self, term: str, cache: dict[str, Any]) -> np.ndarray:
        """A term's token positions (only phrases need them, so they are read apart)."""
        key = "\0pos " + term
        if key not in cache:
            row = self.db.execute("SELECT pos FROM kw_term WHERE term=?", (term,)).fetchone()
            cache[key] = _i32(row[0]) if row else np.zeros(0, np.int32)
            if cache is self._shared:
                self._shared_bytes += cache[key].nbytes
        return cache[key]

    def phrase_posting(self, tokens: list[str], cache: dict[str, Any]) -> Posting:
        """The documents holding `tokens` in a row, with the phrase's frequency as tf (FTS5's rule)."""
        if len(tokens) == 1:
            return cache[tokens[0]]
        key = "\0phrase " + " ".join(tokens)
        if key not in cache:
            cache[key] = self._phrase_posting(tokens, cache)
        return cache[key]

    def _phrase_posting(self, tokens: list[str], cache: dict[str, Any]) -> Posting:
        posts = [cache[t] for t in tokens]
        common = posts[0].labels
        for p in posts[1:]:
            common = np.intersect1d(common, p.labels, assume_unique=True)
        if not len(common):
            return Posting.empty()
        keys = None
        for j, t in enumerate(tokens):
            p, pos = cache[t], self._positions(t, cache)
            idx = np.searchsorted(p.labels, common)
            counts = p.tfs[idx].astype(np.int64)
            starts = (np.cumsum(p.tfs, dtype=np.int64) - p.tfs)[idx]
            gather = np.repeat(starts - np.r_[0, np.cumsum(counts)[:-1]], counts) + np.arange(int(counts.sum()))
            # (label, start of the phrase) as one sorted int64 per occurrence of this token
            k = np.repeat(common.astype(np.int64), counts) * (1 << 32) + (pos[gather].astype(np.int64) - j)
            if keys is None:
                keys = k
            elif len(k):
                keys = keys[_member(k, keys)[0]]
            else:
                keys = k
        assert keys is not None
        if not len(keys):
            return Posting.empty()
        labs, tf = np.unique(keys >> 32, return_counts=True)
        p0 = posts[0]
        dls = p0.dls[np.searchsorted(p0.labels, labs)]
        return Posting(labs, tf.astype(np.float64), dls, int(tf.max()), int(dls.min()))

    def search(
        self, terms: list[str], k: int, cache: dict[str, Any] | None = None
    ) -> list[tuple[int, float, float]]:
        """Top `k` labels by BM25 for the OR of `terms` (each a word or, with inner punctuation, a
        phrase), with each hit's coverage of the query. Returns (label, bm25, coverage), best first
        (ties: lower label first). `cache`, if given, holds the decoded posting lists instead of
        the process's shared cache.

        MaxScore: words are taken by their best possible score, highest (rarest) first, and scored
        over their whole posting list into a dense accumulator. As soon as the words left could
        not together reach the k-th best score found so far, a memory holding none of the words
        taken cannot be in the top k, so the remaining (common) words are only looked up for the
        candidates that could still make it.
        """
        cache = self._shared_cache() if cache is None else cache
        phrases = [toks for toks in (tokenize(t) for t in terms) if toks]
        if not phrases or k <= 0:
            return []
        if "\0stats" not in cache:
            cache["\0stats"] = self.stats()
        n, n_tokens = cache["\0stats"]
        if n <= 0:
            return []
        self._load([t for toks in phrases for t in toks], cache)
        avgdl = n_tokens / n if n_tokens else 1.0
        posts = [self.phrase_posting(toks, cache) for toks in phrases]
        idfs = [fts5_idf(n, len(p)) for p in posts]
        ubs = [idf * _bm25_tf(p.maxtf, p.mindl, avgdl) if len(p) else 0.0 for idf, p in zip(idfs, posts)]
        order = sorted((i for i in range(len(posts)) if len(posts[i])), key=lambda i: -ubs[i])
        if not order:
            return []
        rest = [sum(ubs[i] for i in order[j + 1 :]) for j in range(len(order))]
        acc = np.zeros(max(int(posts[i].labels[-1]) for i in order) + 1)
        theta = 0.0  # a lower bound of the k-th best score
        done, seen = 0, 0.0
        for j, i in enumerate(order):  # essential words: their whole posting lists
            p = posts[i]
            acc[p.labels] += p.impact(idfs[i], avgdl)
            done, seen = j + 1, seen + ubs[i]
            if j + 1 == len(order) or rest[j] >= seen:
                continue  # no memory can have scored more than `seen` yet: no early stop possible
            if len(p) >= k:  # k memories hold this word: the k-th best of them bounds the k-th best
                theta = max(theta, float(np.partition(acc[p.labels], len(p) - k)[len(p) - k]))
            if rest[j] < theta:
                break  # a memory holding none of the words so far scores at most rest[j]: not top k
        remaining = order[done:]
        if not remaining:
            cand = np.flatnonzero(acc != 0)
            score = acc[cand]
        else:
            cand = np.flatnonzero(acc != 0)
            score = acc[cand]
            if len(cand) >= k:  # the k-th best partial score is a lower bound of the k-th best score
                theta = max(theta, float(np.partition(score, len(score) - k)[len(score) - k]))
            for j in range(done, len(order)):  # non-essential words: only the candidates' scores
                keep = score + ubs[order[j]] + rest[j] >= theta  # drop what the words left cannot lift
                cand, score = cand[keep], score[keep]
                p = posts[order[j]]
                if len(cand) * 16 < len(p):  # few candidates: binary search in the posting list
                    hit, at = _member(p.labels, cand)
                    if hit.any():
                        score[hit] += p.impact(idfs[order[j]], avgdl)[at[hit]]
                else:  # else scatter it, cheaper than len(cand) binary searches
                    tmp = np.zeros(len(acc))
                    tmp[p.labels] = p.impact(idfs[order[j]], avgdl)
                    score += tmp[cand]
        if len(cand) > k:  # the top k (and any tie with the k-th), then sorted
            kth = np.partition(score, len(score) - k)[len(score) - k]
            sel = score >= kth
            cand, score = cand[sel], score[sel]
        top = np.lexsort((cand, -score))[:k]
        cand, score = cand[top], score[top]
        weights = [coverage_idf(n, len(p)) for p in posts]
        total = sum(weights)
        matched = np.zeros(len(cand))
        for w, p in zip(weights, posts):
            if len(p):
                matched += w * _member(p.labels, cand)[0]
        cov = matched / total if total else matched
        return [(int(lab), float(s), float(c)) for lab, s, c in zip(cand, score, cov)]


def _member(labels: np.ndarray, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each candidate: is it in the sorted `labels`, and where."""
    at = np.searchsorted(labels, cand)
    at = np.minimum(at, len(labels) - 1)
    return labels[at] == cand, at


def _lookup(table: dict[int, int], keys: np.ndarray) -> np.ndarray:
    labs = np.fromiter(table.keys(), np.int64, len(table))
    vals = np.fromiter(table.values(), np.int64, len(table))
    o = np.argsort(labs)
    return vals[o][np.searchsorted(labs[o], keys)]


def _merge(
    row: tuple[bytes, bytes, bytes, bytes] | None,
    drop: list[int] | None,
    add: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A term's posting list with `drop` labels removed and `add` postings put in label order."""
    if row is None:
        labs = tfs = dls = pos = np.zeros(0, np.int64)
    else:
        labs, tfs, dls, pos = (_i32(b).astype(np.int64) for b in row)
    if drop and len(labs):
        keep = ~np.isin(labs, np.asarray(drop, np.int64))
        pos = pos[np.repeat(keep, tfs)]
        labs, tfs, dls = labs[keep], tfs[keep], dls[keep]
    if add is None:
        return labs, tfs, dls, pos
    alabs, atfs, adls, apos = add
    if not len(labs):
        return alabs, atfs, adls, apos
    labs2 = np.concatenate([labs, alabs])
    tfs2 = np.concatenate([tfs, atfs])
    dls2 = np.concatenate([dls, adls])
    pos2 = np.concatenate([pos, apos])
    if alabs[0] > labs[-1]:  # the usual case: new labels come after every existing one
        return labs2, tfs2, dls2, pos2
    order = np.argsort(labs2, kind="stable")
    starts = np.cumsum(tfs2) - tfs2
    counts = tfs2[order]
    gather = np.repeat(starts[order] - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum()))
    return labs2[order], counts, dls2[order], pos2[gather]
