"""Store discovery, project identity, `where`, and no store created by accident (real git; memcli
run in the directory under test: in-process through Typer's runner, and as real processes in the
clones-and-worktrees test and for a store created by accident; a store named by --store is read
back in-process)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import HASH, invoke_memcli, listed, run_memcli

from memcli.core.discovery import normalise_remote

ENV = {"MEMCLI_EMBED_MODEL": HASH}


def git(cwd: Path, *args: str) -> str:
    out = subprocess.run(["git", "-c", "user.email=dev@example.com", "-c", "user.name=Dev", *args], cwd=cwd,
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


@pytest.mark.parametrize("url", [
    "https://github.com/acme/ledger.git",
    "https://github.com/acme/ledger",
    "https://user:token@GitHub.com/acme/ledger.git/",
    "git@github.com:acme/ledger.git",
    "git@github.com:acme/ledger",
    "ssh://git@github.com/acme/ledger.git",
    "ssh://git@github.com:22/acme/ledger",
    "git://github.com/acme/ledger.git",
])
def test_every_spelling_of_a_remote_is_one_project(url):
    assert normalise_remote(url) == "github.com/acme/ledger"


def test_local_remotes_give_the_repository_name():
    assert normalise_remote("/srv/git/ledger.git") == "ledger"
    assert normalise_remote("file:///srv/git/ledger.git") == "ledger"
    assert normalise_remote("../ledger") == "ledger"


def _where(cwd: Path, *args: str, real: bool = False) -> dict:
    r = (run_memcli if real else invoke_memcli)(*args, "where", "--json", env=ENV, cwd=cwd)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_clones_and_worktrees_share_a_project_and_the_main_worktrees_store(tmp_path):
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    a = tmp_path / "a"
    git(tmp_path, "clone", "-q", str(origin), str(a))
    git(a, "remote", "set-url", "origin", "git@github.com:acme/ledger.git")
    git(a, "commit", "-q", "--allow-empty", "-m", "start")
    b = tmp_path / "elsewhere" / "b-clone"
    b.parent.mkdir()
    git(tmp_path, "clone", "-q", str(origin), str(b))
    git(b, "remote", "set-url", "origin", "https://github.com/acme/ledger")
    wt = tmp_path / "wt-feature"
    git(a, "worktree", "add", "-q", "-b", "feature", str(wt))
    r = run_memcli("init", env=ENV, cwd=a)
    assert r.returncode == 0, r.stderr
    # the worktree lives outside the main worktree: the store is found through git's common dir
    info = _where(wt / "", real=True)
    assert info["store"] == str((a / ".memcli").absolute())
    assert "worktree" in info["store_why"]
    assert info["project"] == "github.com/acme/ledger"
    assert _where(b)["project"] == "github.com/acme/ledger"
    assert _where(a)["project"] == "github.com/acme/ledger"
    # and what is added from the worktree lands in the main store, stamped with the project
    r = run_memcli("add", "--raw", "The ledger service rounds half to even in every currency.", env=ENV, cwd=wt)
    assert r.returncode == 0, r.stderr
    found = json.loads(run_memcli("list", "--json", env=ENV, cwd=a).stdout)["memories"]
    assert [m["project"] for m in found] == ["github.com/acme/ledger"]
    assert not (wt / ".memcli").exists()


def test_without_a_remote_the_project_is_the_repository_directory(tmp_path):
    repo = tmp_path / "ledger"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "commit", "-q", "--allow-empty", "-m", "start")
    wt = tmp_path / "ledger-wt"
    git(repo, "worktree", "add", "-q", "-b", "x", str(wt))
    assert _where(repo)["project"] == "ledger"
    assert _where(wt)["project"] == "ledger"


def test_user_defaults_to_the_git_email(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "ana@acme.dev")
    info = _where(repo)
    assert info["user"] == "ana@acme.dev" and info["user_why"] == "git config user.email"
    store = tmp_path / "s"
    assert invoke_memcli("init", str(store), env=ENV, cwd=repo).returncode == 0
    r = invoke_memcli("--store", str(store), "add", "--raw", "Invoices are numbered per tenant.", env=ENV, cwd=repo)
    assert r.returncode == 0, r.stderr
    assert listed(store)[0]["user"] == "ana@acme.dev"
    assert _where(repo, "--store", str(store))["user"] == "ana@acme.dev"
    info = json.loads(invoke_memcli("where", "--json", env={**ENV, "MEMCLI_USER": "bo"}, cwd=repo).stdout)
    assert info["user"] == "bo"


def test_a_typoed_store_is_an_error_for_every_command_and_creates_nothing(tmp_path):
    typo = tmp_path / "stor"
    for args in (("add", "We tag releases with vX.Y.Z."), ("search", "x"), ("list",),
                 ("stats",), ("doctor",), ("inbox",)):
        r = invoke_memcli("--store", str(typo), *args, input="{\"text\": \"a\"}\n", env=ENV, cwd=tmp_path)
        assert r.returncode == 1, (args, r.stderr)
        assert r.stderr.startswith("memcli: error: no store at") and "Traceback" not in r.stderr, args
        assert not typo.exists(), args
    r = invoke_memcli("--store", str(typo), "add", "--create", "--raw", "We tag releases with vX.Y.Z.", env=ENV)
    assert r.returncode == 0, r.stderr
    assert (typo / "facts").is_dir()


def test_a_bulk_load_fills_a_new_store_and_says_so(tmp_path):
    """`--store NEW import FILE` and `add --batch` restore or load into a new directory (the
    shared LoCoMo harness does exactly this); unlike a lone add, they create it, on stderr."""
    records = tmp_path / "in.jsonl"
    records.write_text('{"text": "We tag releases with vX.Y.Z.", "origins": ["t:1"]}\n')
    for args in (("import", str(records)), ("add", "--no-llm", "--batch", str(records))):
        new = tmp_path / f"new-{args[0]}"
        r = invoke_memcli("--store", str(new), *args, env=ENV, cwd=tmp_path)
        assert r.returncode == 0, (args, r.stderr)
        assert f"creating a new store at {new}" in r.stderr, args
        assert [m["text"] for m in listed(new)] == ["We tag releases with vX.Y.Z."], args
    missing = tmp_path / "never"
    r = invoke_memcli("--store", str(missing), "import", str(tmp_path / "nope.jsonl"), env=ENV, cwd=tmp_path)
    assert r.returncode != 0 and not missing.exists()  # a failed load creates nothing


def test_a_failed_add_creates_no_store(tmp_path):
    home = tmp_path / "data"
    env = {**ENV, "XDG_DATA_HOME": str(home)}
    for args in (("add", ""), ("add", "   "), ("add", "--type", "nonsense", "text")):
        r = run_memcli(*args, env=env, cwd=tmp_path)
        assert r.returncode != 0, args
        assert "Traceback" not in r.stderr
        assert not home.exists(), args
    r = run_memcli("add", "--raw", "The first write creates the global store.", env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (home / "memcli" / "facts").is_dir()
