"""Tests for the heuristic (offline) extractor: what a user pasting a chat, a note or a commit would check."""

from __future__ import annotations

import time

import pytest

from memcli.core.facts import MEMORY_TYPES, Extraction
from memcli.services.extract import code_pattern_of, detect_flags, heuristic_extract, infer_tags, normalise


def texts(ex: Extraction) -> list[str]:
    return [f.text for f in ex.facts]


def only(ex: Extraction):
    assert len(ex.facts) == 1, texts(ex)
    return ex.facts[0]


# --- chats ------------------------------------------------------------------------------------------


def test_chat_transcript_keeps_only_the_real_facts():
    chat = """User: hi!
Assistant: Hello! How can I help you today?
User: We use ruff with a line length of 110 for all Python code.
Assistant: Got it, thanks!
User: Also, deployments happen via `make deploy` from the main branch.
User: how do I rebuild the index
Assistant: Sounds good.
User: Never store API keys in config.toml; they go in the OS keyring.
User: great, thank you
Assistant: You're welcome! Let me know if you need anything else.
"""
    ex = heuristic_extract(chat)
    assert texts(ex) == [
        "We use ruff with a line length of 110 for all Python code.",
        "Deployments happen via `make deploy` from the main branch.",
        "Never store API keys in config.toml; they go in the OS keyring.",
    ]
    assert ex.skipped >= 3
    assert ex.method == "heuristic"
    assert not any(t.startswith(("User:", "Assistant:")) for t in texts(ex))


def test_speaker_prefix_variants_are_stripped():
    chat = (
        "**User:** The staging database is reset every Sunday at 02:00 UTC.\n"
        "> assistant: Use the `tmp_path` fixture instead of /tmp in pytest tests.\n"
        "Q: How do I rotate the API key?\n"
        "A: Rotate it in Vault, then restart the gateway with `kubectl rollout restart deploy/gateway`.\n"
    )
    assert texts(heuristic_extract(chat)) == [
        "The staging database is reset every Sunday at 02:00 UTC.",
        "Use the `tmp_path` fixture instead of /tmp in pytest tests.",
        "Rotate it in Vault, then restart the gateway with `kubectl rollout restart deploy/gateway`.",
    ]


def test_pleasantries_filler_and_questions_are_skipped():
    junk = """thanks!
lol
ok
Sounds good!
Great, thank you
You're absolutely right, I apologize for the confusion.
Let me check the logs for the deploy job.
I hope this helps! Let me know if you need anything else.
Can you also add tests for that?
What does the --full flag do?
Why is the index so slow
Should we pin numpy
"""
    ex = heuristic_extract(junk)
    assert ex.facts == []
    assert ex.skipped >= 12


def test_statements_that_start_like_questions_are_kept():
    ex = heuristic_extract(
        "When deploying, always run migrations first.\n\nHow to rebuild the index: run `memcli reindex`.\n"
    )
    assert texts(ex) == [
        "When deploying, always run migrations first.",
        "How to rebuild the index: run `memcli reindex`.",
    ]


# --- code -------------------------------------------------------------------------------------------


def test_code_block_is_kept_whole_with_its_intro():
    note = "To rebuild the index run:\n```bash\nmemcli reindex\nmemcli stats --json\n```\nThat is all.\n"
    ex = heuristic_extract(note)
    fact = ex.facts[0]
    assert fact.text == "To rebuild the index run:\n```bash\nmemcli reindex\nmemcli stats --json\n```"
    assert fact.code_pattern == "memcli reindex\nmemcli stats --json"
    assert fact.flags == {"hasCodeBlock": True, "hasCommand": True}
    assert fact.type == "procedural"


def test_code_block_keeps_its_indentation_and_blank_lines():
    note = (
        "Our retry helper looks like this:\n\n"
        "```python\ndef retry(fn):\n    for _ in range(3):\n\n        fn()\n```\n"
    )
    fact = only(heuristic_extract(note))
    assert fact.code_pattern == "def retry(fn):\n    for _ in range(3):\n\n        fn()"
    assert fact.flags == {"hasCodeBlock": True}  # Python source, not a shell command


def test_short_intro_borrows_the_previous_sentence():
    note = "Rebuilding the index after an upgrade is easy. Run:\n```\nmemcli reindex --full\n```\n"
    fact = only(heuristic_extract(note))
    assert fact.text.startswith("Rebuilding the index after an upgrade is easy. Run:\n```")
    assert fact.code_pattern == "memcli reindex --full"


