"""The close-pair table (catalog `near`): every pair of memories at >= `NEAR_FLOOR`, kept by each
write that changes a vector, so that `merge --auto` reads its groups instead of searching the graph.

What a user relies on: after any kind of write (new files, a hand edit, a removal, a bulk merge
with provisional vectors and their refresh, a graph compaction, a reindex) the table holds exactly
the close pairs of the memories as they are, never a pair of a memory that left or of a vector
that changed; a catalog indexed before the table existed gets it on its next write, or keeps
working without it (the kNN pass) when it is too large to build then. The vectors are seeded
(small groups of near-copies, fewer than `NEAR_K` per memory, so "every close pair" is exact);
`tests/test_knn_pass.py` checks the groups read from the table against an exact kNN, with
clusters larger than k and with the real model.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_knn_pass import DIM, SeededEmbedder

from memcli import changes
from memcli.api import Store
from memcli.config import Config
from memcli.curate import NEIGHBOURS, merge_groups, similar_groups
from memcli.index import sync as sync_mod
from memcli.index import vectors as vectors_mod
from memcli.index.vectors import NEAR_FLOOR, NEAR_VERSION
from memcli.memory import Memory

POINTS = 900


def grouped_vectors(n: int, seed: int) -> np.ndarray:
    """`n` unit vectors in groups of 1-4 near-copies (~0.8-0.99 alike: some pairs fall just
    under the floor), the groups ~0.3-0.6 alike within a topic."""
    rng = np.random.default_rng(seed)
    topics = rng.normal(size=(12, DIM))
    topics /= np.linalg.norm(topics, axis=1, keepdims=True)
    out: list[np.ndarray] = []
    while len(out) < n:
        base = topics[rng.integers(len(topics))] + rng.uniform(0.9, 1.4) * rng.normal(size=DIM) / np.sqrt(DIM)
        base /= np.linalg.norm(base)
        noise = rng.uniform(0.1, 0.5)
        for _ in range(int(rng.integers(1, 5))):
            v = base + noise * rng.normal(size=DIM) / np.sqrt(DIM)
            out.append(v / np.linalg.norm(v))
    return np.array(out[:n], np.float32)


VECTORS = grouped_vectors(POINTS, seed=5)


def text(point: int) -> str:
    return f"seeded point {point}"


def write(store: Store, mid: str, point: int) -> None:
    (store.facts_dir / f"{mid}.md").write_text(Memory(id=mid, text=text(point)).to_markdown())


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "store", Config(embed_model=f"hash:{DIM}"))
    s.init()
    s.index.embedder = SeededEmbedder(VECTORS, tmp_path / "cache")
    for i in range(300):
        write(s, f"M{i:05d}", i)
    s.index.sync()
    yield s
    s.close()


def table(store: Store) -> dict[tuple[str, str], float]:
    """The recorded pairs by id (a < b by label), with their similarity."""
    index = store.index
    ids = dict((lab, mid) for lab, mid in index.vector_ids())
    a, b, sim = index.near_pairs(-1.0)
    return {(ids[x], ids[y]): s for x, y, s in zip(a.tolist(), b.tolist(), sim.tolist())}


def assert_exact(store: Store) -> None:
    """The table is complete and holds exactly the pairs at >= NEAR_FLOOR of the catalog's
    vectors as they are now (a pair within 1e-5 of the floor may go either way), each at its
    similarity, and every recorded label is a memory's."""
    index = store.index
    assert index.vec.near_ready()
    rows = index.vector_ids()
    labels = [lab for lab, _ in rows]
    ids = [mid for _, mid in rows]
    vecs = index.vectors(labels).astype(np.float32)
    s = vecs @ vecs.T
    got = table(store)
    a_all, b_all, _ = index.near_pairs(-1.0)
    assert set(a_all.tolist()) | set(b_all.tolist()) <= set(labels)  # no pair of a row that left
    at = {mid: i for i, mid in enumerate(ids)}
    for (x, y), sim in got.items():
        assert abs(s[at[x], at[y]] - sim) < 1e-5, (x, y)  # the similarity of the vectors as they are
        assert sim >= NEAR_FLOOR
    iu = np.triu_indices(len(ids), 1)
    close = s[iu] >= NEAR_FLOOR + 1e-5
    want = {tuple(sorted((ids[i], ids[j]), key=at.get)) for i, j in zip(iu[0][close], iu[1][close])}
    assert want <= set(got)
    assert len(want) > 30  # the seeded set has close pairs to find


