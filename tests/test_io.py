"""export and import: every format, files and stdin, and a lossless round trip into a fresh store."""

from __future__ import annotations

import csv
import io
import json

import pytest
from conftest import HASH, Cli, fill

from memcli.core.memory import Memory

RICH = Memory(
    id="01JDQ8ZK4M6V3XW7T2B9C5N1RA",
    text="React custom hook useAsync for async operations.\n\nIt exposes `loading`, `error` and `data`.",
    type="procedural", tags=["react", "hooks"], domain="frontend", confidence=0.95, source="llm",
    origins=["git:3f2a1c9", "session:abc"], user="alice", project="myapp",
    created="2026-11-29T17:00:00Z", updated="2026-11-30T09:00:00Z", code_pattern="const useAsync = (fn) => { ... }",
    flags={"hasCodeBlock": True},
    history=[{"event": "UPDATE", "at": "2026-11-30T09:00:00Z", "old": "React useEffect runs after every render"}],
    links=[{"rel": "contradicts", "id": "01JDQ8ZK4M6V3XW7T2B9C5N1RB"}],
    extra={"reviewed_by": "bob", "jira": {"key": "WEB-12", "points": 3}},
)


@pytest.fixture
def filled(hash_cli) -> Cli:
    return fill(hash_cli, RICH)


def facts(store) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((store / "facts").glob("*.md"))}


def listed(cli: Cli) -> list[dict]:
    return json.loads(cli("list", "--json", "--sort", "id").stdout)["memories"]


# --- export --------------------------------------------------------------------------------------


def test_export_json_and_jsonl_hold_every_record(filled):
    records = listed(filled)
    as_json = json.loads(filled("export").stdout)["memories"]
    assert as_json == json.loads(filled("export", "--format", "json").stdout)["memories"]
    as_jsonl = [json.loads(ln) for ln in filled("export", "--format", "jsonl").stdout.splitlines()]
    assert sorted(as_json, key=lambda r: r["id"]) == records
    assert sorted(as_jsonl, key=lambda r: r["id"]) == records
    rich = next(r for r in as_json if r["id"] == RICH.id)
    assert rich["text"] == RICH.text
    assert rich["history"] == RICH.history and rich["links"] == RICH.links
    assert rich["reviewed_by"] == "bob" and rich["jira"] == {"key": "WEB-12", "points": 3}
    assert rich["code_pattern"] == RICH.code_pattern


def test_export_csv_is_readable_by_a_csv_reader(filled):
    rows = list(csv.DictReader(io.StringIO(filled("export", "--format", "csv").stdout)))
    records = {r["id"]: r for r in listed(filled)}
    assert len(rows) == len(records)
    for row in rows:
        rec = records[row["id"]]
        assert row["text"] == rec["text"]
        assert row["tags"].split(";") == rec["tags"] if rec["tags"] else row["tags"] == ""
        assert row["type"] == rec["type"] and row["created"] == rec["created"]


def test_export_md_has_a_section_per_memory(filled):
    md = filled("export", "--format", "md").stdout
    for rec in listed(filled):
        assert f"## {rec['id']}" in md
        assert rec["text"].strip() in md


def test_export_to_a_file(filled, tmp_path):
    out = tmp_path / "out" / "memories.jsonl"
    out.parent.mkdir()
    r = filled("export", "--format", "jsonl", "-o", str(out))
    assert r.stdout == ""
    assert [json.loads(ln)["id"] for ln in out.read_text().splitlines()] == [x["id"] for x in listed(filled)]


def test_export_filters(filled):
    only = json.loads(filled("export", "--type", "episodic").stdout)["memories"]
    assert [r["type"] for r in only] == ["episodic"]
    tagged = json.loads(filled("export", "--tag", "ops").stdout)["memories"]
    assert len(tagged) == 1 and "ops" in tagged[0]["tags"]


def test_export_unknown_format_is_a_usage_error(filled):
    r = filled("export", "--format", "xml", ok=False)
    assert r.exit_code == 2


# --- import --------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_export_then_import_into_a_fresh_store_is_lossless(filled, tmp_path, fmt):
    dump = tmp_path / f"dump.{fmt}"
    filled("export", "--format", fmt, "-o", str(dump))
    fresh = Cli(tmp_path / "fresh", env={"MEMCLI_EMBED_MODEL": HASH})
    fresh("import", str(dump))
    assert facts(fresh.store) == facts(filled.store)
    assert listed(fresh) == listed(filled)
    again = json.loads(fresh("import", "--json", str(dump)).stdout)
    assert again == {"schema": 1, "added": 0, "updated": 0, "unchanged": len(facts(filled.store))}
    assert facts(fresh.store) == facts(filled.store)


def test_round_trip_keeps_a_hand_added_date_key(hash_cli, tmp_path):
    hash_cli("add", "--raw", "Frontend bundles are built by Vite and served from a CDN.")
    (path,) = (hash_cli.store / "facts").glob("*.md")
    # a user's key, where memcli itself would put it (after the known keys), with a date value
    path.write_text(path.read_text().replace("\n---\nFrontend", "\nreview_day: 2026-02-01\n---\nFrontend"))
    dump = tmp_path / "dump.json"
    hash_cli("export", "-o", str(dump))
    fresh = Cli(tmp_path / "fresh", env={"MEMCLI_EMBED_MODEL": HASH})
    fresh("import", str(dump))
    assert facts(fresh.store) == facts(hash_cli.store)


