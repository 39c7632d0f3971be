"""The keyword index (memcli/index/keyword.py): same BM25 as SQLite FTS5 and as a brute-force
BM25, incremental updates that end where a fresh build does, and a store-level rebuild."""

from __future__ import annotations

import math
import random
import re
import shutil
import sqlite3
from collections import Counter

import numpy as np
import pytest
from conftest import files

from memcli.core.memory import Memory
from memcli.index import fts_body
from memcli.index.keyword import ABBREVIATIONS, KeywordIndex, Posting, coverage_idf, fts5_idf, tokenize
from memcli.ops.search import query_terms

WORDS = ("deploy deploys deployed deploying pipeline pipelines cache cached caching redis postgres migration "
         "migrations token tokens expire expires expired flaky retry retries retried worker workers queue "
         "backup nightly grafana alert alerts runbook rollback release staging production timeout").split()
ODD = [
    "Caroline’s self-care routine — café, naïve résumé",
    "node.js and Node JS and node-js are three spellings",
    "snake_case my_var __init__ and C++ / C# / F#",
    "e-mail vs e‑mail on 2023-05-08, version v1.2.3",
    "ÉCOLE école Ecole: running runs ran runner",
    "self care is not self-care, care self",
]
QUERIES = ["deploying the pipeline", "cached redis tokens expire", "self-care", "node.js", "my_var", "ecole",
           "running runner", "v1.2.3", "2023-05-08", "nightly backup alert runbook", "e-mail", "café",
           "flaky retries in staging production", "postgres migrations rollback release", "unknownword deploy"]


def texts(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    out = list(ODD)
    while len(out) < n:
        out.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 14))) + rng.choice([".", "!", ""]))
    return out


def build(docs: dict[int, str], merged: bool = False) -> KeywordIndex:
    """A fresh index of `docs`; `merged`: all of it in the main posting lists, none in the delta."""
    db = sqlite3.connect(":memory:", isolation_level=None)
    kw = KeywordIndex(db)
    if merged:
        kw.tail_min = kw.tail_max = kw.gone_min = kw.gone_max = 0
    db.execute("BEGIN")
    kw.update([], docs)
    db.execute("COMMIT")
    return kw


# the index's words are FTS5's `porter unicode61` tokens of the text with runs of digits set apart
# from letters ("python3.14" -> python 3 14, as "Python 3.14" is written): the reference does the same
_LETTER = r"[^\x00-\x40\x5b-\x60\x7b-\x7f\s]"
_DIGIT_EDGE = re.compile(rf"(?<=[0-9])(?={_LETTER})|(?<={_LETTER})(?=[0-9])")


_WORD = re.compile(rf"{_LETTER}+")


def digits_apart(text: str) -> str:
    """The text as the index reads it: digits set apart, short forms ("GHA", "deps") written out."""
    text = _DIGIT_EDGE.sub(" ", text)
    return _WORD.sub(lambda m: ABBREVIATIONS.get(m.group().lower(), m.group()), text)


def fts5(docs: dict[int, str]) -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE fts USING fts5(body, tokenize='porter unicode61')")
    db.executemany("INSERT INTO fts(rowid, body) VALUES (?, ?)", ((i, digits_apart(t)) for i, t in docs.items()))
    return db


def fts5_top(db: sqlite3.Connection, terms: list[str], k: int) -> list[tuple[int, float]]:
    match = " OR ".join('"' + digits_apart(t).replace('"', '""') + '"' for t in terms)
    return db.execute("SELECT rowid, -bm25(fts) AS s FROM fts WHERE fts MATCH ? ORDER BY s DESC, rowid LIMIT ?",
                      (match, k)).fetchall()


