"""Issue 22: a burst of commits (a rebase, a script). While the store's worker is alive (named in
`inbox/.worker.pid`), a post-commit hook only writes `inbox/git-<sha>.sha` and starts no process;
the worker looks for hand-overs again after the pid file is gone, and waits for the burst to go
quiet before it takes the commits. Counted and checked, never timed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import HASH, run_memcli
from test_hooks_git import GIT_ENV, WANTED, commit, drain, git, memories, new_repo, wait_for

from memcli.agents import spool
from memcli.ops.handle import Store

needs_proc = pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="no /proc: the hook checks the lock")


def _fake_flock(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment whose `flock` only records that it was run (and says the lock is held)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "flock-calls"
    tool = bin_dir / "flock"
    tool.write_text(f"#!/bin/sh\necho \"$*\" >> '{calls}'\nexit 1\n")
    tool.chmod(0o755)
    return {**GIT_ENV, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}, calls


def _hooked(tmp_path: Path, env: dict[str, str]) -> tuple[Path, Path]:
    store = tmp_path / "store"
    Store(store).init()
    (store / "inbox").mkdir(exist_ok=True)
    repo = new_repo(tmp_path, "repo")
    r = run_memcli("--store", str(store), "hooks", "install", "git", env=env, cwd=repo)
    assert r.returncode == 0, r.stderr
    return store, repo


def _commit(repo: Path, env: dict[str, str], text: str) -> str:
    (repo / f"f{abs(hash(text)) % 10**8}.txt").write_text(text)
    subprocess.run(["git", "add", "-A"], cwd=repo, env={**os.environ, **env}, check=True, capture_output=True)
    out = subprocess.run(["git", "commit", "-q", "-m", text], cwd=repo, env={**os.environ, **env},
                         capture_output=True, text=True)
    assert out.returncode == 0 and not out.stdout and not out.stderr, out  # nothing in git's output
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()


def _holder(path: Path) -> tuple[subprocess.Popen, int]:
    """A process that keeps `path` open (as a worker keeps its lock's file), and that fd."""
    code = "import os, sys, time; print(os.open(sys.argv[1], os.O_RDONLY | os.O_CREAT), flush=True); time.sleep(120)"
    p = subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, text=True)
    return p, int(p.stdout.readline())


@needs_proc
def test_a_commit_made_while_the_worker_is_alive_starts_no_process(tmp_path: Path) -> None:
    env, calls = _fake_flock(tmp_path)
    store, repo = _hooked(tmp_path, env)
    alive, fd = _holder(store / "inbox" / spool.WORKER_LOCK)  # what the hook checks of a worker
    try:
        (store / "inbox" / spool.WORKER_PID).write_text(f"{alive.pid} {fd}\n")
        shas = [_commit(repo, env, text) for text in WANTED[:3]]
        assert sorted(p.name for p in (store / "inbox").glob("git-*.sha")) == sorted(f"git-{s}.sha" for s in shas)
        assert (store / "inbox" / f"git-{shas[0]}.sha").read_text().strip() == str(repo)
        time.sleep(0.5)  # (a background process, had one been started, would have run flock by now)
        assert not calls.exists()  # no process: not even the lock check
        assert not list((store / "inbox").glob("*.json"))
    finally:
        alive.kill()
        alive.wait()
    # the pid file now names a dead process: the hook checks the lock (the fake one says "held")
    sha = _commit(repo, env, WANTED[3])
    wait_for(lambda: calls.exists() and calls.read_text().strip() != "", "the lock check")
    assert (store / "inbox" / f"git-{sha}.sha").exists()