def test_an_index_built_from_empty_holds_every_close_pair(store):
    assert_exact(store)
    assert store.index.meta("near") == NEAR_VERSION


def test_every_kind_of_write_keeps_the_table_exact(store, monkeypatch):
    index = store.index
    for i in range(300, 420):  # new memories, many of them near-copies of earlier ones
        write(store, f"M{i:05d}", i)
    index.sync()
    assert_exact(store)
    for i in range(0, 60, 3):  # hand edits: each text now another point (its vector changes)
        write(store, f"M{i:05d}", 500 + i)
    index.sync()
    assert_exact(store)
    for i in range(100, 160, 2):  # removed by hand
        (store.facts_dir / f"M{i:05d}.md").unlink()
    index.sync()
    assert_exact(store)
    # a bulk merge given provisional vectors (its merged rows take over a source's row and vector),
    # then the refresh that makes them exact (each merged text's vector is another point's)
    monkeypatch.setattr(changes, "PROVISIONAL_MIN", 2)
    groups = [[f"M{i:05d}", f"M{i + 1:05d}"] for i in range(200, 240, 2)]
    merge_groups(store, groups)
    assert index.provisional_count() > 0
    assert_exact(store)
    assert index.refresh_provisional() > 0
    assert_exact(store)
    # a graph rebuilt to drop its tombstones, in the same transaction as new rows
    monkeypatch.setattr(vectors_mod.Vectors, "compacts", lambda self, h, live: True)
    for i in range(420, 460):
        write(store, f"M{i:05d}", i)
    index.sync()
    assert_exact(store)
    monkeypatch.undo()
    index.sync(force=True)  # memcli reindex
    assert_exact(store)


def test_a_catalog_indexed_before_the_table_gets_it_on_its_next_write(store):
    index = store.index
    index.set_meta(near="")
    index.near_clear()
    # meanwhile merge --auto's groups come from the kNN pass, the same groups
    with_pass = similar_groups(store, 0.9)
    assert len(with_pass) > 10
    write(store, "M00300", 300)
    index.sync()
    assert_exact(store)
    from_table = similar_groups(store, 0.9)
    assert [g for g in from_table if "M00300" not in g] == [g for g in with_pass if not set(g) & {
        m for h in from_table if "M00300" in h for m in h}]


def test_a_large_old_catalog_goes_on_without_the_table(store, monkeypatch):
    monkeypatch.setattr(sync_mod, "NEAR_BUILD_MAX", 100)
    index = store.index
    index.set_meta(near="")
    index.near_clear()
    write(store, "M00300", 300)
    index.sync()
    assert not index.vec.near_ready()  # too large to build on a write: left to `memcli reindex`
    assert index.near_count() == 0
    _, vecs, _, _ = index.neighbour_arrays(NEIGHBOURS, threshold=0.9)
    assert vecs.shape == (301, DIM)  # the kNN pass answered (it reads the vectors)
    groups = similar_groups(store, 0.9)
    monkeypatch.undo()
    index.sync(force=True)
    assert_exact(store)
    assert similar_groups(store, 0.9) == groups


@pytest.mark.parametrize("threshold", [0.95, 0.9, 0.85, 0.8])
def test_the_groups_are_the_same_from_the_table_and_from_the_pass(store, threshold):
    """Below the floor the table cannot answer: the pass does (0.8)."""
    index = store.index
    from_table = similar_groups(store, threshold)
    ids, vecs, nbr, _ = index.neighbour_arrays(NEIGHBOURS, threshold=threshold)
    assert (vecs.shape[1] == 0) == (threshold >= NEAR_FLOOR)  # read from the table: no vector read
    index.set_meta(near="")
    try:
        assert similar_groups(store, threshold) == from_table
    finally:
        index.set_meta(near=NEAR_VERSION)
    assert len(from_table) > 10