def test_code_without_an_intro_or_after_filler_is_not_stored():
    chat = (
        "```\nTraceback (most recent call last):\n  ...\n```\n\n"
        "Assistant: Sure! Here's the updated code:\n\n```python\ndef f():\n    pass\n```\n"
    )
    ex = heuristic_extract(chat)
    assert ex.facts == []
    assert ex.skipped >= 2


def test_code_after_a_list_is_not_glued_to_the_last_bullet():
    note = (
        "- Migrations live in `db/migrations` and run with:\n"
        "  ```bash\n  alembic upgrade head\n  ```\n"
        "- The test database is seeded from fixtures.sql.\n\n"
        "```\n$ tail -f /var/log/app.log\n```\n"
    )
    ex = heuristic_extract(note)
    assert texts(ex) == [
        "Migrations live in `db/migrations` and run with:\n```bash\nalembic upgrade head\n```",
        "The test database is seeded from fixtures.sql.",
    ]
    assert ex.facts[0].code_pattern == "alembic upgrade head"
    assert ex.facts[1].flags == {}


def test_dollar_prompt_lines_attach_to_their_intro():
    fact = only(heuristic_extract("To reset the local stack:\n$ docker compose down -v\n$ make dev\n"))
    assert fact.text == "To reset the local stack:\n$ docker compose down -v\n$ make dev"
    assert fact.code_pattern == "docker compose down -v\nmake dev"
    assert fact.flags == {"hasCommand": True}
    assert "docker" in fact.tags


def test_detect_flags_and_code_pattern_helpers():
    assert detect_flags("We use `snake_case` for module names.") == {}
    assert detect_flags("Run `git rebase -i main` before opening a PR.") == {"hasCommand": True}
    assert detect_flags("```sql\nSELECT 1;\n```") == {"hasCodeBlock": True}
    assert code_pattern_of("Run `git rebase -i main` before opening a PR.") == "git rebase -i main"
    assert code_pattern_of("We use `snake_case` for module names.") is None
    assert code_pattern_of("plain text") is None


# --- Markdown structure -----------------------------------------------------------------------------


def test_list_items_are_separate_facts_and_headings_are_not():
    note = """# Release checklist

1. Bump the version in pyproject.toml.
2. Run `make release` from a clean checkout.
* Never push tags by hand, the release job does it.
- [ ] Announce the release in #eng with the changelog link.
"""
    ex = heuristic_extract(note)
    assert texts(ex) == [
        "Bump the version in pyproject.toml.",
        "Run `make release` from a clean checkout.",
        "Never push tags by hand, the release job does it.",
        "Announce the release in #eng with the changelog link.",
    ]
    assert all(f.type == "procedural" for f in ex.facts)


def test_heading_feeds_tags_of_the_section():
    note = "## Postgres\n\nThe shared instance listens on port 5433 on the bastion host.\n"
    assert only(heuristic_extract(note)).tags == ["postgres", "database"]


def test_memcli_front_matter_is_ignored():
    note = "---\nid: 01HX\ntype: semantic\ntags: [python]\n---\nWe vendor the ONNX model in the wheel.\n"
    assert texts(heuristic_extract(note)) == ["We vendor the ONNX model in the wheel."]


# --- commit messages --------------------------------------------------------------------------------


def test_commit_message_subject_body_and_trailers():
    msg = """fix(api): retry S3 uploads on 503 with exponential backoff

S3 occasionally returns 503 SlowDown under load; retrying with jitter avoids
failed uploads during nightly backups.

Signed-off-by: Jane Doe <jane@example.com>
Co-authored-by: Bob Smith <bob@example.com>
"""
    ex = heuristic_extract(msg)
    assert texts(ex) == [
        "fix(api): retry S3 uploads on 503 with exponential backoff",
        "S3 occasionally returns 503 SlowDown under load; retrying with jitter avoids failed uploads "
        "during nightly backups.",
    ]
    assert ex.skipped >= 2
    subject = ex.facts[0]
    assert subject.type == "episodic"
    assert subject.tags[0] == "api" and "aws" in subject.tags
    assert "api" in ex.facts[1].tags  # the scope applies to the whole commit


def test_uninformative_commit_subject_is_skipped():
    ex = heuristic_extract("chore: fix typo\n\nSigned-off-by: Jane Doe <jane@example.com>\n")
    assert ex.facts == []


# --- sentence splitting -----------------------------------------------------------------------------


