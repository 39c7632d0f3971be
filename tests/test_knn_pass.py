"""Curation's one kNN pass asked only for the close pairs (`merge --auto`'s groups): it must find what
an exact (brute-force) kNN finds.

The vectors are seeded, not embedded: the test is about the search over a given geometry (topics of
notes alike at ~0.7-0.85, holding near-copy groups of 1-5, and clusters of 12-40 near-copies, larger
than k), so a seeded embedder stands in for the model. `test_merge_auto_groups_with_the_real_model`
checks the same on real texts with the real model.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import DEV_NOTES, Cli, files

from memcli.api import Store
from memcli.core.config import Config
from memcli.core.memory import Memory
from memcli.index.vectors import Vectors
from memcli.ops.curate import NEIGHBOURS, _linked_groups, _opposed, similar_groups
from memcli.services.embed import Embedder

DIM = 384


def seeded_vectors(n: int, seed: int) -> np.ndarray:
    """`n` unit vectors: topics whose members are ~0.7-0.85 alike, each member a group of 1-5
    near-copies (~0.85-0.99 alike), one group in twelve a cluster of 12-40 copies."""
    rng = np.random.default_rng(seed)
    topics = rng.normal(size=(max(n // 60, 2), DIM))
    topics /= np.linalg.norm(topics, axis=1, keepdims=True)
    out: list[np.ndarray] = []
    while len(out) < n:
        base = topics[rng.integers(len(topics))] + rng.uniform(0.45, 0.7) * rng.normal(size=DIM) / np.sqrt(DIM)
        base /= np.linalg.norm(base)
        size = int(rng.integers(12, 41)) if rng.random() < 1 / 12 else int(rng.integers(1, 6))
        noise = rng.uniform(0.08, 0.4)
        for _ in range(size):
            v = base + noise * rng.normal(size=DIM) / np.sqrt(DIM)
            out.append(v / np.linalg.norm(v))
    return np.array(out[:n], np.float32)


class SeededEmbedder(Embedder):
    """The vector of text "seeded point <i>" is row i of the seeded set (no model, its own cache)."""

    def __init__(self, vectors: np.ndarray, cache) -> None:
        super().__init__(f"hash:{DIM}", cache=cache)
        self.vectors = vectors

    def embed(self, texts, *, on_progress=None, batch_size=None):  # noqa: ANN001, ANN202 - Embedder.embed's signature
        self.computed += len(texts)
        if on_progress:
            on_progress(len(texts))
        return self.vectors[[int(t.rsplit(" ", 1)[1]) for t in texts]]


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    """A store of 1,500 memories over the seeded vectors, its index in step: (store, vectors in the
    order of the pass's ids)."""
    root = tmp_path_factory.mktemp("knn")
    vectors = seeded_vectors(1500, seed=11)
    store = Store(root / "store", Config(embed_model=f"hash:{DIM}"))
    store.init()
    for i in range(len(vectors)):
        m = Memory(id=f"M{i:05d}", text=f"seeded point {i}")
        (store.facts_dir / f"{m.id}.md").write_text(m.to_markdown())
    store.index.embedder = SeededEmbedder(vectors, root / "cache")
    # the graph built on one thread: the same graph every run (hnswlib inserts in parallel
    # otherwise, and about one build in ten left a pair of near-copies unreachable from either end,
    # for the pass: what is checked here is the search, not a build's luck)
    new = Vectors._new

    def one_thread(self, capacity):  # noqa: ANN001, ANN202 - Vectors._new's signature
        h = new(self, capacity)
        h.set_num_threads(1)
        return h

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Vectors, "_new", one_thread)
        store.index.sync()
    ids = store.index.neighbour_arrays(NEIGHBOURS)[0]
    yield store, vectors[[int(mid[1:]) for mid in ids]]
    store.close()