def brute_force(docs: dict[int, str], terms: list[str], k: int) -> list[tuple[int, float, float]]:
    """BM25 and coverage the slow, obvious way: every document, every phrase, every position."""
    toks = {lab: tokenize(t) for lab, t in docs.items()}
    n = len(docs)
    avgdl = sum(len(t) for t in toks.values()) / n
    phrases = [p for p in (tokenize(t) for t in terms) if p]

    def freq(doc: list[str], phrase: list[str]) -> int:
        return sum(doc[i : i + len(phrase)] == phrase for i in range(len(doc) - len(phrase) + 1))

    freqs = {lab: [freq(doc, p) for p in phrases] for lab, doc in toks.items()}
    dfs = [sum(1 for f in freqs.values() if f[i]) for i in range(len(phrases))]
    out = []
    for lab, f in freqs.items():
        if not any(f):
            continue
        dl = len(toks[lab])
        s = sum(fts5_idf(n, df) * x * 2.2 / (x + 1.2 * (0.25 + 0.75 * dl / avgdl)) for x, df in zip(f, dfs))
        cov = sum(coverage_idf(n, df) for x, df in zip(f, dfs) if x) / sum(coverage_idf(n, df) for df in dfs)
        out.append((lab, s, cov))
    out.sort(key=lambda r: (-r[1], r[0]))
    return out[:k]


def same(got: list[tuple[int, float, float]], want: list[tuple], tie_ok: bool = True) -> None:
    assert [round(r[1], 9) for r in got] == [round(r[1], 9) for r in want]
    if not tie_ok:
        assert [r[0] for r in got] == [r[0] for r in want]


@pytest.mark.parametrize("k", [3, 10, 100])
def test_scores_equal_sqlite_fts5_bm25(k):
    docs = dict(enumerate(texts(400), start=1))
    kw, db = build(docs), fts5(docs)
    for q in QUERIES:
        terms = query_terms(q)
        want = fts5_top(db, terms, k)
        got = kw.search(terms, k)
        assert [round(s, 9) for _, s in want] == [round(s, 9) for _, s, _ in got], q
        assert len(got) == len(want), q


def test_scores_and_coverage_equal_a_brute_force_bm25():
    docs = dict(enumerate(texts(300, seed=3), start=10))
    kw = build(docs)
    for q in QUERIES:
        terms = query_terms(q)
        got, want = kw.search(terms, 20), brute_force(docs, terms, 20)
        assert len(got) == len(want), q
        for g, w in zip(got, want):
            assert g[0] == w[0] and g[1] == pytest.approx(w[1], rel=1e-9) and g[2] == pytest.approx(w[2]), q


def test_pruning_keeps_the_exact_top_k_on_a_skewed_vocabulary():
    """Words in most memories are deferred to the candidates (`_top`); the top k must still be the exhaustive one."""
    rng = random.Random(11)
    vocab = [f"w{i}" for i in range(300)]
    weights = [1 / (i + 1) for i in range(300)]  # Zipf: a few words are everywhere
    docs = {i: " ".join(rng.choices(vocab, weights, k=rng.randint(5, 30))) for i in range(1, 3001)}
    kw, db = build(docs), fts5(docs)
    for _ in range(40):
        terms = rng.sample(vocab[:5], 2) + rng.sample(vocab[5:], 3)
        for k in (5, 100):
            want = fts5_top(db, terms, k)
            got = kw.search(terms, k)
            assert [round(s, 9) for _, s in want] == [round(s, 9) for _, s, _ in got]


def test_words_in_most_memories_are_deferred_only_when_they_cannot_change_the_top_k():
    """A word held by over a quarter of the memories is summed last, for the candidates only, when
    the other words' k-th best score is out of its reach; when it is not (the other words are
    rare, or weak), every list is summed. Either way the top k is FTS5's."""
    rng = random.Random(17)
    docs = {}
    for lab in range(1, 601):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 12))]
        if lab % 3:
            words.append("acme")  # two thirds of the memories: idf at its floor
        if lab % 10 < 3:
            words.append("widget")  # 30%: a low but real weight
        if lab % 40 == 0:
            words.append("zeta")  # 15 memories
        if lab in (7, 300):
            words.append("omega")  # fewer than k
        rng.shuffle(words)
        docs[lab] = " ".join(words)
    kw, db = build(docs), fts5(docs)
    queries = [["acme", "widget", "zeta"], ["acme", "widget", "omega"], ["acme", "omega"], ["widget", "acme"],
               ["acme"], ["zeta", "widget", "deploy", "cache", "acme"], ["omega", "zeta"]]
    for terms in queries:
        for k in (5, 20, 100):
            want = fts5_top(db, terms, k)
            got = kw.search(terms, k)
            assert [round(s, 9) for _, s in want] == [round(s, 9) for _, s, _ in got], (terms, k)
            assert [lab for lab, _ in want] == [lab for lab, _, _ in got], (terms, k)


