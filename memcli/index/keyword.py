"""The keyword (BM25) index: an inverted index in the catalog, scored in numpy (one dense sum a query).

Not SQLite FTS5: its `ORDER BY bm25() LIMIT k` scores every row holding any query word, a cost that
grows with the store. Each term's posting list is a few numpy arrays stored as
blobs in the catalog, changed in the same transaction as the rest of `.index/`; a change goes to a
small delta, merged into the main lists in bulk (`update`). The results are FTS5's (tests check it
against FTS5): SQLite's own `porter unicode61` tokenizer, with runs of digits set apart from letters
("py3.14" is "py 3 14", so "Python 3.14" finds it); a word with inner punctuation (`node.js`) is a
phrase; FTS5's BM25 (k1 = 1.2, b = 0.75, idf floored at 1e-6). Each hit also gets its coverage: the
IDF-weighted share of the query's words it contains.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from memcli.core.text import camel_parts

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
-- The delta, merged into kw_term in bulk (see KeywordIndex.update): postings of documents added or
-- changed since the last merge, per term (same columns as kw_term's lists) ...
CREATE TABLE IF NOT EXISTS kw_tail (term TEXT PRIMARY KEY, labels BLOB NOT NULL, tfs BLOB NOT NULL,
                                    dls BLOB NOT NULL, pos BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS kw_tail_doc (label INTEGER PRIMARY KEY);  -- documents whose postings are there
-- ... and documents whose postings in kw_term no longer count (changed or removed), with their words then.
CREATE TABLE IF NOT EXISTS kw_gone (label INTEGER PRIMARY KEY, terms TEXT NOT NULL);
"""
TABLES = ("kw_term", "kw_doc", "kw_stat", "kw_tail", "kw_tail_doc", "kw_gone")
IN_JSON = "IN (SELECT value FROM json_each(?))"  # with `json_list(values)`: any number of values, one parameter


def json_list(values: Iterable[Any]) -> str:
    """Values as one JSON array, for `IN_JSON` (SQLite caps bound parameters)."""
    return json.dumps(list(values), default=int)  # default: numpy integers


# ---------------------------------------------------------------- tokenizer
# Units: runs of letters (anything but ASCII punctuation, digits and white space) or of digits, never
# finer than unicode61's tokens; SQLite then splits and stems each distinct unit exactly as FTS5 did.
_UNIT = re.compile(r"[^\x00-\x40\x5b-\x60\x7b-\x7f\s]+|[0-9]+")
_STEM_CACHE_MAX = 1_000_000
# Developers' short forms, indexed as the words they stand for, in memories and queries alike: a
# commit says "Increase the GHA testsuite timeout", its question "Why was the GitHub Actions test
# timeout raised?" (a real pip-tools miss). Only forms that mean one thing in developer text
# ("py" is also a file extension, "ci" is asked as "CI", so neither is here).
ABBREVIATIONS = {
    "gha": "github actions", "gh": "github", "deps": "dependencies", "dep": "dependency", "env": "environment",
    "envs": "environments", "var": "variable", "vars": "variables", "dev": "development", "docs": "documentation",
    "doc": "documentation", "repo": "repository", "repos": "repositories", "config": "configuration",
    "configs": "configurations", "perf": "performance", "impl": "implementation", "auth": "authentication",
    "db": "database", "dbs": "databases", "dir": "directory", "dirs": "directories", "pkg": "package",
    "pkgs": "packages", "lib": "library", "libs": "libraries", "arg": "argument", "args": "arguments",
    "kwargs": "keyword arguments", "param": "parameter", "params": "parameters", "msg": "message",
    "stdlib": "standard library", "testsuite": "test suite", "tz": "timezone",
}


