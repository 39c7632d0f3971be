"""Extraction keeps context: a named speaker stays attached to what they said, a turn's dependent
sentences stay together, first-person plans are statements; greetings and bare questions are
still skipped."""

from __future__ import annotations

import json

import pytest

from memcli.services.extract import heuristic_extract


def texts(text: str) -> list[str]:
    return [f.text for f in heuristic_extract(text).facts]


@pytest.mark.parametrize("turn", [
    "Joanna: I'm going to make it for my family this weekend.",
    "Nate: I see them at least once a week.",
    "Maria Lopez: I'm moving the release to Thursday, my team agreed.",
])
def test_a_named_speakers_statement_is_kept_with_the_name(turn):
    assert texts(turn) == [turn]


@pytest.mark.parametrize("turn", [
    "Melanie: Hey Caroline! Good to see you! I'm swamped with the kids & work. What's up with you?",
    "Melanie: 5 years already! Time flies- feels like just yesterday I put this dress on!",
    "Melanie: Thanks! They were scared but we reassured them. They're tough kids.",
    "Melanie: Yeah, I painted that lake sunrise last year! It's special to me.",
])
def test_a_turn_with_something_to_keep_is_kept_whole_as_one_fact(turn):
    assert texts(turn) == [turn]


def test_a_chat_of_several_speakers_keeps_each_attribution():
    chat = ("Caroline: Hey Mel! Good to see you! How have you been?\n"
            "Melanie: I started pottery classes last month. They run every Tuesday evening.\n"
            "Caroline: Is it expensive?\n"
            "Caroline: I adopted a second dog, her name is Luna.\n")
    assert texts(chat) == ["Melanie: I started pottery classes last month. They run every Tuesday evening.",
                           "Caroline: I adopted a second dog, her name is Luna."]


@pytest.mark.parametrize("turn", [
    "Caroline: Hey Mel! Good to see you! How have you been?",
    "Melanie: Wow, Caroline! What kinda jobs are you thinkin' of? Anything that stands out?",
    "Caroline: Thanks, Melanie! That's really sweet.",
])
def test_greetings_and_bare_questions_are_still_skipped(turn):
    ex = heuristic_extract(turn)
    assert ex.facts == [] and ex.skipped >= 1


def test_labels_that_are_not_people_are_not_speakers():
    assert texts("Note: the staging database is reset every Sunday at 02:00 UTC.") == [
        "Note: the staging database is reset every Sunday at 02:00 UTC."]
    # an assistant's plan to act is still filler; the role label is still dropped
    assert texts("assistant: I'm going to look into it.") == []
    assert texts("user: We deploy with make release from the main branch.") == [
        "We deploy with make release from the main branch."]


# --- a stack trace, a section, a secret in a line (issue 21, item 5) -----------------------------
TRACEBACK = """User: the worker crashes on startup since the settings refactor:

Traceback (most recent call last):
  File "/srv/app/worker.py", line 12, in <module>
    from app.settings import DATABASE_URL
  File "/srv/app/app/settings.py", line 41, in <module>
    DATABASE_URL = os.environ["DATABASE_URL"]
KeyError: 'DATABASE_URL'

The settings module reads DATABASE_URL at import time, before load_dotenv() runs in worker.py."""


def test_a_stack_trace_keeps_its_cause_line_with_the_sentence_explaining_it():
    (fact,) = texts(TRACEBACK)
    assert "KeyError: 'DATABASE_URL'" in fact and "before load_dotenv() runs" in fact
    assert "crashes on startup" in fact  # what the trace was pasted for
    assert "File \"/srv/app" not in fact and "os.environ[" not in fact  # the frames are not kept


def test_a_paragraph_under_a_heading_is_one_memory_with_the_heading():
    section = ("## Rotating the staging database password\n\n"
               "Run `make rotate-db ENV=staging` and wait for the api pods to restart. Then run "
               "`make smoke ENV=staging`. If it fails, roll back with `make rotate-db ENV=staging ROLLBACK=1`.")
    (fact,) = texts(section)
    assert fact.startswith("Rotating the staging database password: Run `make rotate-db")
    assert "ROLLBACK=1" in fact


