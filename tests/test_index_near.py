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
from conftest import files
from test_knn_pass import DIM, SeededEmbedder

from memcli.api import Store
from memcli.core.config import Config
from memcli.core.memory import Memory
from memcli.index import sync as sync_mod
from memcli.index import vectors as vectors_mod
from memcli.index.vectors import NEAR_FLOOR, NEAR_VERSION
from memcli.ops import changes
from memcli.ops.curate import NEIGHBOURS, _opposed, merge_groups, similar_groups
from memcli.rules.relate import rules_version, texts_mergeable

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
    a, b, sim, _ = index.near_pairs(-1.0)
    return {(ids[x], ids[y]): s for x, y, s in zip(a.tolist(), b.tolist(), sim.tolist())}


def verdicts(store: Store) -> dict[tuple[str, str], int]:
    """The texts' verdicts recorded with the pairs (1 apart, 0 mergeable, -1 not judged)."""
    index = store.index
    ids = dict((lab, mid) for lab, mid in index.vector_ids())
    a, b, _, apart = index.near_pairs(-1.0)
    return {(ids[x], ids[y]): v for x, y, v in zip(a.tolist(), b.tolist(), apart.tolist())}


def assert_exact(store: Store, at_least: int = 30) -> None:
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
    a_all, b_all, _, _ = index.near_pairs(-1.0)
    assert set(a_all.tolist()) | set(b_all.tolist()) <= set(labels)  # no pair of a row that left
    at = {mid: i for i, mid in enumerate(ids)}
    for (x, y), sim in got.items():
        assert abs(s[at[x], at[y]] - sim) < 1e-5, (x, y)  # the similarity of the vectors as they are
        assert sim >= NEAR_FLOOR
    iu = np.triu_indices(len(ids), 1)
    close = s[iu] >= NEAR_FLOOR + 1e-5
    want = {tuple(sorted((ids[i], ids[j]), key=at.get)) for i, j in zip(iu[0][close], iu[1][close])}
    assert want <= set(got)
    assert len(want) >= at_least  # the seeded set has close pairs to find
    # each pair's verdict is the one its texts get now, or none (a merged text on a kept vector)
    text = {m.id: m.text for m in index.records_of(ids).values()}
    assert index.meta("pairs_rules") == rules_version()
    recorded = verdicts(store)
    assert all(recorded[x, y] in (-1, int(not texts_mergeable(text[x], text[y]))) for x, y in got)
    assert (np.array(list(recorded.values())) >= 0).mean() > 0.5


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
    merge_groups(files(store), groups)
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
    with_pass = similar_groups(files(store), 0.9)
    assert len(with_pass) > 10
    write(store, "M00300", 300)
    index.sync()
    assert_exact(store)
    from_table = similar_groups(files(store), 0.9)
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
    groups = similar_groups(files(store), 0.9)
    monkeypatch.undo()
    index.sync(force=True)
    assert_exact(store)
    assert similar_groups(files(store), 0.9) == groups


@pytest.mark.parametrize("threshold", [0.95, 0.9, 0.85, 0.8])
def test_the_groups_are_the_same_from_the_table_and_from_the_pass(store, threshold):
    """Below the floor the table cannot answer: the pass does (0.8)."""
    index = store.index
    from_table = similar_groups(files(store), threshold)
    ids, vecs, nbr, _ = index.neighbour_arrays(NEIGHBOURS, threshold=threshold)
    assert (vecs.shape[1] == 0) == (threshold >= NEAR_FLOOR)  # read from the table: no vector read
    index.set_meta(near="")
    try:
        assert similar_groups(files(store), threshold) == from_table
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
    by_pass = similar_groups(files(store), 0.9)
    write(store, "M00300", 300)  # this memcli's next write
    index.sync()
    assert_exact(store)
    assert [g for g in similar_groups(files(store), 0.9) if "M00300" not in g] == [
        g for g in by_pass if not set(g) & {m for h in similar_groups(files(store), 0.9) if "M00300" in h for m in h}]


