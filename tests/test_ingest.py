"""`add` with the real model: the ADD / UPDATE / NONE decisions, origins, dry runs and the --json report."""

from __future__ import annotations

import json

import pytest
import yaml

from memcli.api import Store

DEPLOY = "We deploy the backend with make release from the main branch."
DEPLOY_PARAPHRASE = "The backend is deployed with make release from the main branch."
DEPLOY_MORE = "We deploy the backend with make release from the main branch, after CI passes."
UNRELATED = "The staging database is reset every Sunday at 02:00 UTC."


def fact_files(store) -> list:
    return sorted((store / "facts").glob("*.md"))


def front(path) -> dict:
    return yaml.safe_load(path.read_text().split("\n---\n", 1)[0][4:])


def add_json(cli, *args: str) -> dict:
    return json.loads(cli("add", "--json", *args).stdout)


def only_event(report: dict) -> dict:
    assert len(report["memory"]) == 1, report["memory"]
    return report["memory"][0]


def test_adding_the_same_text_twice_adds_the_origin_to_the_memory(cli):
    first = only_event(add_json(cli, "--origin", "git:aaa111", DEPLOY))
    assert first["event"] == "ADD"
    second = only_event(add_json(cli, "--origin", "git:bbb222", DEPLOY))
    assert second["event"] == "NONE" and second["verdict"] == "already_known"
    assert second["id"] == first["id"]
    (path,) = fact_files(cli.store)
    fm = front(path)
    assert fm["origins"] == ["git:aaa111", "git:bbb222"]
    assert fm["confidence"] == pytest.approx(min(0.95, first["confidence"] + 0.05))
    # trivially different spelling of the same text is the same memory
    third = only_event(add_json(cli, "--origin", "session:s1", DEPLOY.upper().rstrip(".")))
    assert (third["event"], third["id"]) == ("NONE", first["id"])
    assert front(path)["origins"] == ["git:aaa111", "git:bbb222", "session:s1"]
    assert len(fact_files(cli.store)) == 1


def test_a_paraphrase_is_not_stored_twice(cli):
    first = only_event(add_json(cli, "--origin", "git:aaa111", DEPLOY))
    ev = only_event(add_json(cli, "--origin", "git:ccc333", DEPLOY_PARAPHRASE))
    assert ev["event"] in ("NONE", "UPDATE")
    assert ev["id"] == first["id"]
    (path,) = fact_files(cli.store)
    fm = front(path)
    assert "git:ccc333" in fm["origins"] and "git:aaa111" in fm["origins"]
    if ev["event"] == "UPDATE":
        assert fm["history"][-1]["old"] == DEPLOY
        assert ev["old_memory"] == DEPLOY


def test_a_more_specific_version_updates_and_keeps_the_old_text(cli):
    first = only_event(add_json(cli, DEPLOY))
    path = cli.store / "facts" / f"{first['id']}.md"
    path.write_text(path.read_text().replace("\nuser:", "\nreviewed_by: bob\nuser:"))  # a user's own key
    ev = only_event(add_json(cli, "--origin", "git:ddd444", DEPLOY_MORE))
    assert ev["event"] == "UPDATE" and ev["id"] == first["id"]
    assert ev["old_memory"] == DEPLOY
    assert [p.name for p in fact_files(cli.store)] == [path.name]
    fm = front(path)
    assert path.read_text().rstrip().endswith(DEPLOY_MORE)
    assert fm["history"][-1]["event"] == "UPDATE" and fm["history"][-1]["old"] == DEPLOY
    assert fm["reviewed_by"] == "bob"
    assert "git:ddd444" in fm["origins"]
    log = [json.loads(ln) for ln in (cli.store / "log.jsonl").read_text().splitlines()]
    assert log[-1]["event"] == "UPDATE" and log[-1]["old"] == DEPLOY


def test_an_unrelated_fact_is_added(cli):
    first = only_event(add_json(cli, DEPLOY))
    ev = only_event(add_json(cli, UNRELATED))
    assert ev["event"] == "ADD" and ev["verdict"] == "accepted" and ev["id"] != first["id"]
    assert len(fact_files(cli.store)) == 2


def test_threshold_decides_what_counts_as_known(cli):
    # a rewording (generic words swapped): the same fact at the default threshold, not at 0.95
    old, reworded = "The mobile app targets iOS 16 and later.", "The mobile app supports iOS 16 and newer."
    first = only_event(add_json(cli, old))
    strict = only_event(add_json(cli, "--threshold", "0.95", "--dry-run", reworded))
    assert strict["event"] == "ADD"
    known = only_event(add_json(cli, reworded))
    assert known["event"] == "NONE" and known["id"] == first["id"] and known["matched"]["id"] == first["id"]
    assert len(fact_files(cli.store)) == 1


