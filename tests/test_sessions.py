"""Agent sessions and chat exports become a few dated memories and one summary, not sentence dumps.

The fixtures are written here in the shapes real transcripts have (bench/realdata/sessions: Claude
Code JSONL with tool calls, tool results, progress lines, task notifications and system reminders;
ChatGPT's conversations.json with epoch `create_time`s); none of their texts come from those files.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import llm_server as fake_llm
import pytest
from conftest import HASH, Cli
from typer.testing import CliRunner

from memcli.agents import capture as capturing
from memcli.agents import spool
from memcli.cli.app import app
from memcli.ops.handle import Store  # what the worker runs on (memcli.api.Store is the facade)
from memcli.services import transcripts
from memcli.services.filters import junk_class

llm_server = fake_llm.llm_server  # the fixture
SESSION = "5d1e0f3a-77b2-4c1e-9a4f-0b6c2d8e9f10"
NARRATION = [
    "Let me check the deploy config first.",
    "Now I have a complete picture.",
    "All 31 tests pass.",
    "Perfect! The migration is in place.",
    "I'll continue waiting for the fetch to finish.",
]
FINDING = ("Render's free tier has no persistent disk, so SQLite is wiped on every redeploy; "
           "the entrypoint now runs db:seed after db:prepare on each boot.")
CAUSE = ("The 422 on the curl POST came from the CSRF check: Rails rejects a form post without the "
         "authenticity token, so the smoke test now reads the token from the page first.")


def _line(kind: str, at: str, content, **extra) -> dict:
    role = "user" if kind == "user" else "assistant"
    return {"type": kind, "sessionId": SESSION, "timestamp": at, "cwd": "/work/jgive", "uuid": at,
            "message": {"role": role, "content": content}, **extra}


def transcript_lines() -> list[dict]:
    """A Claude Code session: a request, narration, a tool call and its result, two findings, an
    injected task notification, a system reminder inside a user turn, progress and snapshot lines."""
    return [
        {"type": "file-history-snapshot", "messageId": "m0", "snapshot": {}},
        {"type": "progress", "sessionId": SESSION, "timestamp": "2025-03-04T09:00:00.000Z", "data": {}},
        _line("user", "2025-03-04T09:00:05.120Z", "deploy the donation app to render and keep the seed data"),
        _line("assistant", "2025-03-04T09:00:09.000Z", [
            {"type": "thinking", "thinking": "the user wants render", "signature": "x"},
            {"type": "text", "text": NARRATION[0]}]),
        _line("assistant", "2025-03-04T09:00:11.000Z", [
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "cat render.yaml"}}]),
        _line("user", "2025-03-04T09:00:12.000Z", [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "services:\n  - type: web\n"}]),
        _line("assistant", "2025-03-04T09:02:30.000Z", f"{NARRATION[1]}\n\n{FINDING}\n\n{NARRATION[2]}"),
        _line("user", "2025-03-04T09:05:00.000Z",
              "<task-notification>\n<task-id>b41f2c</task-id>\n<status>completed</status>\n"
              "<summary>Background command \"bin/rails server\" completed (exit code 0)</summary>\n"
              "</task-notification>"),
        _line("user", "2025-03-04T09:06:00.000Z", [
            {"type": "text", "text": "<system-reminder>\nThe TodoWrite tool hasn't been used recently.\n"
                                     "</system-reminder>"},
            {"type": "text", "text": "why did the curl POST get a 422?"}]),
        _line("assistant", "2025-03-04T09:07:45.000Z", f"{CAUSE}\n\n{NARRATION[3]} {NARRATION[4]}"),
        {"type": "system", "sessionId": SESSION, "timestamp": "2025-03-04T09:08:00.000Z", "content": "compacted"},
    ]


def write_transcript(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def exported(cli: Cli) -> list[dict]:
    return [json.loads(line) for line in cli("export", "--format", "jsonl").stdout.splitlines() if line.strip()]


def test_a_transcript_import_keeps_findings_dated_to_their_turn_and_one_summary(tmp_path, hash_cli):
    path = write_transcript(tmp_path / "session.jsonl", transcript_lines())
    hash_cli("import", "--from", "claude-code", str(path), "--json")
    mems = exported(hash_cli)
    texts = [m["text"] for m in mems]
    assert any("no persistent disk" in t and "db:seed" in t for t in texts)
    assert any("CSRF" in t for t in texts)
    for said in NARRATION:  # narration is never a memory, alone or glued to a finding
        assert not any(said in t for t in texts), said
    assert not any("task-notification" in t or "TodoWrite" in t or "exit code 0" in t for t in texts)
    assert not any("services:" in t for t in texts)  # the tool's output
    by_text = {m["text"]: m for m in mems}
    finding = next(m for t, m in by_text.items() if "no persistent disk" in t and "summary" not in m["tags"])
    assert finding["created"] == "2025-03-04T09:02:30Z"  # its own turn's time, not the import's
    cause = next(m for t, m in by_text.items() if "CSRF" in t and "summary" not in m["tags"])
    assert cause["created"] == "2025-03-04T09:07:45Z"
    summaries = [m for m in mems if "summary" in m["tags"]]
    assert len(summaries) == 1
    assert "deploy the donation app to render" in summaries[0]["text"]
    assert "2025-03-04T09:00:00Z" <= summaries[0]["created"] <= "2025-03-04T09:08:00Z"
    for m in mems:
        assert f"session:{SESSION}" in m["origins"] and "import:session.jsonl" in m["origins"]


def test_importing_the_same_session_again_adds_nothing(tmp_path, hash_cli):
    path = write_transcript(tmp_path / "session.jsonl", transcript_lines())
    hash_cli("import", "--from", "claude-code", str(path))
    before = len(exported(hash_cli))
    hash_cli("import", "--from", "claude-code", str(path))
    assert len(exported(hash_cli)) == before


def chatgpt_export(n: int = 3) -> list[dict]:
    """`n` conversations as ChatGPT exports them: a mapping of nodes, a system root, epoch times."""
    out = []
    for k in range(n):
        t0 = 1735478600.25 + 86400 * k
        nodes = {"root": {"id": "root", "message": None, "parent": None, "children": ["sys"]},
                 "sys": {"id": "sys", "parent": "root", "children": ["u1"], "message": {
                     "id": "sys", "author": {"role": "system"}, "create_time": None,
                     "content": {"content_type": "text", "parts": [""]}}}}
        said = [("user", f"how do I stop git tracking runtime{k}.log, the push was rejected?"),
                ("assistant", f"GitHub rejects files over 100 MB, and runtime{k}.log is 380 MB; run "
                              f"`git rm --cached runtime{k}.log`, add it to .gitignore and amend the commit."),
                ("assistant", "Great question! Hope this helps.")]
        parent = "sys"
        for i, (role, text) in enumerate(said):
            nid = f"c{k}m{i}"
            nodes[parent]["children"] = [nid]
            nodes[nid] = {"id": nid, "parent": parent, "children": [], "message": {
                "id": nid, "author": {"role": role}, "create_time": t0 + 10 * (i + 1),
                "content": {"content_type": "text", "parts": [text]}, "recipient": "all"}}
            parent = nid
        out.append({"title": f"git push rejected {k}", "create_time": t0, "update_time": t0 + 60,
                    "mapping": nodes, "current_node": parent, "conversation_id": f"conv-{k}"})
    return out


def test_a_chatgpt_export_is_dated_with_its_messages_times(tmp_path, hash_cli):
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(chatgpt_export()), encoding="utf-8")
    report = json.loads(hash_cli("import", "--from", "chatgpt", str(path), "--json").stdout)["conversations"]
    assert [c["title"] for c in report] == ["git push rejected 0", "git push rejected 1", "git push rejected 2"]
    mems = exported(hash_cli)
    assert not any("Great question" in m["text"] for m in mems)
    fix = next(m for m in mems if "git rm --cached runtime1.log" in m["text"] and "summary" not in m["tags"])
    assert fix["created"] == "2024-12-30T13:23:40Z"  # the message's create_time (epoch 1735564980.25 + 20)
    assert "session:conv-1" in fix["origins"]
    assert sum("summary" in m["tags"] for m in mems) == 3  # one per conversation
    assert all(m["created"] < "2025-01-01" for m in mems)


def test_a_chatgpt_export_is_read_one_conversation_at_a_time(monkeypatch):
    data = chatgpt_export(5)
    monkeypatch.setattr(transcripts, "_READ", 64)  # items far larger than a read: read in steps
    streamed = list(transcripts.iter_chatgpt(io.StringIO(json.dumps(data)), "x"))
    whole = transcripts.read_chatgpt(data)
    assert [c.id for c in streamed] == [c.id for c in whole] == [f"conv-{k}" for k in range(5)]
    assert [c.turns for c in streamed] == [c.turns for c in whole]
    assert [c.times for c in streamed] == [c.times for c in whole]


@pytest.mark.parametrize("bad", ['[{"mapping": {}}', '[{"mapping": {}} {"mapping": {}}]', "[1,"])
def test_a_broken_export_is_one_line_error(tmp_path, hash_cli, bad):
    path = tmp_path / "conversations.json"
    path.write_text(bad, encoding="utf-8")
    r = hash_cli("import", "--from", "chatgpt", str(path), ok=False)
    assert r.exit_code == 1 and r.stderr.startswith("memcli: error:") and "Traceback" not in r.stderr


def test_capture_dates_turns_and_later_captures_update_the_one_summary(tmp_path):
    store = tmp_path / "store"
    runner = CliRunner()
    env = {"MEMCLI_EMBED_MODEL": HASH}
    assert runner.invoke(app, ["--store", str(store), "init"], env=env).exit_code == 0
    lines = transcript_lines()
    path = write_transcript(tmp_path / "live.jsonl", lines[:7])  # the session so far
    hook = {"session_id": SESSION, "transcript_path": str(path), "cwd": str(tmp_path), "hook_event_name": "Stop"}

    def capture_and_process() -> None:
        capturing.run("claude-code", store=str(store), stdin=json.dumps(hook).encode(), worker="none")
        spool.process(Store(store))

    capture_and_process()
    write_transcript(path, lines)  # the session went on
    capture_and_process()
    mems = [m.to_dict() for m in Store(store).index.iter_select(None)]
    texts = [m["text"] for m in mems]
    assert not any(said in t for said in NARRATION for t in texts)
    cause = next(m for m in mems if "CSRF" in m["text"] and "summary" not in m["tags"])
    assert cause["created"] == "2025-03-04T09:07:45Z"
    summaries = [m for m in mems if "summary" in m["tags"]]
    assert len(summaries) == 1, [m["text"] for m in summaries]
    assert "CSRF" in summaries[0]["text"] and "deploy the donation app" in summaries[0]["text"]
    assert all(f"session:{SESSION}" in m["origins"] for m in mems)


@pytest.mark.parametrize("said", NARRATION)
def test_add_import_and_capture_share_one_filter(tmp_path, hash_cli, said):
    assert junk_class(said) == "narration"
    r = json.loads(hash_cli("add", "-", "--json", input=f"{said}\n\n{FINDING}").stdout)
    kept = [f["text"] for f in r["extraction"]["facts"]]
    assert kept and not any(said in t for t in kept)


def test_with_an_llm_one_extraction_request_per_chunk_dated_by_its_turns(tmp_path, llm_server):
    llm_server.script([json.dumps({"facts": [FINDING, "Now I have a complete picture."]})])
    llm_server.default = json.dumps({"facts": []})
    env = {"MEMCLI_EMBED_MODEL": HASH, "MEMCLI_LLM_MODEL": llm_server.model, "MEMCLI_LLM_API_BASE": llm_server.url,
           "MEMCLI_LLM_TIMEOUT": "5", "MEMCLI_LLM_RETRIES": "0"}
    cli = Cli(tmp_path / "store", env=env)
    path = write_transcript(tmp_path / "session.jsonl", transcript_lines())
    cli("import", "--from", "claude-code", str(path))
    extracts = [r for r in llm_server.requests if "You extract long-term memories" in json.dumps(r["messages"])]
    assert len(extracts) == 1  # the whole (small) session is one chunk: one extraction prompt
    sent = json.dumps(extracts[0]["messages"])
    assert "Let me check the deploy config" not in sent and "task-notification" not in sent
    mems = exported(cli)
    texts = [m["text"] for m in mems]
    assert FINDING in texts and "Now I have a complete picture." not in texts
    finding = next(m for m in mems if m["text"] == FINDING)
    assert finding["created"] == "2025-03-04T09:07:45Z"  # the chunk's last turn
    assert f"session:{SESSION}" in finding["origins"]


def test_a_later_capture_of_a_few_turns_still_applies_the_bar(tmp_path):
    """A hook captures after every answer: two new turns are part of a long session, not a short
    exchange whose every remark is kept (an import of a two-turn chat keeps them)."""
    store = tmp_path / "store"
    env = {"MEMCLI_EMBED_MODEL": HASH}
    assert CliRunner().invoke(app, ["--store", str(store), "init"], env=env).exit_code == 0
    lines = transcript_lines()
    path = write_transcript(tmp_path / "live.jsonl", lines)
    hook = {"session_id": SESSION, "transcript_path": str(path), "cwd": str(tmp_path), "hook_event_name": "Stop"}
    capturing.run("claude-code", store=str(store), stdin=json.dumps(hook).encode(), worker="none")
    spool.process(Store(store))
    weak = "The sidebar collapses into a drawer below 640 pixels wide."
    write_transcript(path, [*lines, _line("user", "2025-03-04T09:10:00.000Z", "and on mobile?"),
                            _line("assistant", "2025-03-04T09:10:30.000Z", weak)])
    capturing.run("claude-code", store=str(store), stdin=json.dumps(hook).encode(), worker="none")
    spool.process(Store(store))
    texts = [m.text for m in Store(store).index.iter_select(None)]
    assert not any(t == weak for t in texts)
    chat = Cli(tmp_path / "other", env=env)
    two = write_transcript(tmp_path / "two.jsonl", [_line("user", "2025-03-04T09:10:00.000Z", "and on mobile?"),
                                                    _line("assistant", "2025-03-04T09:10:30.000Z", weak)])
    chat("import", "--from", "claude-code", str(two), "--create")
    assert weak in [m["text"] for m in exported(chat)]


@pytest.mark.parametrize(("said", "why"), [
    # real texts (bench/realdata/sessions): a quoted example string, a sentence cut at its comma,
    # a bold label ending in a colon with nothing after it
    ('"Market X just moved 20% in 1 hour — you bought at $0.35, now $0.55. Take profit?"', "fragment"),
    ("4️⃣ 현실적인 결론: 나는 인간처럼 “경험을 회상”하진 못하지만 대신,", "fragment"),
    ("**最終 Top 5 (full 90d, 7982 substantive PRs, 183 engineers):**", "fragment"),
    ('The error "permission denied" means the deploy key lacks write access.', None),
    ("We deploy with Kamal, not Capistrano, because the server already runs Docker.", None),
    # an arrow-led line goes on with the point before it, unless it names something to run or open
    ("→ 예: 투자결과 리포트, 포트폴리오 성과, 자동 차트 페이지.", "fragment"),
    ("→ `index.html`만 깃허브에 올리면, GitHub Pages에서 바로 웹사이트로 열립니다.", None),
])
def test_quoted_examples_cut_sentences_and_labels_are_fragments(said, why):
    assert junk_class(said) == why