@needs_proc
def test_a_pid_file_naming_another_process_is_not_trusted(tmp_path: Path) -> None:
    """A stale pid reused by a live process that does not hold the store's worker lock file open
    on that fd (another store's worker, this test, garbage) does not stop the hook from checking
    the lock."""
    env, calls = _fake_flock(tmp_path)
    store, repo = _hooked(tmp_path, env)
    other, fd = _holder(tmp_path / "other.lock")
    try:
        for named in (f"{other.pid} {fd}", f"{os.getpid()} 0", f"{other.pid}", "12ab 3", f"{other.pid} {fd} x", ""):
            (store / "inbox" / spool.WORKER_PID).write_text(f"{named}\n")
            before = calls.read_text().count("\n") if calls.exists() else 0
            _commit(repo, env, f"Use pool size {named or 'none'} for the cache")
            wait_for(lambda b=before: calls.exists() and calls.read_text().count("\n") > b, f"the lock check ({named})")
    finally:
        other.kill()
        other.wait()


@needs_proc
def test_the_worker_names_itself_while_it_runs_and_looks_again_once_it_is_gone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A commit handed over after the worker's last look, by a hook that found the pid file still
    there (so it started nothing), is taken before the worker exits."""
    monkeypatch.setenv("MEMCLI_EMBED_MODEL", HASH)
    store = tmp_path / "store"
    Store(store).init()
    (store / "inbox").mkdir()
    repo = new_repo(tmp_path, "repo")
    commit(repo, WANTED[0])
    late = git(repo, "rev-parse", "HEAD").stdout.strip()
    seen = []
    real_work, real_unmark = spool._work, spool._unmark_alive

    def work(store_path: Path, held: int) -> int:
        pid, fd = (store / "inbox" / spool.WORKER_PID).read_text().split()
        assert os.path.samefile(f"/proc/self/fd/{fd}", store / "inbox" / spool.WORKER_LOCK)
        seen.append(pid)
        return real_work(store_path, held)

    def unmark(d: Path, tag: int | None) -> None:
        if len(seen) == 1:  # the hand-over between the last look and the pid file's removal
            (d / f"git-{late}.sha").write_text(f"{repo}\n")
        real_unmark(d, tag)

    monkeypatch.setattr(spool, "_work", work)
    monkeypatch.setattr(spool, "_unmark_alive", unmark)
    assert spool.main(["--store", str(store)]) == 0
    assert seen == [str(os.getpid())] * 2  # named while it ran; a second round for the late commit
    assert not (store / "inbox" / spool.WORKER_PID).exists()
    assert not list((store / "inbox").glob("git-*.sha"))
    assert [m["text"] for m in memories(store)] == [WANTED[0]]


def test_a_burst_is_waited_for_and_a_single_commit_is_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    sleeps: list[float] = []
    monkeypatch.setattr(spool.time, "sleep", lambda s: sleeps.append(s))
    old = time.time() - 60
    for name in ("git-a.sha", "b.json"):  # waiting from long ago (an LLM outage): not a burst
        (inbox / name).write_text("x")
        os.utime(inbox / name, (old, old))
    (inbox / "git-c.sha").write_text("x")  # the commit that started the worker
    assert not spool._burst_under_way(inbox)
    (inbox / "git-d.sha").write_text("x")  # ... and another one right after it
    assert spool._burst_under_way(inbox)
    spool._settle(inbox, quiet=0.4, most=0.2)  # fresh hand-overs: it sleeps (bounded by `most`)
    assert sleeps
    sleeps.clear()
    for name in ("git-c.sha", "git-d.sha"):
        os.utime(inbox / name, (old, old))
    spool._settle(inbox)  # quiet for long: no wait
    assert not sleeps


def test_a_burst_of_commits_is_remembered_once_each(tmp_path: Path) -> None:
    """Twelve commits back to back with the real hook (the first starts the worker, the others
    find it alive or its lock held): each remembered once, nothing left in the inbox."""
    store = tmp_path / "store"
    Store(store).init()
    repo = new_repo(tmp_path, "repo")
    r = run_memcli("--store", str(store), "hooks", "install", "git", env=GIT_ENV, cwd=repo)
    assert r.returncode == 0, r.stderr
    for text in WANTED:
        commit(repo, text)
    wait_for(lambda: len(memories(store)) == len(WANTED), "the burst's memories")
    drain(store)
    assert sorted(m["text"] for m in memories(store)) == sorted(WANTED)
    assert not list((store / "inbox").glob("git-*.sha"))
    assert not (store / "inbox" / spool.WORKER_PID).exists()
