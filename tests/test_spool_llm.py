"""Never block a caller on a slow model: with an LLM configured, MCP `remember` and `add` run by git
return once the input is spooled and a background worker calls the model; `inbox retry` and the
worker never process one item twice. The model is tests/llm_server.py's FakeLLMServer over real
HTTP, holding its answer until the caller has returned (a gate: no race a busy machine could lose);
every memcli under test runs as a real subprocess (the worker is detached); the store is read back
in-process."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

_TESTS = Path(__file__).resolve().parent
for _p in (str(_TESTS), str(_TESTS.parent)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import llm_server as fake_llm  # noqa: E402
from conftest import HASH, Cli, listed, run_memcli  # noqa: E402
from llm_server import FakeLLMServer  # noqa: E402
from test_pipeline_llm import facts_reply, llm_env  # noqa: E402

from memcli.agents import spool  # noqa: E402
from memcli.ops.handle import Store  # noqa: E402

llm_server = fake_llm.llm_server

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

FACT = "The billing export runs nightly at 02:00 UTC and writes to the finance bucket"


def env_for(server: FakeLLMServer) -> dict[str, str]:
    # a long timeout: the model is slow, not down
    return {**llm_env(server.url, MEMCLI_LLM_TIMEOUT="60"), "MEMCLI_EMBED_MODEL": HASH}


def texts(store: Path, env: dict[str, str]) -> list[str]:
    """What `memcli list` shows (in-process: it is polled while the real processes work)."""
    return [m["text"] for m in listed(store, env=env)]


def wait_for(condition, what: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def test_mcp_remember_returns_the_queued_item_and_a_worker_calls_the_slow_model(tmp_path, llm_server):
    pytest.importorskip("mcp")
    from mcp import Client, StdioServerParameters

    store = tmp_path / "store"
    Store(store).init()
    answer = threading.Event()  # the model "answers" when the test opens this: after remember returned
    llm_server.script([{"content": facts_reply(FACT), "gate": answer}])
    env = env_for(llm_server)
    params = StdioServerParameters(command=sys.executable, args=["-m", "memcli", "--store", str(store), "mcp"],
                                   env={**os.environ, **env}, cwd=str(tmp_path))

    async def steps(client):
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert "queued" in tools["remember"].description
        result = await client.call_tool("remember", {"text": f"Note: {FACT}.", "tags": ["billing"]})
        assert not result.is_error, result.content
        assert llm_server.replies == 0  # it returned without the model's answer (none was given yet)
        answer.set()
        data = result.structured_content or json.loads(result.content[0].text)
        assert data["queued"].endswith(".json") and data["decisions"] == []
        deadline = time.monotonic() + 180
        while True:  # the worker's memory shows up in the same server's recall
            recent = await client.call_tool("recent", {"n": 5})
            found = (recent.structured_content or json.loads(recent.content[0].text))["results"]
            if found:
                return found
            assert time.monotonic() < deadline, "the worker never stored the memory"
            await asyncio.sleep(0.5)

    async def session():
        async with Client(params, read_timeout_seconds=120) as client:
            return await steps(client)

    try:
        (found,) = asyncio.run(session())
    finally:
        answer.set()
    assert found["text"] == FACT and found["origins"] == ["mcp"] and "billing" in found["tags"]
    (request,) = llm_server.requests  # the worker asked the model once, for the extraction
    assert "Note:" in json.dumps(request)
    assert not list((store / "inbox").glob("*.json"))


def test_add_run_by_a_git_hook_returns_before_the_slow_model_answers(tmp_path, llm_server):
    store = tmp_path / "store"
    Store(store).init()
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, **env_for(llm_server), "GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@example.com",
           "GIT_COMMITTER_NAME": "Dev", "GIT_COMMITTER_EMAIL": "dev@example.com"}
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True, env=env)
    hook = repo / ".git" / "hooks" / "post-commit"  # the hand-written hook of the README of old
    hook.write_text(f'#!/bin/sh\n{sys.executable} -m memcli --store {store} add --tag git '
                    '"$(git log -1 --format=%B)"\n')
    hook.chmod(0o755)
    answer = threading.Event()  # the model "answers" when the test opens this: after the commit returned
    llm_server.script([{"content": facts_reply(FACT), "gate": answer}])
    (repo / "a.txt").write_text("a\n")
    subprocess.run(["git", "add", "a.txt"], cwd=repo, check=True, env=env)
    try:
        out = subprocess.run(["git", "commit", "-q", "-m", f"billing: {FACT}"], cwd=repo, capture_output=True,
                             text=True, env=env)
        assert llm_server.replies == 0  # the commit returned without the model's answer (none was given yet)
        assert out.returncode == 0, out.stderr
        assert "queued as inbox/" in out.stderr
        assert texts(store, env) == []  # not yet: the model is still thinking
    finally:
        answer.set()
    wait_for(lambda: texts(store, env) == [FACT], "the worker's memory")
    assert len(llm_server.requests) == 1 and not list((store / "inbox").glob("*.json"))
    # an interactive add (not run by git) still waits and reports its decisions
    llm_server.script([facts_reply("Invoices are numbered per tenant")])
    r = run_memcli("--store", str(store), "add", "--json", "invoices are numbered per tenant", env=env_for(llm_server))
    assert r.returncode == 0, r.stderr
    assert [e["event"] for e in json.loads(r.stdout)["memory"]] == ["ADD"] and len(llm_server.requests) == 2


def test_inbox_retry_leaves_an_item_another_worker_holds(tmp_path, llm_server):
    store = tmp_path / "store"
    Store(store).init()
    item = spool.spool(store, "The staging database is Postgres 16 on port 5433.", {"origins": ["cli"]})
    env = env_for(llm_server)
    llm_server.script([facts_reply("The staging database is Postgres 16 on port 5433")])
    with open(item) as held:  # a worker (`memcli inbox process`) is processing it
        fcntl.flock(held, fcntl.LOCK_EX)
        r = run_memcli("--store", str(store), "inbox", "retry", env=env)
        assert r.returncode == 0, r.stderr
        assert "another worker" in r.stderr
        assert item.exists() and json.loads(item.read_text())["attempts"] == 0  # untouched
        assert llm_server.requests == [] and texts(store, env) == []
    # released: now it is processed (in-process: a second process would only re-import litellm)
    r = Cli(store, env=env)("inbox", "retry")
    assert not item.exists() and texts(store, env) == ["The staging database is Postgres 16 on port 5433"]


def test_an_interactive_add_shows_which_request_waits_on_the_model(tmp_path, llm_server):
    """At a terminal (stderr is a tty) `add` waits for the model and says so, with the time taken."""
    import pty
    import re

    store = tmp_path / "store"
    Store(store).init()
    llm_server.script([{"content": facts_reply(FACT), "delay": 1.5}])
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "memcli", "--store", str(store), "add", f"Note: {FACT}."],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave,
                            env={**os.environ, **env_for(llm_server)})
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the terminal's other side closed
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    stdout = proc.stdout.read().decode()
    assert proc.wait(timeout=120) == 0, shown
    assert re.search(r"waiting for the model \(extract\)\.\.\. \d+\.\ds", shown.decode()), shown
    assert FACT in stdout and texts(store, env_for(llm_server)) == [FACT]


def test_add_spool_queues_the_redacted_text_and_returns(tmp_path):
    store = tmp_path / "store"
    Store(store).init()
    env = {"MEMCLI_EMBED_MODEL": HASH}
    secret = "dana.kim@acme-corp.dev"
    # no worker may run before the item is read: hold the worker lock as a running worker would
    (store / "inbox").mkdir(exist_ok=True)
    with open(store / "inbox" / spool.WORKER_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        r = run_memcli("--store", str(store), "add", "--spool", "--json", "--tag", "ci",
                       f"Ask {secret} before rotating the staging certificates; they expire every 90 days.", env=env)
        assert r.returncode == 0, r.stderr
        queued = json.loads(r.stdout)["queued"]
        raw = (store / "inbox" / queued).read_text()
        assert secret not in raw and "[REDACTED:email]" in raw and "expire every 90 days" in raw
        assert texts(store, env) == []
    r = run_memcli("--store", str(store), "inbox", "process", env=env)
    assert r.returncode == 0, r.stderr
    (text,) = texts(store, env)
    assert "expire every 90 days" in text and secret not in text
    bad = run_memcli("--store", str(store), "add", "--spool", "--dry-run", "x", env=env)
    assert bad.returncode == 2 and "conflicts with --dry-run" in bad.stderr
