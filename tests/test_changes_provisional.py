"""Provisional vectors: a bulk curation commit on a cold embedding cache does not wait for the model.

A merge of many groups (on a store just imported, the merged texts are in no cache) indexes each
merged memory with its newest source's vector, taking over that source's row and graph node; a
detached worker (or `memcli reindex --provisional`) then computes the exact vectors. These tests
check what a user relies on: search still finds the merged memories, the refresh makes every
vector its own text's, nothing provisional ever reaches the embedding cache, a person's edit or a
concurrent commit is never overwritten by the refresh, and small merges stay exact.

`PROVISIONAL_MIN` is lowered per test (the real threshold is 128 texts), so the stores stay small.
Similarity and search are asserted with the real default model only; plumbing uses the hash one.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import HASH, Cli, files

from memcli.api import Store
from memcli.core.config import Config
from memcli.core.memory import Memory, new_ulid
from memcli.ops import changes
from memcli.ops.changes import ChangeSet, Update
from memcli.ops.curate import merge_groups
from memcli.services import detached
from memcli.services.embed import Embedder, text_hash

# Eight facts, each said twice with a different detail: eight groups of two to merge, and each
# merged text (the newer wording plus the older detail) is a text no cache holds.
PAIRS = [
    ("The staging database password rotates every 90 days. The vault holds the current one.",
     "The staging database password rotates every 90 days. Ask the platform team for access."),
    ("Deploys to production happen on Tuesdays and Thursdays. Never deploy on Fridays.",
     "Deploys to production happen on Tuesdays and Thursdays. The release channel approves them."),
    ("The payments service retries a failed webhook five times. Backoff is exponential.",
     "The payments service retries a failed webhook five times. Failures page the on-call."),
    ("Our Kubernetes cluster runs in the eu-west-1 region. A standby runs in eu-central-1.",
     "Our Kubernetes cluster runs in the eu-west-1 region. Terraform manages its node pools."),
    ("The frontend is built with Vite and served from a CDN. Assets are cached for a day.",
     "The frontend is built with Vite and served from a CDN. Preview builds go to Netlify."),
    ("Alice owns the billing reconciliation job. She reviews its alerts every morning.",
     "Alice owns the billing reconciliation job. Bob covers for her in August."),
    ("The search API paginates with an opaque cursor. Cursors expire after ten minutes.",
     "The search API paginates with an opaque cursor. Page size is capped at 100."),
    ("Integration tests need a local Redis on port 6380. Start it with make services.",
     "Integration tests need a local Redis on port 6380. CI uses a Redis container."),
]


def _write_pairs(store: Store) -> list[list[str]]:
    """Write the pairs (the second wording newer), index them; returns the groups (ids)."""
    groups = []
    for n, (old, new) in enumerate(PAIRS):
        a = Memory(id=f"01PAIR{n:02d}A{'0' * 17}", text=old, updated="2026-01-01T00:00:00Z")
        b = Memory(id=f"01PAIR{n:02d}B{'0' * 17}", text=new, updated="2026-02-01T00:00:00Z")
        files(store).write(a)
        files(store).write(b)
        groups.append([a.id, b.id])
    store.index.sync()
    return groups


def vector(store: Store, mid: str) -> np.ndarray:
    """A memory's vector as the catalog holds it."""
    label = store.index.labels_of([mid])[mid]
    return np.array(store.index.vectors([label])[0])


def graph_vector(store: Store, mid: str) -> np.ndarray:
    """A memory's vector as the hnswlib graph holds it (what search's kNN reads)."""
    label = store.index.labels_of([mid])[mid]
    return np.asarray(store.index.vec.load().get_items([label]), dtype=np.float32)[0]


