"""Search with the real model: paraphrases find their memory, filters filter, the output has the documented shape,
and a search never rewrites a fact file (usage goes to the state file)."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import sqlite3

import pytest
from conftest import Cli, files

from memcli.api import Store
from memcli.core.memory import iso
from memcli.ops.io import import_memories, to_memories
from memcli.ops.search import search_many

# ~20 developer notes: (text, tags, type, user, project)
NOTES = [
    ("We deploy the backend with `make release` from the main branch.", ["deploy"], "procedural", "alice", "api"),
    ("The staging database is reset every Sunday at 02:00 UTC.", ["database", "staging"], "semantic", "bob", "api"),
    ("Python code is formatted with ruff and a line length of 110.", ["python", "ruff"], "procedural", "alice", "api"),
    ("API keys live in the OS keyring, never in config files.", ["security"], "procedural", "bob", "api"),
    ("The frontend is a React app built with Vite.", ["react", "frontend"], "semantic", "alice", "web"),
    ("Integration tests need Docker running locally.", ["testing", "docker"], "semantic", "bob", "api"),
    ("Run the unit tests with `pytest -q` from the repository root.", ["testing", "python"], "procedural", "alice",
     "api"),
    ("Postgres connection pooling is handled by PgBouncer in transaction mode.", ["database"], "semantic", "bob",
     "api"),
    ("On 2026-03-02 the payment service went down because a TLS certificate expired.", ["incident"], "episodic",
     "alice", "api"),
    ("Feature flags are managed in LaunchDarkly.", ["flags"], "semantic", "bob", "web"),
    ("Logs are shipped to Grafana Loki and kept for 14 days.", ["logging"], "semantic", "alice", "api"),
    ("Mobile builds are signed on the CI macOS runner.", ["mobile", "ci"], "semantic", "bob", "mobile"),
    ("The search service uses Elasticsearch 8 with a nightly reindex.", ["search"], "semantic", "alice", "api"),
    ("Alice owns the billing module and reviews its pull requests.", ["billing", "people"], "semantic", "bob", "api"),
    ("Translations are stored as JSON files under locales/.", ["i18n"], "semantic", "alice", "web"),
    ("GraphQL schema changes require a version bump of the client SDK.", ["graphql"], "procedural", "bob", "web"),
    ("Redis is used as the job queue backend via RQ.", ["redis", "queue"], "semantic", "alice", "api"),
    ("Kubernetes manifests are generated with Helm charts in deploy/charts.", ["kubernetes", "deploy"], "semantic",
     "bob", "api"),
    ("Database migrations are written with Alembic and run automatically on deploy.", ["database", "migrations"],
     "procedural", "alice", "api"),
    ("The team prefers squash merges for pull requests.", ["git"], "procedural", "bob", "api"),
    ("Error tracking goes to Sentry; alerts page the on-call engineer.", ["monitoring"], "semantic", "alice", "api"),
]
TEXTS = [n[0] for n in NOTES]

# Paraphrases that share no telling word with their memory.
PARAPHRASES = {
    "how do we push a new version of the backend live?": 0,
    "which formatter enforces our Python style?": 2,
    "what happened when payments broke?": 8,
    "how are background tasks queued?": 16,
    "how long do we retain logs?": 10,
    "how do we toggle features on and off?": 9,
    "what merge strategy do we use?": 19,
    "where are crashes and exceptions reported?": 20,
    "how is the SQL pool of connections managed?": 7,
    "how do I execute the unit test suite?": 6,
    "which person maintains the invoicing component?": 13,
}
# Paraphrases that happen to share one incidental word with a *different* memory ("kept", "code", "live", ...).
# The embedding alone ranks the right memory first for every one of them.
INCIDENTAL = {
    "how do I ship the server to production?": 0,
    "when is the test DB wiped?": 1,
    "where should secrets and credentials be kept?": 3,
    "who is responsible for invoicing code?": 13,
    "where do the localisation strings live?": 14,
}
# Here the embedding's own margin is tiny (0.31 vs 0.27 for "Translations are stored ..."), so one shared
# word may tip the order; the right memory must still be in the top two.
CLOSE_CALL = ("where do we store passwords and tokens?", 3)
QUERY = "how do we deploy things?"


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    path = tmp_path_factory.mktemp("notes") / "store"
    s = Store(path)
    s.init()
    records = [{"text": t, "tags": tags, "type": ty, "user": u, "project": p} for t, tags, ty, u, p in NOTES]
    import_memories(files(s), to_memories(records, "notes", "import:notes"))
    s.close()
    return path


@pytest.fixture
def notes(template, tmp_path):
    """A private copy of the notes store (usage counts must not leak between tests)."""
    path = tmp_path / "store"
    shutil.copytree(template, path)
    return path


def ids_by_text(path) -> dict[str, str]:
    s = Store(path)
    try:
        s.index.sync()
        return {r.text: r.id for r in s.index.select()}
    finally:
        s.close()


def run_queries(path, queries, **kw):
    s = Store(path)
    try:
        return search_many(files(s), list(queries), record_usage=False, **kw)
    finally:
        s.close()


# --- quality -------------------------------------------------------------------------------------


def test_a_paraphrased_query_finds_its_memory_first(notes):
    responses = run_queries(notes, PARAPHRASES)
    misses = {q: (r.hits[0].memory.text if r.hits else None)
              for (q, i), r in zip(PARAPHRASES.items(), responses)
              if not r.hits or r.hits[0].memory.text != TEXTS[i]}
    assert misses == {}


def test_an_incidental_shared_word_does_not_beat_meaning(notes):
    # threshold 0: this is about ranking, not about the similarity floor (one right answer is below 0.3)
    responses = run_queries(notes, INCIDENTAL, threshold=0.0)
    misses = {q: (r.hits[0].memory.text if r.hits else None)
              for (q, i), r in zip(INCIDENTAL.items(), responses)
              if not r.hits or r.hits[0].memory.text != TEXTS[i]}
    assert misses == {}


def test_a_close_call_keeps_the_right_memory_near_the_top(notes):
    query, i = CLOSE_CALL
    (r,) = run_queries(notes, [query], threshold=0.0)
    assert TEXTS[i] in [h.memory.text for h in r.hits[:2]]


def test_an_exact_identifier_is_found_by_keyword(notes):
    (r,) = run_queries(notes, ["PgBouncer"])
    assert r.hits[0].memory.text == TEXTS[7]


# --- filters -------------------------------------------------------------------------------------


def cli_results(cli: Cli, *args: str) -> list[dict]:
    return json.loads(cli("search", "--json", "-k", "50", "--threshold", "0", *args).stdout)["results"]


@pytest.mark.parametrize(
    "flags, field, check",
    [
        (("--tag", "deploy"), "tags", lambda v: "deploy" in v),
        (("--tag", "database", "--tag", "migrations"), "tags", lambda v: {"database", "migrations"} <= set(v)),
        (("--type", "semantic"), "type", lambda v: v == "semantic"),
        (("--user", "bob"), "user", lambda v: v == "bob"),
        (("--project", "web"), "project", lambda v: v == "web"),
    ],
    ids=["tag", "two-tags", "type", "user", "project"],
)
def test_search_filters(notes, flags, field, check):
    cli = Cli(notes)
    everything = cli_results(cli, QUERY)
    filtered = cli_results(cli, *flags, QUERY)
    assert filtered, "the filter leaves matching memories"
    assert all(check(r[field]) for r in filtered), [r[field] for r in filtered]
    assert any(not check(r[field]) for r in everything), "the unfiltered search returned others too"
    expected = {r["id"] for r in everything if check(r[field])}
    assert expected <= {r["id"] for r in filtered}, "the filter drops only what does not match"


def test_since_and_until(notes):
    now = dt.datetime.now(dt.timezone.utc)
    old, mid = now - dt.timedelta(days=400), now - dt.timedelta(days=60)
    dated = [
        {"text": "Release trains leave every second Tuesday (old rule).", "created": iso(old), "updated": iso(old)},
        {"text": "Release trains leave every Tuesday (newer rule).", "created": iso(mid), "updated": iso(mid)},
    ]
    s = Store(notes)
    try:
        import_memories(files(s), to_memories(dated, "dated", "import:dated"))
    finally:
        s.close()
    cli = Cli(notes)
    query = "when do release trains leave?"

    def texts(*flags):
        return {r["text"] for r in cli_results(cli, *flags, query) if "Release trains" in r["text"]}

    assert texts() == {d["text"] for d in dated}
    assert texts("--since", "90d") == {dated[1]["text"]}
    assert texts("--until", "90d") == {dated[0]["text"]}
    assert texts("--since", iso(old - dt.timedelta(days=1))[:10], "--until", mid.date().isoformat()) == {
        d["text"] for d in dated}  # a bare --until date means the end of that day
    assert texts("--until", (mid - dt.timedelta(days=1)).date().isoformat()) == {dated[0]["text"]}
    everything = cli_results(cli, "--since", "1d", query)
    assert everything and all(r["created"] >= iso(now - dt.timedelta(days=1)) for r in everything)
    bad = cli("search", "--since", "someday", query, ok=False)
    assert bad.exit_code == 2


# --- options and output shape -------------------------------------------------------------------


@pytest.mark.parametrize("k", ["0", "51", "-1"])
def test_top_k_out_of_bounds_is_a_usage_error(notes, k):
    r = Cli(notes)("search", "-k", k, QUERY, ok=False)
    assert r.exit_code == 2


def test_top_k_bounds_the_results(notes):
    cli = Cli(notes)
    one = json.loads(cli("search", "--json", "-k", "1", "--threshold", "0", QUERY).stdout)
    assert len(one["results"]) == 1
    default = json.loads(cli("search", "--json", "--threshold", "0", QUERY).stdout)
    assert len(default["results"]) == 5
    many = json.loads(cli("search", "--json", "-k", "50", "--threshold", "0", QUERY).stdout)
    assert 5 < len(many["results"]) <= len(NOTES)


def test_json_output_shape_and_metadata(notes):
    out = json.loads(Cli(notes)("search", "--json", QUERY).stdout)
    assert out["query"] == QUERY
    results, meta = out["results"], out["metadata"]
    assert results
    for r in results:
        for key in ("id", "text", "type", "tags", "confidence", "source", "origins", "user", "project", "created",
                    "updated", "score", "similarity"):
            assert key in r, key
    assert meta["total_results"] == len(results)
    sims = [r["similarity"] for r in results]
    assert meta["max_similarity"] == pytest.approx(max(sims), abs=1e-3)
    assert meta["min_similarity"] == pytest.approx(min(sims), abs=1e-3)
    assert meta["average_similarity"] == pytest.approx(sum(sims) / len(sims), abs=1e-3)
    assert meta["search_time_ms"] >= meta["embedding_time_ms"] >= 0
    scores = [r["score"] for r in results]
    assert scores[0] == max(scores)


def test_no_match_gives_empty_results_not_an_error(notes):
    cli = Cli(notes)
    out = json.loads(cli("search", "--json", "--threshold", "0.99", "zebra crossing velocity").stdout)
    assert out["results"] == [] and out["metadata"]["total_results"] == 0
    human = cli("search", "--threshold", "0.99", "zebra crossing velocity")
    assert human.stdout == "" and "no matching" in human.stderr


def test_explain_shows_the_parts_of_the_score(notes):
    cli = Cli(notes)
    out = json.loads(cli("search", "--json", "--explain", QUERY).stdout)
    w = Store(notes).config.ranking
    for r in out["results"]:
        p = r["explain"]
        assert set(p) >= {"similarity", "keyword", "recency", "reliability"}
        assert p["similarity"] == pytest.approx(r["similarity"], abs=1e-3)
        total = (w.similarity * p["similarity"] + w.keyword * p["keyword"] + w.recency * p["recency"]
                 + w.reliability * p["reliability"])
        assert p["relevance"] == pytest.approx(total, abs=2e-3)
        # the shown score: relevance less the diversity penalty, on the scale of the best possible score
        full = w.similarity + w.keyword + w.recency + w.reliability
        assert r["score"] == pytest.approx(max(0.0, p["relevance"] - p["diversity_penalty"]) / full, abs=2e-3)
    human = cli("search", "--explain", QUERY).stdout
    for word in ("similarity", "keyword", "recency", "reliability"):
        assert word in human
    assert "explain" not in json.loads(cli("search", "--json", QUERY).stdout)["results"][0]


def test_batch_gives_one_json_line_per_query(notes):
    queries = list(PARAPHRASES)[:3]
    r = Cli(notes)("search", "--batch", input="\n".join(queries[:2]) + "\n\n" + queries[2] + "\n")
    lines = r.stdout.splitlines()
    assert len(lines) == 3
    docs = [json.loads(ln) for ln in lines]
    assert [d["query"] for d in docs] == queries
    for d, q in zip(docs, queries):
        assert d["results"] and d["results"][0]["text"] == TEXTS[PARAPHRASES[q]]
    bad = Cli(notes)("search", "--batch", "a query too", input="x\n", ok=False)
    assert bad.exit_code == 2


# --- a search is read-only on facts/ --------------------------------------------------------------


def usage_counts(path) -> dict[str, int]:
    db = sqlite3.connect(path / ".state.sqlite")
    try:
        return dict(db.execute("SELECT id, count FROM usage").fetchall())
    finally:
        db.close()


def test_search_counts_returns_in_the_state_file_and_never_touches_facts(notes):
    cli = Cli(notes)
    cli("list")  # bring the sidecar in step first
    facts = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in (notes / "facts").iterdir()}
    first = json.loads(cli("search", "--json", "--explain", QUERY).stdout)["results"]
    ids = [r["id"] for r in first]
    assert usage_counts(notes) == {i: 1 for i in ids}
    assert all(r["explain"]["reliability"] == 0 for r in first)
    second = json.loads(cli("search", "--json", "--explain", QUERY).stdout)["results"]
    counts = usage_counts(notes)
    assert all(counts[i] >= 1 for i in ids)
    assert any(counts[i] == 2 for i in ids)
    # being returned is not being used: the same query on an unchanged store scores the same
    assert [(r["id"], r["score"], r["explain"]) for r in second] == [(r["id"], r["score"], r["explain"]) for r in first]
    assert all(r["explain"]["reliability"] == 0 for r in second)
    cli("search", "--batch", input="\n".join(PARAPHRASES) + "\n")
    after = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in (notes / "facts").iterdir()}
    assert after == facts
    assert all(b"usage" not in data for data, _ in after.values())


def test_same_query_twice_scores_the_same_and_feedback_is_what_ranks(notes):
    cli = Cli(notes)
    first = json.loads(cli("search", "--json", "--explain", QUERY).stdout)["results"]
    again = json.loads(cli("search", "--json", "--explain", QUERY).stdout)["results"]
    assert [(r["id"], r["score"]) for r in again] == [(r["id"], r["score"]) for r in first]
    last = first[-1]
    out = json.loads(cli("feedback", last["id"], "--useful", "--json").stdout)
    assert out["id"] == last["id"] and out["confidence"] == pytest.approx(min(0.95, last["confidence"] + 0.05))
    after = {r["id"]: r for r in json.loads(cli("search", "--json", "--explain", QUERY).stdout)["results"]}
    assert after[last["id"]]["explain"]["reliability"] > 0 and after[last["id"]]["score"] > last["score"]
    wrong = json.loads(cli("feedback", last["id"], "--wrong", "--json").stdout)
    assert wrong["confidence"] == pytest.approx(out["confidence"] - 0.05)
    assert cli("feedback", last["id"], ok=False).exit_code == 2  # one of --useful / --wrong


def test_a_long_lived_process_never_reads_a_replaced_usage_file(hash_store):
    """Searches keep the usage file open between calls (opening it cost as much as ranking); a file
    removed, or removed and created again, must not leave a server or batch reading the old one."""
    from pathlib import Path

    from memcli.core.memory import Memory
    from memcli.ops.search import Usage

    files(hash_store).write(Memory(id="M1", text="the payments service times out under load", tags=["ops"]))
    files(hash_store).write(Memory(id="M2", text="grafana alert for the payments queue", tags=["ops"]))

    def reliability() -> float:
        hits = search_many(files(hash_store), ["payments service times out"], k=2, threshold=0.0, record_usage=False)[0]
        return {h.id: h.parts["reliability"] for h in hits}["M1"]

    assert reliability() == 0
    Usage(hash_store).use(["M1"], 5)
    five = reliability()
    assert five == pytest.approx(0.8 * (5 / 10) ** 0.5)
    assert reliability() == five  # the same file, still open: the same count
    state = hash_store.path / ".state.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{state}{suffix}").unlink(missing_ok=True)
    Usage(hash_store).use(["M1"], 1)  # a new file in its place, before any search looked
    assert reliability() == pytest.approx(0.8 * (1 / 10) ** 0.5)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{state}{suffix}").unlink(missing_ok=True)
    assert reliability() == 0  # no file: no uses


def test_a_question_about_a_version_finds_the_memory_that_gives_it(cli):
    """fastapi/typer: "rich" is also a feature there, and its feature memories outranked the bump
    that answers "Which rich version does typer use?" (outside the top 10)."""
    for text in ("Fix `TYPER_USE_RICH` parsing to allow disabling Rich completely",
                 "Use Ruff rules to ensure safe lazy-loading of `rich`",
                 "Add docs for using Rich with Typer: rich help panels, rich markup mode and rich tracebacks",
                 "Make second column of Rich help output reflect the type consistently, even when using metavar",
                 "Bump rich from 14.3.3 to 15.0.0 (#1688)",
                 "Bump ruff from 0.15.1 to 0.15.2 (#1567)",
                 # other subjects of the same history, so "rich" is a word of a few memories, as there
                 "Ensure that the default of a list argument is used correctly",
                 "Pin GitHub actions by commit SHA",
                 "Recommend uv projects by default in docs",
                 "Vendor Click and streamline Typer's functionality and code base",
                 "Ensure that hidden commands are not shown in the help output",
                 "Remove the old Latest Changes workflow",
                 "Add Fish shell completion tests for colon options",
                 "Make epilog formatting consistent with other parts of the help string",
                 "Update security policy",
                 "Run tests with lower bound uv sync, update minimum dependencies"):
        cli("add", "--raw", text)
    hits = json.loads(cli("search", "--json", "-k", "3", "Which rich version does typer use?").stdout)["results"]
    # (without the version part it ranks fourth, below "Vendor Click and streamline Typer's ...")
    assert "Bump rich from 14.3.3 to 15.0.0 (#1688)" in [h["text"] for h in hits[:2]]
    # any other question ranks as before: no memory gets the version part
    other = json.loads(cli("search", "--json", "--explain", "-k", "3", "how do I disable rich?").stdout)["results"]
    assert other and all("similarity" in h["explain"] and "version" not in h["explain"] for h in other)
    asked = json.loads(cli("search", "--json", "--explain", "-k", "3", "Which rich version?").stdout)["results"]
    # (the newest memory about rich alone: the most of the version part)
    assert [h["explain"]["version"] for h in asked if h["text"].startswith("Bump rich")] == [1.5]


def test_a_version_question_ranks_the_newest_pin_above_older_lines_that_list_many_packages(cli, tmp_path):
    """expressjs/express: History.md's 2014 lines list serve-static among other packages and no one
    bump replaces them; "Which serve-static version does Express depend on?" must still answer with
    the current `serve-static@^2.2.0` among them (it was not in the top 10)."""
    lines = [("deps: connect@2.22.0; deps: csurf@~1.3.0; deps: express-session@~1.6.1; deps: multiparty@3.3.0; "
              "deps: serve-static@~1.3.0 (version 3.13.0)", "2014-07-03T00:00:00Z", "changelog:3.13.0"),
             ("deps: connect@2.23.0; deps: debug@1.0.3; deps: express-session@~1.6.4; deps: parseurl@~1.1.3; "
              "deps: serve-static@~1.3.1 (version 3.14.0)", "2014-07-11T00:00:00Z", "changelog:3.14.0"),
             ("deps: connect@2.19.6; deps: body-parser@1.3.1; deps: compression@1.0.7; deps: serve-static@1.2.3 "
              "(version 3.10.5)", "2014-06-11T00:00:00Z", "changelog:3.10.5"),
             ("fix(deps): serve-static@^2.2.0 (#6418)", "2025-03-28T00:46:06Z", "git:4c4f3ea1"),
             ("deps: router@^2.2.0 (#6417)", "2025-03-27T00:00:00Z", "git:eb6d1258")]
    # other subjects of the same history, so "serve-static" is a word of a few memories, as there
    lines += [(t, "2025-01-01T00:00:00Z", f"git:{i:07x}") for i, t in enumerate((
        "Throw on invalid status codes (#4212)", "Use Array.flat instead of array-flatten (#5677)",
        "lib: use req.socket over deprecated req.connection (#6705)", "chore: remove benchmarks directory (#6992)",
        "feat: add support for ETag option in res.sendFile (#6073)", "ci: add dependabot (#5435)",
        "fix: don't render redirect values in anchor href", "docs: add funding (#6064)",
        "chore: update git rules to ignore `yarn.lock` file (#6588)", "Add \"root\" option to res.download",
        "Prevent open redirect allow list bypass due to encodeurl", "examples: use strict mode"))]
    batch = tmp_path / "in.jsonl"
    batch.write_text("".join(json.dumps({"text": t, "created": c, "origins": [o]}) + "\n" for t, c, o in lines))
    cli("add", "--no-llm", "--batch", str(batch))
    asked = "Which serve-static version does Express depend on?"
    hits = json.loads(cli("search", "--json", "--explain", "-k", "3", asked).stdout)["results"]
    version = {h["text"]: h["explain"]["version"] for h in hits}
    assert version.pop("fix(deps): serve-static@^2.2.0 (#6418)") == 1.5  # the newest about serve-static alone
    assert set(version.values()) == {1.0}  # the lines that list it among others


def _add_dated(cli, tmp_path, lines: list[tuple[str, str, str]]) -> None:
    """`add --no-llm --batch` of (text, created, origin) lines, as a replayed history is added."""
    batch = tmp_path / "in.jsonl"
    batch.write_text("".join(json.dumps({"text": t, "created": c, "origins": [o]}) + "\n" for t, c, o in lines))
    cli("add", "--no-llm", "--batch", str(batch))


def _top(cli, query: str) -> list[str]:
    """The texts of the first three results of `search`."""
    return [h["text"] for h in json.loads(cli("search", "--json", "-k", "3", query).stdout)["results"]]


def test_a_question_for_one_end_of_the_python_range_ranks_that_end(cli, tmp_path):
    """Textualize/rich: "What is the newest Python version rich supports?" ranked the newer floor
    ("Dropped support for Python3.7") above the newest support added ("bump for Python3.14"); the
    oldest version asked ranks the newest floor first."""
    lines = [("Add support for Python 3.13", "2024-09-08T00:00:00Z", "git:815596ef"),
             ("Changed: Dropped support for Python3.7 (version 13.9.0)", "2024-10-01T00:00:00Z", "changelog:13.9.0"),
             ("bump for Python3.14", "2025-10-09T00:00:00Z", "git:27c2d2df"),
             ("drop end of life python versions", "2025-05-13T00:00:00Z", "git:52df9eed"),  # pallets/flask
             ("Drop support for EOL Python 3.8 (#4842)", "2026-01-10T00:00:00Z", "git:1a2b3c4d"),
             # psf/black: the release's item of that commit, dated later, is the same floor said again
             ("Black no longer supports running with Python 3.8 (#4842) (version 26.1.0)", "2026-01-20T00:00:00Z",
              "changelog:26.1.0"),
             ("Fix a crash in Table when a column is empty", "2025-11-01T00:00:00Z", "git:5e6f7a8b"),
             ("Add the Markdown table styles", "2025-12-01T00:00:00Z", "git:9c0d1e2f")]
    _add_dated(cli, tmp_path, lines)
    assert _top(cli, "What is the newest Python version rich supports?")[0] == "bump for Python3.14"
    oldest = _top(cli, "What is the oldest Python version rich supports?")
    assert oldest[:2] == [
        "Black no longer supports running with Python 3.8 (#4842) (version 26.1.0)",
        "Drop support for EOL Python 3.8 (#4842)"]
    # the older floors are older values: below what gives no version
    assert not {"drop end of life python versions", "Changed: Dropped support for Python3.7 (version 13.9.0)"} & set(
        oldest)


def test_a_runtime_written_several_ways_is_one_answer(cli, tmp_path):
    """expressjs/express: "What is the minimum supported Node.js version?" is answered by "adopt
    Node@18 as the minimum supported version" (`node`), though the question writes `node.js`."""
    lines = [("Drop support for Node.js below 4", "2022-02-08T00:00:00Z", "git:f6db4ee8"),
             ("build: support Node.js 21.6.2", "2024-02-17T00:00:00Z", "git:1b2c3d4e"),
             ("feat: adopt Node@18 as the minimum supported version (#5803)", "2024-08-02T00:00:00Z", "git:4b3b8cc2"),
             ("ci: build express with node.js v26 (#7218)", "2026-05-17T00:00:00Z", "git:5c6d7e8f"),
             ("Add \"root\" option to res.download", "2025-01-01T00:00:00Z", "git:6d7e8f9a")]
    _add_dated(cli, tmp_path, lines)
    hits = _top(cli, "What is the minimum supported Node.js version?")
    assert hits[0] == "feat: adopt Node@18 as the minimum supported version (#5803)"
    assert "Drop support for Node.js below 4" not in hits  # an older floor


