"""Curation's kNN pass: the close-pairs pass (`merge --auto`) against the wide pass and an exact kNN.

`merge --auto` wants only the pairs at >= its threshold, so it asks `Index.neighbour_arrays` for
them (`threshold=t`): every row is searched at `NEAR_EF` first and again at `CURATION_EF` only when
it may need it (see `memcli/index/vectors.py`). This prints, per threshold, the pairs an exact
(brute-force, numpy) kNN finds, how many the wide pass (ef `CURATION_EF`, every row) and the
close-pairs pass miss or add, the rows searched again, and the CPU of each pass (one process, its
graph threads included: `time.process_time`), in the same run:

- on the curation bench stores (`bench/curate.py` builds them: real model, ~16% near-duplicates);
- on seeded dense sets (4,000 vectors in clusters of up to 40 near-copies, larger than k) and
  "nested" sets (topics of notes ~0.7-0.85 alike holding groups of 1-9 near-copies), each graph
  built `--builds` times (hnswlib builds on several threads: each build is another graph).

    .venv/bin/python bench/knn_pass.py                          # 10k store + seeded sets
    .venv/bin/python bench/knn_pass.py --sizes 1000,10000 --builds 8

The verdict: the close-pairs pass finds the wide pass's pairs in every case. The close-pair table
(`NEAR_FLOOR`), which `merge --auto` reads instead once the catalog has it, is compared with the
exact kNN too, with what it costs to read and what an import pays to record it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, table, verdict  # noqa: E402

sys.path.insert(0, str(ROOT))
from memcli.index.vectors import CURATION_EF, NEAR_EF, NEAR_FLOOR, Vectors  # noqa: E402

K = 8
THRESHOLDS = (0.95, 0.9, 0.85)


def exact_top(v: np.ndarray, k: int = K) -> tuple[np.ndarray, np.ndarray]:
    """Every row's k nearest others by brute force, in blocks (positions, float32 cosines as float64)."""
    n = len(v)
    top, sims = np.empty((n, k), np.int64), np.empty((n, k))
    for i in range(0, n, 1000):
        s = v[i : i + 1000] @ v.T
        s[np.arange(len(s)), np.arange(i, i + len(s))] = -np.inf
        p = np.argpartition(-s, k, axis=1)[:, :k]
        o = np.argsort(-np.take_along_axis(s, p, 1), axis=1)
        top[i : i + 1000] = np.take_along_axis(p, o, 1)
        sims[i : i + 1000] = np.take_along_axis(s, top[i : i + 1000], 1)
    return top, sims


def pairs(nbr: np.ndarray, sims: np.ndarray, t: float) -> set[tuple[int, int]]:
    """The unordered pairs at >= t, found from either end (as `merge --auto`'s groups take them)."""
    r, c = np.nonzero((sims >= t) & (nbr >= 0))
    b = nbr[r, c]
    return set(zip(np.minimum(r, b).tolist(), np.maximum(r, b).tolist()))


class Counted:
    """The graph, counting the rows each pass searches."""

    def __init__(self, h: Any) -> None:
        self.h, self.rows = h, 0

    def knn_query(self, q: np.ndarray, k: int, num_threads: int = -1) -> Any:
        self.rows += len(q)
        return self.h.knn_query(q, k=k, num_threads=num_threads)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.h, name)