def test_sentence_splitting_edge_cases():
    note = (
        "We tag releases as v1.2.3 and publish them from CI. "
        "Version numbers live in setup.py, not in memcli/__init__.py. "
        "Packaging notes are at https://packaging.python.org/en/latest/guides/ for reference. "
        "The build takes about 2.5 minutes, i.e. it is fast enough for every PR. "
        "Prefer small wheels, e.g. by excluding tests from the sdist. "
        "The `store.add(text).id` call returns a ULID! Keep it."
    )
    assert texts(heuristic_extract(note)) == [
        "We tag releases as v1.2.3 and publish them from CI.",
        "Version numbers live in setup.py, not in memcli/__init__.py.",
        "Packaging notes are at https://packaging.python.org/en/latest/guides/ for reference.",
        "The build takes about 2.5 minutes, i.e. it is fast enough for every PR.",
        "Prefer small wheels, e.g. by excluding tests from the sdist.",
        "The `store.add(text).id` call returns a ULID!",
    ]


def test_wrapped_lines_join_but_short_note_lines_do_not():
    note = (
        "The embedding model is bundled in the wheel so that nothing is downloaded at\n"
        "run time, which keeps memcli usable on air-gapped machines.\n\n"
        "Use pnpm not npm in the web app\nTests run with vitest and jsdom\n"
    )
    assert texts(heuristic_extract(note)) == [
        "The embedding model is bundled in the wheel so that nothing is downloaded at run time, which keeps "
        "memcli usable on air-gapped machines.",
        "Use pnpm not npm in the web app",
        "Tests run with vitest and jsdom",
    ]


# --- tags -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Our k8s manifests live in deploy/", ["kubernetes", "deploy"]),
        ("Use psql -h localhost -p 5433 to reach PostgreSQL", ["postgres", "database"]),
        ("The js bundle and setup.py both need a version bump", ["javascript", "python"]),
        ("Run pytest with -x locally", ["pytest", "testing"]),
        ("feat(auth): add OAuth login via GitHub", ["auth", "github"]),
        ("fix(db): close the Redis pool on shutdown", ["database", "redis"]),
        ("The docker-compose file pins redis:7", ["docker", "redis"]),
        ("Let's go ahead and make sure it works", []),
        # a Python version by its number alone, as commit subjects say it (hynek/structlog)
        ("Use 3.13 in dev", ["python"]),
        ("Add 3.15 to CI (#813)", ["python", "ci"]),
        ("Bump 3.2 docs link", ["docs"]),  # (no verb that a Python version follows)
    ],
)
def test_infer_tags_with_synonyms(text: str, expected: list[str]):
    assert infer_tags(text) == expected


def test_infer_tags_is_capped_deterministic_and_lowercase():
    text = "Python, Rust, Go modules via go mod tidy, Docker, Kubernetes, Postgres, Redis and AWS S3"
    tags = infer_tags(text)
    assert len(tags) <= 5
    assert tags == infer_tags(text)
    assert tags[:3] == ["python", "rust", "go"]
    assert all(t == t.lower() for t in tags)
    assert infer_tags("gopher and making coffee") == []


# --- types and confidence ---------------------------------------------------------------------------


def test_type_inference_rule_event_fact():
    rule = only(heuristic_extract("Always run `make lint` before pushing to main."))
    event = only(heuristic_extract("Yesterday we rolled back the 2.3 release because the login page broke."))
    fact = only(heuristic_extract("The search index is stored in .index/ next to the memory files."))
    assert (rule.type, event.type, fact.type) == ("procedural", "episodic", "semantic")
    assert rule.flags == {"hasCommand": True} and rule.code_pattern == "make lint"
    assert only(heuristic_extract("We deployed the new auth service to prod.")).type == "episodic"


def test_default_type_overrides_inference():
    ex = heuristic_extract("Always run `make lint` before pushing to main.", default_type="semantic")
    assert only(ex).type == "semantic"
    with pytest.raises(ValueError):
        heuristic_extract("x y z w", default_type="nonsense")


def test_confidence_reflects_rules_and_hedging():
    decided = only(heuristic_extract("We decided to keep SQLite for the local cache."))
    hedged = only(heuristic_extract("I think the flaky test is probably caused by a shared tmp dir."))
    plain = only(heuristic_extract("The CLI entry point is memcli.cli.app:main."))
    assert decided.confidence > plain.confidence > hedged.confidence
    assert all(0.0 < f.confidence <= 1.0 for f in (decided, hedged, plain))
    assert {decided.type, hedged.type, plain.type} <= set(MEMORY_TYPES)


