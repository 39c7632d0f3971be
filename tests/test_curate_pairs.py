"""Which neighbour pairs curation looks at: the numpy picking in `curate._close_pairs` and
`curate._linked_groups` must choose exactly the pairs, similarities and groups that a plain walk
over the neighbour lists chooses (the contradiction report shows that similarity; the groups are
what `consolidate` and `merge --auto` merge)."""

from __future__ import annotations

import random

import numpy as np

from memcli.ops.curate import _close_pairs, _linked_groups


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
        judged: list[frozenset[str]] = []

        def counted(a, b, apart=apart, judged=judged):
            judged.append(frozenset((a["id"], b["id"])))
            return apart(a, b)

        assert _linked_groups(ids, nbr, sims, threshold, recs, counted) == expected
        assert len(judged) == len(set(judged))  # each pair judged once, though seen from both ends
