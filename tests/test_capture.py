"""Claude Code end to end: `hooks install claude-code`, recorded hook payloads and a transcript file,
run exactly as Claude Code runs the installed commands (a shell, JSON on stdin)."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from conftest import HASH, listed, run_memcli

from memcli.ops.handle import Store
from memcli.services.transcripts import read_chatgpt, read_claude_code

FIXTURES = Path(__file__).parent / "fixtures"
SESSION = "3f9c2b7e-8a41-4d5e-9c0b-2e6f1a7d4b93"
ENV = {"MEMCLI_EMBED_MODEL": HASH,  # `memcli` found on PATH, as the portable hook commands expect
       "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def payload(event: str, transcript: Path, cwd: Path) -> str:
    data = json.loads((FIXTURES / "claude_code_hook_payloads.json").read_text())[event]
    return json.dumps({**data, "transcript_path": str(transcript), "cwd": str(cwd)})


def run_hook(command: str, stdin: str, cwd: Path) -> tuple[subprocess.CompletedProcess, float, float]:
    """Run a hook's command as Claude Code does: (its result, wall seconds, CPU seconds of what the
    caller waits for; a detached worker is not waited for, so not counted)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(["sh", "-c", command], input=stdin, capture_output=True, text=True, cwd=cwd,
                         env={**os.environ, **ENV}, timeout=60)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return out, wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def memories(store: Path) -> list[dict]:
    """What `memcli list` shows (in-process: the hooks under test run as real processes)."""
    return listed(store, env=ENV)


def settle(store: Path, timeout: float = 120) -> None:
    """Wait for the detached worker to empty the inbox."""
    deadline = time.monotonic() + timeout
    while list((store / "inbox").glob("*.json")):
        assert time.monotonic() < deadline, "the worker did not empty the inbox"
        time.sleep(0.2)
    time.sleep(0.3)