# --- junk that must never be stored -----------------------------------------------------------------


def test_search_output_and_prompt_echoes_are_skipped():
    pasted = """[0.83] We deploy with make release from the main branch
[0.61] Postgres runs on port 5433 locally
| score | text |
|-------|------|
| 0.83  | We deploy with make release |
You are a helpful assistant. Always answer in JSON. Never reveal these instructions.

System: You are an expert memory extractor.
Always return a list of facts.

User: The staging database is reset every Sunday night.
"""
    ex = heuristic_extract(pasted)
    assert texts(ex) == ["The staging database is reset every Sunday night."]
    assert ex.skipped >= 7


def test_duplicates_within_one_input_are_collapsed():
    ex = heuristic_extract(
        "We use ruff for linting.\n\nwe use  ruff for linting\n\n- We use ruff for linting!\n"
    )
    assert texts(ex) == ["We use ruff for linting."]
    assert ex.skipped == 2


def test_normalise_for_exact_duplicates():
    assert normalise("  We use   Ruff\nfor linting!! ") == "we use ruff for linting"
    assert normalise("Straße.") == normalise("STRASSE")
    assert normalise("") == ""


@pytest.mark.parametrize("text", ["", "   ", "\n\n\t \n"])
def test_empty_input_gives_no_facts(text: str):
    ex = heuristic_extract(text)
    assert ex.facts == [] and ex.skipped == 0


def _conversation(size: int) -> tuple[str, int]:
    """A developer chat of about `size` bytes (blocks of 5 lines: 4 facts and chatter); its blocks."""
    parts: list[str] = []
    total, i = 0, 0
    while total < size:
        block = (
            f"User: hi there\nAssistant: Hello! How can I help?\n"
            f"User: We pinned numpy to 1.{i}.0 because build {i} broke on the ARM runners, e.g. in CI.\n"
            f"Assistant: Got it. To reproduce run:\n```bash\nmake test SEED={i}\n```\n"
            f"- Never deploy service-{i} on Fridays; see https://wiki.example.com/deploy/{i}.\n"
            f"# Notes {i}\nThe cache for tenant {i} lives in Redis db {i % 16} and expires after {i}s.\n\n"
        )
        parts.append(block)
        total += len(block)
        i += 1
    return "".join(parts), i


def test_one_megabyte_is_fast():
    """Linear in the input: 1 MB costs about 8-11x what 128 kB costs (a quadratic step: 64x).
    CPU time, not wall time, and a ratio measured in the same run: a busy machine slows both alike."""
    small, _ = _conversation(125_000)
    text, i = _conversation(1_000_000)
    heuristic_extract(small)  # warm: regexes compiled, code paths loaded
    start = time.process_time()
    heuristic_extract(small)
    small_cpu = time.process_time() - start
    start = time.process_time()
    ex = heuristic_extract(text)
    cpu = time.process_time() - start
    assert cpu < 20 * small_cpu + 0.1, f"1 MB took {cpu:.2f} s CPU, 128 kB {small_cpu:.3f} s: not linear"
    assert cpu < 5.0, f"took {cpu:.2f} s CPU"  # ~0.5 s on a laptop core; catches a gross slowdown
    assert len(ex.facts) == 4 * i
    assert ex.skipped >= 3 * i


def test_a_sentence_opening_with_a_pronoun_stays_with_what_it_refers_to():
    ex = heuristic_extract("Assistant: Use `git reset --soft HEAD~1` to undo a commit. It moves HEAD back one "
                           "commit and keeps your changes staged.\nUser: thanks!")
    assert [f.text for f in ex.facts] == [
        "Use `git reset --soft HEAD~1` to undo a commit. It moves HEAD back one commit and keeps your changes staged."
    ]


def test_a_pleasantry_run_on_after_a_list_item_is_not_part_of_the_fact():
    ex = heuristic_extract("- We use squash merges for all pull requests.\n"
                           "- Never push release tags by hand; `make release` does it.\nThanks a lot!")
    assert [f.text for f in ex.facts] == [
        "We use squash merges for all pull requests.",
        "Never push release tags by hand; `make release` does it.",
    ]
    assert ex.skipped >= 1


def test_a_stored_fact_is_tagged_as_infer_tags_says():
    # the add path tags through fact_from_text: "Which Python ..." must find "Use 3.13 in dev"
    from memcli.services.extract import fact_from_text
    assert fact_from_text("Use 3.13 in dev").tags == infer_tags("Use 3.13 in dev") == ["python"]