@pytest.fixture
def cold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An embedding cache of this test's own: the merged texts are in no cache (a user's first
    bulk merge after `memcli import`); commits of 4 new texts or more go provisional."""
    monkeypatch.setenv("MEMCLI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(changes, "PROVISIONAL_MIN", 4)
    return tmp_path / "store"


def _merged(store_path: Path, config: Config | None = None) -> tuple[Store, list]:
    """A store with the pairs, merged in one commit by a fresh process-like Store (a new embedder)."""
    s = Store(store_path, config)
    s.init()
    groups = _write_pairs(s)
    s.close()
    store = Store(store_path, config)
    store.index.sync()
    results = merge_groups(files(store), groups, use_llm=False)
    return store, results


# --- real model: no model load, search still works, refresh makes them exact ----------------------


def test_bulk_merge_on_a_cold_cache_loads_no_model_and_search_finds_the_merged_memories(cold: Path) -> None:
    store, results = _merged(cold)
    try:
        assert store.index.embedder.model_loads == 0  # the commit found no vector to compute
        assert store.index.provisional_count() == len(PAIRS)
        # no provisional vector in the cache: a new embedder finds none of the merged texts
        assert Embedder(cache=Path(os.environ["MEMCLI_CACHE_DIR"])).cached([r.merged.text for r in results]) == {}
        # each merged memory has its newest source's vector, in the catalog and in the graph
        reference = Embedder()
        for r in results:
            newest = reference.embed([r.texts[-1]])[0]
            assert np.allclose(vector(store, r.merged.id), newest, atol=1e-6)
            assert np.allclose(graph_vector(store, r.merged.id), newest, atol=1e-5)
        # search finds every merged memory by its own words, first
        for r in results:
            hits = store.search(r.merged.text, k=3)
            assert hits.hits[0].id == r.merged.id, (r.merged.text, [h.memory.text for h in hits.hits])

        refreshed = store.index.refresh_provisional()
        assert refreshed == len(PAIRS)
        assert store.index.provisional_count() == 0
        exact = reference.embed([r.merged.text for r in results])
        for r, want in zip(results, exact):
            assert np.allclose(vector(store, r.merged.id), want, atol=1e-6)
            assert np.allclose(graph_vector(store, r.merged.id), want, atol=1e-5)
            assert store.search(r.merged.text, k=1).hits[0].id == r.merged.id
        # the cache now holds the exact vectors (computed by the refresh), never the stand-ins
        cached = Embedder(cache=Path(os.environ["MEMCLI_CACHE_DIR"])).cached([r.merged.text for r in results])
        for r, want in zip(results, exact):
            assert np.allclose(cached[text_hash(r.merged.text)], want, atol=1e-6)
    finally:
        store.close()


def test_a_small_merge_stays_exact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A user's `memcli merge A B` (one new text, below PROVISIONAL_MIN) embeds as it goes."""
    monkeypatch.setenv("MEMCLI_CACHE_DIR", str(tmp_path / "cache"))
    cli = Cli(tmp_path / "store")
    cli("add", "--raw", PAIRS[0][0])
    cli("add", "--raw", "--no-dedup", PAIRS[0][1])
    ids = [m["id"] for m in json.loads(cli("list", "--json").stdout)["memories"]]
    out = json.loads(cli("merge", "--json", *ids).stdout)
    assert out["provisional_vectors"] == 0
    store = Store(cli.store)
    try:
        merged = out["merged"][0]
        assert np.allclose(vector(store, merged["id"]), Embedder().embed([merged["text"]])[0], atol=1e-6)
        assert store.index.provisional_count() == 0
    finally:
        store.close()


# --- plumbing (hash embedder) --------------------------------------------------------------------


@pytest.fixture
def hashed(cold: Path) -> tuple[Store, list]:
    store, results = _merged(cold, Config(embed_model=HASH))
    yield store, results
    store.close()


def test_a_merged_memory_takes_over_its_newest_sources_row(hashed: tuple[Store, list]) -> None:
    store, results = hashed
    index = store.index
    assert index.provisional_count() == len(PAIRS)
    assert index.count() == len(PAIRS)  # the sources left; no row or label was added
    assert len(index.vec.load().get_ids_list()) == 2 * len(PAIRS)  # no graph node was inserted
    assert index.vector_count() == index.count()
    taken = {index.labels_of([r.merged.id])[r.merged.id] for r in results}
    assert len(taken) == len(PAIRS)


