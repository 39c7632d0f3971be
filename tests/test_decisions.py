"""The labelled pair set, through the real `add` with the real default model.

`tests/data/decision_pairs.jsonl` holds hand-written developer-memory pairs of five kinds: a stored
text (`old`) and a new one (`new`). Each pair goes into a fresh store through `Store.add`, and
the outcome is read back from the store as a user would see it: is the new text merged into the
old memory (NONE / UPDATE), does it supersede it, or do both stay live and separate?
Thresholds are the issue's: distinct and unrelated pairs stay separate >= 98%, merge precision
>= 0.97, duplicates and refinements merged >= 80%, value changes superseded or flagged >= 94%,
at most one false contradiction flag.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from memcli.api import Store
from memcli.index import Filters
from memcli.rules.decide import heuristic_decision
from memcli.rules.relate import relate
from memcli.services.embed import Embedder

PAIRS = [json.loads(line) for line in (Path(__file__).parent / "data" / "decision_pairs.jsonl").open()]
KINDS = ("duplicate", "refinement", "value_change", "distinct", "unrelated")


def test_the_set_is_big_and_covers_every_kind():
    counts = Counter(p["kind"] for p in PAIRS)
    assert set(counts) == set(KINDS) and len(PAIRS) >= 80
    assert min(counts.values()) >= 10


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[dict, str, bool]]:
    """(pair, outcome, flagged) for every pair; outcome is merged | superseded | separate | other."""
    base = tmp_path_factory.mktemp("pairs")
    embedder = Embedder()
    # Every text into the (session) embedding cache in one batched call: each `add` below then
    # reads its vector from the cache, as after any earlier embedding of the same text, instead of
    # running the model once per text (~3x the CPU of batches of 64). Same model, same vectors.
    embedder.embed([t for p in PAIRS for t in (p["old"], p["new"])])
    out = []
    for i, pair in enumerate(PAIRS):
        store = Store(base / f"s{i}")
        store.init()
        store.index.embedder = embedder  # one model load for the whole set
        first = store.add(pair["old"], raw=True, project="p")
        (old_ev,) = first.events
        second = store.add(pair["new"], project="p")
        live = {r.id: r for r in store.index.select(Filters(current=True))}
        every = {r.id: r for r in store.index.select()}
        new_ids = {e.id for e in second.events}
        if old_ev.id in new_ids and len(every) == 1:
            outcome = "merged"
        elif every[old_ev.id].superseded_by in new_ids and old_ev.id not in live:
            outcome = "superseded"
        elif old_ev.id in live and len(live) == 1 + len(new_ids - {old_ev.id}) and old_ev.id not in new_ids:
            outcome = "separate"
        else:
            outcome = "other"
        vecs = embedder.embed([pair["old"], pair["new"]])
        flagged = relate(pair["old"], pair["new"], float(np.dot(vecs[0], vecs[1]))).contradiction
        out.append((pair, outcome, flagged))
        store.close()
    return out


def _rate(outcomes, kinds, good) -> tuple[float, list[str]]:
    rows = [(p, o) for p, o, _ in outcomes if p["kind"] in kinds]
    bad = [f"{p['kind']}: {o}: {p['old']!r} -> {p['new']!r}" for p, o in rows if o not in good]
    return 1 - len(bad) / len(rows), bad


def test_distinct_and_unrelated_facts_stay_separate(outcomes):
    rate, bad = _rate(outcomes, ("distinct", "unrelated"), {"separate"})
    assert rate >= 0.98, bad


def test_duplicates_and_refinements_are_merged(outcomes):
    rate, bad = _rate(outcomes, ("duplicate", "refinement"), {"merged"})
    assert rate >= 0.80, bad


def test_merges_are_precise(outcomes):
    merged = [p for p, o, _ in outcomes if o == "merged"]
    wrong = [f"{p['kind']}: {p['old']!r} -> {p['new']!r}" for p in merged
             if p["kind"] not in ("duplicate", "refinement")]
    assert 1 - len(wrong) / max(1, len(merged)) >= 0.97, wrong


def test_value_changes_are_superseded_never_two_live_truths(outcomes):
    rows = [(p, o, f) for p, o, f in outcomes if p["kind"] == "value_change"]
    bad = [f"{o}: {p['old']!r} -> {p['new']!r}" for p, o, f in rows if o != "superseded" and not f]
    assert 1 - len(bad) / len(rows) >= 0.94, bad


def test_at_most_one_false_contradiction(outcomes):
    false = [f"{p['kind']}: {p['old']!r} / {p['new']!r}" for p, _, f in outcomes if f and p["kind"] != "value_change"]
    assert len(false) <= 1, false


def test_two_commits_under_one_subject_line_with_other_bodies_are_two_changes():
    """BurntSushi/ripgrep: "deps: update everything" twice, one removing winapi, the other `once_cell`;
    the second was dropped as "already known: same text" (the commit path compares subject lines)."""
    stored = ("deps: update everything\n\nNotably, this removes winapi in favor of windows-sys, as a result of\n"
              "winapi-util switching over to windows-sys[1].")
    new = ("deps: update everything\n\nThis removes `once_cell` (a dependency of `cc`) but adds `shlex` (also a\n"
           "dependency of `cc`).")
    near = [{"id": "A", "text": stored, "similarity": 0.93}]
    assert heuristic_decision(new, near, 0.85, headlines=True).event == "ADD"
    # the same subject line with no body, or the same body again, is the same statement
    assert heuristic_decision("pkg/brew: update tap", [{"id": "B", "text": "pkg/brew: update tap",
                                                        "similarity": 1.0}], 0.85, headlines=True).event == "NONE"
    assert heuristic_decision(stored + "\n\n(cherry picked from commit 0123abc4)",
                              near, 0.85, headlines=True).event == "NONE"


def test_a_fix_after_the_feature_is_another_change_under_a_scope_prefix():
    """BurntSushi/ripgrep: "ignore/types: fix Seed7 file extension" was absorbed by "ignore/types: add
    support for Seed7 files" as a rewording."""
    near = [{"id": "A", "text": "ignore/types: add support for Seed7 files\n\nPR #3022", "similarity": 0.81}]
    assert heuristic_decision("ignore/types: fix Seed7 file extension\n\nPR #3023", near, 0.85,
                              headlines=True).event == "ADD"


def test_a_new_version_ends_every_live_version_of_its_subject_whatever_replaced_the_first():
    """gin-gonic/gin: "ci: update Go version support to 1.25+" replaced "ci: support Go 1.25" (a word's
    change) and left the floor "bump minimum Go version to 1.24" live beside it."""
    near = [{"id": "A", "text": "ci: support Go 1.25 (#4341)", "similarity": 0.8},
            {"id": "B", "text": "chore: bump minimum Go version to 1.24 and update workflows (#4388)",
             "similarity": 0.5},
            {"id": "C", "text": "chore(deps): bump github.com/quic-go/quic-go from 0.53.0 to 0.54.0",
             "similarity": 0.4}]
    d = heuristic_decision("ci: update Go version support to 1.25+ across CI and docs (#4550)", near, 0.85,
                           headlines=True)
    assert (d.event, d.target, d.also) == ("SUPERSEDE", "A", ("B",))