def passes(vec: Vectors, n: int, exact: tuple[np.ndarray, np.ndarray]) -> dict[float, dict[str, Any]]:
    """Per threshold: pairs of exact / wide / close-pairs passes / the close-pair table, their CPU
    and rows searched; and the CPU an import spends recording the table (every vector searched
    once the graph holds them all, `Vectors.close_pairs`)."""
    graph = Counted(vec.load())
    vec.load = lambda **kw: graph  # type: ignore[method-assign]
    vec.near_ready = lambda: False  # type: ignore[method-assign]  # the passes search the graph
    c = time.process_time()
    _, _, wn, ws = vec.neighbour_arrays(K)
    wide_cpu = time.process_time() - c
    labels = [r[0] for r in vec.catalog.vector_ids()]
    c = time.process_time()
    recorded, _ = vec.close_pairs(graph.h, labels, vec.catalog.vectors(labels))
    build_cpu = time.process_time() - c
    if isinstance(vec.catalog, SeededCatalog):
        vec.catalog.near = recorded
    out = {}
    for t in THRESHOLDS:
        graph.rows = 0
        c = time.process_time()
        _, _, nn, ns = vec.neighbour_arrays(K, threshold=t)
        out[t] = {"exact": pairs(*exact, t), "wide": pairs(wn, ws, t), "close": pairs(nn, ns, t),
                  "wide_cpu": wide_cpu, "close_cpu": time.process_time() - c, "again": graph.rows - n,
                  "build_cpu": build_cpu}
    vec.near_ready = lambda: True  # type: ignore[method-assign]
    for t in THRESHOLDS:
        c = time.process_time()
        _, _, tn, ts = vec.neighbour_arrays(K, threshold=t)
        out[t].update(table=pairs(tn, ts, t), table_cpu=time.process_time() - c)
    return out


