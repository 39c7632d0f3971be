"""What the hooks cost their host: `git commit` with and without memcli's hook, and one Claude Code capture.

    .venv/bin/python bench/hooks.py [--commits 30] [--captures 20]

git: two fresh repositories, one with `memcli hooks install git`; commits alternate between them
and each is made once the previous commit's background work is done (a developer does not commit
every 100 ms; on two cores a still-running worker slows any process). The hook's own cost is the
synchronous part: `git rev-parse HEAD` and a fork. Target: median with hook <= 1.1x without.

Claude Code: the installed Stop command (`python -m memcli.capture claude-code`) on a transcript
that grew by a few turns, beside a bare `python -c pass`. Target: < 100 ms.
The store uses the hash embedder (the worker's speed is not what is measured here).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PY, ROOT, pct, table, verdict  # noqa: E402

ENV = {**os.environ, "MEMCLI_EMBED_MODEL": "hash:256", "GIT_AUTHOR_NAME": "B", "GIT_AUTHOR_EMAIL": "b@example.com",
       "GIT_COMMITTER_NAME": "B", "GIT_COMMITTER_EMAIL": "b@example.com"}


def sh(cmd: list[str], cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, cwd=cwd, env=ENV, capture_output=True, text=True, input=stdin)
    if p.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{p.stderr}")
    return p


def idle(store: Path, quiet: float = 0.5, timeout: float = 120) -> None:
    inbox = store / "inbox"
    deadline, last, since = time.monotonic() + timeout, None, time.monotonic()
    while time.monotonic() < deadline:
        running = False
        lock = inbox / ".worker.lock"
        if lock.exists():
            with open(lock) as f:
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    running = True
        state = (tuple(sorted(p.name for p in inbox.glob("*.json"))) if inbox.is_dir() else (), running)
        if state != last or running or state[0]:
            last, since = state, time.monotonic()
        elif time.monotonic() - since > quiet:
            return
        time.sleep(0.05)


def commit(repo: Path, i: int) -> float:
    (repo / f"f{i}.txt").write_text(f"{i}\n")
    sh(["git", "add", f"f{i}.txt"], repo)
    t0 = time.perf_counter()
    words = " ".join(f"{(i * 7919 + k * 104729) % 1000003:x}" for k in range(6))  # unrelated messages
    sh(["git", "commit", "-q", "-m", f"Commit {i}: {words}"], repo)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--commits", type=int, default=30)
    ap.add_argument("--captures", type=int, default=20)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="memcli-bench-hooks-"))
    print(f"# hooks; load average at start {os.getloadavg()[0]:.2f}")
    try:
        store = work / "store"
        sh([PY, "-m", "memcli", "init", str(store)], work)
        plain, hooked = work / "plain", work / "hooked"
        for repo in (plain, hooked):
            repo.mkdir()
            sh(["git", "init", "-q"], repo)
        sh([PY, "-m", "memcli", "--store", str(store), "hooks", "install", "git"], hooked)
        without, with_hook = [], []
        for i in range(args.commits + 2):
            idle(store)
            a = commit(plain, i)
            idle(store)
            b = commit(hooked, i)
            if i >= 2:
                without.append(a * 1000), with_hook.append(b * 1000)
        def count() -> int:
            out = json.loads(sh([PY, "-m", "memcli", "--store", str(store), "list", "--json"], work).stdout)
            return len(out["memories"] if isinstance(out, dict) else out)

        deadline = time.monotonic() + 180  # the last workers may still be starting on a busy machine
        while count() < args.commits + 2 and time.monotonic() < deadline:
            time.sleep(1)
        n_mem = count()

        # Claude Code capture
        from memcli.hooks import claude_commands

        command = claude_commands(str(store))["Stop"]
        fixture = ROOT / "tests" / "fixtures" / "claude_code_session.jsonl"
        transcript = work / "session.jsonl"
        lines = fixture.read_text().splitlines(keepends=True)
        cap, bare = [], []
        for i in range(args.captures + 1):
            with open(transcript, "a") as f:  # the session grew: new turns since the last Stop
                f.writelines(lines)
            payload = json.dumps({"session_id": "bench", "transcript_path": str(transcript), "cwd": str(work),
                                  "hook_event_name": "Stop"})
            idle(store)
            t0 = time.perf_counter()
            sh(["sh", "-c", command], work, stdin=payload)
            t1 = time.perf_counter()
            sh([PY, "-c", "pass"], work)
            t2 = time.perf_counter()
            if i:
                cap.append((t1 - t0) * 1000), bare.append((t2 - t1) * 1000)
        idle(store)
        b, h = statistics.median(without), statistics.median(with_hook)
        c = statistics.median(cap)
        print()
        print(table(["what", "median ms", "p95 ms", "runs"], [
            ["git commit, no hook", f"{b:.1f}", f"{pct(without, 0.95):.1f}", len(without)],
            ["git commit, memcli hook", f"{h:.1f}", f"{pct(with_hook, 0.95):.1f}", len(with_hook)],
            ["Claude Code Stop hook (memcli.capture claude-code)", f"{c:.1f}", f"{pct(cap, 0.95):.1f}", len(cap)],
            ["python -c pass (interpreter start-up)", f"{statistics.median(bare):.1f}", f"{pct(bare, 0.95):.1f}",
             len(bare)],
        ]))
        print()
        print(table(["metric", "value", "target", "verdict"], [
            ["commit with hook / without (median)", f"{h / b:.2f}", "<= 1.1", verdict(h / b <= 1.1)],
            ["capture claude-code (median ms)", f"{c:.1f}", "< 100", verdict(c < 100)],
            ["memories from the hooked commits", str(n_mem), str(args.commits + 2), ""],
        ]))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
