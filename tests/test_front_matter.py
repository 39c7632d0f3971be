"""Front matter written by `Memory.to_markdown` reads back as the memory it came from, for every
memory of printable one-line strings (YAML escapes or folds the rest). Generated memories include
what breaks naive YAML writers: quotes, `: ` and ` #`, leading indicators, words YAML reads as
booleans/nulls/numbers/dates, runs of spaces, long lines that libyaml folds."""

from __future__ import annotations

import re

from conftest import STRESS_LONG
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memcli.core.memory import Memory, _Stamp

TRICKY = ["yes", "No", "on", "OFF", "null", "~", "true", "False", "0", "-1", "1e3", ".5", "0x1F", "0o17", "1_000",
          "+12", ".inf", "-.Inf", ".NaN", "2026-01-31", "2026-01-31T10:00:00Z", "2026-01-31 10:00:00", "=", "<<",
          "---", "...", "- a", "-a", "? x", "?x", ":x", ": x", "a: b", "a:b", "a #b", "a#b", "#a", "'a'", '"a"',
          "it's", "a, b", "[a]", "{a}", "&a", "*a", "!a", "|a", ">a", "%a", "@a", "`a`", " a", "a ", "a  b",
          "", " ", "é", "中文", "\u2028", "\x85", "\t", "a\nb", "\x7f", "🦀", "\ufeff", "session:s14", "git:abc1234"]
ALPHABET = st.sampled_from(list("abcdefXYZ0129 .,:;-#'\"?![]{}&*|>%@`~=_/()\\é中  \n\t🦀"))
TEXT = st.one_of(st.sampled_from(TRICKY), st.text(ALPHABET, max_size=30),
                 st.lists(st.sampled_from(TRICKY + ["deploy", "the", "release", "train"]), max_size=40).map(" ".join))
WORDY = st.lists(st.sampled_from(["deploy", "the", "release", "train", "leaves", "at", "noon", "on", "Fridays", "v2.1",
                                  "make", "it's", "ok:", "a"]), min_size=1, max_size=60).map(" ".join)
STAMP = st.sampled_from(["2026-01-31T10:00:00Z", "2025-12-01T00:00:00Z", "2026-01-31", "yesterday"])


@st.composite
def memories(draw: st.DrawFn) -> Memory:
    def line() -> str:
        return draw(st.one_of(TEXT, WORDY))

    history = [{"event": draw(st.sampled_from(["MERGE", "UPDATE"])), "at": draw(STAMP), "id": line(), "old": line()}
               for _ in range(draw(st.integers(0, 3)))]
    links = [{"rel": draw(st.sampled_from(["contradicts", "distilled_into", "derived_from", "supersedes", "a b"])),
              "id": line()} for _ in range(draw(st.integers(0, 3)))]
    extra = {draw(st.sampled_from(["reviewed_by", "note", "a b", "yes", "x:y"])): draw(st.one_of(TEXT, st.integers(),
                                                                                                  st.booleans()))
             for _ in range(draw(st.integers(0, 2)))}
    # keys of its own with the shapes of history and links: the writer goes by the value's shape
    if draw(st.booleans()):
        extra["reviews"] = [{"at": _Stamp(draw(STAMP)), "by": line()} for _ in range(draw(st.integers(1, 2)))]
    if draw(st.booleans()):
        extra["refs"] = [{"rel": draw(st.sampled_from(["see_also", "a b"])), "id": line()}
                         for _ in range(draw(st.integers(1, 2)))]
    return Memory(
        id="01JDQ8ZK4M6V3XW7T2B9C5N1RA", text="the body " + line(),
        type=draw(st.sampled_from(["semantic", "episodic"])),
        tags=draw(st.lists(TEXT, max_size=6)), domain=draw(st.one_of(st.none(), TEXT)),
        confidence=draw(st.floats(0, 1)), source=draw(st.sampled_from(["manual", "import", "llm"])),
        origins=draw(st.lists(st.one_of(TEXT, WORDY), max_size=8)), user=line() or "default",
        project=draw(st.one_of(st.none(), TEXT)), created="2026-01-31T10:00:00Z", updated="2026-02-01T10:00:00Z",
        code_pattern=draw(st.one_of(st.none(), TEXT)), flags=draw(st.sampled_from([{}, {"hasCodeBlock": True}])),
        history=history, links=links, extra=extra,
    )


# a fixed, seeded set of 300 memories (MEMCLI_STRESS=long: 600)
@settings(max_examples=600 if STRESS_LONG else 300, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(memories())
def test_every_front_matter_reads_back_as_written(m: Memory) -> None:
    if not all(_PRINTABLE.match(x) for x in _strings(m.front_matter())):
        return  # line breaks, control and non-BMP characters: YAML escapes or folds them
    back = Memory.parse(m.to_markdown().encode("utf-8"), file_id=m.id)
    assert back.to_dict() == Memory.parse(back.to_markdown().encode("utf-8"), file_id=m.id).to_dict()
    assert back.text == m.text.strip() and back.tags == [t for t in m.tags if t]
    assert back.origins == [o for o in m.origins if o] and back.code_pattern == m.code_pattern
    assert [h["old"] for h in back.history] == [h["old"] for h in m.history]
    assert back.links == m.links


# printable one-line text of the Basic Multilingual Plane (what YAML writes as it is)
_PRINTABLE = re.compile("[\x20-\x7e\u00a0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd]*\\Z")


def _strings(v: object) -> list[str]:
    if isinstance(v, str):
        return [v]
    if isinstance(v, dict):
        return [s for k, x in v.items() for s in _strings(k) + _strings(x)]
    if isinstance(v, list):
        return [s for x in v for s in _strings(x)]
    return []


def test_a_long_history_line_is_folded_as_libyaml_folds_it() -> None:
    words = " ".join(f"word{i}" for i in range(60))
    m = Memory(id="A1", text="body", origins=[f"session:{i:04d}" for i in range(30)],
               history=[{"event": "MERGE", "at": "2026-01-31T10:00:00Z", "id": "B2", "old": words},
                        {"event": "MERGE", "at": "2026-01-31T10:00:00Z", "id": "C3", "old": "it's " + words}])
    head = m.to_markdown().split("\n---\n")[0]
    assert max(len(line) for line in head.splitlines()) < 120 and "\n    word" in head  # folded, indented
