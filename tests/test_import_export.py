"""Import and export round trips in every format, Markdown notes, streaming at any size; the
history (`log`), `edit`, safety defaults of prune, rollback and merge previews, the ask spinner."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import llm_server as fake_llm
import pytest
from conftest import HASH, Cli, fill, run_memcli
from test_pipeline_llm import llm_env

from memcli.core.memory import Memory

llm_server = fake_llm.llm_server

RICH = Memory(
    id="01JDQ8ZK4M6V3XW7T2B9C5N1RA",
    text=("React hook useAsync.\n\n## Usage\n\n```js\nconst x = useAsync(fetch) // --> ok\n```\n\n"
          "Commas, \"quotes\"; fine."),
    type="procedural", tags=["react", "hooks"], domain="frontend", confidence=0.95, source="llm",
    origins=["git:3f2a1c9", "session:abc"], user="alice", project="myapp",
    created="2026-11-29T17:00:00Z", updated="2026-11-30T09:00:00Z", code_pattern="const useAsync = (fn) => { ... }",
    flags={"hasCodeBlock": True},
    history=[{"event": "UPDATE", "at": "2026-11-30T09:00:00Z", "old": "React useEffect runs after every render"}],
    links=[{"rel": "contradicts", "id": "01JDQ8ZK4M6V3XW7T2B9C5N1RB"}],
    extra={"reviewed_by": "bob", "jira": {"key": "WEB-12", "points": 3}},
)


def facts(store: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((store / "facts").glob("*.md"))}


@pytest.fixture
def filled(hash_cli) -> Cli:
    return fill(hash_cli, RICH)


# --- export / import round trips ------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["json", "jsonl", "md", "csv"])
def test_every_export_format_round_trips_losslessly(filled, tmp_path, fmt):
    dump = tmp_path / f"backup.{fmt}"
    filled("export", "--format", fmt, "-o", str(dump))
    fresh = Cli(tmp_path / "fresh", env={"MEMCLI_EMBED_MODEL": HASH})
    r = fresh("import", "--json", str(dump))
    assert json.loads(r.stdout)["added"] == 4
    assert facts(fresh.store) == facts(filled.store)  # byte for byte: history, links, your own keys
    again = json.loads(fresh("import", "--json", str(dump)).stdout)
    assert again["unchanged"] == 4 and again["added"] == again["updated"] == 0


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_export_to_a_pipe_writes_into_it_and_leaves_it_a_pipe(filled, tmp_path):
    """`-o /dev/null`, `-o /dev/stdout` or a named pipe are written to, never replaced by a regular
    file (the atomic rename of a normal export did that to /dev/null)."""
    import stat
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    filled("export", "--format", "jsonl", "-o", str(fifo))
    reader.join(timeout=30)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert len(got) == 1 and len(got[0].decode().splitlines()) == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe", "store"]  # no temporary file left


def test_md_export_reads_as_markdown(filled):
    md = filled("export", "--format", "md").stdout
    assert md.startswith("# memcli export\n")
    assert "## 01JDQ8ZK4M6V3XW7T2B9C5N1RA · procedural · #react #hooks · 2026-11-29" in md
    assert "```js\nconst x = useAsync(fetch) // --> ok\n```" in md  # the text as it is, code and all


def test_csv_export_documents_its_columns(filled):
    rows = list(csv.DictReader(io.StringIO(filled("export", "--format", "csv").stdout)))
    assert list(rows[0]) == ["id", "type", "tags", "domain", "confidence", "source", "origins", "user", "project",
                             "created", "updated", "text", "more"]
    rich = next(r for r in rows if r["id"] == RICH.id)
    assert rich["domain"] == "frontend" and rich["tags"] == "react;hooks"
    assert json.loads(rich["more"])["jira"] == {"key": "WEB-12", "points": 3}
    docs = (Path(__file__).resolve().parents[1] / "docs" / "how-it-works.md").read_text()  # (moved from the README)
    assert "`more`" in docs and "`domain`" in docs


def test_export_json_is_a_document_with_a_schema(filled):
    out = json.loads(filled("export").stdout)
    assert out["schema"] == 1 and len(out["memories"]) == 4


# --- Markdown notes -----------------------------------------------------------------------------------


def notes_folder(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    (root / "ops").mkdir(parents=True)
    (root / ".obsidian").mkdir()
    (root / ".obsidian" / "config.md").write_text("not a note")
    (root / "deploy.md").write_text("---\ntags: [deploy, k8s]\ntype: procedural\n---\n"
                                    "Roll back the API with `kubectl rollout undo deploy/api`.\n")
    (root / "ops" / "redis.md").write_text("Redis in staging evicts with allkeys-lru.\n")
    (root / "ops" / "empty.md").write_text("---\ntags: [x]\n---\n\n")
    (root / "runbook.md").write_text("---\ntags: [runbook]\n---\nIntro line.\n\n## Restart\n\nRun make restart.\n\n"
                                     "```sh\n# not a heading\nmake restart\n```\n\n"
                                     "## Logs\n\nLogs live in /var/log/app.\n")
    return root


def test_import_a_folder_of_markdown_notes(hash_cli, tmp_path):
    root = notes_folder(tmp_path)
    r = hash_cli("import", "--json", str(root))
    assert json.loads(r.stdout)["added"] == 3  # one memory per non-empty note; hidden folders skipped
    recs = {m["text"].splitlines()[0]: m for m in json.loads(hash_cli("list", "--json").stdout)["memories"]}
    deploy = recs["Roll back the API with `kubectl rollout undo deploy/api`."]
    assert deploy["tags"] == ["deploy", "k8s"] and deploy["type"] == "procedural"
    assert deploy["origins"] == ["import:notes"]
    assert "Redis in staging evicts with allkeys-lru." in recs
    assert any(t.startswith("Intro line.") for t in recs)


def test_import_notes_split_by_heading(hash_cli, tmp_path):
    root = notes_folder(tmp_path)
    hash_cli("import", "--format", "md", "--split", str(root / "runbook.md"))
    texts = sorted(m["text"] for m in json.loads(hash_cli("list", "--json").stdout)["memories"])
    restart = "## Restart\n\nRun make restart.\n\n```sh\n# not a heading\nmake restart\n```"
    assert texts == sorted(["Intro line.", restart, "## Logs\n\nLogs live in /var/log/app."])
    assert all(m["tags"] == ["runbook"] for m in json.loads(hash_cli("list", "--json").stdout)["memories"])


def test_import_a_single_note_from_stdin_as_md(hash_cli):
    hash_cli("import", "--format", "md", "-", input="---\ntags: [a]\n---\nA note piped in.\n")
    (m,) = json.loads(hash_cli("list", "--json").stdout)["memories"]
    assert m["text"] == "A note piped in." and m["tags"] == ["a"]


# --- size limits and streaming ---------------------------------------------------------------------------


def test_the_size_limit_applies_per_record_not_per_file(hash_cli, tmp_path):
    big = tmp_path / "big.jsonl"
    line = json.dumps({"text": "x " * 1000}) + "\n"
    # 24 records of ~0.5 MB, 12 MB in all: over 10 MB, each far under it (long words: the cost of
    # an import is per record and per word, not per byte)
    with big.open("w") as f:
        for i in range(24):
            f.write(json.dumps({"text": f"Record {i}: " + f"configuration-{i}-of-the-deploy-pipeline " * 12_000})
                    + "\n")
    assert big.stat().st_size > 10 * 1024 * 1024
    r = hash_cli("import", "--json", str(big))
    assert json.loads(r.stdout)["added"] == 24
    huge = tmp_path / "huge.jsonl"
    huge.write_text(line + json.dumps({"text": "y" * (11 * 1024 * 1024)}) + "\n")
    before = facts(hash_cli.store)
    r = hash_cli("import", str(huge), ok=False)
    assert r.exit_code == 1 and "record 2" in r.stderr and "limit for one memory is 10 MB" in r.stderr
    assert facts(hash_cli.store) == before  # nothing written: every record is checked first
    assert line


def test_add_text_keeps_its_own_limit(hash_cli):
    r = hash_cli("add", "-", input=b"We deploy with make release.\n" * (11 * 1024 * 1024 // 29), ok=False)
    assert r.exit_code == 1 and "MB" in r.stderr


LARGE = int(os.environ.get("MEMCLI_TEST_IMPORT_N", "3000"))


def test_export_and_import_of_a_large_store_stream_in_bounded_memory(tmp_path):
    """An export of LARGE memories imports back (MEMCLI_TEST_IMPORT_N=100000 for the full size;
    bench/import_large.py prints the 100k figures)."""
    src = tmp_path / "src.jsonl"
    with src.open("w") as f:
        for i in range(LARGE):
            f.write(json.dumps({"text": f"Service {i} listens on port {1000 + i % 60000} in zone {i % 7}.",
                                "tags": [f"svc{i % 13}"], "created": f"2026-{1 + i % 12:02d}-01T00:00:00Z"}) + "\n")
    env = {"MEMCLI_EMBED_MODEL": HASH}
    a, b = tmp_path / "a", tmp_path / "b"
    assert run_memcli("--store", str(a), "import", "--create", str(src), env=env).returncode == 0
    dump = tmp_path / "export.jsonl"
    assert run_memcli("--store", str(a), "export", "--format", "jsonl", "-o", str(dump), env=env).returncode == 0
    assert sum(1 for _ in dump.open()) == LARGE
    code = (f"import resource, subprocess, sys; p = subprocess.run([sys.executable, '-m', 'memcli', '--store', "
            f"{str(b)!r}, 'import', '--create', '--json', {str(dump)!r}], capture_output=True, text=True); "
            "print(p.stdout); print(p.stderr, file=sys.stderr); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)")
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, **env},
                       timeout=3600)
    seconds = time.perf_counter() - t0
    report = json.loads(p.stdout)
    assert report["added"] == LARGE, p.stderr
    rss_mb = int(p.stderr.strip().splitlines()[-1]) / 1024
    print(f"\nimport of {LARGE} memories ({dump.stat().st_size / 1e6:.1f} MB): {seconds:.1f} s, "
          f"peak RSS {rss_mb:.0f} MB")
    assert len(list((b / "facts").glob("*.md"))) == LARGE
    assert rss_mb < 900


# --- log and edit ------------------------------------------------------------------------------------------


def test_log_shows_history_filtered_by_id_event_and_time(filled):
    (rec,) = [m for m in json.loads(filled("list", "--json").stdout)["memories"] if m["type"] == "episodic"]
    filled("rm", rec["id"], "--reason", "wrong date")
    filled("restore", rec["id"])
    out = json.loads(filled("log", "--json", rec["id"][:12]).stdout)
    assert [e["event"] for e in out["entries"]] == ["RESTORE", "RM", "ADD"]  # newest first
    assert out["entries"][1]["reason"] == "wrong date"
    rm_only = json.loads(filled("log", "--json", "--event", "rm").stdout)["entries"]
    assert [e["id"] for e in rm_only] == [rec["id"]]
    assert json.loads(filled("log", "--json", "--since", "2999-01-01").stdout)["entries"] == []
    human = filled("log", rec["id"]).stdout.splitlines()
    assert len(human) == 3 and "RM" in human[1] and "wrong date" in human[1]
    assert re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d  RESTORE", human[0])


@pytest.mark.parametrize("columns", [80, 120])
def test_log_fits_the_terminal(filled, columns):
    r = filled.runner.invoke(__import__("memcli.cli.app").cli.app.app, ["--store", str(filled.store), "log"],
                             env={"MEMCLI_EMBED_MODEL": HASH, "MEMCLI_FORCE_TTY": "1", "COLUMNS": str(columns)})
    assert r.exit_code == 0 and all(len(line) <= columns for line in r.stdout.splitlines())


def editor(tmp_path: Path, python: str) -> str:
    script = tmp_path / "ed.py"
    script.write_text(f"import sys\np = sys.argv[1]\ns = open(p).read()\n{python}\nopen(p, 'w').write(s)\n")
    return f"{sys.executable} {script}"


def test_edit_opens_editor_validates_and_reindexes(filled, tmp_path):
    rid = RICH.id
    ed = editor(tmp_path, "s = s.replace('React hook useAsync.', 'React hook useAsync, with cancellation.')")
    r = Cli(filled.store, env={**filled.env, "EDITOR": ed})("edit", rid[:10])
    assert "saved" in r.stderr
    shown = json.loads(filled("show", "--json", rid).stdout)
    assert shown["text"].startswith("React hook useAsync, with cancellation.") and shown["jira"]["key"] == "WEB-12"
    hits = json.loads(filled("search", "--json", "--threshold", "0", "useAsync cancellation").stdout)["results"]
    assert hits[0]["id"] == rid
    assert json.loads(filled("log", "--json", "--event", "EDIT").stdout)["entries"][0]["id"] == rid


def test_a_broken_edit_is_reported_and_kept(filled, tmp_path):
    rid = RICH.id
    before = (filled.store / "facts" / f"{rid}.md").read_bytes()
    ed = editor(tmp_path, "s = s.replace('tags: [react, hooks]', 'tags: [react, hooks')")
    r = Cli(filled.store, env={**filled.env, "EDITOR": ed})("edit", rid, ok=False)
    assert r.exit_code == 1 and "not a valid memory" in r.stderr and "hint:" in r.stderr
    assert (filled.store / "facts" / f"{rid}.md").read_bytes() == before
    (kept,) = (filled.store / ".edits").glob(f"{rid}.*.md")
    assert "tags: [react, hooks\n" in kept.read_text()  # what was typed is not lost


# --- prune, rollback, merge previews ------------------------------------------------------------------------


def test_prune_unused_spares_recent_memories_by_default(filled):
    filled("import", "-", input=json.dumps([{"id": "OLDNOTE", "text": "An old note nobody searched for.",
                                             "created": "2025-01-01T00:00:00Z"}]))
    dry = json.loads(filled("prune", "--unused", "--dry-run", "--json").stdout)
    recent = {m["id"] for m in json.loads(filled("list", "--json").stdout)["memories"]} - {"OLDNOTE"}
    assert {m["id"] for m in dry["trashed"]} == {"OLDNOTE"}  # the others are under 30 days old: spared
    anyage = json.loads(filled("prune", "--unused", "--min-age", "0", "--dry-run", "--json").stdout)
    assert {m["id"] for m in anyage["trashed"]} == recent | {"OLDNOTE"}
    r = filled("prune", ok=False)
    assert r.exit_code == 2 and "criterion" in r.stderr


def test_rollback_dry_run_lists_and_unknown_origin_is_an_error(filled):
    before = facts(filled.store)
    r = filled("rollback", "git:abc", "--dry-run")
    (line,) = r.stdout.splitlines()
    assert line.startswith("trash ") and "staging database" in line
    assert facts(filled.store) == before
    r = filled("rollback", "git:nope", ok=False)
    assert r.exit_code == 1 and r.stderr.splitlines()[0] == "memcli: error: no memory comes from git:nope"
    assert "git:3f2a1c9" in r.stderr and "git:abc" in r.stderr  # the hint names origins that exist


def test_merge_auto_dry_run_prints_one_labelled_block_per_group(hash_cli):
    texts = ["Deploys go out with make release.", "Deploys go out with make release.",
             "Staging resets on Sunday.", "Staging resets on Sunday."]
    hash_cli("import", "-", input=json.dumps([{"text": t} for t in texts]))
    r = hash_cli("merge", "--auto", "--threshold", "0.99", "--dry-run", "--no-llm")
    blocks = r.stdout.strip().split("\n\n")
    assert len(blocks) == 2
    for n, block in enumerate(blocks, 1):
        lines = block.splitlines()
        assert lines[0].startswith(f"group {n}: would merge 2 memories into ")
        assert sum(1 for ln in lines if ln.startswith("  from ")) == 2 and "  into:" in lines
    assert "would merge" not in r.stderr.replace("would merge 2 groups", "")


# --- ask spinner ----------------------------------------------------------------------------------------------


def test_ask_shows_a_spinner_on_stderr_until_the_first_token(tmp_path, llm_server):
    cli = Cli(tmp_path / "store", env={"MEMCLI_EMBED_MODEL": HASH})
    cli("add", "--raw", "--no-llm", "The staging database password rotates every 30 days.")
    llm_server.script([{"content": "It rotates every 30 days.", "delay": 0.6, "chunk_size": 4}])
    # in-process: the spinner is a thread writing to sys.stderr (tests/test_ask.py streams `ask`
    # through a real process and pipe)
    tty = Cli(cli.store, env={**llm_env(llm_server.url), "MEMCLI_EMBED_MODEL": HASH, "MEMCLI_FORCE_TTY": "1"})
    result = tty("ask", "how often does the staging database password rotate?")
    out, err = result.stdout_bytes.decode(), result.stderr_bytes.decode()  # bytes: keep the \r as it is
    assert out == "It rotates every 30 days.\n"  # the answer, untouched by the spinner
    assert "\r⠋ thinking…" in err and "\r\x1b[K" in err  # drawn over one line, then wiped
    assert err.count("thinking…") >= 2  # it turned while waiting
    assert err.index("\x1b[K") > err.rindex("thinking…")  # and stopped before anything else was said
