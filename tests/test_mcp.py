"""`memcli mcp` driven by the official SDK's own client over real stdio (a subprocess)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from memcli.core.memory import Memory
from memcli.ops.handle import Store

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
