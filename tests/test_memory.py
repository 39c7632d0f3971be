"""The memory file format: what a user reading, editing, diffing or grepping `facts/*.md` relies on."""

from __future__ import annotations

import re

import pytest
import yaml
from conftest import files

from memcli.core.errors import NotFound
from memcli.core.memory import MalformedMemory, Memory, new_ulid

PLAIN_STAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
CROCKFORD = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")


def full_memory(mid: str | None = None) -> Memory:
    """A memory with every field set, as CLI.md shows it."""
    return Memory(
        id=mid or new_ulid(),
        text="React custom hook useAsync for handling async operations with loading states.",
        type="procedural",
        tags=["react", "hooks", "async"],
        domain="frontend",
        confidence=0.95,
        source="llm",
        origins=["git:3f2a1c9", "session:abc"],
        user="alice",
        project="myapp",
        created="2026-11-29T17:00:00Z",
        updated="2026-11-30T09:00:00Z",
        code_pattern="const useAsync = (fn) => { ... }",
        history=[{"event": "UPDATE", "at": "2026-11-30T09:00:00Z", "old": "React useEffect runs after every render"}],
        links=[{"rel": "contradicts", "id": "01JDQ8ZK4M6V3XW7T2B9C5N1RB"}],
    )


def front_matter(path) -> dict:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("---\n")
    head = text.split("\n---\n", 1)[0][4:]
    return yaml.safe_load(head)


# --- round trip ---------------------------------------------------------------------------------


def test_every_field_round_trips_through_the_file(hash_store):
    m = full_memory()
    path = files(hash_store).write(m)
    assert path.name == f"{m.id}.md"
    back = hash_store.read(m.id)
    for name in ("id", "text", "type", "tags", "domain", "confidence", "source", "origins", "user", "project",
                 "created", "updated", "code_pattern", "history", "links"):
        assert getattr(back, name) == getattr(m, name), name
    # and the file itself says it, for a human or grep
    fm = front_matter(path)
    assert fm["id"] == m.id
    assert fm["tags"] == ["react", "hooks", "async"]
    assert fm["origins"] == ["git:3f2a1c9", "session:abc"]
    assert fm["links"] == [{"rel": "contradicts", "id": "01JDQ8ZK4M6V3XW7T2B9C5N1RB"}]
    assert path.read_text(encoding="utf-8").rstrip("\n").endswith(m.text)


def test_rewriting_an_unchanged_memory_gives_the_same_bytes(hash_store):
    m = full_memory()
    path = files(hash_store).write(m)
    first = path.read_bytes()
    files(hash_store).write(hash_store.read(m.id))
    assert path.read_bytes() == first


def test_id_is_the_file_name_and_a_time_sortable_ulid(hash_store):
    texts = ["The staging database is reset every Sunday.", "Frontend bundles are built by Vite.",
             "Logs are shipped to Loki.", "Feature flags live in LaunchDarkly.", "Redis backs the job queue."]
    ids = [hash_store.add(t, raw=True).events[0].id for t in texts]
    for mid in ids:
        assert CROCKFORD.match(mid), mid
        assert (hash_store.facts_dir / f"{mid}.md").is_file()
    assert ids == sorted(ids), "ULIDs must sort in creation order"
    assert len(set(ids)) == len(ids)


def test_file_name_wins_over_a_declared_id(hash_store):
    (hash_store.facts_dir / "my-note.md").write_text("---\nid: something-else\n---\nThe VPN config is in ops/vpn.\n")
    m = hash_store.read("my-note")
    assert m.id == "my-note"
    assert m.text == "The VPN config is in ops/vpn."


def test_path_like_ids_are_refused(hash_store):
    with pytest.raises(NotFound):
        hash_store.read("../../etc/passwd")
    with pytest.raises(NotFound):
        files(hash_store).fact_path(".hidden")


# --- timestamps ---------------------------------------------------------------------------------


def test_created_and_updated_are_written_as_plain_utc_stamps(hash_store):
    path = files(hash_store).write(full_memory())
    lines = path.read_text(encoding="utf-8").splitlines()
    stamps = {ln.split(":", 1)[0]: ln.split(":", 1)[1].strip()
              for ln in lines if ln.startswith(("created:", "updated:"))}
    assert stamps == {"created": "2026-11-29T17:00:00Z", "updated": "2026-11-30T09:00:00Z"}