def test_a_write_by_an_older_memcli_is_noticed_and_the_table_rebuilt(store, monkeypatch):
    """An older memcli (a long-running `memcli mcp` left from before an upgrade) writes rows and
    vectors without keeping the table: its new graph generation tells; the table is not read
    until the next write of this memcli has built it again."""
    index = store.index
    before = table(store)
    real_save = vectors_mod.Vectors.save

    def old_save(self, h):  # noqa: ANN001, ANN202 - what an older memcli's save did: no near_gen
        near_gen = self.catalog.meta("near_gen")
        real_save(self, h)
        self.catalog.set_meta(near_gen=near_gen)

    with monkeypatch.context() as mp:
        mp.setattr(sync_mod.Sync, "_keep_near", lambda *a, **k: None)
        mp.setattr(vectors_mod.Vectors, "save", old_save)
        for i in range(0, 40, 2):  # each text now another point: their pairs in the table are stale
            write(store, f"M{i:05d}", 600 + i)
        index.sync()
    assert index.meta("near") == NEAR_VERSION and table(store) == before  # stale, as the old one left it
    assert not index.vec.near_ready()
    _, vecs, _, _ = index.neighbour_arrays(NEIGHBOURS, threshold=0.9)
    assert vecs.shape[1] == DIM  # the kNN pass answered, not the stale table
    by_pass = similar_groups(store, 0.9)
    write(store, "M00300", 300)  # this memcli's next write
    index.sync()
    assert_exact(store)
    assert [g for g in similar_groups(store, 0.9) if "M00300" not in g] == [
        g for g in by_pass if not set(g) & {m for h in similar_groups(store, 0.9) if "M00300" in h for m in h}]


def test_a_memory_older_than_a_crowd_keeps_its_pairs_when_the_crowd_s_first_members_leave(tmp_path):
    """A memory R (~0.9 alike to a crowd), then a crowd of 120 near-copies written a few at a time:
    the crowd's later members list only each other (NEAR_CROWD), R is listed by the first ones.
    When those leave, R is searched again: it stays in the crowd's group, as the kNN pass has it."""
    rng = np.random.default_rng(3)
    centre = rng.normal(size=DIM)
    centre /= np.linalg.norm(centre)
    r = centre + 0.45 * rng.normal(size=DIM) / np.sqrt(DIM)
    crowd = [centre + 0.08 * rng.normal(size=DIM) / np.sqrt(DIM) for _ in range(120)]
    others = [v / np.linalg.norm(v) for v in rng.normal(size=(40, DIM))]
    vectors = np.array([v / np.linalg.norm(v) for v in [r, *crowd, *others]], np.float32)
    assert 0.88 < float(vectors[0] @ vectors[1]) < 0.95 < float(vectors[1] @ vectors[2])
    s = Store(tmp_path / "store", Config(embed_model=f"hash:{DIM}"))
    s.init()
    s.index.embedder = SeededEmbedder(vectors, tmp_path / "cache")
    try:
        write(s, "R", 0)
        for i in range(121, 161):
            write(s, f"O{i:03d}", i)
        s.index.sync()
        for start in range(1, 121, 8):  # the crowd arrives a few at a time (hook notes)
            for i in range(start, start + 8):
                write(s, f"C{i:03d}", i)
            s.index.sync()
        assert s.index.vec.near_ready()
        assert s.index.db.execute("SELECT count(*) FROM near_crowded").fetchone()[0] > 0
        listed = {x for pair in table(s) if "R" in pair for x in pair} - {"R"}
        assert listed and max(listed) < "C070"  # R is listed by the crowd's first members only
        for mid in sorted(listed):
            (s.facts_dir / f"{mid}.md").unlink()
        s.index.sync()
        assert any("R" in pair for pair in table(s))
        groups = similar_groups(s, 0.85)
        s.index.set_meta(near="")
        assert similar_groups(s, 0.85) == groups
        assert any("R" in g for g in groups)
    finally:
        s.close()