def test_incremental_adds_updates_and_deletes_end_where_a_fresh_build_does():
    rng = random.Random(5)
    pool = texts(600, seed=9)
    docs = dict(enumerate(pool[:300], start=1))
    kw = build(docs)
    next_label = 301
    for _ in range(6):
        gone = rng.sample(sorted(docs), 20)
        changed = {lab: rng.choice(pool) + " edited" for lab in rng.sample(sorted(set(docs) - set(gone)), 20)}
        added = {next_label + i: rng.choice(pool) for i in range(15)}
        next_label += 15
        kw.db.execute("BEGIN")
        kw.update(gone, {**changed, **added})
        kw.db.execute("COMMIT")
        for lab in gone:
            del docs[lab]
        docs.update(changed)
        docs.update(added)
        fresh = build(docs)
        assert kw.stats() == fresh.stats()
        for q in QUERIES:
            terms = query_terms(q)
            assert kw.search(terms, 50) == fresh.search(terms, 50), q
    # deleting everything leaves nothing behind
    kw.db.execute("BEGIN")
    kw.update(list(docs), {})
    kw.db.execute("COMMIT")
    assert kw.stats() == (0, 0)
    assert kw.db.execute("SELECT count(*) FROM kw_term").fetchone()[0] == 0
    assert kw.search(["deploy"], 10) == []


def _apply(kw: KeywordIndex, removed: list[int], docs: dict[int, str]) -> None:
    kw.db.execute("BEGIN")
    kw.update(removed, docs)
    kw.db.execute("COMMIT")


def _main_lists(kw: KeywordIndex) -> list[tuple]:
    return kw.db.execute("SELECT term, df, maxtf, mindl, labels, tfs, dls, pos FROM kw_term ORDER BY term").fetchall()


@pytest.mark.parametrize("merges", [False, True], ids=["delta-only", "with-merges"])
def test_one_change_at_a_time_scores_like_a_fresh_build(merges, monkeypatch):
    """Adds, edits and trashes one note at a time (the delta path), with or without merges of the
    delta along the way: after every few changes, search results (labels, BM25, coverage) are
    exactly a fresh build's, phrases included; a final merge leaves the main lists byte for byte
    those of a fresh build."""
    rng = random.Random(21)
    pool = texts(500, seed=13)
    docs = dict(enumerate(pool[:250], start=1))
    kw = build(docs)
    kw.tail_min = kw.tail_max = 150 if merges else 10**9
    kw.gone_min = kw.gone_max = 4 if merges else 10**9
    _apply(kw, [], {})
    next_label, merged = 251, []
    real_merge = KeywordIndex._merge_all
    monkeypatch.setattr(KeywordIndex, "_merge_all", lambda self, *a: (merged.append(self is kw), real_merge(self, *a)))
    for step in range(120):
        op = rng.random()
        if op < 0.4:
            docs[next_label] = rng.choice(pool)
            _apply(kw, [], {next_label: docs[next_label]})
            next_label += 1
        elif op < 0.7:
            lab = rng.choice(sorted(docs))
            docs[lab] = rng.choice(pool) + " node.js self-care edited"
            _apply(kw, [], {lab: docs[lab]})
        else:
            lab = rng.choice(sorted(docs))
            del docs[lab]
            _apply(kw, [lab], {})
        if step % 10 == 9:
            fresh = build(docs)
            assert kw.stats() == fresh.stats()
            for q in QUERIES:
                terms = query_terms(q)
                assert kw.search(terms, 30) == fresh.search(terms, 30), (step, q)
    assert any(merged) == merges  # the delta was merged along the way only when it was allowed to
    kw.tail_min = kw.tail_max = kw.gone_min = kw.gone_max = 0
    _apply(kw, [], {})  # a change with nothing in it: the delta is merged all the same
    assert kw.db.execute("SELECT count(*) FROM kw_tail").fetchone()[0] == 0
    assert kw.db.execute("SELECT count(*) FROM kw_gone").fetchone()[0] == 0
    assert _main_lists(kw) == _main_lists(build(docs, merged=True))


