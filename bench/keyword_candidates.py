"""Keyword (BM25) engines at 100k notes, measured in one run: the choice behind memcli/index/keyword.py.

    .venv/bin/python bench/keyword_candidates.py [--n 100000] [--queries 200]

Each engine indexes the same generated notes (bench/_common.py:make_texts) and answers the same
queries (other generated notes, through `search.query_terms`) for the top 100, one query at a time:
  fts5      SQLite FTS5 `porter unicode61`, `ORDER BY bm25() LIMIT 100` (memcli before issue 12; its
            coverage step, which read every query word's whole posting list, is left out here)
  memcli    memcli.index.keyword (numpy bincount): cold = posting lists read from SQLite for each
            query, warm = this process's decoded posting lists kept (a batch, a server)
  bm25s     bm25s (scipy sparse matrix), fed memcli's own tokens        (skipped if not installed)
  tantivy   tantivy `en_stem` tokenizer, BooleanQuery of should-terms   (skipped if not installed)
`same top 100` is the share of FTS5's top 100 (by label) that the engine returns (ties at the 100th
score can swap a few). `add 1` is the cost of adding one note to the built index and making it
searchable. bm25s has no incremental add: its figure is a full rebuild.
The two optional engines are not dependencies of memcli: `pip install bm25s tantivy` to include them.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import make_texts, pct, table  # noqa: E402

K = 100


def timed(fn, queries) -> tuple[list[float], list[list[int]]]:
    ts, res = [], []
    for q in queries:
        t0 = time.perf_counter()
        r = fn(q)
        ts.append((time.perf_counter() - t0) * 1000)
        res.append(r)
    return ts, res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    from memcli.index.keyword import KeywordIndex, tokenize
    from memcli.ops.search import query_terms

    texts = make_texts(args.n)
    queries = [query_terms(q) for q in make_texts(args.queries, seed=4242)]
    docs = {i + 1: t for i, t in enumerate(texts)}
    tmp = Path(tempfile.mkdtemp(prefix="kwcand-"))
    print(f"# {args.n:,} notes, {len(queries)} queries, top {K}; load average at start {os.getloadavg()[0]:.2f}",
          flush=True)
    rows: list[list[object]] = []

    # --- FTS5 (the baseline)
    db = sqlite3.connect(tmp / "fts.sqlite", isolation_level=None)
    db.execute("CREATE VIRTUAL TABLE fts USING fts5(body, tokenize='porter unicode61')")
    t0 = time.perf_counter()
    db.execute("BEGIN")
    db.executemany("INSERT INTO fts(rowid, body) VALUES (?, ?)", docs.items())
    db.execute("COMMIT")
    build = time.perf_counter() - t0

    def fts(terms: list[str]) -> list[int]:
        match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
        return [r[0] for r in db.execute(
            "SELECT rowid, -bm25(fts) AS s FROM fts WHERE fts MATCH ? ORDER BY s DESC LIMIT ?", (match, K))]

    fts(queries[0])
    t0 = time.perf_counter()
    db.execute("INSERT INTO fts(rowid, body) VALUES (?, ?)", (args.n + 1, "one more note about the CI"))
    add1 = time.perf_counter() - t0
    ts, want = timed(fts, queries)
    want_sets = [set(w) for w in want]

    def row(name: str, build_s: float, add_s: float, ts: list[float], got: list[list[int]]) -> list[object]:
        same = sum(len(set(g) & w) / max(1, len(w)) for g, w in zip(got, want_sets)) / len(want_sets)
        return [name, f"{build_s:.1f}", f"{add_s * 1000:.1f}", f"{pct(ts, .5):.2f}", f"{pct(ts, .95):.2f}",
                f"{same:.3f}"]

    rows.append(row("fts5 (before)", build, add1, ts, want))
    print("# fts5 done", file=sys.stderr, flush=True)

    # --- memcli.index.keyword
    kdb = sqlite3.connect(tmp / "kw.sqlite", isolation_level=None)
    kdb.execute("PRAGMA mmap_size=1073741824")
    kw = KeywordIndex(kdb)
    t0 = time.perf_counter()
    kdb.execute("BEGIN")
    kw.update([], docs)
    kdb.execute("COMMIT")
    build = time.perf_counter() - t0
    t0 = time.perf_counter()
    kdb.execute("BEGIN")
    kw.update([], {args.n + 1: "one more note about the CI"})
    kdb.execute("COMMIT")
    add1 = time.perf_counter() - t0
    ts, got = timed(lambda q: [r[0] for r in kw.search(q, K, {})], queries)
    rows.append(row("memcli, cold", build, add1, ts, got))
    kw.search(queries[0], K)
    ts, got = timed(lambda q: [r[0] for r in kw.search(q, K)], queries)
    ts, got = timed(lambda q: [r[0] for r in kw.search(q, K)], queries)  # second pass: every list decoded
    rows.append(row("memcli, warm", build, add1, ts, got))
    print("# memcli done", file=sys.stderr, flush=True)

    # --- bm25s
    try:
        import bm25s
    except ImportError:
        bm25s = None
    if bm25s is not None:
        corpus = [tokenize(t) for t in texts]
        t0 = time.perf_counter()
        ret = bm25s.BM25(k1=1.2, b=0.75)
        ret.index(corpus, show_progress=False)
        build = time.perf_counter() - t0
        vocab = set(ret.vocab_dict)

        def b25(terms: list[str]) -> list[int]:
            toks = [t for term in terms for t in tokenize(term) if t in vocab]
            if not toks:
                return []
            idx, _ = ret.retrieve([toks], k=K, show_progress=False, n_threads=1)
            return [int(i) + 1 for i in idx[0]]

        ts, got = timed(b25, queries)
        rows.append(row("bm25s (full rebuild to add)", build, build, ts, got))
        print("# bm25s done", file=sys.stderr, flush=True)

    # --- tantivy
    try:
        import tantivy
    except ImportError:
        tantivy = None
    if tantivy is not None:
        sb = tantivy.SchemaBuilder()
        sb.add_integer_field("label", stored=True, indexed=True, fast=True)
        sb.add_text_field("body", stored=False, tokenizer_name="en_stem")
        schema = sb.build()
        (tmp / "tantivy").mkdir()
        index = tantivy.Index(schema, path=str(tmp / "tantivy"))
        t0 = time.perf_counter()
        w = index.writer(heap_size=128_000_000, num_threads=1)
        for lab, t in docs.items():
            w.add_document(tantivy.Document(label=lab, body=t))
        w.commit()
        w.wait_merging_threads()
        index.reload()
        build = time.perf_counter() - t0
        w = index.writer(heap_size=64_000_000, num_threads=1)
        t0 = time.perf_counter()
        w.add_document(tantivy.Document(label=args.n + 1, body="one more note about the CI"))
        w.commit()
        index.reload()
        add1 = time.perf_counter() - t0
        searcher = index.searcher()

        def tv(terms: list[str]) -> list[int]:
            subs = []
            for term in terms:
                words = [x for x in term.replace('"', " ").split() if x]
                if not words:
                    continue
                phrase = '"' + " ".join(words) + '"'
                subs.append((tantivy.Occur.Should, index.parse_query(phrase, ["body"])))
            if not subs:
                return []
            hits = searcher.search(tantivy.Query.boolean_query(subs), K).hits
            return [searcher.doc(addr)["label"][0] for _, addr in hits]

        ts, got = timed(tv, queries)
        rows.append(row("tantivy", build, add1, ts, got))
        print("# tantivy done", file=sys.stderr, flush=True)

    print()
    print(table(["engine", "build s", "add 1 (ms)", "query p50 ms", "query p95 ms", "same top 100 as FTS5"], rows))


if __name__ == "__main__":
    main()
