"""Which neighbour pairs curation looks at: the numpy picking in `curate._close_pairs` and
`curate._linked_groups` must choose exactly the pairs, similarities and groups that a plain walk
over the neighbour lists chooses (the contradiction report shows that similarity; the groups are
what `consolidate` and `merge --auto` merge)."""

from __future__ import annotations

import gc
import os
import random
import sys

import numpy as np
import pytest

from memcli.ops import curate
from memcli.ops.curate import _close_pairs, _gc_paused, _gc_running, _judged_ahead, _linked_groups, _Linker
from memcli.services import background


def _lists(ids: list[str], nbr: np.ndarray, sims: np.ndarray) -> list[list[tuple[str, float]]]:
    return [[(ids[j], float(s)) for j, s in zip(prow, srow) if j >= 0] for prow, srow in zip(nbr, sims)]


def _walk_pairs(ids, nbr, sims, threshold, survivor):
    """The plain walk: row by row, nearest first, each pair once, at its first occurrence."""
    seen, out = set(), []
    for mid, hits in zip(ids, _lists(ids, nbr, sims)):
        for other, sim in hits:
            if sim < threshold:
                continue
            a0, b0 = survivor.get(mid, mid), survivor.get(other, other)
            if a0 == b0:
                continue
            a, b = sorted((a0, b0))
            if (a, b) not in seen:
                seen.add((a, b))
                out.append((a, b, sim))
    return out


def _walk_groups(ids, nbr, sims, threshold, apart):
    parent = {i: i for i in ids}

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x

    for mid, hits in zip(ids, _lists(ids, nbr, sims)):
        for other, sim in hits:
            if sim >= threshold and find(other) != find(mid) and not apart(mid, other):
                parent[find(other)] = find(mid)
    groups: dict[str, list[str]] = {}
    for mid in ids:
        groups.setdefault(find(mid), []).append(mid)
    return [g for g in groups.values() if len(g) > 1]


