"""Curation as a user drives it: merge, prune, rollback and consolidate. Nothing is ever erased:
what leaves `facts/` is in the trash with a reason, restorable, and every change is in log.jsonl.

Memories are loaded with `import` (records as they are, no dedup) so that near-duplicates,
contradictions and old memories can sit side by side in one store.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import pytest
from conftest import HASH, Cli, run_memcli

from memcli.core.memory import Memory
from memcli.ops.curate import heuristic_merge, opposing

UNKNOWN = "01NOSUCHMEMORY0000000000000"


# --- helpers -------------------------------------------------------------------------------------


def load(cli: Cli, records: Iterable[dict[str, Any]]) -> dict[str, str]:
    """Import records; return {text: id} for the whole store."""
    cli("import", "-", input=json.dumps(list(records)))
    return ids(cli)


def listed(cli: Cli) -> list[dict[str, Any]]:
    return json.loads(cli("list", "--json", "--sort", "id").stdout)["memories"]


def ids(cli: Cli) -> dict[str, str]:
    return {r["text"]: r["id"] for r in listed(cli)}


def show(cli: Cli, mid: str) -> dict[str, Any]:
    return json.loads(cli("show", "--json", mid).stdout)


def trashed(cli: Cli, mid: str) -> Memory:
    path = cli.store / ".trash" / f"{mid}.md"
    assert path.is_file(), f"{mid} is not in the trash"
    return Memory.parse(path.read_bytes(), file_id=mid)


def log(cli: Cli) -> list[dict[str, Any]]:
    path = cli.store / "log.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def snapshot(cli: Cli) -> dict[str, bytes]:
    """Everything a curation command may change: facts, trash and the log."""
    root = cli.store
    out = {f"{d}/{p.name}": p.read_bytes() for d in ("facts", ".trash") if (root / d).is_dir()
           for p in sorted((root / d).glob("*.md"))}
    if (root / "log.jsonl").exists():
        out["log.jsonl"] = (root / "log.jsonl").read_bytes()
    return out


def one_line_error(r, code: int = 1) -> None:
    assert r.exit_code == code, (r.exit_code, r.output)
    assert r.stderr.startswith("memcli: error:"), r.stderr
    lines = r.stderr.splitlines()  # the error, and an optional hint
    assert len(lines) == 1 or (len(lines) == 2 and lines[1].startswith("hint: ")), r.stderr
    assert "Traceback" not in r.output


# --- merge ---------------------------------------------------------------------------------------

OLDER = {"text": "deploys go through github actions. The staging database is reset every Sunday.",
         "type": "semantic", "tags": ["ci"], "confidence": 0.6, "origins": ["git:aaa111"],
         "created": "2026-01-10T10:00:00Z", "reviewed_by": "bob"}
NEWER = {"text": "Deploys go through GitHub Actions. Build logs are kept for 14 days.",
         "type": "procedural", "tags": ["ci", "ops"], "confidence": 0.9, "origins": ["session:s1", "git:aaa111"],
         "created": "2026-02-10T10:00:00Z",
         "history": [{"event": "UPDATE", "at": "2026-02-10T10:00:00Z", "old": "Deploys go through Jenkins."}]}
OTHER = {"text": "Alice owns the billing module.", "created": "2026-03-01T10:00:00Z"}


@pytest.fixture
def pair(hash_cli) -> tuple[Cli, str, str, str]:
    by_text = load(hash_cli, [OLDER, NEWER, OTHER])
    return hash_cli, by_text[OLDER["text"]], by_text[NEWER["text"]], by_text[OTHER["text"]]


def test_merge_makes_one_memory_that_keeps_everything(pair):
    cli, old, new, other = pair
    other_file = (cli.store / "facts" / f"{other}.md").read_bytes()
    out = json.loads(cli("merge", "--no-llm", "--json", new, old).stdout)
    assert set(out) == {"schema", "merged", "dry_run", "provisional_vectors"} and out["dry_run"] is False
    assert out["provisional_vectors"] == 0  # one merge: its vector is exact at once
    (r,) = out["merged"]
    assert set(r) == {"id", "text", "merged_from", "method"}
    assert r["method"] == "heuristic" and r["merged_from"] == [old, new]  # oldest first
    mid = r["id"]
    assert mid not in (old, new)

    m = show(cli, mid)
    assert m["text"] == r["text"]
    for sentence in ("Deploys go through GitHub Actions.", "Build logs are kept for 14 days.",
                     "The staging database is reset every Sunday."):
        assert m["text"].count(sentence) == 1, m["text"]
    assert "github actions" not in m["text"]  # the newer wording of a shared sentence wins
    assert m["tags"] == ["ci", "ops"]
    assert m["origins"] == ["git:aaa111", "session:s1"]
    assert m["type"] == "procedural"  # a tie between types goes to the newest memory
    assert m["confidence"] == 0.9 and m["created"] == OLDER["created"]
    assert m["reviewed_by"] == "bob"  # a user's own key survives the merge
    merges = [h for h in m["history"] if h["event"] == "MERGE"]
    assert [(h["id"], h["old"]) for h in merges] == [(old, OLDER["text"]), (new, NEWER["text"])]
    assert NEWER["history"][0] in m["history"]  # earlier history is carried over

    assert set(ids(cli).values()) == {mid, other}
    assert (cli.store / "facts" / f"{other}.md").read_bytes() == other_file
    for src in (old, new):
        assert trashed(cli, src).extra["trashed"]["reason"] == f"merged into {mid}"
    events = log(cli)
    (merge_line,) = [e for e in events if e["event"] == "MERGE"]
    assert merge_line["id"] == mid and merge_line["sources"] == [old, new]
    assert sorted(e["id"] for e in events if e["event"] == "MERGED") == sorted([old, new])

    found = json.loads(cli("search", "--json", "Build logs are kept for 14 days.").stdout)["results"]
    assert found[0]["id"] == mid

    assert json.loads(cli("restore", "--json", old).stdout) == {"schema": 1, "restored": [old]}
    assert ids(cli)[OLDER["text"]] == old
    assert show(cli, old)["origins"] == OLDER["origins"]


def test_merge_human_output_and_id_prefixes(pair):
    cli, old, new, _ = pair
    r = cli("merge", "--no-llm", old[:20].lower(), new[:20])
    (mid,) = set(ids(cli).values()) - {pair[3]}
    lines = r.stdout.splitlines()
    assert lines[0] == f"group 1: merged 2 memories into {mid} (heuristic)"
    assert lines[1].startswith(f"  from {old}  ") and lines[2].startswith(f"  from {new}  ")
    assert lines[3] == "  into:"
    assert " ".join(" ".join(lines[4:]).split()) == " ".join(show(cli, mid)["text"].split())
    assert "merged 1 group" in r.stderr


def test_merge_dry_run_writes_nothing(pair):
    cli, old, new, _ = pair
    before = snapshot(cli)
    r = cli("merge", "--no-llm", "--dry-run", old, new)
    assert "would merge" in r.stderr and "Build logs are kept for 14 days." in r.stdout
    out = json.loads(cli("merge", "--no-llm", "--dry-run", "--json", old, new).stdout)
    assert out["dry_run"] is True and out["merged"][0]["merged_from"] == [old, new]
    assert snapshot(cli) == before


def test_merge_errors_change_nothing(pair):
    cli, old, new, _ = pair
    before = snapshot(cli)
    for args in ((old,), (old, old), (), ("--auto", old, new), ("--no-llm", "--model", "gpt-4o-mini", old, new)):
        r = cli("merge", *args, ok=False)
        assert r.exit_code == 2, (args, r.output)
    one_line_error(cli("merge", "--no-llm", old, UNKNOWN, ok=False))
    assert UNKNOWN in cli("merge", "--no-llm", UNKNOWN, new, ok=False).stderr
    assert snapshot(cli) == before
    proc = run_memcli("--store", str(cli.store), "merge", old, env={"MEMCLI_EMBED_MODEL": HASH})
    assert proc.returncode == 2 and proc.stderr.startswith("memcli: error:")
    assert snapshot(cli) == before


def test_merge_auto_with_nothing_similar(pair):
    cli, *_ = pair
    before = snapshot(cli)
    r = cli("merge", "--auto", "--no-llm")
    assert "nothing to merge" in r.stderr
    assert json.loads(cli("merge", "--auto", "--json").stdout) == {"schema": 1, "merged": [], "dry_run": False,
                                                                        "provisional_vectors": 0}
    assert snapshot(cli) == before


STAGING = ("The staging database is reset every Sunday at 02:00 UTC.",
           "The staging database gets reset each Sunday at 02:00 UTC.")
VITE = ("Frontend bundles are built by Vite and served from a CDN.",
        "Frontend bundles are built with Vite and served from the CDN.")
ALICE = "Alice owns the billing module."


def test_merge_auto_merges_exactly_the_near_duplicate_pairs(cli):
    by_text = load(cli, [{"text": t} for t in (*STAGING, *VITE, ALICE)])
    dry = json.loads(cli("merge", "--auto", "--threshold", "0.9", "--no-llm", "--dry-run", "--json").stdout)
    assert len(dry["merged"]) == 2 and len(ids(cli)) == 5
    out = json.loads(cli("merge", "--auto", "--threshold", "0.9", "--no-llm", "--json").stdout)
    groups = sorted(sorted(r["merged_from"]) for r in out["merged"])
    assert groups == sorted([sorted(by_text[t] for t in STAGING), sorted(by_text[t] for t in VITE)])
    after = ids(cli)
    assert len(after) == 3 and after[ALICE] == by_text[ALICE]
    assert set(after.values()) == {by_text[ALICE], *(r["id"] for r in out["merged"])}
    assert len(list((cli.store / ".trash").glob("*.md"))) == 4



def test_merge_auto_never_merges_a_contradiction(cli):
    """`merge --auto` keeps a contradiction among near-duplicates apart (the "apart" check of
    its union-find): without the veto the pair would be merged at this threshold."""
    from memcli.ops import curate
    from memcli.ops.handle import Store

    by_text = load(cli, [{"text": t} for t in (*STAGING, *VITE, *RATE, *MIGRATIONS, ALICE)])
    store = Store(cli.store)
    try:
        unvetoed = curate.similar_groups(store, 0.8)
    finally:
        store.close()
    assert sorted(by_text[t] for t in RATE) in [sorted(g) for g in unvetoed]
    out = json.loads(cli("merge", "--auto", "--threshold", "0.8", "--no-llm", "--dry-run", "--json").stdout)
    groups = sorted(sorted(r["merged_from"]) for r in out["merged"])
    assert groups == sorted([sorted(by_text[t] for t in STAGING), sorted(by_text[t] for t in VITE)])


def test_merge_auto_never_merges_a_superseded_memory(cli):
    """A superseded memory is kept for its history: never merged, though its text is a rewording
    of another's (the "apart" check reads the memories' state, not only their texts)."""
    by_text = load(cli, [{"text": t} for t in (*STAGING, ALICE)])
    args = ("merge", "--auto", "--threshold", "0.9", "--no-llm", "--dry-run", "--json")
    old = by_text[STAGING[0]]
    assert any(old in r["merged_from"] for r in json.loads(cli(*args).stdout)["merged"])
    path = cli.store / "facts" / f"{old}.md"
    path.write_text(path.read_text().replace("\n---\n", f"\nsuperseded_by: {by_text[ALICE]}\n---\n", 1))
    assert not any(old in r["merged_from"] for r in json.loads(cli(*args).stdout)["merged"])


def test_heuristic_merge_keeps_unique_sentences():
    assert heuristic_merge(["Redis backs the queue.", "Redis backs the queue."]) == "Redis backs the queue."
    # contained word for word in the newer text: covered, not repeated
    assert heuristic_merge(["The app uses Redis.", "The app uses Redis 7 for caching."]) == \
        "The app uses Redis 7 for caching."
    # "port 80" is not said by "port 8080": the older fact stays
    merged = heuristic_merge(["The proxy listens on port 80.", "The proxy listens on port 8080 in dev."])
    assert merged.startswith("The proxy listens on port 8080 in dev.") and "The proxy listens on port 80." in merged
    three = heuristic_merge(["A runs first. B runs second.", "C runs third. A runs first!", "D runs last."])
    assert three.startswith("D runs last.")
    for s in ("A runs first", "B runs second.", "C runs third."):
        assert three.count(s) == 1, three


# --- prune ---------------------------------------------------------------------------------------

PRUNE = [
    # text, created, confidence, type
    ("The old CI ran on Travis.", "2020-01-15T10:00:00Z", 0.9, "semantic"),
    ("In 2020 the release was cut by hand.", "2020-06-01T10:00:00Z", 0.3, "episodic"),
    ("Run the linter with ruff check.", "2021-02-01T10:00:00Z", 0.4, "procedural"),
    ("The current CI runs on GitHub Actions.", None, 0.9, "semantic"),
    ("Yesterday the deploy took twenty minutes.", None, 0.2, "episodic"),
]


@pytest.fixture
def aged(hash_cli) -> tuple[Cli, dict[str, str]]:
    recs = [{"text": t, "confidence": c, "type": ty, **({"created": at} if at else {})} for t, at, c, ty in PRUNE]
    return hash_cli, load(hash_cli, recs)


def prune(cli: Cli, *args: str) -> list[dict[str, Any]]:
    out = json.loads(cli("prune", "--json", *args).stdout)
    assert set(out) == {"schema", "trashed", "dry_run"}
    assert all(set(r) == {"id", "text", "reason"} for r in out["trashed"])
    return out["trashed"]


def texts(records: list[dict[str, Any]]) -> set[str]:
    return {r["text"] for r in records}


OLD = {p[0] for p in PRUNE if p[1]}
LOW = {p[0] for p in PRUNE if p[2] < 0.5}


def test_prune_older_than_and_restore(aged):
    cli, by_text = aged
    gone = prune(cli, "--older-than", "90d")
    assert texts(gone) == OLD
    assert all(r["reason"].startswith("pruned: created before ") for r in gone)
    assert set(ids(cli)) == {p[0] for p in PRUNE} - OLD
    for r in gone:
        assert trashed(cli, r["id"]).extra["trashed"]["reason"] == r["reason"]
    assert sorted(e["id"] for e in log(cli) if e["event"] == "PRUNE") == sorted(r["id"] for r in gone)
    cli("restore", *(r["id"] for r in gone))
    assert ids(cli) == by_text


def test_prune_dry_run_changes_nothing(aged):
    cli, _ = aged
    before = snapshot(cli)
    assert texts(prune(cli, "--older-than", "90d", "--dry-run")) == OLD
    r = cli("prune", "--min-confidence", "0.5", "--min-age", "0", "--dry-run")
    assert f"would trash {len(LOW)} memories" in r.stderr and all(t in r.stdout for t in LOW)
    assert snapshot(cli) == before


def test_prune_min_confidence_type_and_criteria_combine(aged):
    cli, _ = aged
    assert texts(prune(cli, "--dry-run", "--min-confidence", "0.5", "--min-age", "0")) == LOW
    assert texts(prune(cli, "--dry-run", "--min-confidence", "0.5")) == LOW & OLD  # --min-age 30d spares new ones
    assert texts(prune(cli, "--dry-run", "--older-than", "90d", "--min-confidence", "0.5")) == OLD & LOW
    assert texts(prune(cli, "--dry-run", "--older-than", "2020-12-31")) == {PRUNE[0][0], PRUNE[1][0]}
    assert texts(prune(cli, "--dry-run", "--type", "episodic", "--older-than", "90d")) == {PRUNE[1][0]}
    assert texts(prune(cli, "--dry-run", "--type", "episodic", "--min-confidence", "0.5", "--min-age", "0")) == \
        {PRUNE[1][0], PRUNE[4][0]}
    r = cli("prune", "--older-than", "90d", "--min-confidence", "0.5")
    assert "trashed 2 memories" in r.stderr
    assert set(ids(cli)) == {p[0] for p in PRUNE} - (OLD & LOW)


def test_prune_unused(aged):
    cli, by_text = aged
    assert texts(prune(cli, "--dry-run", "--unused", "--min-age", "0")) == set(by_text)  # nothing searched yet
    assert texts(prune(cli, "--dry-run", "--unused")) == OLD  # the default --min-age 30d spares the new ones
    found = json.loads(cli("search", "--json", "-k", "2", "The current CI runs on GitHub Actions.").stdout)
    used = {r["id"] for r in found["results"]}
    assert by_text["The current CI runs on GitHub Actions."] in used and len(used) < len(by_text)
    gone = prune(cli, "--unused", "--min-age", "0")
    assert {r["id"] for r in gone} == set(by_text.values()) - used
    assert all("never returned by a search" in r["reason"] for r in gone)
    assert set(ids(cli).values()) == used
    cli("restore", *(r["id"] for r in gone))
    assert ids(cli) == by_text


def test_prune_unused_and_old(aged):
    cli, by_text = aged
    cli("search", "-k", "1", "The old CI ran on Travis.")
    assert texts(prune(cli, "--dry-run", "--unused", "--older-than", "90d")) == OLD - {"The old CI ran on Travis."}


def test_prune_needs_a_criterion(aged):
    cli, _ = aged
    before = snapshot(cli)
    one_line_error(cli("prune", ok=False), 2)  # a usage mistake
    one_line_error(cli("prune", "--type", "episodic", ok=False), 2)
    assert cli("prune", "--older-than", "soon", ok=False).exit_code == 2
    assert cli("prune", "--min-confidence", "1.5", ok=False).exit_code == 2
    assert snapshot(cli) == before


# --- rollback ------------------------------------------------------------------------------------

ROLLBACK = [
    {"text": "The cache TTL is five minutes.", "origins": ["git:bad0001"]},
    {"text": "Payments are retried three times.", "origins": ["session:s9", "git:bad0001"], "tags": ["payments"],
     "confidence": 0.7, "domain": "backend", "reviewed_by": "carol",
     "links": [{"rel": "see_also", "id": "01JDQ8ZK4M6V3XW7T2B9C5N1RB"}],
     "history": [{"event": "UPDATE", "at": "2026-01-02T00:00:00Z", "old": "Payments are retried twice."}]},
    {"text": "Invoices are emailed on the first of the month.", "origins": ["session:s9"]},
    {"text": "The API is versioned in the URL path."},
]


@pytest.fixture
def origins(hash_cli) -> tuple[Cli, dict[str, str]]:
    return hash_cli, load(hash_cli, ROLLBACK)


def test_rollback_trashes_what_only_that_origin_vouched_for(origins):
    cli, by_text = origins
    only, shared, other, imported = (by_text[r["text"]] for r in ROLLBACK)
    before = snapshot(cli)
    shared_before = show(cli, shared)

    dry = json.loads(cli("rollback", "--dry-run", "--json", "git:bad0001").stdout)
    assert dry == {"schema": 1, "origin": "git:bad0001", "trashed": [only], "detached": [shared], "dry_run": True}
    assert "would trash 1, would detach git:bad0001 from 1" in cli("rollback", "--dry-run", "git:bad0001").stderr
    assert snapshot(cli) == before

    out = json.loads(cli("rollback", "--json", "git:bad0001").stdout)
    assert out == {"schema": 1, "origin": "git:bad0001", "trashed": [only], "detached": [shared], "dry_run": False}
    assert set(ids(cli).values()) == {shared, other, imported}
    assert trashed(cli, only).extra["trashed"]["reason"] == "rollback of git:bad0001"
    after = show(cli, shared)
    assert after["origins"] == ["session:s9"]
    assert {k: v for k, v in after.items() if k not in ("origins", "updated")} == \
        {k: v for k, v in shared_before.items() if k not in ("origins", "updated")}
    for mid in (other, imported):
        assert snapshot(cli)[f"facts/{mid}.md"] == before[f"facts/{mid}.md"]
    lines = [e for e in log(cli) if e["event"] == "ROLLBACK"]
    assert {e["id"] for e in lines} == {only, shared} and all(e["origin"] == "git:bad0001" for e in lines)
    hits = json.loads(cli("search", "--json", "The cache TTL is five minutes.").stdout)["results"]
    assert only not in [h["id"] for h in hits]

    again = json.loads(cli("rollback", "--json", "git:bad0001").stdout)
    assert again["trashed"] == [] and again["detached"] == []
    cli("restore", only)
    assert ids(cli)[ROLLBACK[0]["text"]] == only


def test_rollback_of_an_import(origins):
    cli, by_text = origins
    out = json.loads(cli("rollback", "--json", "import:stdin").stdout)
    assert out["trashed"] == [by_text[ROLLBACK[3]["text"]]] and out["detached"] == []


def test_rollback_of_an_unknown_origin_changes_nothing(origins):
    cli, _ = origins
    before = snapshot(cli)
    r = cli("rollback", "git:0000000", ok=False)  # an origin nothing ever came from: a mistake, exit 1
    one_line_error(r)
    assert "no memory comes from git:0000000" in r.stderr and "git:bad0001" in r.stderr  # hint: the real ones
    r = cli("rollback", "--json", "session:nope", ok=False)
    assert r.exit_code == 1 and r.stdout == ""
    assert json.loads(r.stderr.splitlines()[-1])["error"] == "no memory comes from session:nope"
    assert cli("rollback", "git:bad", "--dry-run", ok=False).exit_code == 1  # a prefix of an origin is not it
    assert snapshot(cli) == before


# --- consolidate (real model: similarity matters) ------------------------------------------------

MIGRATIONS = ("Always run migrations before deploying.", "Never run migrations before deploying.")
RATE = ("The API rate limit is 100 requests per minute.", "The API rate limit is 500 requests per minute.")
EPISODES = ("The nightly build failed because the npm registry timed out.",
            "Tonight's build failed: the npm registry timed out.",
            "The nightly build broke again: npm registry timeout during install.")


@pytest.fixture
def messy(cli) -> tuple[Cli, dict[str, str]]:
    recs = [{"text": t, "origins": [f"session:{i}"]} for i, t in enumerate((*STAGING, *MIGRATIONS, *RATE, ALICE))]
    recs += [{"text": t, "type": "episodic", "tags": [f"day{i}"], "origins": [f"session:e{i}"]}
             for i, t in enumerate(EPISODES)]
    return cli, load(cli, recs)


def links(m: dict[str, Any], rel: str) -> list[str]:
    return [lk["id"] for lk in m.get("links") or [] if lk["rel"] == rel]


def test_consolidate_dry_run_reports_and_writes_nothing(messy):
    cli, by_text = messy
    before = snapshot(cli)
    report = json.loads(cli("consolidate", "--dry-run", "--json").stdout)
    assert set(report) == {"schema", "merged", "contradictions", "distilled", "dry_run", "provisional_vectors"}
    assert report["dry_run"] is True and report["provisional_vectors"] == 0
    assert [sorted(m["merged_from"]) for m in report["merged"]] == [sorted(by_text[t] for t in STAGING)]
    assert sorted(sorted(c["ids"]) for c in report["contradictions"]) == \
        sorted(sorted(by_text[t] for t in pair) for pair in (MIGRATIONS, RATE))
    assert [sorted(d["from"]) for d in report["distilled"]] == [sorted(by_text[t] for t in EPISODES)]
    r = cli("consolidate", "--dry-run")
    assert "1 merged, 2 contradictions, 1 distilled" in r.stderr and "would merge" in r.stderr
    assert snapshot(cli) == before


def test_consolidate_merges_flags_and_distils(messy):
    cli, by_text = messy
    report = json.loads(cli("consolidate", "--json").stdout)
    assert report["dry_run"] is False

    # near-duplicates: one memory, the originals in the trash
    (merged,) = report["merged"]
    assert set(merged) >= {"id", "text", "merged_from", "method"}
    assert sorted(merged["merged_from"]) == sorted(by_text[t] for t in STAGING)
    now = ids(cli)
    assert not set(STAGING) & set(now) and merged["id"] in now.values()
    assert show(cli, merged["id"])["origins"] == ["session:0", "session:1"]
    for t in STAGING:
        assert trashed(cli, by_text[t]).extra["trashed"]["reason"] == f"merged into {merged['id']}"

    # contradictions: both kept, linked both ways, logged; other numbers for one setting count too
    flagged = {tuple(sorted(c["ids"])): c for c in report["contradictions"]}
    assert set(flagged) == {tuple(sorted(by_text[t] for t in pair)) for pair in (MIGRATIONS, RATE)}
    for c in report["contradictions"]:
        assert set(c) == {"ids", "similarity", "why", "texts"}
        assert c["texts"] == [show(cli, i)["text"] for i in c["ids"]]
        assert 0.8 <= c["similarity"] < 1
    for a_text, b_text in (MIGRATIONS, RATE):
        a, b = by_text[a_text], by_text[b_text]
        assert links(show(cli, a), "contradicts") == [b]
        assert links(show(cli, b), "contradicts") == [a]
        assert show(cli, a)["text"] == a_text and show(cli, b)["text"] == b_text
    lines = [e for e in log(cli) if e["event"] == "CONTRADICTION"]
    assert sorted(tuple(sorted(e["ids"])) for e in lines) == sorted(flagged)
    assert all(e["reason"] for e in lines)

    # recurring episodes: one semantic memory derived from each, each pointing at it
    (dist,) = report["distilled"]
    assert set(dist) == {"id", "text", "from"}
    episodes = [by_text[t] for t in EPISODES]
    assert sorted(dist["from"]) == sorted(episodes)
    d = show(cli, dist["id"])
    assert d["type"] == "semantic" and d["text"] == dist["text"] and "npm registry" in d["text"]
    assert sorted(links(d, "derived_from")) == sorted(episodes)
    assert sorted(d["origins"]) == sorted(f"session:e{i}" for i in range(3))
    assert sorted(d["tags"]) == ["day0", "day1", "day2"]
    for e in episodes:
        m = show(cli, e)
        assert m["type"] == "episodic" and links(m, "distilled_into") == [dist["id"]]
    assert [e["id"] for e in log(cli) if e["event"] == "DISTIL"] == [dist["id"]]
    assert now[ALICE] == by_text[ALICE] and not show(cli, by_text[ALICE]).get("links")

    # a second pass finds nothing new: no second distillation, no repeated flags or log lines
    before = snapshot(cli)
    again = json.loads(cli("consolidate", "--json").stdout)
    assert again == {"schema": 1, "merged": [], "contradictions": [], "distilled": [], "dry_run": False,
                     "provisional_vectors": 0}
    assert snapshot(cli) == before


def test_recurring_dated_episodes_are_distilled_not_merged_or_flagged(cli):
    dated = [f"On 2026-03-{d:02d} the nightly build failed because the npm registry timed out." for d in (2, 9, 16)]
    by_text = load(cli, [{"text": t, "type": "episodic"} for t in dated])
    report = json.loads(cli("consolidate", "--json").stdout)
    assert report["merged"] == [] and report["contradictions"] == []
    (dist,) = report["distilled"]
    assert sorted(dist["from"]) == sorted(by_text.values())
    assert set(by_text) <= set(ids(cli))  # every dated event is kept, each with its date
    again = json.loads(cli("consolidate", "--json").stdout)
    assert again == {"schema": 1, "merged": [], "contradictions": [], "distilled": [], "dry_run": False,
                     "provisional_vectors": 0}


@pytest.mark.parametrize("a, b", [
    MIGRATIONS, RATE,
    ("Enable debug logging in staging.", "Disable debug logging in staging."),
    ("Do commit the lockfile.", "Don't commit the lockfile."),
    ("Tests must run in CI.", "Tests must not run in CI."),
    ("The request timeout is 30 seconds.", "The request timeout is 60 seconds."),
])
def test_opposing_wording(a, b):
    assert opposing(a, b) and opposing(b, a)


@pytest.mark.parametrize("a, b", [
    STAGING, VITE,
    ("The API rate limit is 100 requests per minute.", "The API rate limit is 100 requests per minute per user."),
    ("Redis backs the background job queue.", "The background job queue is backed by Redis."),
])
def test_not_opposing(a, b):
    assert opposing(a, b) is None


def test_a_merged_memory_is_judged_for_contradictions(messy):
    """A contradiction candidate of a memory the same pass merges is judged against the merged
    text: "Monday" against the merged "Sunday" staging memory is flagged."""
    cli, by_text = messy
    cli("import", "-", input=json.dumps([{"text": "The staging database is reset every Monday at 02:00 UTC.",
                                          "created": "2024-01-01T00:00:00Z"}]))
    report = json.loads(cli("consolidate", "--dry-run", "--json").stdout)
    merged = [m["id"] for m in report["merged"] if sorted(m["merged_from"]) == sorted(by_text[t] for t in STAGING)]
    assert len(merged) == 1
    assert any(merged[0] in c["ids"] for c in report["contradictions"])  # Sunday vs Monday, merged
