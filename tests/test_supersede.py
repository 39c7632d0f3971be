"""Supersede, --raw / --no-dedup, --batch and "say why", as a user runs them (real model)."""

from __future__ import annotations

import json

PORT = "The API server listens on port 8080."
PORT_NOW = "The API server listens on port 9090 now."
STAGING = "The staging API listens on port 8080."
PROD = "The production API listens on port 443."


def add_json(cli, *args: str) -> dict:
    return json.loads(cli("add", "--json", *args).stdout)


def test_a_new_value_supersedes_the_old_which_is_kept_but_hidden(cli):
    (old,) = add_json(cli, PORT)["memory"]
    (new,) = add_json(cli, PORT_NOW)["memory"]
    assert new["event"] == "ADD" and new["supersedes"] == old["id"] and new["matched"]["id"] == old["id"]
    assert "8080" in new["reasoning"] and "9090" in new["reasoning"]
    shown = json.loads(cli("show", old["id"], "--json").stdout)
    assert shown["superseded_by"] == new["id"] and shown["text"] == PORT  # kept, not trashed
    assert json.loads(cli("show", new["id"], "--json").stdout)["supersedes"] == old["id"]
    assert "superseded by " + new["id"] in cli("show", old["id"]).stderr
    hits = json.loads(cli("search", "--json", "which port does the API server listen on").stdout)["results"]
    assert [h["id"] for h in hits] == [new["id"]]
    every = json.loads(cli("search", "--json", "--all", "which port does the API server listen on").stdout)
    assert {h["id"] for h in every["results"]} == {old["id"], new["id"]}
    assert [r["id"] for r in json.loads(cli("list", "--json").stdout)["memories"]] == [new["id"]]
    assert len(json.loads(cli("list", "--json", "--all").stdout)["memories"]) == 2
    assert [r["id"] for r in json.loads(cli("export").stdout)["memories"]] == [new["id"]]
    assert len(json.loads(cli("export", "--all").stdout)["memories"]) == 2
    chain = json.loads(cli("show", new["id"], "--history", "--json").stdout)["chain"]
    assert [(s["id"], s["event"]) for s in chain] == [(old["id"], "SUPERSEDED"), (new["id"], "CURRENT")]
    human = cli("show", old["id"], "--history").stdout
    assert human.index(old["id"]) < human.index(new["id"])
    log = [json.loads(ln) for ln in (cli.store / "log.jsonl").read_text().splitlines()]
    assert any(e["event"] == "SUPERSEDE" and e["old_id"] == old["id"] and e["id"] == new["id"] for e in log)


def test_another_subject_worded_alike_is_added_and_linked_not_replaced(cli):
    (a,) = add_json(cli, STAGING)["memory"]
    (b,) = add_json(cli, PROD)["memory"]
    assert b["event"] == "ADD" and "supersedes" not in b and b["id"] != a["id"]
    assert "staging" in b["reasoning"] and "production" in b["reasoning"]
    assert len(json.loads(cli("list", "--json").stdout)["memories"]) == 2


def test_raw_is_verbatim_and_no_dedup_stores_even_a_repeat(cli):
    texts = [f"service-{i} uses queue q{i} for its jobs." for i in range(1, 5)]
    events = [add_json(cli, "--raw", t)["memory"][0] for t in texts]
    assert [e["event"] for e in events] == ["ADD"] * 4
    hits = json.loads(cli("search", "--json", "-k", "1", "which queue does service-1 use").stdout)["results"]
    assert hits[0]["text"] == texts[0]
    again = add_json(cli, "--raw", texts[0].upper())["memory"][0]
    assert again["event"] == "NONE" and again["id"] == events[0]["id"] and again["matched"]["id"] == events[0]["id"]
    forced = add_json(cli, "--raw", "--no-dedup", texts[0])["memory"][0]
    assert forced["event"] == "ADD" and forced["id"] != events[0]["id"]
    assert len(json.loads(cli("list", "--json").stdout)["memories"]) == 5


def test_the_human_output_names_the_matched_memory_and_why(cli):
    (old,) = add_json(cli, PORT)["memory"]
    out = cli("add", PORT_NOW).stdout
    assert f"supersedes {old['id']}" in out and "8080 -> 9090" in out
    out = cli("add", "Our API server listens on port 9090 now.").stdout
    assert "NONE" in out and "matched" in out


def test_batch_runs_each_line_through_the_decisions_in_order(cli, tmp_path):
    lines = [{"text": PORT, "origins": ["chat:1"], "created": "2026-01-02T03:04:05Z", "tags": ["api"]},
             {"text": "Our API server listens on port 8080.", "origins": ["chat:2"]},
             {"text": PORT_NOW, "origins": ["chat:3"], "type": "semantic"},
             {"nope": 1}, "not json"]
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(json.dumps(x) if isinstance(x, dict) else x for x in lines) + "\n\n")
    r = cli("add", "--batch", str(path), "--json", ok=False)
    assert r.exit_code == 1  # two bad lines, reported, the others done
    out = [json.loads(ln) for ln in r.stdout.splitlines()]
    assert [o["line"] for o in out] == [1, 2, 3, 4, 5]
    first, second, third = (o["memory"][0] for o in out[:3])
    assert first["event"] == "ADD" and second["event"] == "NONE" and second["id"] == first["id"]
    assert third["supersedes"] == first["id"]
    assert "error" in out[3] and "error" in out[4]
    old = json.loads(cli("show", first["id"], "--json").stdout)
    assert old["created"] == "2026-01-02T03:04:05Z" and old["origins"] == ["chat:1", "chat:2"] and "api" in old["tags"]
    r = cli("add", "--batch", "-", "--json", input=json.dumps({"text": "Deploys happen on Tuesdays."}) + "\n")
    assert json.loads(r.stdout)["memory"][0]["event"] == "ADD"