def test_a_version_question_finds_the_newest_bump_even_when_it_names_no_number(cli, tmp_path):
    """BurntSushi/ripgrep: "deps: bump ignore version" (2026) is the newest statement of the ignore
    crate's version; the changelog's bug fixes in "the `ignore` crate" outranked it (outside the top
    10), and the older numbered bumps are superseded by it."""
    lines = [("deps: bump ignore to 0.4.23", "2024-09-09T00:00:00Z", "git:312a7884"),
             ("deps: bump to ignore 0.4.24", "2025-10-15T00:00:00Z", "git:c03e49b8"),
             ("deps: bump ignore version", "2026-07-15T00:00:00Z", "git:d7982619"),
             ("[BUG #800](https://github.com/BurntSushi/ripgrep/issues/800): Fix a bug in the `ignore` crate for "
              "custom ignore files. This had no impact on ripgrep. (version 0.8.1)", "2017-02-01T00:00:00Z",
              "changelog:0.8.1"),
             ("[BUG #988](https://github.com/BurntSushi/ripgrep/issues/988): Fix a bug in the `ignore` crate that "
              "prevented the use of explicit ignore files after disabling all other ignore rules. (version 0.9.0)",
              "2018-08-03T00:00:00Z", "changelog:0.9.0"),
             ("ignore: skip loading unreachable ignore files", "2026-07-29T00:00:00Z", "git:435f59fc"),
             ("printer: drop dependency on `base64` crate", "2023-09-26T00:00:00Z", "git:0a1b2c3d")]
    batch = tmp_path / "in.jsonl"
    batch.write_text("".join(json.dumps({"text": t, "created": c, "origins": [o]}) + "\n" for t, c, o in lines))
    cli("add", "--no-llm", "--batch", str(batch))
    hits = json.loads(cli("search", "--json", "-k", "3", "Which version of the ignore crate does ripgrep depend on?"
                          ).stdout)["results"]
    assert hits[0]["text"] == "deps: bump ignore version"
    assert not any(h["text"].startswith("deps: bump") and "0.4.2" in h["text"] for h in hits)  # superseded