def test_adding_one_note_leaves_the_main_posting_lists_alone():
    """What makes an add cheap on a big store: no common word's whole posting list is rewritten."""
    docs = {i: f"redis cache deploy note {i}" for i in range(1, 400)}
    kw = build(docs, merged=True)
    kw.tail_min = kw.tail_max = kw.gone_min = kw.gone_max = 10**9
    before = _main_lists(kw)
    _apply(kw, [7], {400: "redis cache deploy again", 3: "postgres migration"})
    assert _main_lists(kw) == before
    assert [r[0] for r in kw.search(["postgres"], 5)] == [3]
    assert 7 not in [r[0] for r in kw.search(["redis"], 500)]
    assert 400 in [r[0] for r in kw.search(["again"], 5)]


def test_a_replaced_document_loses_its_old_words():
    kw = build({1: "the redis cache expired", 2: "grafana alert"})
    kw.db.execute("BEGIN")
    kw.update([], {1: "postgres migration"})
    kw.db.execute("COMMIT")
    assert kw.search(["redis"], 5) == []
    assert [r[0] for r in kw.search(["migrations"], 5)] == [1]


def test_porter_stemming_and_case_and_accents_match_like_fts5():
    kw = build({1: "Deploying the pipelines nightly", 2: "ÉCOLE and café", 3: "unrelated words"})
    assert [r[0] for r in kw.search(["deploys"], 5)] == [1]
    assert [r[0] for r in kw.search(["pipeline"], 5)] == [1]
    assert [r[0] for r in kw.search(["ecole"], 5)] == [2]
    assert [r[0] for r in kw.search(["CAFE"], 5)] == [2]
    assert tokenize("Running runs, RUNNER's") == ["run", "run", "runner", "s"]


def test_a_punctuated_word_is_a_phrase():
    kw = build({1: "we use node.js here", 2: "node is old; js is new", 3: "self-care matters", 4: "care for self"})
    assert [r[0] for r in kw.search(["node.js"], 5)] == [1]
    assert [r[0] for r in kw.search(["self-care"], 5)] == [3]


def test_coverage_is_the_idf_weighted_share_of_the_query():
    docs = {1: "redis cache", 2: "redis", 3: "redis", 4: "redis", 5: "cache grafana"}
    kw = build(docs)
    hits = {lab: cov for lab, _, cov in kw.search(["redis", "cache", "nowhere"], 10)}
    w_redis, w_cache, w_none = coverage_idf(5, 4), coverage_idf(5, 2), coverage_idf(5, 0)
    total = w_redis + w_cache + w_none  # a word no memory has still counts, as a rare one
    assert hits[1] == pytest.approx((w_redis + w_cache) / total)
    assert hits[2] == pytest.approx(w_redis / total)
    assert hits[5] == pytest.approx(w_cache / total)
    assert w_cache > w_redis  # the rarer word weighs more


def test_a_long_list_looked_up_again_answers_membership_from_a_bitmap_as_the_binary_search_did():
    rng = np.random.default_rng(3)
    labels = np.unique(rng.integers(1, 5000, 2000)).astype(np.intp)  # a long list: ~1 label in 3
    p = Posting(labels, np.ones(len(labels), np.int32), np.ones(len(labels), np.int32), 1, 1)
    cand = np.r_[rng.integers(0, 6000, 300), labels[:5], labels[-1], labels[-1] + 1, 10**6].astype(np.intp)
    expected = np.isin(cand, labels)
    assert (p.holds(cand) == expected).all() and p._dense is None  # the first lookup: a binary search
    assert (p.holds(cand) == expected).all() and p._dense is not None  # then the bitmap
    assert (p.holds(cand[:0]) == expected[:0]).all()
    short = Posting(labels[::50], np.ones(len(labels[::50]), np.int32), np.ones(len(labels[::50]), np.int32), 1, 1)
    for _ in range(3):  # a short list never gets one: a binary search of it is cheap
        assert (short.holds(cand) == np.isin(cand, labels[::50])).all()
    assert short._dense is None and short.dense_bytes() == 0
    assert not Posting.empty().holds(cand).any()