def _with_parts(unit: str) -> str:
    """The text stemmed for a unit: a short form written out, a camel-case name with its words
    (short forms among them written out too: `NetRCAuth` says "authentication")."""
    parts = camel_parts(unit)
    if not parts:
        return ABBREVIATIONS.get(unit.lower(), unit)
    return " ".join([unit, *(ABBREVIATIONS.get(p.lower(), p) for p in parts)])


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
        wanted = list(dict.fromkeys(units))
        if any(u not in cache for u in wanted):
            with self._lock:
                new = [u for u in wanted if u not in cache]
                if len(cache) + len(new) > _STEM_CACHE_MAX:
                    cache.clear()
                    new = wanted  # the units of this call seen before went with the rest
                db = self._conn()
                db.execute("BEGIN")
                db.executemany("INSERT INTO w(rowid, x) VALUES (?, ?)",
                               ((i, _with_parts(u)) for i, u in enumerate(new)))
                found: dict[int, list[str]] = {}
                for doc, term in db.execute("SELECT doc, term FROM wv ORDER BY doc, offset"):
                    found.setdefault(doc, []).append(term)
                db.execute("DELETE FROM w")
                db.execute("COMMIT")
                for i, u in enumerate(new):
                    cache[u] = tuple(found.get(i, ()))
        return cache

    def tokens_many(self, texts: Iterable[str]) -> list[list[str]]:
        """The tokens of each text, the words not seen before stemmed in one round trip for all."""
        unit_lists = [_UNIT.findall(text) for text in texts]
        cache = self.units(u for units in unit_lists for u in units)
        return [[t for u in units for t in cache[u]] for units in unit_lists]

    def tokens(self, text: str) -> list[str]:
        units = _UNIT.findall(text)
        try:
            return [t for u in units for t in self._cache[u]]
        except KeyError:  # a word not seen before: stem the new ones, then again
            cache = self.units(units)
            return [t for u in units for t in cache[u]]


STEMMER = _Stemmer()