def test_repeats_inside_one_input_become_one_memory(real_store):
    r = real_store.add(f"{DEPLOY}\n\n{DEPLOY_PARAPHRASE}\n\n{UNRELATED}")
    events = [(e.event, e.id) for e in r.events]
    assert [e for e, _ in events] == ["ADD", "NONE", "ADD"]
    assert events[1][1] == events[0][1]
    assert len(list(real_store.facts_dir.glob("*.md"))) == 2


def test_stamps_tags_type_user_project_and_session(cli):
    ev = only_event(add_json(cli, "-t", "Backend", "-t", "release", "--type", "procedural", "--user", "carol",
                             "--project", "shop", "--session", "abc", DEPLOY))
    fm = front(cli.store / "facts" / f"{ev['id']}.md")
    assert {"backend", "release"} <= set(fm["tags"])
    assert fm["type"] == "procedural" and fm["user"] == "carol" and fm["project"] == "shop"
    assert "session:abc" in fm["origins"]
    assert fm["source"] == "heuristic"


def test_json_report_has_the_documented_shape(cli):
    add_json(cli, DEPLOY)
    report = add_json(cli, f"{DEPLOY_MORE}\n\nhi!\n\n{UNRELATED}")
    assert set(report) >= {"extraction", "memory", "summary", "timestamp"}
    ex = report["extraction"]
    assert ex["extracted"] == len(ex["facts"]) == 2
    assert ex["skipped"] >= 1
    assert [f["text"] for f in ex["facts"]] == [DEPLOY_MORE, UNRELATED]
    for m in report["memory"]:
        assert set(m) >= {"id", "text", "event", "tags", "confidence", "reasoning"}
        assert isinstance(m["tags"], list) and isinstance(m["reasoning"], str)
    update, add = report["memory"]
    assert update["event"] == "UPDATE" and update["old_memory"] == DEPLOY
    assert add["event"] == "ADD" and "old_memory" not in add
    assert report["summary"]["update"] == 1 and report["summary"]["add"] == 1
    assert report["timestamp"].endswith("Z")


def test_human_output_has_one_line_per_fact(cli):
    r = cli("add", f"{DEPLOY}\n\n{UNRELATED}")
    lines = r.stdout.splitlines()
    assert len(lines) == 2
    ids = sorted(p.stem for p in fact_files(cli.store))
    for line, text in zip(lines, (DEPLOY, UNRELATED)):
        event, mid, rest = line.split(None, 2)
        assert event == "ADD" and mid in ids and rest == text


def test_dry_run_writes_nothing(cli):
    add_json(cli, DEPLOY)
    snapshot = {p.name: p.read_bytes() for p in fact_files(cli.store)}
    log = (cli.store / "log.jsonl").read_bytes()
    report = add_json(cli, "--dry-run", "--origin", "git:eee", f"{DEPLOY}\n\n{UNRELATED}\n\n{DEPLOY_MORE}")
    assert report["dry_run"] is True
    assert [m["event"] for m in report["memory"]][:2] == ["NONE", "ADD"]
    assert {p.name: p.read_bytes() for p in fact_files(cli.store)} == snapshot
    assert (cli.store / "log.jsonl").read_bytes() == log
    human = cli("add", "--dry-run", UNRELATED)
    assert "dry run" in human.stderr
    assert {p.name: p.read_bytes() for p in fact_files(cli.store)} == snapshot


def test_dry_run_on_a_new_store_creates_nothing(cli):
    report = add_json(cli, "--dry-run", UNRELATED)
    assert report["memory"][0]["event"] == "ADD"
    assert not cli.store.exists()


def test_library_add_and_search(real_store):
    r = real_store.add(f"{DEPLOY}\n\n{UNRELATED}", origins=["git:abc"])
    assert [e.event for e in r.events] == ["ADD", "ADD"]
    hits = real_store.search("when is the staging DB wiped?")
    assert hits.hits[0].memory.text == UNRELATED
    again = Store(real_store.path)
    try:
        assert {m.text for m in (again.read(p.stem) for p in again.facts_dir.glob("*.md"))} == {DEPLOY, UNRELATED}
    finally:
        again.close()
