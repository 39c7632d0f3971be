"""Curation's kNN pass (`Index.neighbour_arrays`, ef `CURATION_EF`) against an exact kNN.

Prints, per threshold, the pairs an exact (brute-force, numpy) kNN finds among each memory's 8
nearest, how many the pass misses or adds, and the pass's CPU (one process, its graph threads
included: `time.process_time`), in the same run:

- on the curation bench stores (`bench/curate.py` builds them: real model, ~16% near-duplicates);
- on seeded dense sets (4,000 vectors in clusters of up to 40 near-copies, larger than k) and
  "nested" sets (topics of notes ~0.7-0.85 alike holding groups of 1-9 near-copies), each graph
  built `--builds` times (hnswlib builds on several threads: each build is another graph).

    .venv/bin/python bench/knn_pass.py                          # 10k store + seeded sets
    .venv/bin/python bench/knn_pass.py --sizes 1000,10000 --builds 8
    .venv/bin/python bench/knn_pass.py --ef 64                  # another ef for the pass
"""

from __future__ import annotations

import argparse
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
from memcli.index.vectors import CURATION_EF, Vectors  # noqa: E402

K = 8
THRESHOLDS = (0.95, 0.9, 0.85, 0.8)

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



def passes(vec: Vectors, exact: tuple[np.ndarray, np.ndarray], ef: int) -> dict[float, dict[str, Any]]:
    """The pass's pairs and the exact kNN's at each threshold, and the pass's CPU."""
    cpu = time.process_time()
    _, _, nbr, sims = vec.neighbour_arrays(K, ef=ef)
    cpu = time.process_time() - cpu
    return {t: {"exact": pairs(*exact, t), "pass": pairs(nbr, sims, t), "cpu": cpu} for t in THRESHOLDS}


class SeededCatalog:
    """What `Vectors` reads of a catalog, over a seeded set of vectors (labels 1..n)."""

    def __init__(self, v: np.ndarray) -> None:
        self.v, self.dir = v, Path(tempfile.gettempdir())

    def on_drop(self, forget: Any) -> None:
        pass

    def meta(self, key: str) -> None:
        return None

    def vector_rows(self) -> tuple[list[int], np.ndarray]:
        return list(range(1, len(self.v) + 1)), self.v

    def vector_ids(self) -> list[tuple[int, str]]:
        return [(i + 1, str(i)) for i in range(len(self.v))]

    def vectors(self, labels: list[int]) -> np.ndarray:
        return self.v[np.asarray(labels, np.int64) - 1]

    def count(self) -> int:
        return len(self.v)

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



def store_rows(n: int, ef: int) -> list[list[object]]:
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
        res = passes(vec, exact_top(v), ef)
        st.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return [_row(f"curate-{n}", t, [r]) for t, r in res.items()]


def seeded_rows(builds: int, ef: int) -> list[list[object]]:
    out = []
    for name, make in (("dense", dense), ("nested", nested)):
        per_t: dict[float, list[dict[str, Any]]] = {t: [] for t in THRESHOLDS}
        for seed in (1, 2, 3):
            v = make(np.random.default_rng(seed))
            exact = exact_top(v)
            for _ in range(builds):
                vec = Vectors(SeededCatalog(v), lambda d=v.shape[1]: d)  # type: ignore[arg-type]
                for t, r in passes(vec, exact, ef).items():
                    per_t[t].append(r)
        out += [_row(f"{name} 3x{len(v)}, {builds} builds", t, rs) for t, rs in per_t.items()]
    return out


def _row(name: str, t: float, runs: list[dict[str, Any]]) -> list[object]:
    """One table row over the runs (graphs) of a set: pairs differing summed, cases counted."""
    cases = sum(r["pass"] != r["exact"] for r in runs)
    miss = sum(len(r["exact"] - r["pass"]) for r in runs)
    extra = sum(len(r["pass"] - r["exact"]) for r in runs)
    return [name, t, sum(len(r["exact"]) for r in runs) // len(runs), f"-{miss} +{extra} ({cases}/{len(runs)})",
            f"{sum(r['cpu'] for r in runs) / len(runs):.2f}",
            verdict(miss <= 2 * len(runs))]  # (in clusters larger than k: which k of the equally close copies)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000", help="curation bench store sizes (built by bench/curate.py)")
    ap.add_argument("--builds", type=int, default=4, help="graph builds per seeded set")
    ap.add_argument("--ef", type=int, default=CURATION_EF, help="the pass's ef")
    args = ap.parse_args()
    rows: list[list[object]] = []
    for n in (int(x) for x in args.sizes.split(",") if x):
        rows += store_rows(n, args.ef)
    if args.builds:
        rows += seeded_rows(args.builds, args.ef)
    print(f"# the pass: ef {args.ef}, k {K}. Pairs differing from the exact kNN's: -missed +extra "
          "(graphs differing / graphs); CPU: one pass, per graph")
    print(table(["set", "threshold", "exact pairs", "pass vs exact", "pass CPU s", "verdict"], rows))


if __name__ == "__main__":
    main()
