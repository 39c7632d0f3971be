"""doctor warns about memories whose git: origins name commits this repository does not have.

The first test runs memcli as real processes in the repository; the others in-process there."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import HASH, invoke_memcli, run_memcli

ENV = {"MEMCLI_EMBED_MODEL": HASH}


def git(cwd: Path, *args: str) -> str:
    out = subprocess.run(["git", "-c", "user.email=dev@example.com", "-c", "user.name=Dev", *args], cwd=cwd,
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_doctor_names_memories_from_commits_the_repository_lacks(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-q", "-m", "first")
    real = git(repo, "rev-parse", "--short=7", "HEAD")
    store = repo / ".memcli"
    gone = "deadbee"
    for text, sha in [("the cache key includes the locale", real), ("retries back off exponentially", gone)]:
        r = run_memcli("--store", str(store), "add", "--create", text, "--origin", f"git:{sha}", "--json",
                       env=ENV, cwd=repo)
        assert r.returncode == 0, r.stderr
    r = run_memcli("--store", str(store), "doctor", "--json", env=ENV, cwd=repo)
    assert r.returncode == 0, r.stdout  # a warning, never a failure
    checks = {c["check"]: c for c in json.loads(r.stdout)["checks"]}
    origins = checks["git origins"]
    assert origins["ok"] and origins.get("warn")
    assert f"git:{gone}" in origins["detail"] and f"git:{real}" not in origins["detail"]
    assert "1 memory" in origins["detail"] and "memcli rollback git:" in origins["detail"]
    text = run_memcli("--store", str(store), "doctor", env=ENV, cwd=repo)
    assert "warn git origins:" in text.stdout
    assert "Traceback" not in text.stderr


def test_doctor_is_quiet_about_origins_outside_a_repository(tmp_path):
    store = tmp_path / "store"
    r = invoke_memcli("--store", str(store), "add", "--create", "x uses y", "--origin", "git:deadbee",
                   env=ENV, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = invoke_memcli("--store", str(store), "doctor", "--json", env=ENV, cwd=tmp_path)
    assert "git origins" not in {c["check"] for c in json.loads(r.stdout)["checks"]}


def _doctor_checks(store: Path, repo: Path) -> dict[str, dict]:
    r = invoke_memcli("--store", str(store), "doctor", "--json", env=ENV, cwd=repo)
    assert r.returncode == 0, r.stdout
    return {c["check"]: c for c in json.loads(r.stdout)["checks"]}


def _repo_with_store(tmp_path: Path) -> tuple[Path, Path]:
    """A fresh git repository with an initialised store inside it."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    store = repo / ".memcli"
    assert invoke_memcli("--store", str(store), "init", env=ENV, cwd=repo).returncode == 0
    return repo, store


def test_doctor_reports_what_the_git_hooks_logged(tmp_path):
    repo, store = _repo_with_store(tmp_path)
    assert _doctor_checks(store, repo)["git hooks"] == {"check": "git hooks", "ok": True, "detail": "no errors logged"}
    (repo / ".git" / "memcli-hook.log").write_text("memcli: add failed: disk full\n")
    hooks = _doctor_checks(store, repo)["git hooks"]
    assert hooks["ok"] and hooks.get("warn") and "disk full" in hooks["detail"]


def test_a_commit_into_a_read_only_store_leaves_a_trace_doctor_shows(tmp_path):
    import os
    import time

    import pytest

    repo, store = _repo_with_store(tmp_path)
    assert invoke_memcli("hooks", "install", "git", env=ENV, cwd=repo).returncode == 0
    if os.geteuid() != 0 or subprocess.run(["mount", "--bind", str(store), str(store)],
                                           capture_output=True).returncode != 0:
        pytest.skip("cannot bind-mount here (needs root and mount permission)")
    try:
        if subprocess.run(["mount", "-o", "remount,ro,bind", str(store)], capture_output=True).returncode != 0:
            pytest.skip("cannot remount read-only here")
        (repo / "a.txt").write_text("a\n")
        git(repo, "add", "a.txt")
        git(repo, "commit", "-q", "-m", "Pin httpcore==1.* because 0.18 broke proxies")  # the commit succeeds
        log = repo / ".git" / "memcli-hook.log"
        deadline = time.monotonic() + 120  # a poll, left as soon as the line is there
        while time.monotonic() < deadline and not (log.exists() and log.read_text().strip()):
            time.sleep(0.2)
    finally:
        subprocess.run(["umount", "-l", str(store)], capture_output=True)
    hooks = _doctor_checks(store, repo)["git hooks"]
    assert hooks.get("warn") and "Read-only file system" in hooks["detail"]
