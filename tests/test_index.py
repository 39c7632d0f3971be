"""The sidecar (.index/): hand edits are noticed, a deleted or corrupt index heals, a model change rebuilds."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import DEV_NOTES, Cli, files

from memcli.api import Store
from memcli.core.config import Config

NOTES = DEV_NOTES[:5]


def fill(cli: Cli, texts=NOTES) -> list[str]:
    ids = []
    for t in texts:
        out = json.loads(cli("add", "--raw", "--json", t).stdout)
        ids.append(out["memory"][0]["id"])
    return ids


def listing(cli: Cli) -> dict[str, str]:
    return {r["id"]: r["text"] for r in json.loads(cli("list", "--json").stdout)["memories"]}


def search_ids(cli: Cli, query: str, *extra: str) -> list[str]:
    return [r["id"] for r in json.loads(cli("search", "--json", *extra, query).stdout)["results"]]


def facts_snapshot(store) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((store / "facts").glob("*"))}


# --- hand edits ---------------------------------------------------------------------------------


def test_a_hand_edited_text_is_seen_by_list_and_search(hash_cli):
    ids = fill(hash_cli)
    assert search_ids(hash_cli, "Grafana Loki")[0] == ids[2]
    path = hash_cli.store / "facts" / f"{ids[2]}.md"
    new = "Audit trails are archived to Glacier after ninety days."
    path.write_text(path.read_text().replace(NOTES[2], new))
    assert listing(hash_cli)[ids[2]] == new
    assert search_ids(hash_cli, "audit trails archived Glacier")[0] == ids[2]
    assert ids[2] not in search_ids(hash_cli, "Grafana Loki")  # (its tags, kept by hand, may still match)
    shown = json.loads(hash_cli("show", "--json", ids[2]).stdout)
    assert shown["text"] == new


def test_a_deleted_file_disappears_from_list_and_search(hash_cli):
    ids = fill(hash_cli)
    (hash_cli.store / "facts" / f"{ids[3]}.md").unlink()
    assert ids[3] not in listing(hash_cli)
    assert set(listing(hash_cli)) == set(ids) - {ids[3]}
    assert ids[3] not in search_ids(hash_cli, "Feature flags are managed in LaunchDarkly.")
    r = hash_cli("show", ids[3], ok=False)
    assert r.exit_code == 1


def test_a_new_file_dropped_into_facts_is_found(hash_cli):
    fill(hash_cli)
    (hash_cli.store / "facts" / "vpn-note.md").write_text(
        "---\ntags: [ops, vpn]\n---\nThe office VPN profile lives in ops/vpn/office.ovpn.\n")
    assert listing(hash_cli)["vpn-note"] == "The office VPN profile lives in ops/vpn/office.ovpn."
    assert search_ids(hash_cli, "office VPN profile")[0] == "vpn-note"
    assert search_ids(hash_cli, "office VPN profile", "--tag", "vpn") == ["vpn-note"]


BROKEN = "---\ntags: [unclosed\n---\nThis file has broken front matter.\n"


def test_a_malformed_file_is_reported_once_and_skipped(hash_cli):
    ids = fill(hash_cli)
    (hash_cli.store / "facts" / "broken.md").write_text(BROKEN)
    first = hash_cli("list", "--json")
    assert "broken.md" in first.stderr
    assert [ln for ln in first.stderr.splitlines() if "broken.md" in ln].__len__() == 1
    assert set(r["id"] for r in json.loads(first.stdout)["memories"]) == set(ids)
    second = hash_cli("search", "--json", "Vite bundles")
    assert "broken.md" not in second.stderr
    assert json.loads(second.stdout)["results"][0]["id"] == ids[1]
    # other commands keep working
    hash_cli("add", "--raw", "Sentry receives frontend errors.")
    assert "broken.md" not in hash_cli("stats").stderr
    doctor = hash_cli("doctor", "--json", ok=False)
    assert doctor.exit_code != 0
    report = json.loads(doctor.stdout)
    assert report["ok"] is False
    bad = [c for c in report["checks"] if not c["ok"]]
    assert bad and all("broken.md" in c["detail"] for c in bad)
    # fixing the file by hand brings it in
    (hash_cli.store / "facts" / "broken.md").write_text(BROKEN.replace("[unclosed", "[fixed]"))
    assert listing(hash_cli)["broken"] == "This file has broken front matter."
    assert hash_cli("doctor").exit_code == 0


def test_a_good_file_turned_bad_leaves_search_until_fixed(hash_cli):
    ids = fill(hash_cli)
    path = hash_cli.store / "facts" / f"{ids[0]}.md"
    good = path.read_bytes()
    path.write_bytes(b"\x00\x01 binary garbage")
    r = hash_cli("list", "--json")
    assert f"{ids[0]}.md" in r.stderr
    assert ids[0] not in {x["id"] for x in json.loads(r.stdout)["memories"]}
    path.write_bytes(good)
    assert ids[0] in listing(hash_cli)


# --- a deleted, stale or corrupt sidecar --------------------------------------------------------


def test_deleting_the_index_rebuilds_it_with_identical_results(hash_cli):
    fill(hash_cli)
    query = "database reset Sunday"
    before = json.loads(hash_cli("search", "--json", "-k", "5", "--threshold", "0", query).stdout)["results"]
    listed = listing(hash_cli)
    shutil.rmtree(hash_cli.store / ".index")
    after = json.loads(hash_cli("search", "--json", "-k", "5", "--threshold", "0", query).stdout)["results"]
    assert [r["id"] for r in after] == [r["id"] for r in before]
    assert [r["similarity"] for r in after] == [r["similarity"] for r in before]
    assert listing(hash_cli) == listed
    assert hash_cli("doctor").exit_code == 0


def test_rebuild_from_a_kept_cache_embeds_nothing(real_store):
    for t in NOTES:
        real_store.add(t, raw=True)
    query = NOTES[0]  # already in the embedding cache
    before = [(h.id, round(h.similarity, 5)) for h in real_store.search(query, record_usage=False)]
    real_store.close()
    shutil.rmtree(real_store.path / ".index")

    fresh = Store(real_store.path)
    try:
        report = fresh.index.sync()
        assert report.added == len(NOTES)
        after = [(h.id, round(h.similarity, 5)) for h in fresh.search(query, record_usage=False)]
        assert after == before
        assert fresh.index.embedder.model_loads == 0
        assert fresh.index.embedder.computed == 0
    finally:
        fresh.close()


def test_an_unchanged_store_does_no_work(hash_store):
    for t in NOTES:
        hash_store.add(t, raw=True)
    hash_store.close()
    again = Store(hash_store.path, Config(embed_model="hash:256"))
    try:
        report = again.index.sync()
        assert not report.touched
        assert again.index.count() == len(NOTES)
    finally:
        again.close()


def vector_dims(store: Store) -> set[int]:
    rows = store.index.db.execute("SELECT vec FROM mem").fetchall()
    return {len(r[0]) // 4 for r in rows}


def test_changing_the_model_rebuilds_with_the_new_dimension(hash_store):
    for t in NOTES:
        hash_store.add(t, raw=True)
    assert vector_dims(hash_store) == {256}
    path = hash_store.path
    hash_store.close()

    small = Store(path, Config(embed_model="hash:128"))
    try:
        report = small.index.sync()
        assert report.rebuilt and "model" in report.rebuilt
        small.add("Sentry receives frontend errors and pages on-call.", raw=True)
        assert vector_dims(small) == {128}
        assert small.index.meta("dim") == "128" and small.index.meta("model") == "hash:128"
        hits = small.search(NOTES[1], record_usage=False)
        assert hits.hits[0].memory.text == NOTES[1]
        assert abs(hits.hits[0].similarity - 1.0) < 1e-4
        assert small.index.count() == len(NOTES) + 1
    finally:
        small.close()


def test_changing_the_model_through_the_environment(tmp_path):
    cli256 = Cli(tmp_path / "store", env={"MEMCLI_EMBED_MODEL": "hash:256"})
    cli128 = Cli(tmp_path / "store", env={"MEMCLI_EMBED_MODEL": "hash:128"})
    ids = fill(cli256, NOTES[:3])
    r = cli128("search", "--json", NOTES[2])
    assert "rebuilt" in r.stderr
    assert json.loads(r.stdout)["results"][0]["id"] == ids[2]
    doctor = json.loads(cli128("doctor", "--json").stdout)
    assert doctor["ok"] is True
    assert any("128" in c["detail"] for c in doctor["checks"] if c["check"] == "embedding model")
    s = Store(tmp_path / "store", Config(embed_model="hash:128"))
    try:
        s.index.sync()
        assert vector_dims(s) == {128}
    finally:
        s.close()
    # and back: no 128-d vector survives in a 256-d index
    assert json.loads(cli256("search", "--json", NOTES[0]).stdout)["results"][0]["id"] == ids[0]
    s = Store(tmp_path / "store", Config(embed_model="hash:256"))
    try:
        s.index.sync()
        assert vector_dims(s) == {256}
    finally:
        s.close()


def test_a_corrupt_vector_file_heals(hash_cli):
    ids = fill(hash_cli)
    files = list((hash_cli.store / ".index").glob("vectors-*.hnsw"))
    assert files
    for p in files:
        p.write_bytes(b"\x00garbage" * 50)
    assert search_ids(hash_cli, NOTES[4])[0] == ids[4]
    assert hash_cli("doctor").exit_code == 0
    hash_cli("add", "--raw", "Sentry receives frontend errors and pages on-call.")
    assert len(listing(hash_cli)) == len(ids) + 1
    assert search_ids(hash_cli, NOTES[3])[0] == ids[3]


def test_a_corrupt_catalog_heals(hash_cli):
    ids = fill(hash_cli)
    facts = facts_snapshot(hash_cli.store)
    (hash_cli.store / ".index" / "catalog.sqlite").write_bytes(b"this is not a database " * 200)
    assert set(listing(hash_cli)) == set(ids)
    assert search_ids(hash_cli, NOTES[1])[0] == ids[1]
    assert hash_cli("doctor").exit_code == 0
    assert facts_snapshot(hash_cli.store) == facts


def test_reindex_rebuilds_everything(hash_cli):
    ids = fill(hash_cli)
    out = json.loads(hash_cli("reindex", "--json").stdout)
    assert out["memories"] == len(ids)
    assert set(listing(hash_cli)) == set(ids)


def test_hand_edited_tags_are_seen_by_filters(hash_cli):
    ids = fill(hash_cli)
    path = hash_cli.store / "facts" / f"{ids[3]}.md"
    text = path.read_text()
    assert "\ntags: []\n" in text
    path.write_text(text.replace("\ntags: []\n", "\ntags: [rollout, vendor]\n"))
    tagged = json.loads(hash_cli("list", "--json", "--tag", "rollout").stdout)["memories"]
    assert [r["id"] for r in tagged] == [ids[3]]
    assert search_ids(hash_cli, "LaunchDarkly flags", "--tag", "vendor") == [ids[3]]


def test_editor_leftovers_are_neither_indexed_nor_reported(hash_cli):
    ids = fill(hash_cli, NOTES[:2])
    facts = hash_cli.store / "facts"
    (facts / f".{ids[0]}.md.swp").write_bytes(b"\x00vim swap")
    (facts / f".#{ids[0]}.md").write_text("emacs lock")
    (facts / f"{ids[0]}.md~").write_text("backup copy")
    (facts / "README.txt").write_text("not a memory")
    r = hash_cli("list", "--json")
    assert r.stderr.count("skipping") == 0
    assert sorted(x["id"] for x in json.loads(r.stdout)["memories"]) == sorted(ids)
    assert hash_cli("doctor").exit_code == 0


def test_odd_queries_and_unicode_text(hash_cli):
    ids = fill(hash_cli, ["Café crème costs €3 at the 日本 office.", "C++ builds use `-O2 -Wall` flags."])
    assert listing(hash_cli)[ids[0]] == "Café crème costs €3 at the 日本 office."
    assert search_ids(hash_cli, "Café crème")[0] == ids[0]
    for q in ['"unbalanced', "C++ AND (x OR y*)", "NEAR(a b)", "-O2", "the of and", "🙂"]:
        r = hash_cli("search", "--json", "--", q)
        assert isinstance(json.loads(r.stdout)["results"], list), q


def test_many_deletions_compact_the_vector_index(hash_store):
    from memcli.ops.io import import_memories, to_memories

    recs = [{"text": f"Note number {i}: service s{i} runs on port {9000 + i}."} for i in range(1500)]
    import_memories(files(hash_store), to_memories(recs, "bulk", "import:bulk"))
    for path in sorted(hash_store.facts_dir.glob("*.md"))[:1200]:
        path.unlink()
    hash_store.add("The cache service s9999 runs on port 6379.", raw=True)
    index = hash_store.index
    assert index.count() == 301
    assert index.vec.load().element_count == 301  # rebuilt without the 1,200 tombstones
    (hit, *_) = hash_store.search("service s9999 port 6379", k=3).hits
    assert hit.memory.text == "The cache service s9999 runs on port 6379."


def test_a_graph_that_fails_while_the_rows_are_written_leaves_the_catalog_as_it_was(hash_store, monkeypatch):
    """The vectors go into the graph in a thread while the commit writes its rows: when the graph
    fails there, the rows are rolled back with it (the catalog never lists a memory its graph lacks),
    the add itself succeeds (its file is written and logged) with a notice, and the next command
    indexes the file."""
    from memcli.index.vectors import Vectors

    hash_store.add("The weekly restore drill runs on Tuesdays.", raw=True)
    index = hash_store.index
    real_insert = Vectors.insert

    def broken(self, h, vecs, labels):
        raise RuntimeError("graph broke")

    monkeypatch.setattr(Vectors, "insert", broken)
    hash_store.add("Deploys freeze on Fridays after 15:00.", raw=True)  # the file is written, the index not
    from memcli.storage.safety import drain

    assert any("index could not be updated (graph broke)" in n for n in drain())
    assert index.count() == 1 and len(list(hash_store.facts_dir.glob("*.md"))) == 2
    assert "Deploys freeze on Fridays after 15:00." in hash_store.log_path.read_text()
    monkeypatch.setattr(Vectors, "insert", real_insert)
    index.sync()
    assert index.count() == 2 and index.vec.load().element_count == 2
    (hit, *_) = hash_store.search("deploy freeze friday", k=1).hits
    assert hit.memory.text == "Deploys freeze on Fridays after 15:00."


def test_a_bug_in_the_index_update_is_raised_not_turned_into_a_notice(hash_store, monkeypatch):
    """Only hnswlib's own RuntimeError makes a failed index update a notice: its subclasses
    (RecursionError, NotImplementedError) are bugs, and the command fails with them."""
    from memcli.index.vectors import Vectors

    hash_store.add("The weekly restore drill runs on Tuesdays.", raw=True)

    def broken(self, h, vecs, labels):
        raise RecursionError("a bug")

    monkeypatch.setattr(Vectors, "insert", broken)
    with pytest.raises(RecursionError):
        hash_store.add("Deploys freeze on Fridays after 15:00.", raw=True)


def test_a_sync_reports_only_what_it_embedded_itself(hash_store):
    hash_store.add("The nightly backup runs at 03:00 UTC.", raw=True)
    assert hash_store.index.embedder.computed == 1
    report = hash_store.index.sync(force=True)  # same process, same embedder: everything is cached
    assert report.rebuilt == "reindex requested" and report.embedded == 0


# --- what the catalog returns -------------------------------------------------------------------

HAND_WRITTEN = {
    # a hand-made file: no id, a bare date, camelCase flags of 0.1, a key of your own holding a date
    "hand-made": "---\ntype: procedural\ntags: deploy, ci\ncreated: 2026-01-05\nhasCommand: true\n"
                 "reviewed: 2026-02-01T08:00:00Z\njira: {key: OPS-1, points: 2}\n---\nRun `make deploy` from main.\n",
    # a declared id that is not the file name, history, links, confidence with many decimals
    "renamed": "---\nid: OTHER\nconfidence: 0.123456\nhistory:\n- event: UPDATE\n  at: 2026-03-01T00:00:00Z\n"
               "  old: before\nlinks:\n- {rel: contradicts, id: hand-made}\nsuperseded_by: hand-made\n---\nAfter.\n",
    "bom": "\ufeff---\ntags: [a]\n---\nA file saved with a BOM.\n",
    "no-front-matter": "Just a line of text, no front matter at all.\n",
}


def test_the_catalog_returns_the_memory_its_file_holds(tmp_path):
    """Every read of the catalog gives the `Memory` that parsing `facts/<id>.md` gives, on every
    field the catalog keeps (confidence as the file writes it, to 4 decimals)."""
    from memcli.core.memory import Memory

    root = Path(__file__).resolve().parent.parent / "sample_memories"
    store = Store(tmp_path / "store", Config(embed_model="hash:64"))
    store.init()
    for p in (root / "facts").glob("*.md"):
        shutil.copy(p, store.facts_dir / p.name)
    for name, text in HAND_WRITTEN.items():
        (store.facts_dir / f"{name}.md").write_bytes(text.encode("utf-8"))
    try:
        store.index.sync()
        expected = {}
        for p in sorted(store.facts_dir.glob("*.md")):
            m = Memory.parse(p.read_bytes(), file_id=p.stem)
            m.confidence = round(m.confidence, 4)
            expected[m.id] = m
        assert len(expected) == len(list((root / "facts").glob("*.md"))) + len(HAND_WRITTEN)
        index = store.index
        ids = list(expected)
        labels = index.labels_of(ids)
        reads = {
            "select": {m.id: m for m in index.select()},
            "iter_select": {m.id: m for m in index.iter_select()},
            "records_of": index.records_of(ids),
            "records": {m.id: m for m in index.records(labels.values()).values()},
            "catalog_entries": {mid: e[0] for mid, e in index.catalog_entries(ids).items()},
        }
        for name, got in reads.items():
            assert set(got) == set(expected), name
            for mid, m in got.items():
                assert isinstance(m, Memory), name
                if mid in HAND_WRITTEN and "created:" not in HAND_WRITTEN[mid]:  # each reading says "now"
                    expected[mid].created, expected[mid].updated = m.created, m.updated
                assert m == expected[mid], (name, mid)
                assert m.to_dict() == expected[mid].to_dict(), (name, mid)
                assert m.to_markdown() == expected[mid].to_markdown(), (name, mid)  # dates stay unquoted
        assert reads["select"]["renamed"].superseded_by == "hand-made"
        assert reads["select"]["hand-made"].flags == {"hasCommand": True}
        fields = index.rank_fields(labels.values())
        for mid, lab in labels.items():
            f, m = fields[lab], expected[mid]
            assert (f.id, f.created, f.updated) == (m.id, m.created, m.updated)
            assert f.superseded == (m.superseded_by is not None)
            assert abs(f.confidence - m.confidence) <= 5e-5  # the column keeps the file's own decimals
    finally:
        store.close()


def test_the_step_hook_sees_every_step_of_a_search_and_changes_nothing(hash_store, monkeypatch):
    import memcli.ops.search as search

    for t in NOTES:
        hash_store.add(t, raw=True)
    now = search.time.time()
    monkeypatch.setattr(search.time, "time", lambda: now)  # recency: the same "now" for both searches
    plain = [(h.id, h.score) for h in hash_store.search(NOTES[0], k=3, record_usage=False)]
    seen: list[str] = []
    monkeypatch.setattr(search, "STEP_HOOK", seen.append)
    hooked = [(h.id, h.score) for h in hash_store.search(NOTES[0], k=3, record_usage=False)]
    assert hooked == plain and plain
    assert seen[0] == "start" and seen[-1] == "hits, metadata, usage counts"
    assert {"Index.knn", "Index.keyword", "rank", "MMR"} <= set(seen) and len(seen) == len(set(seen))


def _fifty_notes(tmp_path) -> Store:
    """A store of 50 short notes (hash:64 embedder), its index in step: for the kNN pass's tests."""
    cli = Cli(tmp_path / "store", env={"MEMCLI_EMBED_MODEL": "hash:64"})
    cli("import", "-", input=json.dumps([{"text": f"Note {i}: service-{i % 7} listens on port {8000 + i}."}
                                         for i in range(50)]))
    store = Store(cli.store, Config(embed_model="hash:64"))
    store.index.sync()
    return store


def test_the_knn_pass_is_the_same_in_batches_and_with_a_threshold(tmp_path):
    """Curation's one kNN pass (`neighbour_arrays`): searching in batches gives the arrays of one
    search, each row's own memory is never its neighbour, and a threshold only blanks (-1) the
    neighbours below it."""
    import numpy as np

    store = _fifty_notes(tmp_path)
    whole = store.index.neighbour_arrays(4)
    batched = store.index.neighbour_arrays(4, batch=8)
    assert batched[0] == whole[0] and len(whole[0]) == 50
    for a, b in zip(whole[1:], batched[1:]):
        assert np.array_equal(a, b)
    ids, _, nbr, sims = whole
    assert not (nbr == np.arange(50)[:, None]).any()
    cut = float(np.median(sims[nbr >= 0]))
    _, _, close, _ = store.index.neighbour_arrays(4, threshold=cut)
    assert np.array_equal(close, np.where(sims >= cut, nbr, -1))
    store.close()
