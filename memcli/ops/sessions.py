"""Agent sessions and chat exports to memories: what a developer wants next week, not every sentence.

Both `import --from` and the worker behind `capture claude-code` come here, so the two keep the same
memories: the turns' facts that pass the shared junk filter and say enough, each dated with its own
turn, plus one summary per session (docs/sessions.md). With an LLM the filtered turns go to `add`'s
LLM path a chunk at a time.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from memcli.core.memory import Memory
from memcli.index import Filters
from memcli.ops.changes import ChangeSet, Update, commit_planned
from memcli.ops.handle import Store
from memcli.services.extract import fact_from_text, heuristic_extract, normalise
from memcli.services.filters import junk_class, strip_injected, substance
from memcli.services.redact import redact as scrub
from memcli.services.transcripts import Conversation

SUMMARY_TAG = "summary"
_LONE_URL = re.compile(r"^\s*<?https?://[\w.-]+\.[a-z]{2,}\S*>?\s*$")
#: a candidate below this says too little to keep (a short remark with no name, number or reason)
MIN_SUBSTANCE = 3.5
#: characters of filtered conversation per LLM extraction request
LLM_CHUNK_CHARS = 6000
SUMMARY_POINTS = 5
SUMMARY_REQUESTS = 4  # the first requests of a session say what it was for


@dataclass
class Candidate:
    """A memory-to-be from one turn: its text, the turn's role and time, how much it says."""

    text: str
    role: str
    at: str | None
    type: str
    score: float
    tags: list[str] = field(default_factory=list)


def clean_turns(conv: Conversation, *, redact: bool = True) -> list[tuple[str, str, str | None]]:
    """(role, text, time) of the turns worth reading, injected blocks removed, secrets redacted."""
    out = []
    for role, text, at in conv.dated():
        text = strip_injected(text)
        if not text or junk_class(text[:400]) in ("injected", "api_error"):
            continue
        out.append((role, scrub(text)[0] if redact else text, at))
    return out


def candidates(turns: Iterable[tuple[str, str, str | None]]) -> list[Candidate]:
    """Every fact of every turn that passes the shared filter, in order, repeats dropped."""
    out: list[Candidate] = []
    seen: set[str] = set()
    for role, text, at in turns:
        facts = heuristic_extract(text).facts
        if not facts and _LONE_URL.match(text):  # a turn that is only a link: where something lives
            facts = [fact_from_text(text.strip())]
        for fact in facts:
            if junk_class(fact.text, role=role) is not None:
                continue
            key = normalise(fact.text)
            if key in seen:
                continue
            seen.add(key)
            out.append(Candidate(fact.text, role, at, fact.type, substance(fact.text), list(fact.tags)))
    return out


#: a session part with this few candidates keeps them all (each is most of what was said)
SMALL_SESSION = 8


def select(cands: list[Candidate], *, whole: bool = True) -> list[Candidate]:
    """The candidates that say enough, in session order: all of a short exchange, else those at or
    above MIN_SUBSTANCE and the SMALL_SESSION best. `whole=False`: a part of a session (a hook's
    capture), whose few turns are not a short exchange."""
    if not whole:
        return [c for c in cands if c.score >= MIN_SUBSTANCE]
    if len(cands) <= SMALL_SESSION:
        return list(cands)
    best = {id(c) for c in sorted(cands, key=lambda c: -c.score)[:SMALL_SESSION]}
    return [c for c in cands if c.score >= MIN_SUBSTANCE or id(c) in best]


_FIRST_SENTENCE = re.compile(r"^(.{20,200}?[.!?。])(?:\s|$)", re.S)


def _gist(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split("```", 1)[0].split())
    m = _FIRST_SENTENCE.match(flat)
    s = m.group(1) if m else flat
    return s if len(s) <= limit else s[: limit - 1].rstrip() + "…"


def summary_text(conv: Conversation, turns: list[tuple[str, str, str | None]], kept: list[Candidate]) -> str | None:
    """One paragraph for the session: where and when, what was asked first, the main points."""
    requests = [_gist(t, 160) for r, t, _ in turns if r == "user" and len(t.split()) >= 3
                and junk_class(t[:300]) not in ("injected", "api_error")]
    asked = " | ".join(dict.fromkeys(requests[:SUMMARY_REQUESTS])) or None
    points = [_gist(c.text) for c in sorted(kept, key=lambda c: -c.score)[:SUMMARY_POINTS]]
    if not asked and not points:
        return None
    span = conv.span or [t[2] for t in turns if t[2]][:1] * 2
    when = f"{span[0][:10]}" if span else "undated"
    where = conv.title or (conv.cwd.rstrip("/").rsplit("/", 1)[-1] if conv.cwd else None)
    head = f"Session summary ({when}{', ' + where if where else ''})"
    lines = [head + (f": asked: {asked}" if asked else ".")]
    if points:
        lines.append("Main points: " + " | ".join(points))
    return "\n".join(lines)