def test_claude_code_hooks_capture_only_new_text_and_context_prints_it(tmp_path):
    project = tmp_path / "ledger"
    project.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    store = project / ".memcli"
    Store(store).init()
    claude = project / ".claude"
    claude.mkdir()
    mine = {"model": "sonnet", "permissions": {"allow": ["Bash(npm test)"]},
            "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]}}
    (claude / "settings.json").write_text(json.dumps(mine, indent=2))
    for _ in range(2):  # idempotent
        r = run_memcli("hooks", "install", "claude-code", env=ENV, cwd=project)
        assert r.returncode == 0, r.stderr
    settings = json.loads((claude / "settings.json").read_text())
    assert settings["model"] == "sonnet" and settings["permissions"] == mine["permissions"]
    stop_commands = [h["command"] for g in settings["hooks"]["Stop"] for h in g["hooks"]]
    assert stop_commands[0] == "notify-send done" and len(stop_commands) == 2
    commands = {ev: [h["command"] for g in settings["hooks"][ev] for h in g["hooks"] if "memcli" in h["command"]]
                for ev in ("SessionStart", "Stop", "PreCompact", "SessionEnd")}
    assert all(len(c) == 1 for c in commands.values()), commands

    transcript = tmp_path / "claude" / f"{SESSION}.jsonl"
    transcript.parent.mkdir()
    shutil.copy(FIXTURES / "claude_code_session.jsonl", transcript)
    out, took, cpu = run_hook(commands["Stop"][0], payload("Stop", transcript, project), project)
    assert out.returncode == 0 and out.stdout == "" and out.stderr == "", out
    # a hook's budget, judged by CPU (~0.05 s; a busy machine barely moves it): a hook that waited
    # for the worker would count its model load; bench/hooks.py measures the < 100 ms wall target
    assert cpu < 0.4, (cpu, took)
    settle(store)
    mems = memories(store)
    texts = " | ".join(m["text"] for m in mems)
    assert "half to even" in texts and "Vault" in texts, texts
    for noise in ("ghp_", "12 passed", "ROUND_HALF_UP", "/init", "thinking", "dana@acme.dev"):
        assert noise not in texts, noise  # tool output, tool calls, injected commands, secrets
    assert all(f"session:{SESSION}" in m["origins"] for m in mems)
    before = len(mems)

    # the session goes on; the next Stop takes only the new lines
    with open(transcript, "a") as f:
        f.write((FIXTURES / "claude_code_session_more.jsonl").read_text())
    out, _, _ = run_hook(commands["SessionEnd"][0], payload("SessionEnd", transcript, project), project)
    assert out.returncode == 0 and out.stdout == "" and out.stderr == "", out
    settle(store)
    mems = memories(store)
    assert any("5433" in m["text"] for m in mems) and len(mems) > before
    log = [json.loads(x) for x in (store / "log.jsonl").read_text().splitlines()]
    assert not [e for e in log if e["event"] == "NONE"], "earlier lines were sent again"
    # nothing new: nothing spooled
    done_before = sum(e["event"] == "INBOX_DONE" for e in log)
    out, _, _ = run_hook(commands["PreCompact"][0], payload("PreCompact", transcript, project), project)
    assert out.returncode == 0
    time.sleep(0.5)
    log = [json.loads(x) for x in (store / "log.jsonl").read_text().splitlines()]
    assert sum(e["event"] == "INBOX_DONE" for e in log) == done_before and not list((store / "inbox").glob("*.json"))

    # SessionStart: its stdout is what Claude Code adds to the session
    out, _, _ = run_hook(commands["SessionStart"][0], payload("SessionStart", transcript, project), project)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("## What memcli remembers") and "half to even" in out.stdout and "5433" in out.stdout
    small = run_memcli("context", "--budget", "100", env=ENV, cwd=project)
    assert small.returncode == 0 and 0 < len(small.stdout) <= 100 * 4 and "more" in small.stdout

    r = run_memcli("hooks", "install", "claude-code", "--uninstall", env=ENV, cwd=project)
    assert r.returncode == 0, r.stderr
    assert json.loads((claude / "settings.json").read_text()) == mine


def test_shared_claude_settings_hold_portable_commands_that_fail_open(tmp_path):
    project = tmp_path / "ledger"
    project.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    Store(project / ".memcli").init()
    r = run_memcli("hooks", "install", "claude-code", env=ENV, cwd=project)
    assert r.returncode == 0, r.stderr
    shared = (project / ".claude" / "settings.json").read_text()
    here = str(Path(__file__).resolve().parents[1])
    for machine_specific in (sys.executable, here, str(tmp_path), str(Path.home())):
        assert machine_specific not in shared, machine_specific
    assert not (project / ".claude" / "settings.local.json").exists()
    settings = json.loads(shared)
    commands = [h["command"] for ev in ("SessionStart", "Stop", "PreCompact", "SessionEnd")
                for g in settings["hooks"][ev] for h in g["hooks"]]
    assert len(commands) == 4 and all("memcli" in c for c in commands)
    # memcli not installed (a teammate, or after an uninstall): every hook exits 0 and says nothing
    bare = {**os.environ, "PATH": "/usr/bin:/bin"}
    for c in commands:
        out = subprocess.run(["sh", "-c", c], input="{}", capture_output=True, text=True, cwd=project, env=bare)
        assert (out.returncode, out.stdout, out.stderr) == (0, "", ""), (c, out)
    # this machine's interpreter goes only to the local file
    r = run_memcli("hooks", "install", "claude-code", "--scope", "local", env=ENV, cwd=project)
    assert r.returncode == 0, r.stderr
    local = (project / ".claude" / "settings.local.json").read_text()
    assert sys.executable in local and (project / ".claude" / "settings.json").read_text() == shared
    assert "captured twice" in r.stderr  # both files hold memcli's hooks now: said, not silently doubled
    # a store outside the project is machine-specific too: never written to the shared file
    outside = tmp_path / "elsewhere"
    Store(outside).init()
    r = run_memcli("--store", str(outside), "hooks", "install", "claude-code", env=ENV, cwd=project)
    assert r.returncode == 0 and "settings.local.json" in r.stderr, r.stderr
    assert str(outside) not in (project / ".claude" / "settings.json").read_text()


def test_capture_never_fails_its_host(tmp_path):
    """No store, bad JSON, a missing transcript: exit 0, nothing on stdout, a one-line note."""
    cases = [("{not json", tmp_path), (json.dumps({"session_id": "x", "transcript_path": "/nope"}), tmp_path)]
    for stdin, cwd in cases:
        out = subprocess.run([sys.executable, "-m", "memcli.agents.capture", "claude-code"], input=stdin,
                             capture_output=True, text=True, cwd=cwd,
                             env={**os.environ, **ENV, "XDG_DATA_HOME": str(tmp_path / "x")})
        assert out.returncode == 0 and out.stdout == "" and "Traceback" not in out.stderr
    assert not (tmp_path / "x").exists()  # and no store was created
    Store(tmp_path / "s").init()
    out = subprocess.run([sys.executable, "-m", "memcli.agents.capture", "claude-code", "--store", str(tmp_path / "s")],
                         input="{not json", capture_output=True, text=True, env={**os.environ, **ENV})
    assert out.returncode == 0 and out.stderr == ""
    assert "not JSON" in (tmp_path / "s" / "inbox" / "errors.log").read_text()


def test_transcript_readers_keep_only_what_was_said():
    convs = read_claude_code((FIXTURES / "claude_code_session.jsonl").read_text())
    (conv,) = convs
    assert conv.id == SESSION
    assert [r for r, _ in conv.turns] == ["user", "assistant", "assistant", "user", "assistant"]
    (chat, _thanks) = read_chatgpt(json.loads((FIXTURES / "chatgpt_conversations.json").read_text()))
    assert chat.title == "Deploying the API"
    said = chat.text()
    assert "make release" in said and "kubectl by hand" not in said  # the edited-away branch is not kept
    assert "print(1)" not in said  # a code-tool call is not conversation


def test_import_conversation_exports_through_the_add_pipeline(tmp_path, hash_cli):
    r = hash_cli("import", "--from", "chatgpt", str(FIXTURES / "chatgpt_conversations.json"), "--json")
    report = json.loads(r.stdout)["conversations"]
    assert [c["title"] for c in report] == ["Deploying the API", "Thanks"]
    listed = json.loads(hash_cli("list", "--json").stdout)["memories"]
    texts = [m["text"] for m in listed]
    assert any("make release" in t for t in texts)
    assert not any("thanks" in t.lower() or "welcome" in t.lower() for t in texts)  # chit-chat skipped
    assert all("import:chatgpt_conversations.json" in m["origins"] for m in listed)
    r = hash_cli("import", "--from", "claude-code", str(FIXTURES / "claude_code_session.jsonl"), "--json")
    listed = json.loads(hash_cli("list", "--json").stdout)["memories"]
    assert any("half to even" in m["text"] and f"session:{SESSION}" in m["origins"] for m in listed)
    bad = hash_cli("import", "--from", "chatgpt", str(FIXTURES / "claude_code_session.jsonl"), ok=False)
    assert bad.exit_code == 1 and bad.stderr.startswith("memcli: error:")


def test_a_capture_is_redacted_before_it_is_spooled(tmp_path):
    """The inbox item, the only copy memcli keeps before the worker runs, holds no planted secret;
    and after the worker, no file of the store does."""
    store = tmp_path / "store"
    Store(store).init()
    key = "sk-proj-Q7vR2mXk9LpT4wZc8NbY3hJd6FsA1eGu"
    password = "Tr0ub4dor-and-3"
    said = [f"For the staging bot use the key {key} and keep the bot quiet on weekends.",
            f"The admin login is ops with password={password}; the staging database lives in eu-west-1."]
    transcript = tmp_path / "session.jsonl"
    with open(transcript, "w") as f:
        for i, text in enumerate(said):
            f.write(json.dumps({"type": "user", "uuid": f"u{i}", "sessionId": "s-1",
                                "message": {"role": "user", "content": text}}) + "\n")
    stdin = json.dumps({"session_id": "s-1", "transcript_path": str(transcript), "cwd": str(tmp_path),
                        "hook_event_name": "Stop"})
    out = subprocess.run([sys.executable, "-m", "memcli.agents.capture", "claude-code", "--store", str(store),
                          "--worker", "none"], input=stdin, capture_output=True, text=True, env={**os.environ, **ENV})
    assert out.returncode == 0 and out.stdout == "" and out.stderr == "", out
    (item,) = (store / "inbox").glob("*.json")
    raw = item.read_text()
    assert "eu-west-1" in raw and "keep the bot quiet" in raw  # what was said is there ...
    assert key not in raw and password not in raw, raw  # ... the secrets are not
    assert "[REDACTED:openai_key]" in raw and "[REDACTED:password]" in raw
    r = run_memcli("--store", str(store), "inbox", "process", env=ENV)
    assert r.returncode == 0, r.stderr
    assert memories(store)
    for path in store.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert key.encode() not in data and password.encode() not in data, path