def test_a_warm_reader_returns_what_a_cold_one_does():
    docs = dict(enumerate(texts(3000), 1))
    kw = build(docs, merged=True)
    cold = [kw.search(query_terms(q), 50, {}) for q in QUERIES]  # a fresh cache each: binary searches
    for _ in range(3):  # the shared cache: its long lists get bitmaps from the second use on
        assert [kw.search(query_terms(q), 50) for q in QUERIES] == cold


def test_empty_and_odd_queries():
    kw = build({1: "something"})
    assert kw.search([], 5) == []
    assert kw.search(["__", "--"], 5) == []
    assert kw.search(["nothing"], 5) == []
    assert kw.search(["something"], 0) == []
    assert build({}).search(["something"], 5) == []


# --- in a store ---------------------------------------------------------------------------------


def _store_keyword(store, q: str, k: int = 10) -> list[tuple[str, float]]:
    index = store.index
    index.sync()
    ids = {lab: rid for rid, lab in index.labels_of(r.id for r in index.select()).items()}
    return [(ids[lab], round(s, 9)) for lab, s, _ in index.keyword(query_terms(q), k)]


def _write(store, mid: str, text: str) -> None:
    files(store).write(Memory(id=mid, text=text, tags=["ops"]))


def test_store_sync_is_incremental_and_a_deleted_index_rebuilds_the_same(hash_store):
    for i, t in enumerate(texts(120, seed=21)):
        _write(hash_store, f"M{i:04d}", t)
    queries = ["redis cache", "self-care", "nightly backup", "ops"]
    before = {q: _store_keyword(hash_store, q) for q in queries}
    assert all(before.values())

    db = hash_store.index.db
    changes = db.total_changes
    _write(hash_store, "M0005", "a brand new sentence about zeppelins")
    hash_store.index.sync()
    assert db.total_changes - changes < 40  # a few posting lists, not the whole index
    assert [m for m, _ in _store_keyword(hash_store, "zeppelin")] == ["M0005"]
    (hash_store.facts_dir / "M0005.md").unlink()
    assert _store_keyword(hash_store, "zeppelins") == []

    _write(hash_store, "M0005", texts(120, seed=21)[5])
    again = {q: _store_keyword(hash_store, q) for q in queries}
    assert {q: sorted(v) for q, v in again.items()} == {q: sorted(v) for q, v in before.items()}

    hash_store.close()
    shutil.rmtree(files(hash_store).index_dir)
    rebuilt = {q: _store_keyword(hash_store, q) for q in queries}
    assert {q: sorted(v) for q, v in rebuilt.items()} == {q: sorted(v) for q, v in before.items()}
    docs = hash_store.index.db.execute("SELECT count(*) FROM kw_doc").fetchone()[0]
    assert docs == hash_store.index.count() == 120


def test_an_fts5_catalog_from_before_is_rebuilt(hash_store):
    _write(hash_store, "M1", "the payments service times out")
    hash_store.index.sync()
    db = hash_store.index.db
    db.execute("CREATE VIRTUAL TABLE fts USING fts5(body, tokenize='porter unicode61')")
    db.execute("UPDATE meta SET value='1' WHERE key='schema'")
    db.execute("DELETE FROM kw_term")
    hash_store.close()
    report = hash_store.index.sync()
    assert report.rebuilt == "the index format changed"
    assert [m for m, _ in _store_keyword(hash_store, "payment timeouts")] == ["M1"]
    assert not hash_store.index.db.execute("SELECT name FROM sqlite_master WHERE name='fts'").fetchall()


def test_the_body_indexed_is_text_tags_and_domain():
    m = Memory(id="X", text="Use ruff", tags=["lint"], domain="python")
    assert Counter(tokenize(fts_body(m))) == Counter(["us", "ruff", "lint", "python"])
    assert math.isclose(fts5_idf(10, 9), 1e-6)