def test_a_file_edited_by_hand_gets_an_exact_vector_and_the_refresh_leaves_it(hashed: tuple[Store, list]) -> None:
    store, results = hashed
    edited = results[0].merged.id
    path = files(store).fact_path(edited)
    m = Memory.parse(path.read_bytes(), file_id=edited)
    m.text = "Rotate the staging database password by hand in the vault."
    path.write_text(m.to_markdown(), encoding="utf-8")
    store.index.sync()
    exact = store.index.embedder.embed([m.text])[0]
    assert np.allclose(vector(store, edited), exact)
    assert store.index.provisional_count() == len(PAIRS) - 1
    assert store.index.refresh_provisional() == len(PAIRS) - 1
    assert np.allclose(vector(store, edited), exact) and np.allclose(graph_vector(store, edited), exact, atol=1e-5)
    for r in results[1:]:
        assert np.allclose(vector(store, r.merged.id), store.index.embedder.embed([r.merged.text])[0])


def test_a_commit_landing_while_the_refresh_embeds_is_not_overwritten(hashed: tuple[Store, list],
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    store, results = hashed
    target = results[1].merged.id
    new_text = "Production deploys: Tuesdays and Thursdays, approved in the release channel."
    embedder = store.index.embedder
    plain = embedder.embed

    def embed_then_commit(texts, **kw):  # noqa: ANN001, ANN202 - the embedder's own signature
        out = plain(texts, **kw)
        if results[1].merged.text in texts:  # the refresh's embedding, before its update
            other = Store(store.path, Config(embed_model=HASH))
            cs = ChangeSet(files(other))
            cs.edit(target, Update(new_text))
            cs.commit()
            other.close()
        return out

    monkeypatch.setattr(embedder, "embed", embed_then_commit)
    refreshed = store.index.refresh_provisional()
    monkeypatch.setattr(embedder, "embed", plain)
    assert refreshed == len(PAIRS) - 1
    assert store.index.provisional_count() == 0
    want = plain([new_text])[0]
    assert np.allclose(vector(store, target), want) and np.allclose(graph_vector(store, target), want, atol=1e-5)
    assert Memory.parse(files(store).fact_path(target).read_bytes(), file_id=target).text == new_text


def test_a_distilled_memory_borrows_its_sources_vector_and_the_sources_keep_theirs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMCLI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(changes, "PROVISIONAL_MIN", 1)
    store = Store(tmp_path / "store", Config(embed_model=HASH))
    store.init()
    try:
        groups = _write_pairs(store)
        a, b = groups[0]
        before = vector(store, b)
        cs = ChangeSet(files(store))
        made = cs.add(Memory(id=new_ulid(), text="Recurring (2 times): the staging password rotates."), event="DISTIL",
                      sources=[a, b], like=b)
        report = cs.commit()
        assert report.provisional == 1 and store.index.provisional_count() == 1
        assert np.allclose(vector(store, made.id), before) and np.allclose(vector(store, b), before)
        assert np.allclose(graph_vector(store, made.id), before, atol=1e-5)
        assert store.index.count() == 2 * len(PAIRS) + 1
        assert store.index.refresh_provisional() == 1
        assert np.allclose(vector(store, made.id), store.index.embedder.embed([made.text])[0])
        assert np.allclose(vector(store, b), before)
    finally:
        store.close()


def test_reindex_leaves_no_provisional_vector(hashed: tuple[Store, list]) -> None:
    store, results = hashed
    out = json.loads(Cli(store.path, env={"MEMCLI_EMBED_MODEL": HASH})("reindex", "--json").stdout)
    assert out["provisional_vectors"] == 0
    store.close()
    for r in results:
        assert np.allclose(vector(store, r.merged.id), store.index.embedder.embed([r.merged.text])[0])


def test_the_cli_reports_provisional_vectors_and_refreshes_them(cold: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(changes, "PROVISIONAL_MIN", 1)  # one merge is a bulk commit here
    cli = Cli(cold, env={"MEMCLI_EMBED_MODEL": HASH})
    s = Store(cold, Config(embed_model=HASH))
    s.init()
    groups = _write_pairs(s)
    s.close()
    r = cli("merge", "--no-llm", "--json", *groups[0])
    out = json.loads(r.stdout)
    n = 1
    assert out["provisional_vectors"] == n
    assert "1 merged memory indexed with a provisional vector" in r.stderr
    assert "memcli reindex --provisional" in r.stderr  # background work is off in this suite
    assert json.loads(cli("stats", "--json").stdout)["provisional_vectors"] == n
    assert re.search(rf"^provisional_vectors\s+{n}$", cli("stats").stdout, re.M)
    doctor = json.loads(cli("doctor", "--json").stdout)
    check = next(c for c in doctor["checks"] if c["check"] == "provisional vectors")
    assert check["ok"] and check["detail"].startswith(f"{n} merged memor")
    out = json.loads(cli("reindex", "--provisional", "--json").stdout)
    assert (out["refreshed"], out["provisional_vectors"]) == (n, 0)
    assert json.loads(cli("stats", "--json").stdout)["provisional_vectors"] == 0
    check = next(c for c in json.loads(cli("doctor", "--json").stdout)["checks"] if c["check"] == "provisional vectors")
    assert check["detail"] == "none"


# --- the background refresh ----------------------------------------------------------------------


def test_a_commit_with_provisional_vectors_starts_the_worker_unless_turned_off(
        cold: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[Path] = []
    monkeypatch.setattr(detached, "start_worker", lambda path: started.append(Path(path)))
    monkeypatch.delenv("MEMCLI_NO_BACKGROUND")
    store, _ = _merged(cold, Config(embed_model=HASH))
    store.close()
    assert started == [cold]

    started.clear()
    store, _ = _merged(cold.parent / "off-by-config", Config(embed_model=HASH, background=False))
    store.close()
    assert started == []
    monkeypatch.setenv("MEMCLI_NO_BACKGROUND", "1")
    store, _ = _merged(cold.parent / "off-by-env", Config(embed_model=HASH))
    store.close()
    assert started == []


def test_the_detached_worker_makes_the_vectors_exact(hashed: tuple[Store, list],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A real detached worker, as a commit starts it (the suite turns it off for every other test)."""
    store, results = hashed
    monkeypatch.delenv("MEMCLI_NO_BACKGROUND")
    monkeypatch.setenv("MEMCLI_EMBED_MODEL", HASH)  # the worker reads the store's model from its environment
    assert detached.start_refresh(store.path)
    deadline = time.monotonic() + 120
    while store.index.provisional_count() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert store.index.provisional_count() == 0
    for r in results:
        assert np.allclose(vector(store, r.merged.id), store.index.embedder.embed([r.merged.text])[0])
    # it leaves: the worker lock is free again once it is done
    lock = store.path / "inbox" / ".worker.lock"
    for _ in range(100):
        probe = subprocess.run([sys.executable, "-c", "import fcntl,sys; f=open(sys.argv[1],'a');"
                                "fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)", str(lock)], capture_output=True)
        if probe.returncode == 0:
            break
        time.sleep(0.1)
    assert probe.returncode == 0
    assert not (store.path / "inbox" / "errors.log").read_text()


def test_an_input_spooled_while_the_worker_refreshes_is_processed_by_it(hashed: tuple[Store, list],
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A hook that spools while the worker refreshes finds the worker lock held and starts no
    worker of its own: the refreshing worker processes that input before it leaves."""
    from memcli.agents import spool
    from memcli.index import Index

    store, _ = hashed
    monkeypatch.setenv("MEMCLI_EMBED_MODEL", HASH)
    monkeypatch.delenv("MEMCLI_NO_BACKGROUND")
    monkeypatch.setattr(os, "nice", lambda n: 0)  # in-process: leave the test run's priority alone
    refresh = Index.refresh_provisional

    def refresh_while_a_hook_spools(self, *args, **kw):  # noqa: ANN001, ANN202 - the method's own signature
        spool.spool(store.path, "The nightly backup job writes to the eu-west-1 bucket.", {"raw": True})
        return refresh(self, *args, **kw)

    monkeypatch.setattr(Index, "refresh_provisional", refresh_while_a_hook_spools)
    assert spool.main(["--store", str(store.path)]) == 0
    assert spool.pending(store.path) == []
    check = Store(store.path, Config(embed_model=HASH))
    try:
        check.index.sync()
        assert check.index.provisional_count() == 0
        assert check.index.find_exact("The nightly backup job writes to the eu-west-1 bucket.")
    finally:
        check.close()


def test_a_worker_leaves_provisional_vectors_alone_when_background_work_is_off(
        hashed: tuple[Store, list], monkeypatch: pytest.MonkeyPatch) -> None:
    """Turning background work off (env or config) also keeps the worker a hook starts for its
    inbox from loading the model for the refresh: the vectors wait for `reindex --provisional`."""
    from memcli.agents import spool

    store, _ = hashed
    monkeypatch.setenv("MEMCLI_EMBED_MODEL", HASH)
    monkeypatch.setattr(os, "nice", lambda n: 0)
    before = store.index.provisional_count()
    assert before and spool.main(["--store", str(store.path)]) == 0  # MEMCLI_NO_BACKGROUND=1 (the suite's)
    monkeypatch.delenv("MEMCLI_NO_BACKGROUND")
    (store.path / "config.toml").write_text("background = false\n")
    assert spool.main(["--store", str(store.path)]) == 0
    check = Store(store.path)
    try:
        assert check.index.provisional_count() == before
    finally:
        check.close()


def test_a_failed_refresh_is_recorded_with_the_inbox_results_and_not_retried_at_once(
        hashed: tuple[Store, list], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A worker whose refresh fails (no model) still records its inbox items' results, records
    the failure, and the workers of the next hooks leave the refresh alone for a while."""
    from memcli.agents import spool
    from memcli.core.errors import EmbedError
    from memcli.index import Index

    store, _ = hashed
    monkeypatch.setenv("MEMCLI_EMBED_MODEL", HASH)
    monkeypatch.delenv("MEMCLI_NO_BACKGROUND")
    monkeypatch.setattr(os, "nice", lambda n: 0)
    inbox = store.path / "inbox"
    inbox.mkdir(exist_ok=True)
    (inbox / "0001-broken.json").write_text("{not json")  # an item the worker cannot read
    calls = []
    refresh = Index.refresh_provisional

    def offline(self, *args, **kw):  # noqa: ANN001, ANN202 - the method's own signature
        calls.append(1)
        raise EmbedError("cannot load embedding model: offline")

    monkeypatch.setattr(Index, "refresh_provisional", offline)
    assert spool.main(["--store", str(store.path)]) == 0
    log = (inbox / "errors.log").read_text()
    assert "refresh of provisional vectors: EmbedError" in log and "waiting" in log
    assert spool.main(["--store", str(store.path)]) == 0  # the next hook's worker
    assert len(calls) == 1
    from memcli.cli.app import _provisional_note

    capsys.readouterr()
    assert _provisional_note(store)  # what a bulk merge now says: not "a background process is computing"
    assert "the last background refresh failed (see inbox/errors.log)" in capsys.readouterr().err
    old = time.time() - detached.REFRESH_RETRY_AFTER - 1
    os.utime(inbox / detached.REFRESH_FAILED, (old, old))
    monkeypatch.setattr(Index, "refresh_provisional", refresh)  # the model is back
    assert spool.main(["--store", str(store.path)]) == 0
    check = Store(store.path, Config(embed_model=HASH))
    try:
        assert check.index.provisional_count() == 0
    finally:
        check.close()
