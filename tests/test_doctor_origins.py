"""doctor warns about memories whose git: origins name commits this repository does not have."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import HASH, run_memcli

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
    r = run_memcli("--store", str(store), "doctor", "--json",
                       env=ENV, cwd=repo)
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
    r = run_memcli("--store", str(store), "add", "--create", "x uses y", "--origin", "git:deadbee",
                   env=ENV, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = run_memcli("--store", str(store), "doctor", "--json", env=ENV, cwd=tmp_path)
    assert "git origins" not in {c["check"] for c in json.loads(r.stdout)["checks"]}
