"""The one write path: plan (no lock) -> preview (dry run) -> commit (lock once, re-check, write,
log, index once). What a user would check: a slow model never blocks another writer, a person's
edit is never overwritten with a stale copy, a dry run shows exactly what the real run does."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from conftest import HASH, Cli, files, run_memcli
from llm_server import FakeLLMServer

from memcli.api import Store
from memcli.core.config import Config
from memcli.core.errors import Conflict, StoreError
from memcli.core.memory import Memory
from memcli.index.sync import Sync
from memcli.ops.changes import ChangeSet, Link, Reinforce, Update
from memcli.ops.curate import consolidate, plan_consolidate

BASE = "Redis runs on port 6379 in every environment."
DUP = "The staging database is reset every Sunday at 02:00 UTC."


def _load(cli: Cli, records: list[dict]) -> dict[str, str]:
    cli("import", "-", input=json.dumps(records))
    listed = json.loads(cli("list", "--json", "--sort", "id").stdout)["memories"]
    return {r["id"]: r["text"] for r in listed}


def _facts(store: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((store / "facts").glob("*.md"))}


def test_a_slow_llm_merge_does_not_block_a_concurrent_add(tmp_path: Path) -> None:
    """consolidate asks the model while planning, with no lock: an `add` from a git hook lands
    while the model is still thinking, and consolidate then commits. The model answers only once
    the add is done (a gate, not a delay the add had to beat: a busy machine cannot fail it)."""
    env = {"MEMCLI_EMBED_MODEL": HASH}
    cli = Cli(tmp_path / "store", env=env)
    _load(cli, [{"text": DUP, "origins": ["session:a"]}, {"text": DUP, "origins": ["session:b"]}])
    answer = threading.Event()
    with FakeLLMServer() as server:
        server.script([{"content": "The staging DB is reset every Sunday at 02:00 UTC.", "gate": answer}])
        llm = {"MEMCLI_LLM_MODEL": server.model, "MEMCLI_LLM_API_BASE": server.url, "MEMCLI_LLM_RETRIES": "0",
               "MEMCLI_LLM_TIMEOUT": "120"}
        result: dict[str, object] = {}

        def run() -> None:
            result["proc"] = run_memcli("--store", str(cli.store), "consolidate", "--json", env={**env, **llm})

        worker = threading.Thread(target=run)
        worker.start()
        try:
            deadline = time.monotonic() + 120
            while not server.requests and time.monotonic() < deadline:  # the model is thinking now
                time.sleep(0.05)
            assert server.requests, "consolidate never asked the model"
            # a lock held by consolidate would fail this add after 1 s
            add = run_memcli("--store", str(cli.store), "add", "--raw", "--no-llm", "Deploys are frozen on Fridays.",
                             env={**env, "MEMCLI_LOCK_TIMEOUT": "1"})
            still_thinking = worker.is_alive()
        finally:
            answer.set()
            worker.join(120)
    assert add.returncode == 0, add.stderr
    assert still_thinking, "consolidate ended before the add finished: the test proved nothing"
    proc = result["proc"]
    assert proc.returncode == 0, proc.stderr  # type: ignore[attr-defined]
    report = json.loads(proc.stdout)  # type: ignore[attr-defined]
    assert report["merged"][0]["method"] == "llm"
    texts = sorted(r["text"] for r in json.loads(cli("list", "--json").stdout)["memories"])
    assert texts == ["Deploys are frozen on Fridays.", "The staging DB is reset every Sunday at 02:00 UTC."]


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Store, Cli, list[str]]:
    cli = Cli(tmp_path / "store", env={"MEMCLI_EMBED_MODEL": HASH})
    ids = list(_load(cli, [{"text": DUP, "origins": ["session:a"]}, {"text": DUP, "origins": ["session:b"]},
                           {"text": "Alice owns the billing module.", "origins": ["session:c"]}]))
    store = Store(cli.store, Config(embed_model=HASH))
    yield store, cli, ids
    store.close()


def test_a_dry_run_is_the_plan_and_writes_nothing(pair) -> None:
    store, cli, ids = pair
    before = _facts(cli.store)
    log_before = (cli.store / "log.jsonl").read_bytes()
    cs, report = plan_consolidate(files(store), use_llm=False)
    ops = [(c["op"], c["id"]) for c in cs.preview()]
    merged = report.merged[0]["id"]
    assert ("MERGE", merged) in ops and sorted(i for op, i in ops if op == "MERGED") == sorted(ids[:2])
    assert _facts(cli.store) == before and (cli.store / "log.jsonl").read_bytes() == log_before
    dry = consolidate(files(store), dry_run=True, use_llm=False)
    assert [m["merged_from"] for m in dry.merged] == [m["merged_from"] for m in report.merged]
    assert _facts(cli.store) == before
    done = cs.commit()
    assert done.written == [merged] and sorted(done.trashed) == sorted(ids[:2])
    assert set(_facts(cli.store)) == {f"{merged}.md", f"{ids[2]}.md"}
    listed = json.loads(cli("list", "--json").stdout)["memories"]  # the index was updated by the commit itself
    assert sorted(r["id"] for r in listed) == sorted([merged, ids[2]])


def test_a_dry_run_plan_is_the_real_plan_and_cannot_be_committed(pair) -> None:
    """A dry run takes the memories the catalog knows without opening their files (nothing will
    compare their hashes): its plan is the real run's, and it refuses to be committed."""
    store, cli, ids = pair
    before = _facts(cli.store)
    real, real_report = plan_consolidate(files(store), use_llm=False)
    dry, dry_report = plan_consolidate(files(store), use_llm=False, preview=True)
    assert dry_report.merged and [m["merged_from"] for m in dry_report.merged] == \
        [m["merged_from"] for m in real_report.merged]
    assert [m["text"] for m in dry_report.merged] == [m["text"] for m in real_report.merged]
    assert [(c["op"], c["id"]) for c in dry.preview() if c["op"] != "MERGE"] == \
        [(c["op"], c["id"]) for c in real.preview() if c["op"] != "MERGE"]
    with pytest.raises(StoreError, match="dry-run"):
        dry.commit()
    assert _facts(cli.store) == before


