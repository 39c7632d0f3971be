"""Every command through the CLI runner, as a user types it; and the errors a user hits, each one clean."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import HASH, Cli

from memcli import __version__
from memcli.cli.app import app

NOTES = [
    ("The staging database is reset every Sunday at 02:00 UTC.", 0.9, "2026-01-10T10:00:00Z", "semantic"),
    ("Frontend bundles are built by Vite and served from a CDN.", 0.6, "2026-03-10T10:00:00Z", "semantic"),
    ("On 2026-03-02 the payment service went down.", 0.75, "2026-03-02T10:00:00Z", "episodic"),
    ("Run the unit tests with `pytest -q` from the repository root.", 0.8, "2026-02-10T10:00:00Z", "procedural"),
]


@pytest.fixture
def store(hash_cli) -> Cli:
    records = [{"text": t, "confidence": c, "created": at, "updated": at, "type": ty} for t, c, at, ty in NOTES]
    hash_cli("import", "-", input=json.dumps(records))
    return hash_cli


def ids(cli: Cli) -> dict[str, str]:
    return {r["text"]: r["id"] for r in json.loads(cli("list", "--json").stdout)["memories"]}


def snapshot(cli: Cli) -> dict[str, bytes]:
    root = cli.store
    out = {p.name: p.read_bytes() for p in sorted((root / "facts").glob("*"))} if (root / "facts").is_dir() else {}
    if (root / "log.jsonl").exists():
        out["log.jsonl"] = (root / "log.jsonl").read_bytes()
    return out


def unique_prefix(mid: str, others: list[str]) -> str:
    for n in range(1, len(mid)):
        if not any(o != mid and o.startswith(mid[:n]) for o in others):
            return mid[:n]
    return mid


# --- init, version ------------------------------------------------------------------------------


def test_init_creates_a_store_with_a_gitignore(tmp_path):
    cli = Cli(tmp_path / "unused", env={"MEMCLI_EMBED_MODEL": HASH})
    target = tmp_path / "team" / "memories"
    r = cli.runner.invoke(app, ["init", str(target)], catch_exceptions=False)
    assert r.exit_code == 0
    assert (target / "facts").is_dir()
    ignored = (target / ".gitignore").read_text().split()
    assert ".index/" in ignored and ".trash/" in ignored
    assert "facts/" not in ignored
    again = cli.runner.invoke(app, ["init", str(target)], catch_exceptions=False)
    assert again.exit_code == 0 and "exists" in again.stderr
    assert (target / "facts").is_dir()


def test_an_older_stores_gitignore_gains_the_new_entries_and_keeps_the_users(tmp_path):
    """A store made by an earlier memcli ignored only .index/ and .trash/: `doctor` says what is
    missing (and fails), `doctor --fix` and `init` append it, and the user's own lines stay."""
    cli = Cli(tmp_path / "unused", env={"MEMCLI_EMBED_MODEL": HASH})
    target = tmp_path / "old"
    assert cli.runner.invoke(app, ["init", str(target)]).exit_code == 0
    (target / ".gitignore").write_text(".index/\n.trash/\nmy-notes.txt")  # no final newline
    r = cli.runner.invoke(app, ["--store", str(target), "doctor"])
    assert r.exit_code != 0 and ".journal.json" in r.stdout + r.stderr
    r = cli.runner.invoke(app, ["--store", str(target), "doctor", "--fix"])
    lines = (target / ".gitignore").read_text().splitlines()
    assert lines[:3] == [".index/", ".trash/", "my-notes.txt"]
    assert {".journal.json", ".*.tmp", ".quarantine/", "inbox/"} <= set(lines)
    assert len(lines) == len(set(lines))  # nothing doubled
    assert cli.runner.invoke(app, ["--store", str(target), "doctor"]).exit_code == 0
    (target / ".gitignore").write_text(".index/\n")
    assert cli.runner.invoke(app, ["init", str(target)]).exit_code == 0
    assert ".journal.json" in (target / ".gitignore").read_text().splitlines()


def test_version(hash_cli):
    r = hash_cli("--version")
    assert __version__ in r.stdout


# --- show, list ----------------------------------------------------------------------------------


def test_show_by_id_and_unique_prefix(store):
    by_text = ids(store)
    all_ids = list(by_text.values())
    text, mid = next(iter(by_text.items()))
    path = store.store / "facts" / f"{mid}.md"
    assert store("show", mid).stdout == path.read_text()
    prefix = unique_prefix(mid, all_ids)
    assert len(prefix) < len(mid)
    assert store("show", prefix).stdout == path.read_text()
    assert json.loads(store("show", "--json", prefix.lower()).stdout)["text"] == text
    common = os.path.commonprefix(all_ids)  # ULIDs made in the same second share their first characters
    assert common
    r = store("show", common, ok=False)  # ambiguous: refuse rather than guess
    assert r.exit_code == 1 and r.stderr.startswith("memcli: error:")


