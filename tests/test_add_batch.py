"""`add --batch` writes a chunk of lines at once, yet decides each line exactly as one `add` after
the other would: same memories, same merges, same supersedes (real default model)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from conftest import files

from memcli.api import Store
from memcli.index import Filters
from memcli.ops.batch import add_chunks, batch_items

PAIRS = [json.loads(line) for line in (Path(__file__).parent / "data" / "decision_pairs.jsonl").open()]

#: a chat log with repeats, and developer notes whose later lines repeat, refine or change earlier ones
CHAT = [
    "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
    "Melanie: That's amazing, Caroline! What happened there?",
    "Caroline: I'm going to make a painting for my family this weekend.",
    "Melanie: I see them at least once a week, they live nearby.",
    "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
    "Melanie: I'm running a charity race for mental health next Saturday.",
    "Caroline: Next Saturday Melanie is running a charity race for mental health.",
]


def _lines() -> list[str]:
    notes = []
    for kind in ("duplicate", "refinement", "value_change", "distinct"):
        for p in [p for p in PAIRS if p["kind"] == kind][:6]:
            notes += [p["old"], p["new"]]
    texts = CHAT + notes + CHAT[:3] + [p["old"] for p in PAIRS[:4]]
    return [json.dumps({"text": t, "origins": [f"log:{i}"], "created": f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}Z"})
            for i, t in enumerate(texts)]


def _content(store: Store) -> set[tuple]:
    """What a user sees: each memory's text, origins, confidence, and the text that superseded it."""
    recs = store.index.select()
    text_of = {r.id: r.text for r in recs}
    return {(r.text, tuple(sorted(r.origins)), round(r.confidence, 3), text_of.get(r.superseded_by))
            for r in recs}


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, Store, list]:
    base = tmp_path_factory.mktemp("batch")
    one, chunked = Store(base / "one"), Store(base / "chunked")
    one.init()
    chunked.init()
    lines = _lines()
    results = [one.add(**kw) for _, kw in batch_items(lines, {"llm": False, "project": "p"})]
    chunked.index.embedder = one.index.embedder  # one model load
    outputs = list(add_chunks(files(chunked), batch_items(lines, {"llm": False, "project": "p"}), chunk=16))
    yield one, chunked, results, outputs
    one.close()
    chunked.close()


def test_the_input_decides_against_its_own_earlier_lines(stores):
    """The lines do merge into and supersede lines of the same chunk (the comparison can fail)."""
    _, _, results, _ = stores
    events = Counter(e.event if not e.supersedes else "SUPERSEDE" for r in results for e in r.events)
    assert events["NONE"] >= 5 and events["UPDATE"] >= 3 and events["SUPERSEDE"] >= 4 and events["ADD"] >= 20


def test_chunked_batch_leaves_the_same_store_as_one_add_per_line(stores):
    one, chunked, results, outputs = stores
    assert _content(chunked) == _content(one)
    assert [n for n, _ in outputs] == list(range(1, len(results) + 1))
    for r, (_, o) in zip(results, outputs):  # the same event, line by line
        assert [(e.event, e.text, bool(e.supersedes)) for e in r.events] == \
            [(e.event, e.text, bool(e.supersedes)) for e in o.events]


def test_a_bad_line_is_reported_in_its_place_and_the_rest_is_written(real_store: Store):
    lines = [json.dumps({"text": "The API server listens on port 8080."}), "not json",
             json.dumps({"text": "The API server listens on port 9090 now."}), json.dumps({"text": "x", "tags": [1]})]
    out = list(add_chunks(files(real_store), batch_items(lines, {"llm": False})))
    assert [n for n, _ in out] == [1, 2, 3, 4]
    assert isinstance(out[1][1], str) and isinstance(out[3][1], str)
    first, third = out[0][1].events[0], out[2][1].events[0]
    assert third.supersedes == first.id
    live = [m.text for m in real_store.list(Filters(current=True))]  # what `memcli list` shows
    assert live == ["The API server listens on port 9090 now."]


def test_a_dry_run_batch_shows_the_real_runs_decisions_and_writes_nothing(stores, tmp_path):
    """`add --batch --dry-run` must not drift from the real run: later lines see earlier ones."""
    one, _, results, _ = stores
    fresh = Store(tmp_path / "dry")
    fresh.init()
    fresh.index.embedder = one.index.embedder
    before = sorted(p.name for p in fresh.facts_dir.iterdir())
    preview = list(fresh.add_batch(_lines(), llm=False, project="p", dry_run=True))
    assert sorted(p.name for p in fresh.facts_dir.iterdir()) == before == []
    assert [(e.event, e.text, bool(e.supersedes)) for r in results for e in r.events] == \
        [(e.event, e.text, bool(e.supersedes)) for _, o in preview for e in o.events]
    assert all(o.dry_run for _, o in preview)
