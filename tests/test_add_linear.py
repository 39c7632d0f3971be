"""Issue 24: `add` in linear time. The in-batch dedup (a later fact of one input that repeats an
earlier one) relates a fact only to the earlier ones `relate` could call the same; these tests
check that the shortcut never hides a SAME from `relate` (so the decisions are the ones `relate`
alone would make), that the most-similar pick is the one a stable sort makes, and that the work
grows with the facts, counted (not timed: the same on a loaded machine)."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import numpy as np
import pytest
from conftest import HASH

from memcli.api import Store
from memcli.core.config import Config
from memcli.ops.add import _may_be_same, _most_similar, _Said
from memcli.rules.relate import SAME, relate

PAIRS = [json.loads(line) for line in (Path(__file__).parent / "data" / "decision_pairs.jsonl").open()]

#: texts with references, call parentheses and little else: relate reads them without those
REFS = [
    "Fix the pager on Windows (#2811)", "Fix the pager on Windows (#2840)", "Reconcile #2811 and #2840",
    "Reconcile #2840 and #2811", "Call `get_pager_file()` before echo", "Call `get_pager_file` before echo",
    "Merge pull request #2790 from pallets/fix-typos", "Merge pull request #2791 from pallets/fix-typos",
    "See https://example.com/docs for the setup", "See the setup docs", "Bump rich to 13.1 (#77)",
    "Bump rich to 13.1", "closes gh-381", "closes gh-382", "Use tmp_path() in the fixtures, see 1a2b3c4d",
    "Use tmp_path in the fixtures",
]

SIMILARITIES = (0.5, 0.62, 0.79, 0.8, 0.81, 0.85, 0.9, 1.0)


def _texts() -> list[str]:
    return list(dict.fromkeys([t for p in PAIRS for t in (p["old"], p["new"])] + REFS))


def test_may_be_same_never_hides_a_same() -> None:
    """Wherever `relate` says SAME, `_may_be_same` lets the pair through: every judged pair both
    ways, every pair of the reference texts, and a seeded sample of the pairs across the file,
    at similarities around each floor relate reads (and at two thresholds)."""
    texts = _texts()
    pairs = [(p["old"], p["new"]) for p in PAIRS] + [(p["new"], p["old"]) for p in PAIRS]
    pairs += list(itertools.permutations(REFS, 2))
    rnd = random.Random(24)
    pairs += [(rnd.choice(texts), rnd.choice(texts)) for _ in range(2000)]
    said = {t: _Said(t) for t in texts}
    sames = refused = 0
    for old, new in pairs:
        for sim in SIMILARITIES:
            for threshold in (0.85, 0.7):
                may = _may_be_same(said[old], said[new], sim, threshold)
                if relate(old, new, sim, threshold=threshold).kind == SAME:
                    sames += 1
                    assert may, (old, new, sim, threshold)
                elif not may:
                    refused += 1
    assert sames > 200 and refused > 10 * sames  # it does tell most pairs apart, and met many SAMEs


def test_most_similar_is_the_stable_sort_pick() -> None:
    rnd = np.random.default_rng(24)
    for trial in range(3000):
        n = int(rnd.integers(25, 300))
        if trial % 2:  # many exact ties (the hash embedder makes them)
            sims = rnd.choice(np.array([0.5, 0.6, 0.7, 0.9], dtype=np.float32), size=n)
        else:
            sims = rnd.random(n).astype(np.float32)
        idx = np.sort(rnd.choice(10 * n, size=n, replace=False))
        want = set(idx[np.argsort(-sims, kind="stable")[:24]].tolist())
        assert set(_most_similar(idx, sims, 24).tolist()) == want


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    import memcli.rules.relate as rel

    calls = [0]
    real = rel.relate

    def counting(*a, **k):
        calls[0] += 1
        return real(*a, **k)

    monkeypatch.setattr(rel, "relate", counting)
    return calls


def test_alike_facts_are_not_related_one_by_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """1,200 facts that differ in one value: each has 24 earlier ones as similar as can be, and
    each of those is a new value, not a repeat: no `relate` call for any of them."""
    calls = _counting(monkeypatch)
    store = Store(tmp_path / "s", Config(embed_model=HASH))
    store.init()
    text = "\n".join(f"The deploy script uses port {i} for the staging server." for i in range(1200))
    result = store.add(text, llm=False)
    assert result.summary()["ADD"] == 1200
    assert calls[0] == 0
    store.close()


def test_repeats_within_one_input_are_still_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same input with its facts said twice (the second time with references, or in other
    words): each repeat is NONE against the fact of the same input, as `relate` decides."""
    calls = _counting(monkeypatch)
    store = Store(tmp_path / "s", Config(embed_model=HASH))
    store.init()
    first = [f"The deploy script uses port {i} for the staging server." for i in range(40)]
    again = [f"The deploy script uses port {i} for the staging server (#{100 + i})." for i in range(40)]
    result = store.add("\n".join(first + again), llm=False)
    summary = result.summary()
    assert summary["ADD"] == 40 and summary["NONE"] == 40, summary
    repeats = [e for e in result.events if e.event == "NONE"]
    assert all(e.reasoning.startswith("repeats a fact of this input") for e in repeats)
    assert calls[0] <= 2 * 40  # the repeats, not every similar earlier fact
    store.close()


def test_the_words_index_finds_what_the_similarities_find() -> None:
    """From INDEXED_FROM planned memories on, a fact's words are looked up first and the
    similarities computed only if need be: the memories worth relating are the same as the full
    product and `_may_be_same` find (texts of the judged pairs, their rewordings, alike facts and
    exact repeats, with the test embedder's vectors)."""
    from memcli.core.memory import Memory
    from memcli.ops.add import ThisInput
    from memcli.services.embed import Embedder

    judged = [t for p in PAIRS for t in (p["old"], p["new"])]
    texts = list(dict.fromkeys(judged[::2] + REFS[::2]
                               + [f"The deploy script uses port {i} for the staging server." for i in range(300)]))
    rnd = random.Random(22)
    queries = (judged[1::2] + REFS[1::2] + rnd.sample(texts, 20) + [t + " now" for t in rnd.sample(texts, 20)]
               + [f"The deploy script uses port {i} for the staging server" for i in (5, 7, 999, 1000, 1001)])
    vecs = Embedder(HASH).embed(texts + queries)
    indexed, plain = ThisInput(), ThisInput()
    plain.INDEXED_FROM = 10**9
    indexed.INDEXED_FROM = 256
    for n, (text, vec) in enumerate(zip(texts, vecs)):
        for batch in (indexed, plain):
            batch.append((vec, Memory(id=f"m{n}", text=text)))
    assert indexed.indexed and not plain.indexed
    products = [0]
    full = indexed.candidates

    def counted(*a):
        products[0] += 1
        return full(*a)

    indexed.candidates = counted  # type: ignore[method-assign]
    found = asked = 0
    for q, vec in zip(queries, vecs[len(texts):]):
        for threshold in (0.85, 0.7):
            got, _ = indexed.worth_relating(q, vec, threshold)
            want, _ = plain.worth_relating(q, vec, threshold)
            assert got == want, q
            found += bool(want)
            asked += 1
    assert found > 20 and products[0] < asked / 2  # most facts ruled out without the full product