def _existing_summary(store: Store, session: str) -> Memory | None:
    summaries = store.index.iter_select(Filters(tags=(SUMMARY_TAG,)))
    return next((m for m in summaries if f"session:{session}" in m.origins), None)


def _merge_summaries(old: str, new: str) -> str:
    """A later part of a session: the first request stays, the main points join (newest last)."""
    head = old.split("\n", 1)[0]
    pts_old = old.split("Main points: ", 1)[1].split(" | ") if "Main points: " in old else []
    pts_new = new.split("Main points: ", 1)[1].split(" | ") if "Main points: " in new else []
    points = list(dict.fromkeys([*pts_old, *pts_new]))[-2 * SUMMARY_POINTS:]
    return head + ("\nMain points: " + " | ".join(points) if points else "")


_CHATTER = ("narration", "tool_output", "git_output", "ui_chatter", "injected", "api_error")
_PARAGRAPH = re.compile(r"\n\s*\n")


def without_chatter_paragraphs(text: str) -> str:
    """A turn without its paragraphs of narration or pasted output (fewer tokens for the model, and
    nothing for it to copy); a turn with code is kept whole."""
    if "```" in text:
        return text
    kept = [p for p in _PARAGRAPH.split(text) if p.strip() and junk_class(p) not in _CHATTER]
    return "\n\n".join(kept)


def _llm_items(turns: list[tuple[str, str, str | None]], base: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The filtered conversation in chunks of about LLM_CHUNK_CHARS, one extraction request each,
    dated with the chunk's last turn."""
    buf: list[str] = []
    size, last = 0, None
    for role, text, at in turns:
        text = without_chatter_paragraphs(text)
        if not text:
            continue
        piece = f"{'User' if role == 'user' else 'Assistant'}: {text}"
        if buf and size + len(piece) > LLM_CHUNK_CHARS:
            yield {**base, "text": "\n\n".join(buf), "created": last}
            buf, size = [], 0
        buf.append(piece[: LLM_CHUNK_CHARS * 2])
        size += len(piece)
        last = at or last
    if buf:
        yield {**base, "text": "\n\n".join(buf), "created": last}


def add_conversation(store: Store, conv: Conversation, *, origins: Iterable[str] = (), redact: bool = True,
                     llm: bool | None = None, whole: bool = True) -> dict[str, Any]:
    """Write one conversation's memories and its summary; returns the counts. `whole=False`: `conv`
    is the part of a session one capture read."""
    from memcli.ops.batch import add_chunks

    turns = clean_turns(conv, redact=redact)
    base: dict[str, Any] = {"origins": list(origins), "session": conv.id, "redact": False, "inbox": False}
    use_llm = bool(store.config.llm_model) if llm is None else llm
    cands = candidates(turns)
    kept = select(cands, whole=whole)
    if use_llm:
        items: list[dict[str, Any]] = list(_llm_items(turns, {**base, "llm": True}))
    else:
        items = [{**base, "text": c.text, "created": c.at, "raw": True, "type": c.type, "tags": c.tags}
                 for c in kept]
    summary = {"ADD": 0, "UPDATE": 0, "NONE": 0, "already_known": 0}
    events: list[dict[str, Any]] = []
    for _, result in add_chunks(store, enumerate(items, 1)):
        if isinstance(result, str):
            continue
        events.extend(e.to_dict() for e in result.events)
        for k, v in result.summary().items():
            if k in summary:
                summary[k] += v
    text = summary_text(conv, turns, kept)
    if text is not None:
        _write_summary(store, conv, text, list(origins), turns)
        summary["summary"] = 1
    return {"conversation": conv.id, "title": conv.title, "turns": len(conv.turns), "candidates": len(cands),
            "kept": len(kept) if not use_llm else None, "summary": summary, "memories": events}


def _write_summary(store: Store, conv: Conversation, text: str, origins: list[str],
                   turns: list[tuple[str, str, str | None]]) -> None:
    """Add the session's summary memory, or update the one an earlier capture of it wrote."""
    from memcli.ops.add import add

    at = next((t[2] for t in reversed(turns) if t[2]), None) or (conv.span[1] if conv.span else None)
    old = _existing_summary(store, conv.id)
    if old is None:
        add(store, text, raw=True, type="episodic", tags=[SUMMARY_TAG], origins=origins, session=conv.id,
            created=at, redact=False, inbox=False)
        return

    def plan() -> tuple[ChangeSet, None]:
        cs = ChangeSet(store)
        cs.edit(old.id, Update(_merge_summaries(old.text, text), tags=[SUMMARY_TAG],
                               origins=[*origins, f"session:{conv.id}"], when=at))
        return cs, None

    commit_planned(plan)


def import_conversations(store: Store, conversations: Iterable[Conversation], name: str,
                         **options: Any) -> list[dict[str, Any]]:
    """`import --from`: each conversation (streamed) with origins `import:<file>` and `session:<id>`."""
    return [add_conversation(store, conv, origins=[f"import:{name}"], **options) for conv in conversations]