def test_list_sort_limit_and_json(store):
    recs = json.loads(store("list", "--json").stdout)["memories"]
    assert [r["text"] for r in recs] == [n[0] for n in sorted(NOTES, key=lambda n: n[2])]
    by_conf = json.loads(store("list", "--json", "--sort", "confidence").stdout)["memories"]
    assert [r["confidence"] for r in by_conf] == sorted(n[1] for n in NOTES)
    desc = json.loads(store("list", "--json", "--sort", "-confidence").stdout)["memories"]
    assert [r["confidence"] for r in desc] == sorted((n[1] for n in NOTES), reverse=True)
    top2 = json.loads(store("list", "--json", "--sort", "-created", "--limit", "2").stdout)["memories"]
    assert [r["text"] for r in top2] == [n[0] for n in sorted(NOTES, key=lambda n: n[2], reverse=True)[:2]]
    episodic = json.loads(store("list", "--json", "--type", "episodic").stdout)["memories"]
    assert [r["type"] for r in episodic] == ["episodic"]
    since = json.loads(store("list", "--json", "--since", "2026-03-01").stdout)["memories"]
    assert {r["text"] for r in since} == {n[0] for n in NOTES if n[2] >= "2026-03-01"}
    human = store("list")
    assert len(human.stdout.splitlines()) == len(NOTES)
    assert all(i in human.stdout for i in ids(store).values())
    assert human.stderr == ""  # piped: the rows only (a count on stderr is noise to a script; issue 22)


def test_list_unknown_sort_key_is_a_usage_error(store):
    r = store("list", "--sort", "confidnece", ok=False)
    assert r.exit_code == 2


# --- rm, restore ---------------------------------------------------------------------------------


def test_rm_and_restore(store):
    by_text = ids(store)
    text, mid = NOTES[1][0], by_text[NOTES[1][0]]
    before = (store.store / "facts" / f"{mid}.md").read_text()
    r = store("rm", "--json", unique_prefix(mid, list(by_text.values())))
    assert json.loads(r.stdout) == {"schema": 1, "trashed": [mid]}
    assert text not in ids(store)
    assert (store.store / ".trash" / f"{mid}.md").is_file()
    found = json.loads(store("search", "--json", "Vite CDN bundles").stdout)["results"]
    assert mid not in [x["id"] for x in found]
    assert json.loads(store("stats", "--json").stdout)["trash"] == 1
    r = store("restore", "--json", mid)
    assert json.loads(r.stdout) == {"schema": 1, "restored": [mid]}
    assert ids(store)[text] == mid
    after = (store.store / "facts" / f"{mid}.md").read_text()
    assert after.split("\nupdated:")[0] == before.split("\nupdated:")[0]
    assert after.split("\n---\n", 1)[1] == before.split("\n---\n", 1)[1]
    assert json.loads(store("search", "--json", "Vite CDN bundles").stdout)["results"][0]["id"] == mid


def test_rm_several_and_an_unknown_id_removes_nothing(store):
    by_text = ids(store)
    a, b = by_text[NOTES[0][0]], by_text[NOTES[2][0]]
    before = snapshot(store)
    r = store("rm", a, "01NOSUCHMEMORY0000000000000", ok=False)
    assert r.exit_code == 1 and "01NOSUCHMEMORY" in r.stderr
    assert snapshot(store) == before
    store("rm", a, b)
    assert set(ids(store)) == {NOTES[1][0], NOTES[3][0]}
    store("restore", a, b)
    assert set(ids(store)) == {n[0] for n in NOTES}


# --- stats, doctor, reindex ----------------------------------------------------------------------


def test_stats(store):
    out = json.loads(store("stats", "--json").stdout)
    assert out["memories"] == len(NOTES)
    assert {c["name"]: c["count"] for c in out["types"]} == {"semantic": 2, "episodic": 1, "procedural": 1}
    assert out["oldest"] == min(n[2] for n in NOTES) and out["newest"] == max(n[2] for n in NOTES)
    assert out["malformed_files"] == 0 and out["embed_model"] == HASH
    human = store("stats").stdout
    assert "memories" in human and str(len(NOTES)) in human


def test_doctor_on_a_healthy_store(store):
    r = store("doctor", "--json")
    out = json.loads(r.stdout)
    assert out["ok"] is True and all(c["ok"] for c in out["checks"])
    index = next(c for c in out["checks"] if c["check"] == "index")
    assert str(len(NOTES)) in index["detail"]
    assert "FAIL" not in store("doctor").stdout


def test_doctor_on_a_missing_store_fails(hash_cli):
    r = hash_cli("doctor", ok=False)
    assert r.exit_code == 1


def test_reindex(store):
    before = json.loads(store("list", "--json").stdout)["memories"]
    out = json.loads(store("reindex", "--json").stdout)
    assert out["memories"] == len(NOTES) and out["skipped_files"] == 0
    assert json.loads(store("list", "--json").stdout)["memories"] == before
    assert "reindexed" in store("reindex").stderr


# --- errors --------------------------------------------------------------------------------------


