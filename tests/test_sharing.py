"""A store committed to git and shared by two clones: git pull merges, `sync`, doctor on conflicts.

Git runs for real; memcli runs in-process in the clone (Typer's runner, as `cd clone && memcli`),
except in the sync round trip, which runs every memcli as a real process."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import HASH, invoke_memcli, run_memcli

ENV = {"MEMCLI_EMBED_MODEL": HASH, "GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@example.com",
       "GIT_COMMITTER_NAME": "Dev", "GIT_COMMITTER_EMAIL": "dev@example.com"}


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-c", "user.email=dev@example.com", "-c", "user.name=Dev", *args], cwd=cwd,
                          capture_output=True, text=True, check=check)


def memcli(cwd: Path, *args: str, ok: bool = True, real: bool = False) -> subprocess.CompletedProcess:
    r = (run_memcli if real else invoke_memcli)(*args, env=ENV, cwd=cwd)
    if ok:
        assert r.returncode == 0, (args, r.stderr)
    return r


def texts(cwd: Path) -> list[str]:
    return sorted(m["text"] for m in json.loads(memcli(cwd, "list", "--json").stdout)["memories"])


def two_clones(tmp_path: Path, *, shared: bool = True) -> tuple[Path, Path]:
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    a, b = tmp_path / "a", tmp_path / "b"
    git(tmp_path, "clone", "-q", str(origin), str(a))
    git(a, "checkout", "-q", "-b", "main")
    memcli(a, "init", *(["--shared"] if shared else []))
    if not shared:
        (a / ".memcli" / ".gitattributes").unlink()
    memcli(a, "add", "--raw", "The ledger rounds half to even.")
    git(a, "add", ".memcli")
    git(a, "commit", "-q", "-m", "memcli store")
    git(a, "push", "-q", "origin", "main")
    git(tmp_path, "clone", "-q", str(origin), str(b))
    return a, b


def test_two_clones_pull_each_others_memories_without_conflicts(tmp_path):
    a, b = two_clones(tmp_path)
    assert (a / ".memcli" / ".gitattributes").read_text().count("log.jsonl merge=union") == 1
    memcli(a, "add", "--raw", "Invoices are numbered per tenant.")
    memcli(b, "add", "--raw", "Refunds go through the payments service only.")
    for clone, msg in ((a, "a"), (b, "b")):
        git(clone, "add", ".memcli")
        git(clone, "commit", "-q", "-m", msg)
    git(a, "push", "-q")
    pulled = git(b, "pull", "--no-rebase", "--no-edit", "-q", check=False)
    assert pulled.returncode == 0, pulled.stderr  # log.jsonl merged by union, facts are separate files
    assert texts(b) == ["Invoices are numbered per tenant.", "Refunds go through the payments service only.",
                        "The ledger rounds half to even."]
    log = (b / ".memcli" / "log.jsonl").read_text()
    assert "<<<<<<<" not in log and len([json.loads(x) for x in log.splitlines()]) == 3
    assert json.loads(memcli(b, "doctor", "--json").stdout)["ok"] is True


def test_without_the_union_rule_doctor_finds_the_conflict_and_says_how_to_fix_it(tmp_path):
    a, b = two_clones(tmp_path, shared=False)
    memcli(a, "add", "--raw", "Invoices are numbered per tenant.")
    memcli(b, "add", "--raw", "Refunds go through the payments service only.")
    for clone in (a, b):
        git(clone, "add", ".memcli")
        git(clone, "commit", "-q", "-m", "more")
    git(a, "push", "-q")
    assert git(b, "pull", "--no-rebase", "--no-edit", "-q", check=False).returncode != 0
    r = memcli(b, "doctor", "--json", ok=False)
    assert r.returncode == 1
    (check,) = [c for c in json.loads(r.stdout)["checks"] if c["check"] == "merge conflicts"]
    assert not check["ok"] and "log.jsonl" in check["detail"] and "merge=union" in check["detail"]
    human = memcli(b, "doctor", ok=False).stdout
    assert "FAIL merge conflicts" in human


def test_sync_commits_pulls_reindexes_and_pushes(tmp_path):
    a, b = two_clones(tmp_path)
    memcli(a, "add", "--raw", "Invoices are numbered per tenant.", real=True)
    r = memcli(a, "sync", "--json", real=True)
    report = json.loads(r.stdout)
    assert report["committed"] and report["pushed"] and report["memories"] == 2
    memcli(b, "add", "--raw", "Refunds go through the payments service only.", real=True)
    assert json.loads(memcli(b, "sync", "--json", real=True).stdout)["memories"] == 3
    memcli(a, "sync", real=True)
    assert texts(a) == texts(b) and len(texts(a)) == 3
    # only the store was committed: other work in the clone is left alone
    (a / "notes.txt").write_text("draft\n")
    memcli(a, "sync", real=True)
    assert "notes.txt" in git(a, "status", "--porcelain").stdout


def test_sync_outside_git_is_one_clear_error(tmp_path):
    memcli(tmp_path, "init", str(tmp_path / "s"))
    r = memcli(tmp_path, "--store", str(tmp_path / "s"), "sync", ok=False)
    assert r.returncode == 1 and r.stderr.startswith("memcli: error:") and "git repository" in r.stderr


def test_sync_publishes_the_store_only_and_no_merge_commits(tmp_path):
    a, b = two_clones(tmp_path)
    origin = tmp_path / "origin.git"
    memcli(b, "add", "--raw", "Refunds go through the payments service only.")
    memcli(b, "sync")  # the remote moved on: a's next sync must not merge
    (a / "draft.txt").write_text("half-done refactor\n")
    git(a, "add", "draft.txt")
    git(a, "commit", "-q", "-m", "WIP: half-done refactor", "draft.txt")
    memcli(a, "add", "--raw", "Invoices are numbered per tenant.")
    drafts = a / ".memcli" / ".edits"
    drafts.mkdir()
    (drafts / "x.md").write_text("---\nbroken: [\n---\nsecret draft\n")
    memcli(a, "sync")
    published = git(origin, "log", "--format=%s", "main").stdout
    assert "WIP" not in published and "draft.txt" not in git(origin, "ls-tree", "-r", "--name-only", "main").stdout
    assert git(origin, "rev-list", "--merges", "main").stdout == ""  # a straight line
    assert ".edits" not in git(origin, "ls-tree", "-r", "--name-only", "main").stdout
    # a keeps its own commit, on top of what it published, and has b's memory
    assert git(a, "log", "-1", "--format=%s").stdout.strip() == "WIP: half-done refactor"
    assert git(a, "rev-list", "--merges", "HEAD").stdout == ""
    assert len(texts(a)) == 3 and (a / "draft.txt").exists()
    memcli(b, "sync")
    assert texts(a) == texts(b)
    assert git(b, "rev-list", "--merges", "HEAD").stdout == "" and not (b / "draft.txt").exists()