def test_a_list_under_a_heading_is_still_one_memory_per_item():
    assert len(texts("## Release checklist\n\n- Bump the version in pyproject.toml first\n"
                     "- Tag the release commit with vX.Y.Z\n")) == 2


@pytest.mark.parametrize("line, kept, secret", [
    ("The script now sets the password to \"Snoppy23\" for the staging admin user.",
     "for the staging admin user", "Snoppy23"),
    ("Assistant: The seed creates the admin user with the password \"Snoppy23\" in db/seeds.rb.",
     "in db/seeds.rb", "Snoppy23"),
    ("The nightly backup job uploads to the s3://acme-ledger-backups bucket in eu-west-1 with access key "
     "AKIA4QWERTY7UIOP3ASD.", "s3://acme-ledger-backups bucket in eu-west-1", "AKIA4QWERTY7UIOP3ASD"),
])
def test_a_secret_is_redacted_in_place_and_the_rest_of_the_line_kept(hash_cli, line, kept, secret):
    import json

    hash_cli("add", "-", input=line)
    (m,) = json.loads(hash_cli("list", "--json").stdout)["memories"]
    assert kept in m["text"] and secret not in m["text"] and "[REDACTED:" in m["text"]


def test_a_section_whose_heading_is_a_gerund_is_kept_by_add(hash_cli):
    """A runbook section titled "Deploying to staging" reads like an agent's progress line once its
    heading is joined ("Deploying to staging: Build ..."): `add` keeps it, while a bare progress line
    or a status after a gerund title is still skipped as narration."""
    section = ("## Deploying to staging\n\nBuild the image with `make image`. Push it with `make push`. "
               "Then run `./deploy.sh staging` and watch the logs in Grafana.")
    out = json.loads(hash_cli("add", "--no-llm", "--json", section).output)
    assert [m["text"] for m in out["memory"]] == [
        "Deploying to staging: Build the image with `make image`. Push it with `make push`. "
        "Then run `./deploy.sh staging` and watch the logs in Grafana."]
    for said in ("Writing the analyzer in parallel now.", "Checking the tests: All 31 tests pass."):
        out = json.loads(hash_cli("add", "--no-llm", "--json", said).output)
        assert out["memory"] == [] and out["extraction"]["skipped_pieces"][0]["rule"] == "narration"


def test_a_decision_records_one_word_sections_keep_the_records_title():
    """An ADR's "Context" / "Decision" / "Consequences" sections: one memory each, prefixed with the
    record's title, since "One fewer service to operate." alone says nothing."""
    adr = ("# Use PostgreSQL for the job queue\n\nDate: 2024-05-02\n\n## Context\n\nWe ran the job queue on "
           "Redis with RQ. Jobs were lost twice when Redis restarted without persistence.\n\n## Decision\n\n"
           "We will move the job queue to PostgreSQL using procrastinate.\n\n## Consequences\n\n"
           "One fewer service to operate. Throughput is capped at roughly 500 jobs/s.\n")
    assert texts(adr) == [
        "Use PostgreSQL for the job queue — Context: We ran the job queue on Redis with RQ. Jobs were lost "
        "twice when Redis restarted without persistence.",
        "Use PostgreSQL for the job queue — Decision: We will move the job queue to PostgreSQL using procrastinate.",
        "Use PostgreSQL for the job queue — Consequences: One fewer service to operate. Throughput is capped "
        "at roughly 500 jobs/s.",
    ]


def test_speaker_headings_of_an_exported_chat_are_not_sections():
    chat = ("# Chat about the deploy\n\n## User\n\nHow do we deploy the API to staging these days?\n\n"
            "## Assistant\n\nWe deploy the API with Kamal now. The staging host is api-staging.internal.\n")
    got = texts(chat)
    assert "We deploy the API with Kamal now." in got and not any("Assistant:" in t for t in got)