def check_clean_error(r, before: dict, after: dict) -> None:
    assert r.exit_code == 1, (r.exit_code, r.output)
    lines = r.stderr.splitlines()
    assert 1 <= len(lines) <= 2, r.stderr  # the error, and an optional hint
    assert lines[0].startswith("memcli: error:")
    assert len(lines) == 1 or lines[1].startswith("hint: ")
    assert "Traceback" not in r.output
    assert r.stdout == ""
    assert after == before, "nothing may be half-written"


BIG = b"We deploy with make release.\n" * (20 * 1024 * 1024 // 29 + 1)


@pytest.mark.parametrize(
    "args, stdin",
    [
        pytest.param(("show", "01NOSUCHMEMORY0000000000000"), None, id="show-unknown-id"),
        pytest.param(("rm", "01NOSUCHMEMORY0000000000000"), None, id="rm-unknown-id"),
        pytest.param(("restore", "01NOSUCHMEMORY0000000000000"), None, id="restore-unknown-id"),
        pytest.param(("add", ""), None, id="add-empty-argument"),
        pytest.param(("add", "-"), b"", id="add-empty-stdin"),
        pytest.param(("add",), b"  \n\t\n", id="add-blank-stdin"),
        pytest.param(("add", "-"), "caf\u00e9 au lait is served at 10.".encode("latin-1"), id="add-invalid-utf8"),
        pytest.param(("add", "-"), b"\x7fELF\x02\x01\x01\x00\x00\x00binary", id="add-binary"),
        pytest.param(("add", "-"), BIG, id="add-20MB"),
        pytest.param(("import", "-"), BIG, id="import-20MB"),
        pytest.param(("import", "-"), b"", id="import-empty"),
        pytest.param(("import", "-"), b'[{"text": "caf\xe9"}]', id="import-invalid-utf8"),
        pytest.param(("import", "-"), b"\x00\x01\x02\x03", id="import-binary"),
    ],
)
def test_errors_are_one_clean_line(store, args, stdin):
    before = snapshot(store)
    r = store(*args, input=stdin, ok=False)
    check_clean_error(r, before, snapshot(store))


def test_unreadable_files_are_clean_errors(store, tmp_path):
    before = snapshot(store)
    (tmp_path / "no-notes").mkdir()
    # does not exist; a folder with no notes; a folder holding only a memcli store (not notes)
    for path in (tmp_path / "missing.json", tmp_path / "no-notes", tmp_path):
        r = store("import", str(path), ok=False)
        check_clean_error(r, before, snapshot(store))
        assert str(path.name) in r.stderr
    binary = tmp_path / "image.json"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    check_clean_error(store("import", str(binary), ok=False), before, snapshot(store))
    latin = tmp_path / "latin1.jsonl"
    latin.write_bytes('{"text": "caf\u00e9"}\n'.encode("latin-1"))
    check_clean_error(store("import", str(latin), ok=False), before, snapshot(store))


def test_commands_on_a_missing_store_fail_cleanly_and_create_nothing(hash_cli):
    for args in (("search", "anything"), ("list",), ("show", "01ABC"), ("stats",), ("reindex",)):
        r = hash_cli(*args, ok=False)
        assert r.exit_code == 1, args
        assert r.stderr.startswith("memcli: error:") and "no store" in r.stderr
    assert not hash_cli.store.exists()


def test_usage_errors_exit_2(store):
    assert store("no-such-command", ok=False).exit_code == 2
    assert store("add", "--no-llm", "--llm", "text", ok=False).exit_code == 2
    assert store("search", ok=False, input="").exit_code == 2
    assert store("search", "--threshold", "2", "x", ok=False).exit_code == 2
    assert store("search", "-k", "0", "x", ok=False).exit_code == 2


def test_an_invalid_type_is_a_usage_error(store):
    before = snapshot(store)
    r = store("add", "--type", "opinion", "Some fact about the build.", ok=False)
    assert r.exit_code == 2
    assert snapshot(store) == before


def test_an_os_error_is_one_line_not_a_traceback(hash_cli):
    hash_cli("add", "--raw", "The CDN caches static assets for one hour.")
    lock = hash_cli.store / ".lock"
    lock.unlink()
    lock.mkdir()  # the writer lock cannot be opened: an OSError deep inside a write
    r = hash_cli("add", "--raw", "Deploys are frozen on Fridays.", ok=False)
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert r.stderr.startswith("memcli: error: Is a directory") and r.stderr.count("\n") == 1
    assert len(list((hash_cli.store / "facts").glob("*.md"))) == 1


def test_the_process_skips_the_last_garbage_collection() -> None:
    """`memcli` freezes what is left when it exits, after every other exit handler: Python's last
    collection would walk every object a command made (~0.35 s of a 10k consolidate)."""
    probe = ("import atexit, gc, sys\n"
             "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0))\n"
             "sys.argv = ['memcli', '--version']\n"
             "from memcli.cli.app import main\n"
             "main()\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert __version__ in out.stdout and "frozen True" in out.stdout