def _random_neighbours(rng: random.Random, n: int, k: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    ids = [f"M{rng.randrange(10**6):06d}{i}" for i in range(n)]  # not in label order
    nbr = np.full((n, k), -1, np.int64)
    sims = np.zeros((n, k))
    for i in range(n):
        others = rng.sample([j for j in range(n) if j != i], min(n - 1, k - rng.randint(0, 2)))
        vals = sorted((float(np.float32(rng.uniform(0.6, 1.0))) for _ in others), reverse=True)
        nbr[i, : len(others)], sims[i, : len(others)] = others, vals
    return ids, nbr, sims


def test_a_pair_keeps_its_first_similarity_and_a_merge_stands_for_its_sources():
    ids = ["A1", "B1", "C1", "D1"]
    nbr = np.array([[1, 2], [0, 3], [0, 3], [2, -1]])
    sims = np.array([[0.9, 0.85], [0.91, 0.7], [0.85, 0.95], [0.95, 0.0]])
    survivor = {"C1": "Z9", "D1": "Z9"}  # C1 and D1 merged into Z9: their own pair is gone
    assert _close_pairs(ids, nbr, sims, 0.8, survivor) == [("A1", "B1", 0.9), ("A1", "Z9", 0.85)]
    assert _close_pairs(ids, nbr, sims, 0.99, survivor) == []


def test_close_pairs_match_the_plain_walk_on_random_neighbour_lists():
    rng = random.Random(6)
    for _ in range(40):
        ids, nbr, sims = _random_neighbours(rng, rng.randint(2, 30), 6)
        merged = rng.sample(ids, rng.randint(0, len(ids) // 2))
        survivor = {mid: f"N{rng.randint(0, 3)}" for mid in merged}
        threshold = rng.choice([0.7, 0.8, float(np.float32(0.85)), 0.95])
        assert _close_pairs(ids, nbr, sims, threshold, survivor) == _walk_pairs(ids, nbr, sims, threshold, survivor)


def test_linked_groups_match_the_plain_walk_with_a_veto():
    rng = random.Random(7)
    for _ in range(40):
        ids, nbr, sims = _random_neighbours(rng, rng.randint(2, 30), 6)
        vetoed = {frozenset(rng.sample(ids, 2)) for _ in range(rng.randint(0, 10))}
        recs = {mid: {"id": mid} for mid in ids}

        def apart(a, b, vetoed=vetoed):
            return frozenset((a["id"], b["id"])) in vetoed

        def apart_ids(a, b, vetoed=vetoed):
            return frozenset((a, b)) in vetoed

        threshold = rng.choice([0.7, 0.9])
        expected = _walk_groups(ids, nbr, sims, threshold, apart_ids)
        assert _linked_groups(ids, nbr, sims, threshold, recs, apart) == expected
        # fed batch by batch while the kNN pass runs (`_Linker`), each pair judged once: the same groups
        judged: list[frozenset[str]] = []

        def counted(a, b, apart=apart, judged=judged):
            judged.append(frozenset((a["id"], b["id"])))
            return apart(a, b)

        linker = _Linker(len(ids), threshold, recs.__getitem__, counted)
        step = rng.randint(1, 7)
        for start in range(0, len(ids), step):
            linker.rows(ids, start, nbr[start:start + step], sims[start:start + step])
        assert linker.groups(ids) == expected
        assert len(judged) == len(set(judged))



@pytest.mark.parametrize("how", ["forked", "child fails", "one core"])
def test_pairs_judged_ahead_on_two_cores_link_as_one_pair_at_a_time(monkeypatch, how):
    """`merge --auto`: once the graph has searched every row, the rows left are judged after the
    pass, half of their pairs in a forked child (`_judged_ahead`), then linked in row order with
    those verdicts. The groups are those of judging one pair at a time (the plain walk), a vetoed
    pair is never linked whichever process judged it, also when the child fails or cannot run."""
    if how != "one core" and not (background.cores() > 1 and sys.platform.startswith("linux")):
        pytest.skip("needs Linux and a second core")
    monkeypatch.setattr(background, "_one_thread", lambda: True)  # (the suite's own threads aside)
    monkeypatch.setattr(curate, "FORK_PAIRS", 2)  # fork even for these few pairs
    if how == "one core":
        monkeypatch.setenv("MEMCLI_WORKERS", "1")
    forks: list[int] = []
    start = background._start
    monkeypatch.setattr(background, "_start", lambda work: forks.append(1) or start(work))
    parent = os.getpid()
    rng = random.Random(8)
    for _ in range(30):
        ids, nbr, sims = _random_neighbours(rng, rng.randint(2, 40), 6)
        vetoed = {frozenset(rng.sample(ids, 2)) for _ in range(rng.randint(0, 15))}
        recs = {mid: {"id": mid} for mid in ids}
        here: list[frozenset[str]] = []

        def apart(a, b, vetoed=vetoed, here=here):
            if os.getpid() != parent:
                if how == "child fails":
                    raise RuntimeError("the child fails")
            else:
                here.append(frozenset((a["id"], b["id"])))
            return frozenset((a["id"], b["id"])) in vetoed

        threshold = rng.choice([0.7, 0.9])
        expected = _walk_groups(ids, nbr, sims, threshold, lambda a, b, vetoed=vetoed: frozenset((a, b)) in vetoed)
        linker = _Linker(len(ids), threshold, recs.__getitem__, apart)
        step = rng.randint(1, 7)
        batches = [(i, nbr[i:i + step], sims[i:i + step]) for i in range(0, len(ids), step)]
        linked_first = rng.randint(0, len(batches))  # the graph was done after these batches
        for start_, rows_nbr, rows_sims in batches[:linked_first]:
            linker.rows(ids, start_, rows_nbr, rows_sims)
        judged_before = len(here)
        pairs = linker.pending(batches[linked_first:])
        _judged_ahead(linker, ids, batches[linked_first:])
        ahead = len(pairs) >= curate.FORK_PAIRS  # (fewer are left to `rows`)
        assert set(linker.verdicts) == (set(pairs) if ahead else set())
        in_child = len(pairs) - (len(here) - judged_before) if ahead else 0
        assert in_child == (len(pairs) - len(pairs) // 2 if how == "forked" and ahead else 0)
        judged_after = len(here)
        for start_, rows_nbr, rows_sims in batches[linked_first:]:
            linker.rows(ids, start_, rows_nbr, rows_sims)
        if ahead:
            assert len(here) == judged_after  # every pair `rows` asked about was judged ahead
        assert linker.groups(ids) == expected
    assert bool(forks) == (how != "one core")


def test_the_collector_is_paused_only_while_planning_and_runs_during_llm_requests():
    """Planning pauses the cyclic GC (speed); the caller's process gets it back, error or not, and an
    LLM request inside the plan runs with it on (each leaves cycles behind)."""
    assert gc.isenabled()
    with _gc_paused():
        assert not gc.isenabled()
        with _gc_running():
            assert gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ValueError), _gc_paused():
        raise ValueError("planning failed")
    assert gc.isenabled()
    gc.disable()  # a caller that turned it off keeps it off
    try:
        with _gc_paused(), _gc_running():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
    gc.freeze()  # a caller that froze its objects keeps them frozen
    try:
        frozen = gc.get_freeze_count()
        with _gc_paused():
            kept = [[] for _ in range(100)]
        assert gc.get_freeze_count() == frozen and gc.isenabled() and kept
    finally:
        gc.unfreeze()
    with _gc_paused():  # what the plan holds afterwards is not frozen (a later collection may free it)
        kept = [[] for _ in range(100)]
    assert gc.get_freeze_count() == 0 and kept