def tokenize(text: str) -> list[str]:
    """The stemmed tokens of a text, in order, as FTS5's `porter unicode61` yields them once digits
    are set apart from letters and short forms written out (`ABBREVIATIONS`)."""
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
    _dense: _Table | None = None  # a long list's membership
    _lookups: int = 0  # membership lookups before `_dense` was built

    def holds(self, cand: np.ndarray) -> np.ndarray:
        """For each candidate label: does this list hold it. A long list (a word in more than
        1/DENSE_SHARE of the labels) looked up a second time (a batch, a server) gets a dense bitmap,
        one read a candidate instead of a binary search that grows with the store; a one-query
        process would pay the bitmap's build for one use."""
        if not len(self.labels):
            return np.zeros(len(cand), bool)
        if self._dense is None:
            self._lookups += 1
            if self._lookups < 2 or not self.dense_bytes():
                return _member(self.labels, cand)[0]
            self._dense = _Table(self.labels)
        return self._dense.holds(cand)

    def dense_bytes(self) -> int:
        """The size of the bitmap `holds` may build for this list (0 if it never will)."""
        last = int(self.labels[-1]) if len(self.labels) else 0
        return last + 2 if len(self.labels) * DENSE_SHARE > last else 0

    def impact(self, idf: float, avgdl: float) -> np.ndarray:
        """Each document's BM25 score for this term, kept while idf and avgdl stay the same."""
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
    """BM25 over an inverted index kept in the catalog's connection `db`, written inside the
    caller's transaction (so it always agrees with the rest of the catalog)."""

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
        """Remove `removed` labels and (re)index `docs` (label -> text), replacing what is there.

        A few changes go to the delta, so a common word's long list is not rewritten per note: new
        postings into the small `kw_tail` lists, labels whose main postings no longer count into
        `kw_gone`. Past the delta's limits everything is merged into `kw_term`. Searches read
        main + tail - gone: the same results merged or not."""
        db = self.db
        self._drop_cache()
        docs = dict(docs)
        gone = set(removed) | set(docs)
        old: dict[int, tuple[int, list[str]]] = {}
        q = f"SELECT label, dl, terms FROM kw_doc WHERE label {IN_JSON}"
        for label, dl, terms in db.execute(q, (json_list(gone),)):
            old[label] = (dl, terms.split(" ") if terms else [])
        doc_rows, new, add_tokens = _postings(docs)
        n_docs, n_tokens = self.stats()
        n_docs += len(doc_rows) - len(old)
        n_tokens += add_tokens - sum(dl for dl, _ in old.values())
        tail_size, gone_size = self._delta_size()
        in_tail = self._labels_in(list(old), "kw_tail_doc")
        in_gone = self._labels_in([lab for lab in old if lab not in in_tail], "kw_gone")
        to_gone = [lab for lab in old if lab not in in_tail and lab not in in_gone]
        tail_limit = max(self.tail_min, min(self.tail_max, n_tokens // 20))
        gone_limit = max(self.gone_min, min(self.gone_max, n_docs // 100))
        bulk = add_tokens + tail_size > tail_limit or gone_size + len(to_gone) > gone_limit
        if n_docs <= 0:
            self.reset()  # nothing left: no posting list, main or delta, stays behind
        elif bulk:
            self._merge_all(old, new)
        else:
            self._update_delta(old, in_tail, to_gone, new, [lab for lab, _, _ in doc_rows])
        db.execute(f"DELETE FROM kw_doc WHERE label {IN_JSON}", (json_list(old),))
        if n_docs > 0:
            db.executemany("INSERT INTO kw_doc VALUES (?,?,?)", doc_rows)
        db.executemany("INSERT OR REPLACE INTO kw_stat VALUES (?, ?)", [("docs", max(n_docs, 0)),
                                                                       ("tokens", max(n_tokens, 0))])

    # The delta is merged once it holds more than 5% of the store's postings or hides more than 1%
    # of its documents, within these bounds (a merge rewrites most lists).
    tail_min, tail_max = 2_000, 100_000  # postings
    gone_min, gone_max = 64, 2_000  # labels

    def _delta_size(self) -> tuple[int, int]:
        rows = dict(self.db.execute("SELECT key, value FROM kw_stat WHERE key IN ('tail', 'gone')"))
        return int(rows.get("tail", 0)), int(rows.get("gone", 0))

    def _labels_in(self, labels: list[int], table: str) -> set[int]:
        return {r[0] for r in self.db.execute(f"SELECT label FROM {table} WHERE label {IN_JSON}", (json_list(labels),))}

    def _rows(self, table: str, terms: list[str]) -> dict[str, tuple[bytes, bytes, bytes, bytes]]:
        q = f"SELECT term, labels, tfs, dls, pos FROM {table} WHERE term {IN_JSON}"
        return {term: tuple(blobs) for term, *blobs in self.db.execute(q, (json_list(terms),))}  # type: ignore[misc]

    def _update_delta(self, old: dict[int, tuple[int, list[str]]], in_tail: set[int], to_gone: list[int],
                      new: dict[str, tuple[np.ndarray, ...]], new_labels: list[int]) -> None:
        """A small change: rewrite only the tail lists of the words involved."""
        db = self.db
        drop: dict[str, list[int]] = {}  # tail postings of replaced or removed labels
        for label in in_tail:
            for t in set(old[label][1]):
                drop.setdefault(t, []).append(label)
        db.executemany("INSERT INTO kw_gone VALUES (?, ?)", [(lab, " ".join(old[lab][1])) for lab in to_gone])
        touched = list(set(drop) | set(new))
        rows = self._rows("kw_tail", touched)
        before = sum(len(r[0]) // 4 for r in rows.values())
        after, writes, deletes = 0, [], []
        for term in touched:
            labs, tfs, dls, pos = _merge(rows.get(term), drop.get(term), new.get(term))
            after += len(labs)
            if len(labs):
                writes.append((term, _blob(labs), _blob(tfs), _blob(dls), _blob(pos)))
            elif term in rows:
                deletes.append((term,))
        db.executemany("DELETE FROM kw_tail WHERE term=?", deletes)
        db.executemany("INSERT OR REPLACE INTO kw_tail VALUES (?,?,?,?,?)", writes)
        db.executemany("DELETE FROM kw_tail_doc WHERE label=?", [(lab,) for lab in old])
        db.executemany("INSERT INTO kw_tail_doc VALUES (?)", [(lab,) for lab in new_labels])
        tail_size, gone_size = self._delta_size()
        db.executemany("INSERT OR REPLACE INTO kw_stat VALUES (?, ?)",
                       [("tail", tail_size + after - before), ("gone", gone_size + len(to_gone))])

    def _merge_all(self, old: dict[int, tuple[int, list[str]]], new: dict[str, tuple[np.ndarray, ...]]) -> None:
        """Merge the delta and this change into the main posting lists, and empty the delta."""
        db = self.db
        gone_rows = db.execute("SELECT label, terms FROM kw_gone").fetchall()
        hidden = {lab for lab, _ in gone_rows} | set(old)  # main-list postings that no longer count
        terms_of_hidden: set[str] = {t for _, terms in gone_rows for t in terms.split(" ") if t}
        terms_of_hidden.update(t for _, terms in old.values() for t in terms)
        tail = self._rows("kw_tail", [r[0] for r in db.execute("SELECT term FROM kw_tail")])
        touched = list(terms_of_hidden | set(tail) | set(new))
        # each label's membership as one read of a table, not a sort of the labels per word
        hidden_tab, old_tab = _Table(hidden), _Table(old)
        writes, deletes = [], []
        for chunk in _chunks(touched):
            main = self._rows("kw_term", chunk)
            for term in chunk:
                labs, tfs, dls, pos = _merge(main.get(term), hidden_tab, None)
                if term in tail:  # the tail minus replaced or removed labels, then this change's postings
                    t_labs, t_tfs, t_dls, t_pos = _merge(tail[term], old_tab, None)
                    labs, tfs, dls, pos = _merge((labs, tfs, dls, pos), None, (t_labs, t_tfs, t_dls, t_pos))
                if term in new:
                    labs, tfs, dls, pos = _merge((labs, tfs, dls, pos), None, new[term])
                if len(labs):
                    writes.append((term, len(labs), int(tfs.max()), int(dls.min()), _blob(labs), _blob(tfs),
                                   _blob(dls), _blob(pos)))
                elif term in main:
                    deletes.append((term,))
        db.executemany("DELETE FROM kw_term WHERE term=?", deletes)
        db.executemany("INSERT OR REPLACE INTO kw_term VALUES (?,?,?,?,?,?,?,?)", writes)
        for table in ("kw_tail", "kw_gone", "kw_tail_doc"):
            db.execute(f"DELETE FROM {table}")
        db.executemany("INSERT OR REPLACE INTO kw_stat VALUES (?, ?)", [("tail", 0), ("gone", 0)])

    # ------------------------------------------------------------ reads
    def _delta(self, cache: dict[str, Any]) -> tuple[np.ndarray, set[str]] | None:
        """The delta as readers need it: the hidden labels (sorted) and their words; None when empty."""
        if "\0delta" not in cache:
            tail, gone = self._delta_size()
            if not tail and not gone:
                cache["\0delta"] = None
            else:
                rows = self.db.execute("SELECT label, terms FROM kw_gone").fetchall()
                hidden = np.sort(np.fromiter((r[0] for r in rows), np.int64, len(rows)))
                cache["\0delta"] = (hidden, {t for _, terms in rows for t in terms.split(" ") if t})
        return cache["\0delta"]

    def _load(self, terms: list[str], cache: dict[str, Any]) -> None:
        need = [t for t in dict.fromkeys(terms) if t not in cache]
        if not need:
            return
        delta = self._delta(cache)
        tail = self._rows("kw_tail", need) if delta is not None else {}
        q = f"SELECT term, maxtf, mindl, labels, tfs, dls FROM kw_term WHERE term {IN_JSON}"
        for term, maxtf, mindl, labs, tfs, dls in self.db.execute(q, (json_list(need),)):
            if delta is not None and (term in tail or term in delta[1]):
                cache[term] = _combined((labs, tfs, dls, None), delta, tail.get(term), term)
            else:
                # labels as intp: numpy would convert int32 indices on every use
                cache[term] = Posting(_i32(labs).astype(np.intp), _i32(tfs), _i32(dls), int(maxtf), int(mindl))
            if cache is self._shared:
                # labels (intp), tfs, dls (int32), impacts (float64); a long list's bitmap (`holds`)
                self._shared_bytes += len(labs) * 6 + cache[term].dense_bytes()
        for t in need:
            if t not in cache and t in tail:  # a word only the delta holds
                assert delta is not None
                cache[t] = _combined(None, delta, tail[t], t)
            cache.setdefault(t, Posting.empty())

    def _positions(self, term: str, cache: dict[str, Any]) -> np.ndarray:
        """A term's token positions (only phrases need them, so they are read apart)."""
        key = "\0pos " + term
        if key not in cache:
            delta = self._delta(cache)
            if delta is None:
                row = self.db.execute("SELECT pos FROM kw_term WHERE term=?", (term,)).fetchone()
                cache[key] = _i32(row[0]) if row else np.zeros(0, np.int32)
            else:
                main = self._rows("kw_term", [term]).get(term)
                tail = self._rows("kw_tail", [term]).get(term)
                drop = delta[0] if term in delta[1] else None
                cache[key] = _merge(_merge(main, drop, None), None, tail)[3]
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
            # the starts every token so far has (none once a token has no occurrence left)
            keys = k if keys is None or not len(k) else keys[_member(k, keys)[0]]
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
        phrase), as (label, bm25, coverage), best first (ties: lower label first). Coverage is the
        IDF-weighted share of the query the memory holds, so one incidental shared word does not
        pass for a match. `cache`, if given, holds the decoded posting lists instead of the
        process's shared cache (kept until the catalog changes)."""
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
        cand, score = _top(posts, idfs, ubs, order, k, avgdl, n)
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
                matched += w * p.holds(cand)
        cov = matched / total if total else matched
        return [(int(lab), float(s), float(c)) for lab, s, c in zip(cand, score, cov)]


DEFER_SHARE = 4  # a word in more than 1/DEFER_SHARE of the memories may be deferred (see `_top`)
DENSE_SHARE = 32  # a posting list of more than 1/DENSE_SHARE of the labels: dense membership (`Posting.holds`)


def _top(posts: list[Posting], idfs: list[float], ubs: list[float], order: list[int], k: int, avgdl: float,
         n_docs: int) -> tuple[np.ndarray, np.ndarray]:
    """The candidates for the top k (every memory that could tie the k-th) and their BM25 scores.

    The posting lists are added in `order` into one dense accumulator, so a memory's score is the
    same float whatever else the query holds. A word held by more than 1/DEFER_SHARE of the
    memories (long list, low weight) is left out of the sum when the others' k-th best partial
    score exceeds the most all such words could add: they are then looked up for the candidates only.
    """
    deferred = [i for i in order if len(posts[i]) * DEFER_SHARE > n_docs]
    summed = [i for i in order if i not in deferred] or order
    deferred = [i for i in deferred if i not in summed]
    acc = np.zeros(max(int(posts[i].labels[-1]) for i in order) + 1)
    for i in summed:
        np.add.at(acc, posts[i].labels, posts[i].impact(idfs[i], avgdl))
    # a lower bound of the k-th best score: the k-th best among the shortest list with k memories
    probe = min((posts[i].labels for i in summed if len(posts[i]) >= k), key=len, default=None)
    theta = float(np.partition(acc[probe], len(probe) - k)[len(probe) - k]) if probe is not None else 0.0
    lift = sum(ubs[i] for i in deferred)
    if deferred and theta <= lift:  # the deferred words could matter: sum them too
        for i in deferred:
            np.add.at(acc, posts[i].labels, posts[i].impact(idfs[i], avgdl))
        deferred, lift = [], 0.0
    cand = np.flatnonzero(acc >= theta - lift) if theta > lift else np.flatnonzero(acc)
    score = acc[cand]
    for i in deferred:
        p = posts[i]
        hit, at = _member(p.labels, cand)
        if hit.any():
            score[hit] += p.impact(idfs[i], avgdl)[at[hit]]
    return cand, score


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


def _combined(main: Any, delta: tuple[np.ndarray, set[str]], tail: Any, term: str) -> Posting:
    """A word's main posting list minus the hidden labels, plus its tail (without positions)."""
    drop = delta[0] if term in delta[1] else None
    tail3 = None if tail is None else (*tail[:3], None)
    labs, tfs, dls, _ = _merge(_merge(main, drop, None), None, tail3)
    if not len(labs):
        return Posting.empty()
    return Posting(labs.astype(np.intp), tfs, dls, int(tfs.max()), int(dls.min()))


def _chunks(items: list[Any], size: int = 900) -> Iterator[list[Any]]:
    """A bulk merge reads the main posting lists `size` words at a time (its memory stays bounded)."""
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _blob(a: np.ndarray) -> bytes:
    return a.astype(np.int32).tobytes()


def _postings(docs: Mapping[int, str]) -> tuple[list[tuple[int, int, str]], dict[str, tuple[np.ndarray, ...]], int]:
    """Tokenize `docs`: their kw_doc rows (label, length, words), their postings grouped by term
    with numpy ((term id, label, position) sorted), and the number of tokens."""
    all_toks: list[str] = []
    doc_rows = []
    for label, toks in zip(docs, STEMMER.tokens_many(docs.values())):
        all_toks.extend(toks)
        doc_rows.append((label, len(toks), " ".join(toks)))  # its words, to find them when it leaves
    vocab = list(dict.fromkeys(all_toks))
    term_ids = {t: i for i, t in enumerate(vocab)}
    new: dict[str, tuple[np.ndarray, ...]] = {}
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
            new[vocab[int(pt[a])]] = (pl[a:b], tf[a:b], pdl[a:b], P[pos_start[a] : pos_start[b]])
    return doc_rows, new, len(all_toks)


def _arrays(row: Any) -> tuple[np.ndarray, ...]:
    """A posting list as int64 arrays (labels, tfs, dls, pos) from its blobs or arrays; pos may be
    None when only (labels, tfs, dls) were read."""
    if row is None:
        z = np.zeros(0, np.int64)
        return z, z, z, z
    return tuple(None if x is None else (_i32(x) if isinstance(x, bytes) else x).astype(np.int64, copy=False)
                 for x in row)


class _Table:
    """A set of labels as a boolean table: a whole posting list's membership in one gather (np.isin
    sorted the set again for each word of a bulk merge)."""

    def __init__(self, labels: Iterable[int] | np.ndarray) -> None:
        labs = labels if isinstance(labels, np.ndarray) else np.fromiter(labels, np.int64)
        self.tab = np.zeros(int(labs.max()) + 2 if len(labs) else 1, bool)  # the last entry: False
        self.tab[labs] = True

    def holds(self, labs: np.ndarray) -> np.ndarray:
        return self.tab[np.minimum(labs, len(self.tab) - 1)]


def _merge(row: Any, drop: Any, add: Any) -> tuple[np.ndarray, ...]:
    """A term's posting list with `drop` labels removed and `add` postings put in label order.
    Positions (the fourth array) are carried along unless the row has none."""
    labs, tfs, dls, pos = _arrays(row)
    if drop is not None and len(labs) and (isinstance(drop, _Table) or len(drop)):
        keep = ~(drop.holds(labs) if isinstance(drop, _Table) else np.isin(labs, np.asarray(drop, np.int64)))
        if pos is not None:
            pos = pos[np.repeat(keep, tfs)]
        labs, tfs, dls = labs[keep], tfs[keep], dls[keep]
    if add is None:
        return labs, tfs, dls, pos
    alabs, atfs, adls, apos = _arrays(add)
    if not len(alabs):
        return labs, tfs, dls, pos
    if not len(labs):
        return alabs, atfs, adls, apos if pos is not None else None
    labs2 = np.concatenate([labs, alabs])
    tfs2 = np.concatenate([tfs, atfs])
    dls2 = np.concatenate([dls, adls])
    pos2 = np.concatenate([pos, apos]) if pos is not None and apos is not None else None
    if alabs[0] > labs[-1]:  # the usual case: new labels come after every existing one
        return labs2, tfs2, dls2, pos2
    order = np.argsort(labs2, kind="stable")
    counts = tfs2[order]
    if pos2 is not None:
        starts = np.cumsum(tfs2) - tfs2
        gather = np.repeat(starts[order] - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum()))
        pos2 = pos2[gather]
    return labs2[order], counts, dls2[order], pos2