def test_a_crowd_of_near_copies_makes_merge_auto_search_the_graph_until_it_is_gone(tmp_path):
    """A memory R (~0.9 alike to a crowd), then a crowd of 120 near-copies written a few at a time:
    the crowd's later members are searched for NEAR_CROWD neighbours only, all of the crowd, and do
    not list R. While such a row is there the table is not read (merge --auto searches the graph,
    and groups R with the crowd as an exact kNN does); once the crowd is gone it is complete again."""
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
        index = s.index
        assert index.vec.near_ready() and index.near_crowded()
        listed = {x for pair in table(s) if "R" in pair for x in pair} - {"R"}
        assert listed and max(listed) < "C070"  # R is listed by the crowd's first members only
        _, vecs, _, _ = index.neighbour_arrays(NEIGHBOURS, threshold=0.85)
        assert vecs.shape[1] == DIM  # the graph was searched, not the table
        groups = similar_groups(files(s), 0.85)
        assert any("R" in g and len(g) == 121 for g in groups)
        crowded = {mid for lab, mid in index.vector_ids()
                   if index.db.execute("SELECT 1 FROM close_crowded WHERE label=?", (lab,)).fetchone()}
        assert listed.isdisjoint(crowded)
        for mid in crowded:  # the crowd goes, but for the members that found all their close ones
            (s.facts_dir / f"{mid}.md").unlink()
        index.sync()
        assert not index.near_crowded()
        assert_exact(s, at_least=10)
        _, vecs, _, _ = index.neighbour_arrays(NEIGHBOURS, threshold=0.85)
        assert vecs.shape[1] == 0  # the table answers again
        groups = similar_groups(files(s), 0.85)
        assert any("R" in g for g in groups)
        index.set_meta(near="")
        assert similar_groups(files(s), 0.85) == groups
    finally:
        s.close()


class MappedEmbedder(SeededEmbedder):
    """Each text's vector named by a table (text -> row of the vectors), whatever the text says."""

    def __init__(self, vectors: np.ndarray, rows: dict[str, int], cache) -> None:  # noqa: ANN001
        super().__init__(vectors, cache)
        self.rows = rows

    def embed(self, texts, *, on_progress=None, batch_size=None):  # noqa: ANN001, ANN202
        self.computed += len(texts)
        return self.vectors[[self.rows.get(t, 0) for t in texts]]


NOTES = {  # (id, text, vector row): three notes about deploys (two say the same), two about the cache
    "D1": ("Deploys go out on Tuesdays after the standup. Ask Sam before a big one.", 1),
    "D2": ("Deploys go out on Tuesdays, after the standup!", 2),
    "D3": ("Deploys go out on Fridays after the standup.", 3),
    "C1": ("The API cache keeps entries for 5 minutes.", 4),
    "C2": ("The API cache keeps entries for five minutes.", 5),
}


@pytest.fixture
def noted(tmp_path):
    """A store of NOTES whose vectors are all close (>= 0.9) within each subject."""
    rng = np.random.default_rng(8)
    d, c = rng.normal(size=DIM), rng.normal(size=DIM)
    vecs = [rng.normal(size=DIM)] + [d + 0.1 * rng.normal(size=DIM) for _ in range(3)]
    vecs += [c + 0.1 * rng.normal(size=DIM) for _ in range(2)]
    vectors = np.array([v / np.linalg.norm(v) for v in vecs], np.float32)
    s = Store(tmp_path / "store", Config(embed_model=f"hash:{DIM}"))
    s.init()
    rows = {text: row for text, row in NOTES.values()}
    s.index.embedder = MappedEmbedder(vectors, rows, tmp_path / "cache")
    for mid, (text, _) in NOTES.items():
        (s.facts_dir / f"{mid}.md").write_text(Memory(id=mid, text=text, updated=f"2026-01-0{mid[1]}T00:00:00Z",
                                                      ).to_markdown())
    s.index.sync()
    yield s, rows
    s.close()


def test_each_pair_is_recorded_with_its_texts_verdict(noted):
    store, _ = noted
    got = verdicts(store)
    assert got[("D1", "D2")] == 0  # a rewording: mergeable
    assert got[("D1", "D3")] == 1 and got[("D2", "D3")] == 1  # another day: never merged
    assert got[("C1", "C2")] == int(not texts_mergeable(NOTES["C1"][0], NOTES["C2"][0]))
    assert similar_groups(files(store), 0.85, apart=_opposed) == [["D1", "D2"]] + (
        [["C1", "C2"]] if got[("C1", "C2")] == 0 else [])


def test_a_merged_text_on_a_kept_vector_is_judged_again(noted, monkeypatch):
    """A bulk merge's merged memory takes over its newest source's row and vector (provisional):
    the pairs of that row lose the old text's verdict (here made wrong on purpose first, so that a
    verdict left alone would show), and get the new one's when the refresh gives the row its own
    vector; meanwhile `merge --auto` judges them itself."""
    store, rows = noted
    index = store.index
    index.db.execute("UPDATE close_pairs SET apart = 1 - apart")  # every verdict wrong
    monkeypatch.setattr(changes, "PROVISIONAL_MIN", 1)
    (result,) = merge_groups(files(store), [["D1", "D2"]])
    assert index.provisional_count() == 1
    merged = result.merged
    judged = {frozenset(pair): v for pair, v in verdicts(store).items() if merged.id in pair}
    assert judged == {frozenset(("D3", merged.id)): -1}  # its pair with D3 kept, the verdict forgotten
    assert not any("D3" in g for g in similar_groups(files(store), 0.85, apart=_opposed))
    rows[merged.text] = 2  # the refresh: the merged text's own vector (that of D2, here)
    assert index.refresh_provisional() == 1
    assert verdicts(store)[(merged.id, "D3")] == int(not texts_mergeable(merged.text, NOTES["D3"][0])) == 1