class SeededCatalog:
    """The catalog's vector half, in memory (for the seeded sets; labels 1..n)."""

    def __init__(self, v: np.ndarray) -> None:
        self.v, self.dir = v, None
        self.near: list[tuple[int, int, float]] = []  # the close-pair table, as an import records it

    def near_pairs(self, threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        a, b, s = (np.array(x) for x in zip(*self.near)) if self.near else (np.zeros(0),) * 3
        keep = s >= threshold
        return (a[keep].astype(np.int64), b[keep].astype(np.int64), s[keep].astype(np.float64),
                np.full(int(keep.sum()), -1, np.int8))  # (no verdicts: the texts are not judged here)

    def near_crowded(self) -> bool:
        return False  # (the table of a seeded set is read as if complete: its pairs are compared below)

    def on_drop(self, forget: Any) -> None:
        pass

    def snapshot(self) -> Any:
        return contextlib.nullcontext()

    def meta(self, key: str) -> None:
        return None

    def vector_rows(self) -> tuple[list[int], np.ndarray]:
        return list(range(1, len(self.v) + 1)), self.v

    def vector_ids(self) -> list[tuple[int, str]]:
        return [(i + 1, str(i)) for i in range(len(self.v))]

    def vectors(self, labels: list[int]) -> np.ndarray:
        return self.v[np.asarray(labels, np.int64) - 1]


def dense(rng: np.random.Generator, n: int = 4000, d: int = 384) -> np.ndarray:
    """Clusters of 1-40 near-copies of a random centre (cosine ~0.89-0.998 within a cluster)."""
    out: list[np.ndarray] = []
    while len(out) < n:
        c = rng.normal(size=d)
        c /= np.linalg.norm(c)
        size, noise = int(rng.integers(1, 41)), rng.uniform(0.05, 0.35)
        out += [c + noise * rng.normal(size=d) / np.sqrt(d) for _ in range(size)]
    v = np.array(out[:n])
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def nested(rng: np.random.Generator, n: int = 4000, d: int = 384, topics: int = 60) -> np.ndarray:
    """Topics whose notes are ~0.7-0.85 alike, holding near-copy groups of 1-9 (~0.85-0.99 alike)."""
    cents = rng.normal(size=(topics, d))
    cents /= np.linalg.norm(cents, axis=1, keepdims=True)
    out: list[np.ndarray] = []
    while len(out) < n:
        base = cents[int(rng.integers(topics))] + rng.uniform(0.45, 0.7) * rng.normal(size=d) / np.sqrt(d)
        base /= np.linalg.norm(base)
        size, noise = int(rng.integers(1, 10)), rng.uniform(0.08, 0.45)
        out += [base + noise * rng.normal(size=d) / np.sqrt(d) for _ in range(size)]
    v = np.array(out[:n])
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def store_rows(n: int) -> list[list[object]]:
    """The curation bench store of `n` memories (a private copy: opening it may sync its index)."""
    from curate import build

    from memcli.ops.handle import Store

    store, cache, _ = build(n, None)
    tmp = Path(tempfile.mkdtemp(prefix="knn-pass-"))
    try:
        shutil.copytree(store, tmp / "store", copy_function=shutil.copy2)
        os.environ["MEMCLI_CACHE_DIR"] = str(cache)
        st = Store(tmp / "store")
        st.index.sync()
        vec = st.index.vec
        rows = vec.catalog.vector_ids()
        v = vec.catalog.vectors([r[0] for r in rows]).astype(np.float32)
        res = passes(vec, len(v), exact_top(v))
        st.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return [_row(f"curate-{n}", t, [r]) for t, r in res.items()]


def seeded_rows(builds: int) -> list[list[object]]:
    out = []
    for name, make in (("dense", dense), ("nested", nested)):
        per_t: dict[float, list[dict[str, Any]]] = {t: [] for t in THRESHOLDS}
        for seed in (1, 2, 3):
            v = make(np.random.default_rng(seed))
            exact = exact_top(v)
            for _ in range(builds):
                res = passes(Vectors(SeededCatalog(v), lambda d=v.shape[1]: d), len(v), exact)  # type: ignore[arg-type]
                for t, r in res.items():
                    per_t[t].append(r)
        out += [_row(f"{name} 3x{len(v)}, {builds} builds", t, rs) for t, rs in per_t.items()]
    return out


def _row(name: str, t: float, runs: list[dict[str, Any]]) -> list[object]:
    """One table row over the runs (graphs) of a set: pairs differing summed, cases counted."""
    def diff(a: str, b: str) -> str:
        cases = sum(r[a] != r[b] for r in runs)
        miss = sum(len(r[b] - r[a]) for r in runs)
        extra = sum(len(r[a] - r[b]) for r in runs)
        return f"-{miss} +{extra} ({cases}/{len(runs)})"

    same = all(r["close"] == r["wide"] for r in runs)
    return [name, t, sum(len(r["exact"]) for r in runs) // len(runs), diff("wide", "exact"),
            diff("close", "exact"), diff("close", "wide"), diff("table", "exact"),
            f"{sum(r['wide_cpu'] for r in runs):.2f}", f"{sum(r['close_cpu'] for r in runs):.2f}",
            f"{sum(r['table_cpu'] for r in runs):.3f}", f"{sum(r['build_cpu'] for r in runs):.2f}",
            sum(r["again"] for r in runs) // len(runs), verdict(same)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000", help="curation bench store sizes (built by bench/curate.py)")
    ap.add_argument("--builds", type=int, default=4, help="graph builds per seeded set")
    args = ap.parse_args()
    rows: list[list[object]] = []
    for n in (int(x) for x in args.sizes.split(",") if x):
        rows += store_rows(n)
    if args.builds:
        rows += seeded_rows(args.builds)
    print(f"# wide pass: ef {CURATION_EF}, every row; close-pairs pass: ef {NEAR_EF}, then the rows that need it "
          f"at ef {CURATION_EF}. Pairs differing: -missed +extra (graphs differing / graphs)")
    print(f"# table: each row's {K} nearest at >= the threshold read from the close-pair table (>= {NEAR_FLOOR}), "
          "recorded as an import records it (table build CPU: what that costs the import)")
    print(table(["set", "threshold", "exact pairs", "wide vs exact", "close vs exact", "close vs wide",
                 "table vs exact", "wide CPU s", "close CPU s", "table read CPU s", "table build CPU s",
                 "rows again", "close = wide"], rows))


if __name__ == "__main__":
    main()