def test_timestamps_in_other_notations_are_normalised_to_utc_z(hash_store):
    (hash_store.facts_dir / "tz.md").write_text(
        "---\ncreated: 2026-11-29T18:00:00+01:00\nupdated: 2026-11-30\n---\nTimezone note.\n")
    m = hash_store.read("tz")
    assert m.created == "2026-11-29T17:00:00Z"
    assert m.updated == "2026-11-30T00:00:00Z"
    files(hash_store).write(m)
    text = (hash_store.facts_dir / "tz.md").read_text()
    assert "\ncreated: 2026-11-29T17:00:00Z\n" in text
    assert "\nupdated: 2026-11-30T00:00:00Z\n" in text


def test_history_timestamps_are_written_plain_too(hash_store):
    path = files(hash_store).write(full_memory())
    text = path.read_text(encoding="utf-8")
    assert "!!timestamp" not in text
    assert re.search(r"at: 2026-11-30T09:00:00Z[,}\n]", text), text


# --- hand edits and unknown keys ----------------------------------------------------------------


def test_a_file_without_front_matter_is_accepted(hash_store):
    (hash_store.facts_dir / "plain-note.md").write_text("Release notes are written in CHANGELOG.md by the author.\n")
    m = hash_store.read("plain-note")
    assert m.id == "plain-note"
    assert m.text == "Release notes are written in CHANGELOG.md by the author."
    assert m.type == "semantic"
    assert PLAIN_STAMP.match(m.created)


HAND_WRITTEN = """---
type: semantic
tags: [ops]
created: 2026-01-05T10:00:00Z
updated: 2026-01-05T10:00:00Z
reviewed_by: bob
priority: 3
notes:
  - first
  - second
---
The staging database is reset every Sunday at 02:00 UTC.
"""


def test_unknown_keys_survive_when_add_reinforces_the_memory(hash_store):
    path = hash_store.facts_dir / "01JDQ8ZK4M6V3XW7T2B9C5N1RA.md"
    path.write_text(HAND_WRITTEN)
    r = hash_store.add("The staging database is reset every Sunday at 02:00 UTC.", raw=True, origins=["git:1234"])
    assert [e.event for e in r.events] == ["NONE"]
    fm = front_matter(path)
    assert "git:1234" in fm["origins"], "the file was really rewritten"
    assert fm["reviewed_by"] == "bob"
    assert fm["priority"] == 3
    assert fm["notes"] == ["first", "second"]


def test_unknown_keys_survive_an_update(hash_store):
    path = hash_store.facts_dir / "01JDQ8ZK4M6V3XW7T2B9C5N1RA.md"
    path.write_text(HAND_WRITTEN)
    longer = "The staging database is reset every Sunday at 02:00 UTC by the cron job."
    # the hash embedder knows no meaning: a lower threshold makes the near-duplicate count as known
    r = hash_store.add(longer, threshold=0.6)
    assert [(e.event, e.id) for e in r.events] == [("UPDATE", "01JDQ8ZK4M6V3XW7T2B9C5N1RA")]
    fm = front_matter(path)
    assert fm["reviewed_by"] == "bob" and fm["priority"] == 3 and fm["notes"] == ["first", "second"]
    assert path.read_text().rstrip().endswith(longer)
    assert fm["history"][-1]["old"] == "The staging database is reset every Sunday at 02:00 UTC."


def test_unknown_timestamp_values_keep_their_spelling(hash_store):
    path = hash_store.facts_dir / "01JDQ8ZK4M6V3XW7T2B9C5N1RA.md"
    path.write_text(HAND_WRITTEN.replace("reviewed_by: bob\n", "reviewed_by: bob\nreviewed_at: 2026-02-01T10:00:00Z\n"))
    hash_store.add("The staging database is reset every Sunday at 02:00 UTC.", raw=True, origins=["git:1234"])
    assert "\nreviewed_at: 2026-02-01T10:00:00Z\n" in path.read_text()


