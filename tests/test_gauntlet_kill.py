"""kill -9 at seeded random points during import, add, merge and consolidate, and concurrent
writers: afterwards (once the next command has run) no file is half written, no temp file is
left, no memory is both live and trashed, and every memory in `facts/` has its line in
`log.jsonl` (logging is part of the write).

Real subprocesses for what is killed and for the concurrent writers, since a kill and processes
racing are the point; the command that runs next (and finishes an interrupted commit) runs
in-process. `MEMCLI_GAUNTLET_KILLS` sets the number of kills per command (default 4 in CI;
`MEMCLI_STRESS=long` makes it 50 and doubles the concurrent writers).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import HASH, STRESS_LONG
from typer.testing import CliRunner

from memcli.cli.app import app
from memcli.core.memory import Memory

KILLS = int(os.environ.get("MEMCLI_GAUNTLET_KILLS") or (50 if STRESS_LONG else 4))
WRITERS = 16 if STRESS_LONG else 8  # concurrent `add` processes (each pays a ~0.5 s CPU start-up)
ENV = {**os.environ, "MEMCLI_EMBED_MODEL": HASH, "MEMCLI_LOCK_TIMEOUT": "30"}


def memcli(store: Path, *args: str, input: bytes | None = None):
    """The next command, in-process (what it does to the store is the same as from a shell)."""
    return CliRunner().invoke(app, ["--store", str(store), *args], input=input,
                                env={"MEMCLI_EMBED_MODEL": HASH}, catch_exceptions=False)


def start(store: Path, *args: str, input: bytes | None = None) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-m", "memcli", "--store", str(store), *args], env=ENV,
                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if input is not None:
        p.stdin.write(input)
    p.stdin.close()
    return p


def logged_ids(store: Path) -> set[str]:
    ids: set[str] = set()
    log = store / "log.jsonl"
    if not log.exists():
        return ids
    for line in log.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by the kill: the write it describes is judged by the file below
        for key in ("id", "ids"):
            v = rec.get(key)
            ids.update([v] if isinstance(v, str) else v if isinstance(v, list) else [])
    return ids


def check_whole(store: Path) -> None:
    """The invariants after a kill, once the next command ran."""
    r = memcli(store, "list", "--json")
    assert r.exit_code == 0, r.stderr
    facts = store / "facts"
    names = os.listdir(facts)
    assert not [n for n in names if n.endswith(".tmp")], "temp files left"
    live = {n[:-3] for n in names if n.endswith(".md")}
    for mid in live:
        Memory.parse((facts / f"{mid}.md").read_bytes(), file_id=mid)  # never half a file
    trash = store / ".trash"
    gone = {n[:-3] for n in os.listdir(trash) if n.endswith(".md")} if trash.is_dir() else set()
    assert not live & gone, f"both live and trashed: {sorted(live & gone)}"
    unlogged = live - logged_ids(store)
    assert not unlogged, f"{len(unlogged)} memories without a log line, e.g. {sorted(unlogged)[:3]}"


def wait_for_writes(store: Path, p: subprocess.Popen, timeout: float = 30.0) -> None:
    """Until the process starts writing (a temp file, a new fact file, the log grows) or ends:
    a kill during python's start-up would test nothing."""
    facts, log = store / "facts", store / "log.jsonl"
    names = set(os.listdir(facts))
    size = log.stat().st_size if log.exists() else 0
    deadline = time.monotonic() + timeout
    while p.poll() is None and time.monotonic() < deadline:
        now = set(os.listdir(facts))
        if now != names or (log.exists() and log.stat().st_size != size):
            return
        time.sleep(0.001)


def seed_store(store: Path, n: int = 40) -> None:
    records = "\n".join(json.dumps({"text": f"deploy note {i}: the release train leaves at {i % 24}:00"})
                        for i in range(n))
    assert memcli(store, "import", "--create", "-", input=records.encode()).exit_code == 0


SCENARIOS = {
    "import": lambda store, rng: ("import", "-"),
    "add": lambda store, rng: ("add", "--raw", f"a fact added at {rng.random()} about release trains"),
    "merge": lambda store, rng: ("merge", "--auto", "--threshold", "0.5"),
    "consolidate": lambda store, rng: ("consolidate", "--no-llm"),
}


@pytest.mark.parametrize("command", list(SCENARIOS))
def test_kill_9_at_random_points_leaves_a_whole_logged_store(tmp_path: Path, command: str) -> None:
    rng = random.Random(f"kill-{command}")
    store = tmp_path / "S"
    seed_store(store)
    for k in range(KILLS):
        args = SCENARIOS[command](store, rng)
        data = None
        if command == "import":
            data = "\n".join(json.dumps({"text": f"imported fact {k}-{i} about the deploy window {rng.random()}"})
                             for i in range(300)).encode()
        p = start(store, *args, input=data)
        wait_for_writes(store, p)
        time.sleep(rng.uniform(0, 0.05))  # somewhere inside the write phase (or just after it)
        p.send_signal(signal.SIGKILL)
        p.wait()
        check_whole(store)


def test_concurrent_writers_all_land(tmp_path: Path) -> None:
    store = tmp_path / "C"
    seed_store(store, 5)
    each = WRITERS // 4
    procs = [start(store, "add", "--raw", f"writer {w} fact {i}: service {w}-{i} listens on port {8000 + i}")
             for w in range(4) for i in range(each)]
    for p in procs:
        assert p.wait(timeout=300) == 0
    listed = json.loads(memcli(store, "list", "--json").stdout)["memories"]
    texts = {m["text"] for m in listed}
    assert all(f"writer {w} fact {i}: service {w}-{i} listens on port {8000 + i}" in texts
               for w in range(4) for i in range(each))
    check_whole(store)