def exact_neighbours(vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Every row's k nearest others by brute force (positions, float32 cosines as float64)."""
    s = vectors @ vectors.T
    np.fill_diagonal(s, -np.inf)
    top = np.argsort(-s, axis=1, kind="stable")[:, :k]
    return top, np.take_along_axis(s, top, 1).astype(np.float64)


def close_pairs(nbr: np.ndarray, sims: np.ndarray, threshold: float) -> set[tuple[int, int]]:
    rows, cols = np.nonzero((sims >= threshold) & (nbr >= 0))
    other = nbr[rows, cols]
    return set(zip(np.minimum(rows, other).tolist(), np.maximum(rows, other).tolist()))


@pytest.mark.parametrize("threshold", [0.95, 0.9, 0.85])
def test_the_close_pairs_pass_finds_what_an_exact_knn_finds(seeded, threshold):
    """Asked for the neighbours at >= threshold only, the pass finds every pair an exact kNN finds
    at >= threshold for a memory with fewer than k such neighbours (no near-copy missed), k of them
    for a memory in a cluster larger than k (never cut off), nothing below the threshold, the same
    pairs as without a threshold; and `merge --auto`'s groups are the groups of the exact kNN's
    pairs. Pairs count from either end, as the groups take them."""
    store, vectors = seeded
    exact, exact_sims = exact_neighbours(vectors, NEIGHBOURS)
    ids, _, nbr, sims = store.index.neighbour_arrays(NEIGHBOURS, threshold=threshold)
    found = nbr >= 0
    assert np.all(sims[found] >= threshold)  # only the close neighbours are given
    true = np.einsum("ij,ij->i", vectors[np.repeat(np.arange(len(ids)), found.sum(1))], vectors[nbr[found]])
    assert np.allclose(true, sims[found], atol=1e-5)  # at their true similarity
    small = (exact_sims >= threshold).sum(1) < NEIGHBOURS
    assert 100 < (~small).sum() < len(ids) * 2 // 3  # the set has clusters larger than k, and not only
    pairs = close_pairs(nbr, sims, threshold)
    assert {(a, b) for a, b in close_pairs(exact, exact_sims, threshold) if small[a] or small[b]} <= pairs
    # (approximate search: hnswlib builds its graph with threads, so a build may leave a rare row
    # of a big cluster a neighbour short; what matters, the groups, is checked exactly below)
    assert (found[~small].sum(1) < NEIGHBOURS).mean() <= 0.01
    _, _, wide, wide_sims = store.index.neighbour_arrays(NEIGHBOURS)
    assert pairs == close_pairs(wide, wide_sims, threshold)
    expected = _linked_groups(ids, exact, exact_sims, threshold)
    assert len(expected) > 80
    assert similar_groups(files(store), threshold) == expected


VARIANTS = (  # re-typed copies of a note, as a second hook or a re-import leaves them
    lambda t: t[0].lower() + t[1:].rstrip("."),
    lambda t: "Note: " + t,
    lambda t: t + " Confirmed.",
    lambda t: t.replace(".", ";", 1) + "!",
    lambda t: "Reminder: " + t,
    lambda t: t.upper(),
    lambda t: t.rstrip(".") + " (again).",
    lambda t: "FYI " + t,
    lambda t: t.replace(" the ", " our ", 1),
    lambda t: "Team note: " + t,
    lambda t: t + " As agreed.",
)
NOTES = DEV_NOTES


def test_merge_auto_groups_with_the_real_model(tmp_path):
    """On real texts and the real model: a note copied 12 times (each copy's neighbours at >= 0.9
    fill more than k slots), notes copied once or twice, and notes alone. `merge --auto` merges
    exactly the groups that single linkage over an exact kNN's pairs gives (with the same veto),
    and the 12 copies end up in one group."""
    records = [{"text": v(NOTES[0])} for v in VARIANTS] + [{"text": NOTES[0]}]
    records += [{"text": t} for t in NOTES[1:]]
    records += [{"text": VARIANTS[k % len(VARIANTS)](t)} for k, t in enumerate(NOTES[1:6])]
    records += [{"text": VARIANTS[(k + 3) % len(VARIANTS)](t)} for k, t in enumerate(NOTES[1:4])]
    cli = Cli(tmp_path / "store")
    cli("import", "-", input=json.dumps(records))
    store = Store(cli.store)
    try:
        store.index.sync()
        out = json.loads(cli("merge", "--auto", "--no-llm", "--dry-run", "--json").stdout)
        ids, vectors, _, _ = store.index.neighbour_arrays(NEIGHBOURS)
        exact, exact_sims = exact_neighbours(vectors.astype(np.float32), NEIGHBOURS)
        recs = store.index.records_of(ids)
        expected = _linked_groups(ids, exact, exact_sims, 0.9, recs, _opposed)
        text = {mid: r.text for mid, r in recs.items()}
    finally:
        store.close()
    got = sorted(sorted(r["merged_from"]) for r in out["merged"])
    assert got == sorted(sorted(g) for g in expected)
    copies = {r["text"] for r in records[:12]}
    assert any(copies <= {text[mid] for mid in g} for g in expected)  # the 12 copies: one group
    assert len(expected) >= 4
