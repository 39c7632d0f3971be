"""The store on disk: atomic writes, trash and restore, the change log, the writer lock, and which store is used."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HASH, files, run_memcli
from typer.testing import CliRunner

from memcli.api import Store
from memcli.cli.app import app
from memcli.core.errors import NotFound, StoreError
from memcli.core.memory import Memory
from memcli.ops import handle as store_mod


def log_lines(store: Store) -> list[dict]:
    if not store.log_path.exists():
        return []
    return [json.loads(line) for line in store.log_path.read_text().splitlines()]


def stray_files(root: Path) -> list[str]:
    """Temp files an interrupted or sloppy writer would leave behind in facts/ and .trash/."""
    out = []
    for d in (root / "facts", root / ".trash"):
        if d.is_dir():
            out += [p.name for p in d.iterdir() if p.name.startswith(".") or p.name.endswith((".tmp", "~"))]
    return out


# --- atomic writes ------------------------------------------------------------------------------


def test_writes_leave_no_temp_files(hash_store):
    a = hash_store.add("The staging database is reset every Sunday at 02:00 UTC.", raw=True).events[0].id
    hash_store.add("Frontend bundles are built by Vite and served from a CDN.", raw=True)
    hash_store.add("The staging database is reset every Sunday at 02:00 UTC.", raw=True, origins=["git:1"])
    hash_store.remove([a], reason="test")
    hash_store.restore(a)
    assert stray_files(hash_store.path) == []
    assert sorted(p.suffix for p in hash_store.facts_dir.iterdir()) == [".md", ".md"]


def test_a_failed_write_keeps_the_old_file_whole_and_leaves_no_temp_file(hash_store, monkeypatch):
    m = hash_store.add("Frontend bundles are built by Vite and served from a CDN.", raw=True).events[0]
    path = files(hash_store).fact_path(m.id)
    before = path.read_bytes()
    memory = hash_store.read(m.id)
    memory.text = "A completely different text that must never be half-written."

    def boom(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store_mod.os, "replace", boom)
    with pytest.raises(OSError):
        files(hash_store).write(memory)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert stray_files(hash_store.path) == []


def test_new_files_are_private_and_edited_files_keep_their_mode(hash_store):
    """A store holds what people said: new files are 0600 in 0700 directories (issue 9); a file
    someone made readable keeps its mode when memcli rewrites it."""
    old = os.umask(0o022)
    try:
        mid = hash_store.add("Frontend bundles are built by Vite and served from a CDN.", raw=True).events[0].id
        hand = hash_store.facts_dir / "hand.md"
        hand.write_text("The staging database is reset every Sunday at 02:00 UTC.\n")
        hand.chmod(0o644)
        hash_store.add("The staging database is reset every Sunday at 02:00 UTC.", raw=True, origins=["git:1"])
    finally:
        os.umask(old)
    assert stat.S_IMODE(files(hash_store).fact_path(mid).stat().st_mode) == 0o600
    assert stat.S_IMODE(hash_store.facts_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(hash_store.log_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(hand.stat().st_mode) == 0o644


# --- trash and restore --------------------------------------------------------------------------


def old_memory() -> Memory:
    return Memory(
        id="01JDQ8ZK4M6V3XW7T2B9C5N1RA", text="Feature flags are managed in LaunchDarkly.", type="semantic",
        tags=["flags"], confidence=0.9, source="manual", origins=["cli"], user="alice", project="web",
        created="2026-01-05T10:00:00Z", updated="2026-02-01T10:00:00Z",
        extra={"reviewed_by": "bob"},
    )


def test_rm_moves_the_file_to_the_trash(hash_store):
    m = old_memory()
    files(hash_store).write(m)
    hash_store.remove([m.id], reason="no longer true")
    assert not files(hash_store).fact_path(m.id).exists()
    trashed = files(hash_store).trash_dir / f"{m.id}.md"
    assert trashed.is_file()
    assert "no longer true" in trashed.read_text()
    assert [t.text for t in hash_store.trashed()] == [m.text]
    with pytest.raises(NotFound):
        hash_store.read(m.id)


def test_restore_brings_back_text_and_fields(hash_store):
    m = old_memory()
    files(hash_store).write(m)
    hash_store.remove([m.id], reason="oops")
    back = hash_store.read(hash_store.restore(m.id)[0])
    assert not (files(hash_store).trash_dir / f"{m.id}.md").exists()
    again = hash_store.read(m.id)
    for name in ("text", "type", "tags", "confidence", "source", "origins", "user", "project", "created", "extra"):
        assert getattr(again, name) == getattr(m, name), name
        assert getattr(back, name) == getattr(m, name), name


def test_rm_then_restore_gives_back_the_identical_file(hash_store):
    m = old_memory()
    path = files(hash_store).write(m)
    before = path.read_bytes()
    hash_store.remove([m.id], reason="oops")
    hash_store.restore(m.id)
    assert path.read_bytes() == before


def test_restore_refuses_unknown_ids_and_does_not_overwrite(hash_store):
    m = old_memory()
    files(hash_store).write(m)
    with pytest.raises(NotFound):
        hash_store.restore("01JDQ8ZK4M6V3XW7T2B9C5N1ZZ")
    hash_store.remove([m.id], reason="x")
    files(hash_store).write(m)  # the same id was written again meanwhile
    with pytest.raises(StoreError):
        hash_store.restore(m.id)
    assert (files(hash_store).trash_dir / f"{m.id}.md").exists()


# --- the change log -----------------------------------------------------------------------------


def test_every_change_appends_one_log_line(hash_store):
    text = "The staging database is reset every Sunday at 02:00 UTC."
    steps = [
        ("ADD", lambda: hash_store.add(text, raw=True, origins=["git:aaa"]).events[0].id),
        ("NONE", lambda: hash_store.add(text, raw=True, origins=["git:bbb"]).events[0].id),
    ]
    mid = None
    for event, action in steps:
        n = len(log_lines(hash_store))
        mid = action()
        lines = log_lines(hash_store)
        assert len(lines) == n + 1
        assert lines[-1]["event"] == event and lines[-1]["id"] == mid
    n = len(log_lines(hash_store))
    hash_store.remove([mid], reason="stale")
    hash_store.restore(mid)
    lines = log_lines(hash_store)
    assert [ln["event"] for ln in lines[n:]] == ["RM", "RESTORE"]  # a removal by the user, as `memcli rm` logs it
    assert lines[n]["old"] == text and lines[n]["reason"] == "stale"
    assert lines[0]["text"] == text and lines[0]["origin"] == ["git:aaa"]
    assert all(ln["at"].endswith("Z") for ln in lines)


def test_dry_run_and_search_do_not_log(hash_store):
    hash_store.add("Frontend bundles are built by Vite and served from a CDN.", raw=True)
    before = hash_store.log_path.read_bytes()
    hash_store.add("Logs are kept for 14 days in Loki.", raw=True, dry_run=True)
    hash_store.search("Vite bundles")
    assert hash_store.log_path.read_bytes() == before


# --- the writer lock ----------------------------------------------------------------------------


def test_concurrent_add_processes_all_land(tmp_path):
    store = tmp_path / "store"
    env = {**os.environ, "MEMCLI_EMBED_MODEL": HASH}
    texts = ["The staging database is reset every Sunday at 02:00 UTC.",
             "Frontend bundles are built by Vite and served from a CDN.",
             "Release tags are pushed by CI only, never by hand.",
             "The payments service retries webhooks three times with backoff."]
    procs = [
        subprocess.Popen([sys.executable, "-m", "memcli", "--store", str(store), "add", "--create", "--json", t],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        for t in texts
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * len(texts), outs
    files = sorted((store / "facts").glob("*.md"))
    assert len(files) == len(texts)
    s = Store(store)
    try:
        assert sorted(s.read(f.stem).text for f in files) == sorted(texts)
    finally:
        s.close()
    stats = run_memcli("--store", str(store), "stats", "--json", env={"MEMCLI_EMBED_MODEL": HASH})
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["memories"] == len(files)
    doctor = run_memcli("--store", str(store), "doctor", "--json", env={"MEMCLI_EMBED_MODEL": HASH})
    assert doctor.returncode == 0, doctor.stdout
    assert json.loads(doctor.stdout)["ok"] is True


def test_a_held_lock_makes_a_second_writer_wait_then_fail_clearly(hash_store, tmp_path):
    other = Store(hash_store.path)
    with files(hash_store).lock():
        with pytest.raises(StoreError, match="locked"):
            with files(other).lock(timeout=0.2):
                pass
    with files(other).lock(timeout=0.2):  # free again once released
        assert files(other).locked


# --- which store ---------------------------------------------------------------------------------


class Here:
    """Run the CLI in-process from a directory, without --store, with a given environment."""

    def __init__(self, monkeypatch, tmp_path: Path) -> None:
        self.mp = monkeypatch
        self.xdg = tmp_path / "xdg-data"
        monkeypatch.setenv("XDG_DATA_HOME", str(self.xdg))
        monkeypatch.setenv("MEMCLI_EMBED_MODEL", HASH)
        monkeypatch.delenv("MEMCLI_STORE", raising=False)

    def add(self, cwd: Path, text: str, *args: str):
        self.mp.chdir(cwd)
        create = ["--create"] if "--store" in args else []  # a missing --store is created only when asked
        r = CliRunner().invoke(app, [*args, "add", *create, "--raw", text], catch_exceptions=False)
        assert r.exit_code == 0, r.output
        return r


def texts_in(store: Path) -> list[str]:
    if not (store / "facts").is_dir():
        return []
    return sorted(Memory.parse(p.read_bytes(), file_id=p.stem).text for p in (store / "facts").glob("*.md"))


def test_store_resolution_order(monkeypatch, tmp_path):
    here = Here(monkeypatch, tmp_path)
    proj = tmp_path / "proj"
    deep = proj / "src" / "pkg"
    deep.mkdir(parents=True)
    (proj / ".memcli").mkdir()
    env_store, flag_store = tmp_path / "env-store", tmp_path / "flag-store"

    here.add(deep, "nearest project store")
    monkeypatch.setenv("MEMCLI_STORE", str(env_store))
    here.add(deep, "env beats project store")
    here.add(deep, "flag beats env", "--store", str(flag_store))
    monkeypatch.delenv("MEMCLI_STORE")
    here.add(tmp_path, "global store")

    assert texts_in(proj / ".memcli") == ["nearest project store"]
    assert texts_in(env_store) == ["env beats project store"]
    assert texts_in(flag_store) == ["flag beats env"]
    assert texts_in(here.xdg / "memcli") == ["global store"]


def test_init_creates_a_project_store_that_later_commands_find(monkeypatch, tmp_path):
    Here(monkeypatch, tmp_path)
    repo = tmp_path / "repo"
    (repo / "sub").mkdir(parents=True)
    monkeypatch.chdir(repo)
    r = CliRunner().invoke(app, ["init"], catch_exceptions=False)
    assert r.exit_code == 0
    gi = (repo / ".memcli" / ".gitignore").read_text().split()
    assert ".index/" in gi and ".trash/" in gi
    assert (repo / ".memcli" / "facts").is_dir()
    monkeypatch.chdir(repo / "sub")
    r = CliRunner().invoke(app, ["add", "--raw", "Found from a subdirectory."], catch_exceptions=False)
    assert r.exit_code == 0
    assert texts_in(repo / ".memcli") == ["Found from a subdirectory."]
    r = CliRunner().invoke(app, ["init"], catch_exceptions=False)  # idempotent
    assert r.exit_code == 0 and texts_in(repo / ".memcli") == ["Found from a subdirectory."]


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args], cwd=cwd, check=True,
                   capture_output=True)


def test_default_project_is_shared_by_git_worktrees(monkeypatch, tmp_path):
    here = Here(monkeypatch, tmp_path)
    repo = tmp_path / "webshop"
    repo.mkdir()
    git("init", "-q", cwd=repo)
    git("commit", "-q", "--allow-empty", "-m", "init", cwd=repo)
    git("worktree", "add", "-q", str(tmp_path / "webshop-feature"), cwd=repo)
    (repo / "deep" / "dir").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    store = tmp_path / "s"
    here.add(repo / "deep" / "dir", "from the main checkout", "--store", str(store))
    here.add(tmp_path / "webshop-feature", "from the worktree", "--store", str(store))
    here.add(outside, "from outside any repository", "--store", str(store))
    s = Store(store)
    projects = {m.text: m.project for m in (s.read(p.stem) for p in s.facts_dir.glob("*.md"))}
    assert projects == {"from the main checkout": "webshop", "from the worktree": "webshop",
                        "from outside any repository": None}
    monkeypatch.chdir(tmp_path / "webshop-feature")
    r = CliRunner().invoke(app, ["--store", str(store), "list", "--json", "--project", "."], catch_exceptions=False)
    listed = sorted(x["text"] for x in json.loads(r.stdout)["memories"])
    assert listed == ["from the main checkout", "from the worktree"]
    monkeypatch.chdir(outside)
    r = CliRunner().invoke(app, ["--store", str(store), "list", "--project", "."], catch_exceptions=False)
    assert r.exit_code == 1 and r.stderr.startswith("memcli: error:")


def test_a_bulk_log_keeps_every_line_whole(hash_store):
    records = [{"event": "IMPORT", "id": f"id{i}", "text": "x" * 2000} for i in range(3000)]  # ~6 MB
    files(hash_store).log_many(records)
    lines = hash_store.log_path.read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == [r["id"] for r in records]


# --- the public Store: composition, and every change through a ChangeSet --------------------------------


def test_the_public_store_composes_the_layers_and_has_no_write_around_a_changeset(hash_store):
    from memcli.ops.handle import Store as Handle
    from memcli.storage.files import Files

    assert not issubclass(Store, (Files, Handle))
    public = {n for n in dir(Store) if not n.startswith("_")}
    assert not public & {"write", "lock", "purge_trash", "log_many", "fact_path", "locked"}
    # what a caller reads is the store it named
    assert hash_store.path == files(hash_store).path and hash_store.exists()


def test_update_keeps_the_old_text_in_history_and_search_finds_the_new_one(hash_store):
    (event,) = hash_store.add("The API listens on port 8000.", raw=True, llm=False).events
    m = hash_store.update(event.id[:10], "The API listens on port 9000 since the proxy moved.", tags=["net"])
    assert m.text.startswith("The API listens on port 9000") and "net" in m.tags
    assert [h["old"] for h in m.history if h.get("event") == "UPDATE"] == ["The API listens on port 8000."]
    assert hash_store.get(event.id).text == m.text
    hits = hash_store.search("port 9000 proxy", threshold=0).hits
    assert hits and hits[0].memory.id == event.id
    assert [e["event"] for e in hash_store.log(id_prefix=event.id)][-1] == "UPDATE"
    with pytest.raises(Exception, match="empty"):
        hash_store.update(event.id, "   ")


def test_an_edit_is_one_commit_that_keeps_the_old_text(hash_store, tmp_path):
    (event,) = hash_store.add("Deploys run from the main branch.", raw=True, llm=False).events
    ed = tmp_path / "ed.py"
    ed.write_text("import sys\np = sys.argv[1]\ns = open(p).read().replace('main branch', 'release branch')\n"
                  "open(p, 'w').write(s)\n")
    env = {"EDITOR": f"{sys.executable} {ed}", "MEMCLI_EMBED_MODEL": HASH}
    r = CliRunner().invoke(app, ["--store", str(hash_store.path), "edit", event.id], env=env)
    assert r.exit_code == 0, r.output
    edited = hash_store.get(event.id)
    assert edited.text == "Deploys run from the release branch."
    assert any(h.get("old") == "Deploys run from the main branch." for h in edited.history)  # never lost
    assert [e["event"] for e in hash_store.log(id_prefix=event.id)][-1] == "EDIT"
    assert not list(hash_store.path.glob(".journal.json"))


def test_one_inbox_a_spooled_input_is_listed_and_a_failed_retry_is_recorded_as_the_worker_records_it(hash_store):
    """A hook's spooled input and an add parked for its LLM live in one inbox, in one format, and
    `inbox retry` is the worker's processor: a failed replay leaves the item with the error, the
    attempt count and the time stamps the hooks' worker reads."""
    import json as json_

    from memcli.agents import spool

    item = spool.spool(hash_store.path, "The nightly backup job writes to the eu-west-1 bucket.", {"origins": ["x"]})
    assert [p.name for p, _ in hash_store.inbox()] == [item.name]
    (result,) = hash_store.retry_inbox()  # no LLM configured: the replay fails, the input stays
    assert result[0] == item.name and isinstance(result[1], str) and "LLM" in result[1]
    kept = json_.loads(item.read_text(encoding="utf-8"))
    assert kept["attempts"] == 1 and kept["error"] == result[1] and kept["last_attempt_ts"] > 0
    assert kept["text"].startswith("The nightly backup job") and [p.name for p, _ in hash_store.inbox()] == [item.name]