def test_verdicts_given_by_other_rules_are_not_used(noted):
    store, _ = noted
    index = store.index
    expected = similar_groups(files(store), 0.85, apart=_opposed)
    assert ["D1", "D2"] in expected and not any("D3" in g for g in expected)
    index.db.execute("UPDATE close_pairs SET apart = 0")  # all mergeable, D3 too: as other rules might say
    index.set_meta(pairs_rules="other rules")
    recorded: dict = {}
    index.neighbour_arrays(NEIGHBOURS, threshold=0.85, verdicts=recorded)
    assert recorded == {}  # not handed out
    assert similar_groups(files(store), 0.85, apart=_opposed) == expected
    (store.facts_dir / "C2.md").unlink()  # the next write judges them again (a small store)
    index.sync()
    assert index.meta("pairs_rules") == rules_version()
    assert verdicts(store) == {("D1", "D2"): 0, ("D1", "D3"): 1, ("D2", "D3"): 1}
    assert similar_groups(files(store), 0.85, apart=_opposed) == [["D1", "D2"]]


def test_verdicts_of_other_rules_in_a_large_store_are_left_to_the_reader(noted, monkeypatch):
    monkeypatch.setattr(sync_mod, "NEAR_BUILD_MAX", 2)
    store, _ = noted
    index = store.index
    index.set_meta(pairs_rules="other rules")
    (store.facts_dir / "C2.md").unlink()
    index.sync()
    assert index.meta("pairs_rules") == rules_version()
    assert set(verdicts(store).values()) == {-1}  # forgotten: merge --auto judges them when it reads
    assert similar_groups(files(store), 0.85, apart=_opposed) == [["D1", "D2"]]


def test_the_rules_digest_is_read_from_the_sources_or_else_from_the_code(monkeypatch):
    """The verdicts are recorded under a digest of the rules' sources (read when memcli.rules.relate is
    imported); an install of compiled modules only (no sources to read) still gets a stable one,
    from the functions' code."""
    from memcli.rules import relate as decide

    from_sources = decide._rules_digest()
    assert decide.rules_version() == from_sources and len(from_sources) == 16
    real = decide.__spec__.loader.get_data

    def no_sources(path):  # noqa: ANN001, ANN202
        if path.endswith(".py"):
            raise FileNotFoundError(path)
        return real(path)

    monkeypatch.setattr(decide.__spec__.loader, "get_data", no_sources)
    from_code = decide._rules_digest()
    assert decide._rules_digest() == from_code != from_sources
    assert len(from_code) == 16 and int(from_code, 16) >= 0


def test_a_superseded_memory_is_never_merged_whatever_its_texts_verdict(noted):
    """The recorded verdict is on the texts only: D1 and D2 say the same, but once D2 is marked
    replaced by a newer memory, merge --auto keeps it out of any group (as the kNN pass does)."""
    store, _ = noted
    assert verdicts(store)[("D1", "D2")] == 0
    text = NOTES["D2"][0]
    (store.facts_dir / "D2.md").write_text(Memory(id="D2", text=text, updated="2026-01-02T00:00:00Z",
                                                  extra={"superseded_by": "D3"}).to_markdown())
    store.index.sync()
    assert verdicts(store)[("D1", "D2")] == 0  # (the text did not change: nor did its verdict)
    groups = similar_groups(files(store), 0.85, apart=_opposed)
    assert not any("D2" in g for g in groups)
    store.index.set_meta(near="")
    assert similar_groups(files(store), 0.85, apart=_opposed) == groups


def test_a_bulk_judging_lets_the_texts_it_read_go(store, monkeypatch):
    """A whole store's pairs judged at once (an import, a rebuild) leave no parsed texts behind:
    a long-running process (`memcli mcp`) would carry them through every later sync."""
    from memcli.rules import relate as decide

    monkeypatch.setattr(sync_mod, "FORGET_AFTER", 10)
    index = store.index
    index.set_meta(near="")
    decide.forget_parsed()
    write(store, "M00300", 300)
    index.sync()  # builds the table whole: every pair judged
    assert decide.parse.cache_info().currsize == 0
    assert_exact(store)  # (the verdicts were given all the same)