def test_a_question_for_the_latest_release_finds_the_newest_release_statement(cli, tmp_path):
    """encode/httpx: "What is the latest httpx release?" found docs and install notes that share its
    words ("release", "latest"); the changelog's "Version 0.28.1 was released ..." names no project."""
    lines = [("## 0.28.0 (28th November, 2024)\n\n- The deprecated `app` argument has been removed.",
              "2024-11-28T00:00:00Z", "changelog:0.28.0"),
             ("## 0.28.1 (6th December, 2024)\n\n- Fix SSL case where `verify=False` together with client side "
              "certificates.", "2024-12-06T00:00:00Z", "changelog:0.28.1"),
             ("Always use latest version of `pip`. (#2396)\n\nInstallation should start by updating `pip` to the "
              "latest version.", "2022-10-05T00:00:00Z", "git:a1b2c3d4"),
             ("`httpx.ConnectionPool` will properly release a dropped connection. (Pull #230)", "2019-08-01T00:00:00Z",
              "git:b2c3d4e5"),
             ("Release notes for the httpx 1.0 release are drafted in the docs", "2025-01-01T00:00:00Z",
              "git:c3d4e5f6")]
    batch = tmp_path / "in.jsonl"
    batch.write_text("".join(json.dumps({"text": t, "created": c, "origins": [o]}) + "\n" for t, c, o in lines))
    cli("add", "--no-llm", "--batch", str(batch))
    hits = json.loads(cli("search", "--json", "-k", "3", "What is the latest httpx release?").stdout)["results"]
    assert hits[0]["text"] == "Version 0.28.1 was released on 2024-12-06"
    assert not any(h["text"].startswith("Version 0.28.0") for h in hits)  # superseded


def test_the_latest_release_is_found_among_a_hundred_and_more_release_statements(cli, tmp_path):
    """simonw/sqlite-utils (135 sections), Textualize/rich (188): the current "Version X was released
    ..." was no nearer to the question than the hundred older, superseded ones, and fell outside the
    candidates."""
    sections = [(f"## 1.{n} ({1 + n % 28:d}th March, {2000 + n // 12})\n\n- Fixed the widget renderer for case {n}.",
                 f"{2000 + n // 12}-{1 + n % 12:02d}-{1 + n % 28:02d}T00:00:00Z", f"changelog:1.{n}")
                for n in range(140)]
    batch = tmp_path / "in.jsonl"
    batch.write_text("".join(json.dumps({"text": t, "created": c, "origins": [o]}) + "\n" for t, c, o in sections))
    cli("add", "--no-llm", "--batch", str(batch))
    hits = json.loads(cli("search", "--json", "-k", "3", "What is the latest widget release?").stdout)["results"]
    assert hits[0]["text"].startswith("Version 1.139 was released on")