def test_a_change_by_another_connection_is_seen_by_a_warm_reader(tmp_path):
    path = tmp_path / "kw.sqlite"
    writer = KeywordIndex(sqlite3.connect(path, isolation_level=None))
    reader = KeywordIndex(sqlite3.connect(path, isolation_level=None))
    writer.update([], {1: "redis cache", 2: "grafana alert"})
    assert [r[0] for r in reader.search(["redis"], 5)] == [1]  # now cached by the reader
    writer.update([1], {3: "redis queue"})
    assert [r[0] for r in reader.search(["redis"], 5)] == [3]


def test_the_stem_cache_filling_up_mid_call_still_answers_every_unit(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bulk update stems all its documents' words in one call: when that call fills the cache up,
    the cache is emptied, and the words of the same call it held before are stemmed again."""
    from memcli.index import keyword

    stemmer = keyword._Stemmer()
    monkeypatch.setattr(keyword, "_STEM_CACHE_MAX", 5)
    assert stemmer.units(["alpha", "beta"])["alpha"] == ("alpha",)
    got = stemmer.units(["alpha", "running", "cats", "dogs", "birds", "beta"])
    assert {u: got[u] for u in ("alpha", "running", "cats", "beta")} == {
        "alpha": ("alpha",), "running": ("run",), "cats": ("cat",), "beta": ("beta",)}


def test_a_version_glued_to_its_name_matches_the_version_written_apart():
    """Commits write "py3.14+", "python3.14", "pip v25.2"; questions write "Python 3.14", "pip 25.2"
    (a real pip-tools commit, "Adjust the 'piplowest' version for py3.14+", missed by its question)."""
    docs = {1: "Adjust the 'piplowest' version for py3.14+. pip v25.2 was the first to support python3.14",
            2: "Use Python 3.13 for the QA workflow", 3: "Bump pip minimum version to 22.2"}
    kw = build(docs)
    assert [lab for lab, *_ in kw.search(query_terms("What is the lowest pip for Python 3.14?"), 3)][0] == 1
    assert [lab for lab, *_ in kw.search(query_terms("pip 25.2"), 3)][0] == 1
    assert tokenize("sha256 utf8") == ["sha", "256", "utf", "8"]  # the same rule on both sides
    assert [lab for lab, *_ in kw.search(query_terms("python3.13"), 3)] == [2]


def test_a_short_form_matches_the_words_it_stands_for():
    """A real pip-tools commit, "Increase the GHA testsuite timeout to 15m", and its question, "Why
    was the GitHub Actions test timeout raised?": the short forms are indexed as their words, in the
    memories and in the query, so either spelling finds the other."""
    docs = {1: "Increase the GHA testsuite timeout to 15m", 2: "Run the test suite on GitHub before a release",
            3: "Bump the deps of the docs build", 4: "Pin the action versions in the workflow"}
    kw = build(docs)
    assert [lab for lab, *_ in kw.search(query_terms("Why was the GitHub Actions test timeout raised?"), 4)][0] == 1
    assert [lab for lab, *_ in kw.search(query_terms("documentation dependencies"), 4)] == [3]
    assert [lab for lab, *_ in kw.search(query_terms("gha"), 4)] == [1]
    assert tokenize("Deps") == tokenize("dependencies") and tokenize("py3") == ["py", "3"]  # "py" stays itself



def test_a_camel_case_name_is_also_its_words_in_the_index_and_the_query():
    # Textualize/rich: "Does the progress bar have an IterationSpeedColumn?" and "revert iteration speed column"
    from memcli.index.keyword import tokenize
    from memcli.ops.search import query_terms
    assert {"iter", "speed", "column"} <= set(tokenize("Add new column object: IterationSpeedColumn"))
    assert {"iteration", "speed", "column"} <= set(query_terms("Does the progress bar have an IterationSpeedColumn?"))
    assert tokenize("GitHub JavaScript") == ["github", "javascript"]  # brands of two words are themselves
    assert tokenize("httpx URL") == ["httpx", "url"]