# --- malformed files ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b"---\ntags: [unclosed\n---\nSome body text.\n", id="bad-yaml"),
        pytest.param(b"---\ntype: semantic\ntags: [a]\n---\n", id="no-body"),
        pytest.param(b"---\ntype: semantic\n---\n   \n\n", id="blank-body"),
        pytest.param(b"", id="empty-file"),
        pytest.param(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", id="binary"),
        pytest.param("---\ntype: semantic\n---\ncaf\u00e9 au lait".encode("latin-1"), id="invalid-utf8"),
        pytest.param(b"---\ntype: bogus\n---\nA body.\n", id="unknown-type"),
        pytest.param(b"---\nconfidence: very high\n---\nA body.\n", id="confidence-not-a-number"),
        pytest.param(b"---\ncreated: last tuesday\n---\nA body.\n", id="bad-timestamp"),
    ],
)
def test_malformed_files_raise_malformed_memory(hash_store, raw):
    (hash_store.facts_dir / "bad.md").write_bytes(raw)
    with pytest.raises(MalformedMemory):
        hash_store.read("bad")


def test_front_matter_that_is_not_a_mapping_is_malformed(hash_store):
    (hash_store.facts_dir / "list.md").write_bytes(b"---\n- reviewed\n- important\n---\nA body.\n")
    with pytest.raises(MalformedMemory):
        hash_store.read("list")


def test_malformed_message_is_short_and_names_the_problem():
    with pytest.raises(MalformedMemory) as info:
        Memory.parse(b"---\ntags: [unclosed\n---\nbody\n", file_id="x")
    msg = str(info.value)
    assert "\n" not in msg and "YAML" in msg
    with pytest.raises(MalformedMemory, match="UTF-8"):
        Memory.parse(b"caf\xe9", file_id="x")
    with pytest.raises(MalformedMemory, match="binary"):
        Memory.parse(b"abc\x00def", file_id="x")


def test_emoji_and_accents_stay_readable_in_the_front_matter(hash_store):
    m = Memory(id="01JDQ8ZK4M6V3XW7T2B9C5N1RB", text="Ship it 🚀", tags=["café", "🚀"],
               history=[{"event": "UPDATE", "at": "2026-11-30T09:00:00Z", "old": "Ship it later 🙂"}])
    text = files(hash_store).write(m).read_text(encoding="utf-8")
    assert "\\U" not in text and "🚀" in text and "café" in text and "🙂" in text
    assert hash_store.read(m.id).to_dict() == m.to_dict()


# --- the catalog's form -------------------------------------------------------------------------


def odd_memories() -> list[Memory]:
    """Memories whose JSON form has the corners: timestamps in your own keys, flags, a history
    entry without a time, links, no optional field at all, non-ASCII text."""
    full = full_memory()
    full.flags = {"hasCodeBlock": True, "hasCommand": True}
    full.extra = {"jira": {"key": "WEB-12", "due": "2026-12-01T10:00:00Z"}, "reviewed": "2026-11-01",
                  "superseded_by": "01JDQ8ZK4M6V3XW7T2B9C5N1RB", "note": None, "score": 3}
    full.history.append({"event": "MERGE", "old": "x", "at": None})
    bare = Memory(id="bare", text="Nothing but text: ünïcödé, 日本語, emoji 🚀.", domain=None, project=None)
    return [full, bare, Memory.parse(full.to_markdown().encode(), file_id=full.id)]


@pytest.mark.parametrize("m", odd_memories(), ids=["full", "bare", "parsed"])
def test_to_dict_is_the_front_matter_and_the_text_as_json(m):
    """`to_dict` (export, --json, the catalog's record) is built directly, not through the YAML
    front matter: it must stay exactly that mapping, key order included (export output)."""
    from memcli.core.memory import _jsonable

    reference = _jsonable({**m.front_matter(), "text": m.text})
    assert m.to_dict() == reference
    assert list(m.to_dict()) == list(reference)


@pytest.mark.parametrize("m", odd_memories(), ids=["full", "bare", "parsed"])
def test_from_catalog_gives_what_from_dict_gives(m):
    """The trusted constructor (catalog rows were validated when indexed) builds the same memory
    as the validating one, and the same JSON back."""
    import json

    row = json.dumps(m.to_dict(), ensure_ascii=False)
    fast, checked = Memory.from_catalog(json.loads(row)), Memory.from_dict(json.loads(row))
    assert fast == checked
    assert fast.to_dict() == m.to_dict() and fast.to_markdown() == checked.to_markdown()
    assert fast.superseded_by == m.extra.get("superseded_by")