def test_import_from_stdin_json_and_jsonl(hash_cli):
    arr = [{"text": "Feature flags are managed in LaunchDarkly.", "tags": ["flags"]},
           {"text": "Mobile builds are signed on the CI macOS runner.", "type": "episodic",
            "created": "2026-01-02T03:04:05Z"}]
    r = hash_cli("import", "--json", "-", input=json.dumps(arr))
    assert json.loads(r.stdout) == {"schema": 1, "added": 2, "updated": 0, "unchanged": 0}
    lines = "\n".join(json.dumps({"text": t}) for t in ("Logs are kept for 14 days.", "Redis backs the job queue."))
    hash_cli("import", "-", input=lines + "\n")
    recs = {r["text"]: r for r in listed(hash_cli)}
    assert set(recs) == {a["text"] for a in arr} | {"Logs are kept for 14 days.", "Redis backs the job queue."}
    mobile = recs["Mobile builds are signed on the CI macOS runner."]
    assert mobile["type"] == "episodic" and mobile["created"] == "2026-01-02T03:04:05Z"
    assert recs["Feature flags are managed in LaunchDarkly."]["tags"] == ["flags"]
    assert all(r["source"] == "import" for r in recs.values())
    assert recs["Logs are kept for 14 days."]["origins"] == ["import:stdin"]


def test_import_of_a_file_names_its_origin(hash_cli, tmp_path):
    f = tmp_path / "team-notes.jsonl"
    f.write_text(json.dumps({"text": "Alice owns the billing module."}) + "\n")
    hash_cli("import", str(f))
    (rec,) = listed(hash_cli)
    assert rec["origins"] == ["import:team-notes.jsonl"]
    found = json.loads(hash_cli("search", "--json", "billing module owner").stdout)["results"]
    assert found[0]["id"] == rec["id"]


def test_importing_a_changed_record_keeps_the_old_text_in_history(filled):
    rec = next(r for r in listed(filled) if r["id"] == RICH.id)
    changed = {**rec, "text": "React custom hook useAsync, now with cancellation.", "updated": "2026-12-01T00:00:00Z"}
    out = json.loads(filled("import", "--json", "-", input=json.dumps([changed])).stdout)
    assert out == {"schema": 1, "added": 0, "updated": 1, "unchanged": 0}
    shown = json.loads(filled("show", "--json", RICH.id).stdout)
    assert shown["text"] == changed["text"]
    assert shown["history"][-1]["old"] == RICH.text
    assert shown["history"][:-1] == RICH.history


def test_a_bad_record_imports_nothing(filled):
    before = facts(filled.store)
    lines = [json.dumps({"text": "A good record that must not land alone."}), json.dumps({"tags": ["no text"]})]
    r = filled("import", "-", input="\n".join(lines) + "\n", ok=False)
    assert r.exit_code == 1
    assert r.stderr.startswith("memcli: error:") and "record 2" in r.stderr
    assert facts(filled.store) == before
    r = filled("import", "-", input='[{"text": "ok"}, {"text": "bad type", "type": "opinion"}]', ok=False)
    assert r.exit_code == 1 and facts(filled.store) == before
    r = filled("import", "-", input='{"text": "truncated json', ok=False)
    assert r.exit_code == 1 and facts(filled.store) == before


def test_an_id_cannot_escape_the_store(hash_cli, tmp_path):
    hash_cli("add", "--raw", "Frontend bundles are built by Vite and served from a CDN.")
    before = facts(hash_cli.store)
    for bad in ("../../escaped", "/tmp/escaped", ".hidden", "a/b"):
        r = hash_cli("import", "-", input=json.dumps([{"id": bad, "text": "sneaky"}]), ok=False)
        assert r.exit_code == 1 and r.stderr.startswith("memcli: error:"), bad
    assert facts(hash_cli.store) == before
    assert not (tmp_path / "escaped.md").exists() and not (hash_cli.store / "escaped.md").exists()


def test_duplicate_ids_in_one_file_are_refused(hash_cli):
    recs = [{"id": "same-id", "text": "first"}, {"id": "same-id", "text": "second"}]
    r = hash_cli("import", "-", input=json.dumps(recs), ok=False)
    assert r.exit_code == 1 and "same-id" in r.stderr
    assert not (hash_cli.store / "facts" / "same-id.md").exists()


def test_import_logs_every_memory_it_writes(hash_cli, tmp_path):
    f = tmp_path / "notes.jsonl"
    f.write_text("".join(json.dumps({"text": f"Service {i} listens on port {8000 + i}."}) + "\n" for i in range(5)))
    hash_cli("import", str(f))
    lines = [json.loads(line) for line in (hash_cli.store / "log.jsonl").read_text().splitlines()]
    imported = [entry for entry in lines if entry["event"] == "IMPORT"]
    assert sorted(e["id"] for e in imported) == sorted(r["id"] for r in listed(hash_cli))
    assert all(e["origin"] == ["import:notes.jsonl"] for e in imported)