def test_a_stale_update_is_refused_and_nothing_is_written(pair) -> None:
    store, cli, ids = pair
    cs = ChangeSet(files(store))
    cs.edit(ids[0], Update("The staging database is reset on Sundays and Wednesdays."))
    cs.trash(ids[2], "test")
    path = cli.store / "facts" / f"{ids[0]}.md"
    edited = path.read_text().replace("every Sunday", "every Saturday")
    path.write_text(edited)  # a person edits the file between planning and commit
    before = _facts(cli.store)
    log_before = (cli.store / "log.jsonl").read_bytes()
    with pytest.raises(Conflict, match=ids[0]):
        cs.commit()
    assert _facts(cli.store) == before and path.read_text() == edited
    assert (cli.store / "log.jsonl").read_bytes() == log_before


def test_a_reinforcement_of_an_edited_file_is_replanned_on_the_new_text(pair) -> None:
    store, cli, ids = pair
    cs = ChangeSet(files(store))
    cs.edit(ids[2], Reinforce(["git:abc1234"]), origin=["git:abc1234"])
    cs.edit(ids[2], Link("see_also", ids[0]), quiet=True)
    path = cli.store / "facts" / f"{ids[2]}.md"
    path.write_text(path.read_text().replace("Alice owns", "Alice and Bob own"))
    report = cs.commit()
    assert report.rebased == [ids[2]]
    m = Memory.parse(path.read_bytes(), file_id=ids[2])
    assert m.text == "Alice and Bob own the billing module."
    assert m.origins == ["session:c", "git:abc1234"] and {"rel": "see_also", "id": ids[0]} in m.links


def test_commit_updates_the_index_without_a_rescan(pair, monkeypatch) -> None:
    store, cli, ids = pair
    store.index.sync()
    calls: list[str] = []
    real_scan = Sync._scan  # the one scan of facts/ (memcli/index/sync.py)

    def counting_scan(self):  # noqa: ANN001, ANN202
        calls.append("scan")
        return real_scan(self)

    monkeypatch.setattr(Sync, "_scan", counting_scan)
    cs = ChangeSet(files(store))
    cs.trash(ids[2], "removed in a test", event="RM")
    cs.commit()
    assert calls == []
    assert store.index.count() == 2 and ids[2] not in store.index.records_of(ids)
    log = [json.loads(line) for line in (cli.store / "log.jsonl").read_text().splitlines()]
    assert log[-1]["event"] == "RM" and log[-1]["id"] == ids[2]


def test_every_edit_made_during_add_and_consolidate_survives_or_is_reported(tmp_path: Path) -> None:
    """A person rewrites a memory in a tight loop while `add` reinforces it and `consolidate`
    runs: after each command the file holds the person's last edit (plus the command's own
    change), or the command said Conflict and left the file as the person wrote it."""
    env = {"MEMCLI_EMBED_MODEL": HASH}
    cli = Cli(tmp_path / "store", env=env)
    ids = list(_load(cli, [{"text": BASE, "origins": ["session:x"]},
                           {"text": DUP, "origins": ["session:a"]}, {"text": DUP, "origins": ["session:b"]}]))
    target = cli.store / "facts" / f"{ids[0]}.md"
    stop = threading.Event()
    written: list[str] = []

    def person() -> None:
        """Adds a front-matter line of their own, `reviewed: edit N`, and saves like an editor."""
        n = 0
        while not stop.is_set():
            n += 1
            head, body = target.read_text().split("\n---\n", 1)
            head = "\n".join(line for line in head.splitlines() if not line.startswith("reviewed:"))
            tmp = target.with_name(f".{target.name}.person")
            tmp.write_text(f"{head}\nreviewed: edit {n}\n---\n{body}")
            tmp.replace(target)  # an editor's atomic save
            written.append(f"edit {n}")
            time.sleep(0.002)

    editor = threading.Thread(target=person)
    editor.start()
    outcomes = []
    try:
        for n in range(3):  # "seen again": a reinforcement of the memory the person is editing
            outcomes.append(cli("add", "--raw", "--no-llm", "--json", "--origin", f"git:feed00{n}", BASE, ok=False))
        outcomes.append(cli("consolidate", "--no-llm", ok=False))
    finally:
        stop.set()
        editor.join()
    for r in outcomes:
        assert r.exit_code == 0 or "changed while this command ran" in r.stderr, r.output
    reinforced = [json.loads(r.stdout)["memory"][0] for r in outcomes[:3] if r.exit_code == 0]
    assert reinforced and all(e["event"] == "NONE" and e["id"] == ids[0] for e in reinforced)
    final = Memory.parse(target.read_bytes(), file_id=ids[0])
    assert final.extra["reviewed"] == written[-1]  # the person's last edit is what the file says
    assert final.text == BASE
    # the next command sees the edit too: nothing stale was written over it
    assert json.loads(cli("show", "--json", ids[0]).stdout)["reviewed"] == written[-1]