def test_consolidate_lists_contradictions_to_resolve_and_can_supersede_the_older(cli, tmp_path):
    recs = [{"text": "The request timeout for the gateway is 30 seconds.", "created": "2026-01-01T00:00:00Z"},
            {"text": "The request timeout for the gateway is 60 seconds.", "created": "2026-02-01T00:00:00Z"},
            {"text": "The staging API listens on port 8080.", "created": "2026-01-01T00:00:00Z"},
            {"text": "The production API listens on port 8080.", "created": "2026-01-02T00:00:00Z"}]
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    cli("import", str(path))
    by_text = {r["text"]: r["id"] for r in json.loads(cli("list", "--json").stdout)["memories"]}
    old, new = (by_text[r["text"]] for r in recs[:2])
    dry = json.loads(cli("consolidate", "--dry-run", "--json").stdout)
    assert [sorted(c["ids"]) for c in dry["contradictions"]] == [sorted([old, new])]  # staging/production: no
    assert dry["merged"] == []
    assert "to resolve" in cli("consolidate", "--dry-run").stderr
    out = json.loads(cli("consolidate", "--supersede-older", "--json").stdout)
    assert out["contradictions"][0]["superseded"] == {"old": old, "new": new}
    assert json.loads(cli("show", old, "--json").stdout)["superseded_by"] == new
    assert old not in {r["id"] for r in json.loads(cli("list", "--json").stdout)["memories"]}


def test_a_question_that_names_an_older_value_finds_it_marked_superseded(cli):
    # jazzband/pip-tools: "Why did CI move PyPy to 3.10?" after a later bump to 3.11
    (old,) = add_json(cli, "CI runs the tests on PyPy 3.10 because pypy-3.8 is end of life.")["memory"]
    (new,) = add_json(cli, "CI runs the tests on PyPy 3.11 now.")["memory"]
    assert new["supersedes"] == old["id"]
    hits = json.loads(cli("search", "--json", "why does CI run PyPy 3.10?").stdout)["results"]
    assert hits[0]["id"] == old["id"] and hits[0]["superseded_by"] == new["id"]
    assert "superseded" in cli("search", "why does CI run PyPy 3.10?").stdout.splitlines()[0]
    current = json.loads(cli("search", "--json", "which PyPy version does CI run?").stdout)["results"]
    assert [h["id"] for h in current] == [new["id"]]


def test_a_question_naming_what_only_an_older_memory_says_finds_it(cli):
    # gin-gonic/gin: "upgrade Protobuf for CVE-2024-24786" was replaced by later protobuf bumps, and
    # "Which CVE prompted the protobuf upgrade?" found nothing
    (old,) = add_json(cli, "chore(security): upgrade Protobuf for CVE-2024-24786 (#3893)")["memory"]
    (new,) = add_json(cli, "chore(deps): bump google.golang.org/protobuf from 1.36.9 to 1.36.10 (#4383)")["memory"]
    assert new["supersedes"] == old["id"]
    hits = json.loads(cli("search", "--json", "Which CVE prompted the protobuf upgrade?").stdout)["results"]
    assert hits[0]["id"] == old["id"] and hits[0]["superseded_by"] == new["id"]
    current = json.loads(cli("search", "--json", "Which protobuf version is used?").stdout)["results"]
    assert [h["id"] for h in current] == [new["id"]]
    # a live memory of the subject that says the acronym too keeps the older one hidden
    (fix,) = add_json(cli, "Bump protobuf to 1.36.11 for CVE-2025-0001")["memory"]
    hits = json.loads(cli("search", "--json", "Which CVE prompted the protobuf upgrade?").stdout)["results"]
    assert old["id"] not in {h["id"] for h in hits} and hits[0]["id"] == fix["id"]


def test_a_value_said_before_the_current_one_is_history_even_when_it_replaces_an_older_one(cli, tmp_path):
    # jazzband/pip-tools: the commits replayed first, then the changelog. 7.0.0's item ended 4.0.0's
    # floor and stayed live beside the 2025 commit, a second answer to "What is the minimum Python?"
    lines = [{"text": "Remove support for Python 3.8", "origins": ["git:b971038e"], "created": "2025-11-23T04:33:17Z"},
             {"text": "## v4.0.0\n\n*2019-07-25*\n\n- Drop support for EOL Python 3.4",
              "origins": ["changelog:4.0.0"], "created": "2019-07-25T00:00:00Z"},
             {"text": "## v7.0.0\n\n*2023-07-14*\n\n- Drop support for Python 3.7",
              "origins": ["changelog:7.0.0"], "created": "2023-07-14T00:00:00Z"}]
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    cli("add", "--no-llm", "--batch", str(path), "--json")
    mems = json.loads(cli("list", "--all", "--json").stdout)["memories"]
    by_text = {m["text"].split(" (version")[0]: m for m in mems}
    now, v7, v4 = (by_text[t] for t in ("Remove support for Python 3.8", "Drop support for Python 3.7",
                                         "Drop support for EOL Python 3.4"))
    assert v7["superseded_by"] == now["id"] and v4["superseded_by"] == v7["id"]
    assert [m["id"] for m in json.loads(cli("list", "--json").stdout)["memories"]
            if "Python" in m["text"] and "support" in m["text"]] == [now["id"]]
