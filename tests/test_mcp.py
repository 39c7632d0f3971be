"""`memcli mcp` driven by the official SDK's own client over real stdio (a subprocess), and, where
a test reads what the tools answer and nothing of the process, over the SDK's in-memory transport
to the same server built in this process (`_in_process`: no new Python and model load, ~3 s CPU)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from memcli.api import Store
from memcli.core.memory import Memory

mcp = pytest.importorskip("mcp")


def _params(store: Path, **env: str):
    from mcp import StdioServerParameters

    return StdioServerParameters(command=sys.executable, args=["-m", "memcli", "--store", str(store), "mcp"],
                                 env={**os.environ, **env}, cwd=str(store.parent))


def _data(result) -> dict:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


async def _session(store: Path, steps):
    from mcp import Client

    async with Client(_params(store), read_timeout_seconds=120) as client:
        return await steps(client)


def _in_process(store: Path):
    """An MCP client connected in memory to `build_server` on `store`, as `memcli --store STORE mcp`
    builds it; on leaving, the store is closed on its thread, the server's pool shut down and the
    root logger as it was (the SDK's server may configure it: this process runs other tests)."""
    import contextlib
    import logging

    from mcp import Client

    from memcli.agents.mcp import build_server

    @contextlib.asynccontextmanager
    async def connected():
        root = logging.getLogger()
        saved = root.level, list(root.handlers)
        handle = Store(store)
        server = build_server(handle)
        try:
            async with Client(server, read_timeout_seconds=120) as client:
                yield client
        finally:
            server._memcli_pool.submit(handle.close).result(timeout=60)
            server._memcli_pool.shutdown(wait=True)
            root.setLevel(saved[0])
            root.handlers[:] = saved[1]

    return connected()


def test_remember_then_recall_over_stdio_with_the_real_model(tmp_path):
    store = tmp_path / "store"
    Store(store).init()

    async def steps(client):
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert {"remember", "recall", "get", "recent", "forget", "feedback"} <= set(tools)
        assert "decides" in tools["remember"].description.lower() or "ADD" in tools["remember"].description
        remembered = _data(await client.call_tool("remember", {
            "text": "The ledger API is deployed with `make release VERSION=x.y.z`; tags are never pushed by hand.",
            "tags": ["deploy"]}))
        (decision,) = remembered["decisions"]
        assert decision["event"] == "ADD" and decision["id"]
        again = _data(await client.call_tool("remember", {
            "text": "The ledger API is deployed with `make release VERSION=x.y.z`; tags are never pushed by hand."}))
        assert again["decisions"][0]["event"] == "NONE" and again["decisions"][0]["id"] == decision["id"]
        found = _data(await client.call_tool("recall", {"query": "how do we ship a new version of the API?"}))
        top = found["results"][0]
        assert top["id"] == decision["id"] and "make release" in top["text"]
        assert top["origins"] == ["mcp"] and len(top["date"]) == 10
        full = _data(await client.call_tool("get", {"id": top["id"]}))
        assert full["tags"][0] == "deploy" or "deploy" in full["tags"]
        rated = _data(await client.call_tool("feedback", {"id": top["id"], "verdict": "useful"}))
        assert rated["confidence"] > full["confidence"]
        recent = _data(await client.call_tool("recent", {"n": 3}))
        assert [r["id"] for r in recent["results"]] == [decision["id"]]
        return decision["id"], full["id"]

    short, full_id = asyncio.run(_session(store, steps))
    assert (store / "facts" / f"{full_id}.md").is_file() and full_id.endswith(short) and len(short) == 8


def test_hand_edits_between_calls_are_seen_and_forget_goes_to_the_trash(tmp_path):
    store = tmp_path / "store"
    s = Store(store, )
    s.init()

    async def steps(client):
        first = _data(await client.call_tool("recent", {}))
        assert first["results"] == []
        # a memory dropped in by hand (an editor, a git pull) while the server runs
        m = Memory(id="01JDQ8ZK4M6V3XW7T2B9C5N1RA", text="Staging Postgres listens on port 6543, not 5432.",
                   origins=["manual"])
        (store / "facts" / f"{m.id}.md").write_text(m.to_markdown())
        hits = _data(await client.call_tool("recall", {"query": "which port does staging postgres use?"}))
        assert hits["results"] and hits["results"][0]["text"].startswith("Staging Postgres listens on port 6543")
        # edited in place (same file, no rename): seen after the periodic full sync
        path = store / "facts" / f"{m.id}.md"
        path.write_text(path.read_text().replace("6543", "6544"))
        await asyncio.sleep(2.2)
        got = _data(await client.call_tool("get", {"id": "01JDQ8ZK"}))
        assert "6544" in got["text"]
        gone = _data(await client.call_tool("forget", {"id": "01JDQ8ZK", "reason": "the port moved again"}))
        assert gone["forgotten"] == m.id
        missing = await client.call_tool("get", {"id": m.id})
        assert missing.is_error
        return True

    assert asyncio.run(_session(store, steps))
    assert not (store / "facts" / "01JDQ8ZK4M6V3XW7T2B9C5N1RA.md").exists()
    trashed = (store / ".trash" / "01JDQ8ZK4M6V3XW7T2B9C5N1RA.md").read_text()
    assert "the port moved again" in trashed


def test_the_server_does_not_import_litellm_without_an_llm():
    import subprocess

    code = ("import sys, memcli.agents.mcp as m; from memcli.ops.handle import Store; "
            "m.build_server(Store(sys.argv[1]), warm=False); print('litellm' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, "/nonexistent"], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


# --- issue 22 / 24: what an agent is told, and how the server behaves under a careless client ----------
A_ID, B_ID = "01JDQ8ZK4M6V3XW7T2B9C5N1RA", "01JDQ8ZK4M6V3XW7T2B9C5N1RB"  # monotonic: one add's ids


def _write(store: Path, m: Memory) -> None:
    (store / "facts" / f"{m.id}.md").write_text(m.to_markdown())


def _logged_params(store: Path, errlog: Path):
    from mcp import StdioServerParameters

    cmd = f"exec {sys.executable} -m memcli --store {store} mcp 2>>{errlog}"
    return StdioServerParameters(command="sh", args=["-c", cmd], env=dict(os.environ), cwd=str(store.parent))


def _error_text(result) -> str:
    assert result.is_error, result.content
    return result.content[0].text


def test_user_errors_carry_the_cli_message_and_no_traceback_is_logged(tmp_path):
    from mcp import Client

    store, errlog = tmp_path / "store", tmp_path / "server.err"
    Store(store).init()
    _write(store, Memory(id=A_ID, text="The billing service deploys with `make ship`.", origins=["manual"]))
    _write(store, Memory(id=B_ID, text="The billing database is Postgres 16.", origins=["manual"]))

    async def steps():
        async with Client(_logged_params(store, errlog), read_timeout_seconds=120) as client:
            assert client.server_info.version == __import__("memcli").__version__
            out = {
                "unknown": _error_text(await client.call_tool("get", {"id": "NOPE"})),
                "ambiguous": _error_text(await client.call_tool("get", {"id": "01JDQ8ZK"})),
                "empty": _error_text(await client.call_tool("remember", {"text": "   "})),
                "since": _error_text(await client.call_tool("recall", {"query": "deploy", "since": "garbage"})),
                "forget": _error_text(await client.call_tool("forget", {"id": "ZZZZZZZZ", "reason": "x"})),
                "feedback": _error_text(await client.call_tool("feedback", {"id": "ZZZZZZZZ", "verdict": "useful"})),
                "huge": _error_text(await client.call_tool("get", {"id": "7" * 100_000})),
                "big_text": _error_text(await client.call_tool("remember", {"text": "word " * 2_000_000})),
            }
            recent = _data(await client.call_tool("recent", {"n": 5}))  # still answering after all that
            return out, recent

    out, recent = asyncio.run(steps())
    assert "no memory with id NOPE" in out["unknown"]
    assert "ambiguous" in out["ambiguous"] and A_ID in out["ambiguous"] and B_ID in out["ambiguous"]
    assert "nothing to remember" in out["empty"]
    assert out["since"].count("since") >= 1 and "garbage" in out["since"]
    assert "no memory with id ZZZZZZZZ" in out["forget"] and "no memory with id ZZZZZZZZ" in out["feedback"]
    assert "at most 128 characters" in out["huge"] and len(out["huge"]) < 300
    assert "characters; the most this tool takes is" in out["big_text"]
    assert not any(o.endswith("Error executing tool get") for o in out.values())
    # the shown short ids are 8 characters and resolve, though the full ids share 25 of 26
    assert sorted(r["id"] for r in recent["results"]) == sorted([A_ID[-8:], B_ID[-8:]])
    assert "Traceback" not in errlog.read_text()


def test_tools_are_annotated_and_resources_and_prompts_are_real(tmp_path):
    store = tmp_path / "store"
    Store(store).init()
    _write(store, Memory(id=A_ID, text="Releases are cut from the main branch every Tuesday.", origins=["manual"]))

    async def steps():
        async with _in_process(store) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            resources = (await client.list_resources()).resources
            templates = (await client.list_resource_templates()).resource_templates
            text = (await client.read_resource("memcli://recent")).contents[0].text
            prompts = (await client.list_prompts()).prompts
            prompt = await client.get_prompt("memcli-context", {"topic": "release schedule"})
            return tools, resources, templates, text, prompts, prompt

    tools, resources, templates, text, prompts, prompt = asyncio.run(steps())
    assert {"remember", "recall", "get", "recent", "list", "update", "forget", "feedback"} <= set(tools)
    for name in ("recall", "get", "recent", "list"):
        assert tools[name].annotations.read_only_hint is True, name
    assert tools["forget"].annotations.destructive_hint is True
    assert tools["remember"].annotations.read_only_hint is False
    assert tools["update"].annotations.destructive_hint is False
    assert "results" in tools["recall"].output_schema["properties"]  # a real schema, not a generic object
    assert {str(r.uri) for r in resources} >= {"memcli://recent", "memcli://context"} and templates
    assert "Releases are cut from the main branch" in text and f"`{A_ID[-8:]}`" in text
    assert prompts and "Releases are cut" in prompt.messages[0].content.text


def test_agent_reads_hide_superseded_and_show_a_contradiction_as_one(tmp_path):
    store = tmp_path / "store"
    Store(store).init()
    old, new = "01JDQ8ZK4M6V3XW7T2B9C5N1R0", "01JDQ8ZK4M6V3XW7T2B9C5N1R1"
    _write(store, Memory(id=old, text="The docs are deployed to Read the Docs on every tag.", origins=["manual"],
                         extra={"superseded_by": new}))
    _write(store, Memory(id=new, text="The docs are now deployed to GitHub Pages instead of Read the Docs.",
                         origins=["manual"]))
    _write(store, Memory(id=A_ID, text="Always squash commits when merging a pull request.", origins=["manual"],
                         links=[{"rel": "contradicts", "id": B_ID}]))
    _write(store, Memory(id=B_ID, text="Never squash commits when merging a pull request.", origins=["manual"],
                         links=[{"rel": "contradicts", "id": A_ID}]))

    async def steps():
        async with _in_process(store) as client:
            recent = _data(await client.call_tool("recent", {"n": 100}))["results"]
            listed = _data(await client.call_tool("list", {"n": 100}))["results"]
            docs = _data(await client.call_tool("recall", {"query": "where are the docs deployed?", "k": 10}))
            squash = _data(await client.call_tool("recall", {"query": "squash commits when merging", "k": 10}))
            return recent, listed, docs["results"], squash["results"]

    recent, listed, docs, squash = asyncio.run(steps())
    for results in (recent, listed, docs):
        assert not any("Read the Docs on every tag" in r["text"] for r in results)
    assert any("GitHub Pages" in r["text"] for r in docs)
    for results in (recent, listed, squash):
        sides = [r for r in results if "squash" in r["text"]]
        assert len(sides) == 1 and len(sides[0]["conflict"]) == 1  # one item: "A, or B?"
        assert {sides[0]["text"][:6], sides[0]["conflict"][0]["text"][:6]} == {"Always", "Never "}
    block = Store(store).context(budget=5000)
    assert "Read the Docs on every tag" not in block and "GitHub Pages" in block
    assert block.count("squash commits") == 2 and block.count("UNRESOLVED") == 1
    for sid in (new[-8:], A_ID[-8:], B_ID[-8:]):  # the ids context tells agents to cite resolve
        assert f"`{sid}`" in block and Store(store).resolve(sid) in (new, A_ID, B_ID)


def test_update_and_list_tools(tmp_path):
    store = tmp_path / "store"
    Store(store).init()
    _write(store, Memory(id=A_ID, text="CI runs on Python 3.10.", tags=["ci"], origins=["manual"]))
    _write(store, Memory(id=B_ID, text="The API listens on port 8080.", tags=["api"], origins=["manual"]))

    async def steps():
        async with _in_process(store) as client:
            upd = _data(await client.call_tool("update", {"id": A_ID[-8:], "text": "CI runs on Python 3.12.",
                                                          "tags": ["python"]}))
            ci = _data(await client.call_tool("list", {"tags": ["ci"]}))["results"]
            empty = _error_text(await client.call_tool("update", {"id": A_ID[-8:], "text": ""}))
            return upd, ci, empty

    upd, ci, empty = asyncio.run(steps())
    assert upd["was"] == "CI runs on Python 3.10." and upd["text"] == "CI runs on Python 3.12."
    assert [r["text"] for r in ci] == ["CI runs on Python 3.12."] and "python" in ci[0]["tags"]
    assert "empty" in empty
    m = Store(store).get(A_ID)
    assert m.history and m.history[-1]["old"] == "CI runs on Python 3.10."


def test_no_store_is_an_answer_not_a_dead_connection(tmp_path):
    from mcp import Client

    async def steps():
        async with Client(_params(tmp_path / "missing"), read_timeout_seconds=60) as client:
            return _error_text(await client.call_tool("recent", {}))

    text = asyncio.run(steps())
    assert "no memcli store at" in text and "memcli init" in text


def test_a_client_that_closes_both_pipes_with_calls_pending_ends_the_server_quietly(tmp_path):
    import subprocess

    store = tmp_path / "store"
    Store(store).init()
    proc = subprocess.Popen([sys.executable, "-m", "memcli", "--store", str(store), "mcp"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def send(obj):
        proc.stdin.write((json.dumps(obj) + "\n").encode())

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
    proc.stdin.flush()
    assert b'"result"' in proc.stdout.readline()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    for i in range(1, 40):
        send({"jsonrpc": "2.0", "id": i, "method": "tools/call",
              "params": {"name": "remember", "arguments": {"text": f"Service {i} listens on port {8000 + i}."}}})
    proc.stdin.flush()
    proc.stdin.close()
    proc.stdout.close()
    code = proc.wait(timeout=120)
    err = proc.stderr.read().decode()
    assert code == 0 and "Traceback" not in err and "ExceptionGroup" not in err, err
