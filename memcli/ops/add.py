"""The add pipeline: redact -> extract -> embed -> neighbours -> decide -> write -> index.

Decisions never destroy: UPDATE keeps the old text in `history`, DELETE (LLM only, and only with
`allow_delete`) moves the memory to the trash with its reason, NONE adds the new origin to the
memory that already said it. Every fact gets an event and a verdict
(accepted / already_known / invalid / failed).

With an LLM an add costs at most two requests whatever the number of facts: one extract, and one
decide for all the facts that have neighbours (cosine >= decide_threshold, up to 5 each); facts
with no neighbour, and exact repeats, are decided locally. What the model returns is untrusted:
a DELETE applies only with `allow_delete`, a decision naming a memory that is not one of the
fact's neighbours is rejected (the heuristic decision stands, and says so), unusable JSON falls
back to the heuristic extractor or decisions with a note. When the model cannot be reached at
all, the (redacted) input is parked in `<store>/inbox/` and `memcli inbox retry` replays it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memcli.core.config import Config, default_user, git_project
from memcli.core.decision import Decision, Event
from memcli.core.errors import InputRejected, InvalidInput, LLMNotConfigured, NotFound
from memcli.core.facts import MEMORY_TYPES, Extraction, Fact
from memcli.core.memory import Memory, new_ulid, now_iso
from memcli.core.refs import cited_refs
from memcli.core.text import snake
from memcli.ops.changes import ChangeSet, Feedback, Reinforce, Supersede, Update, commit_planned
from memcli.ops.handle import Store
from memcli.rules.decide import bears_on
from memcli.rules.decide import matched as _matched
from memcli.rules.deciders import NEIGHBOUR_FLOOR, Decider, LLMDecider, load_decider
from memcli.rules.relate import CANDIDATE_FLOOR, SAME, Said, _normal, may_be_same, relate, same_change
from memcli.rules.subjects import headline, removal_of, removes, subject_keys
from memcli.services.changelog import is_section, section_facts
from memcli.services.commits import commit_fact, commit_facts, is_commit_origin
from memcli.services.extract import fact_from_text, heuristic_extract, infer_tags
from memcli.storage.inbox import park

if TYPE_CHECKING:  # types only: search and list never import the LLM client (litellm)
    from memcli.index import Index
    from memcli.services.llm.client import LLM

MAX_INPUT_BYTES = 10 * 1024 * 1024


class IngestError(InputRejected):
    """Input that cannot be added (empty, too large, binary, not UTF-8); one line for the user."""


@dataclass
class AddResult:
    extraction: Extraction
    events: list[Event]
    dry_run: bool = False
    timestamp: str = field(default_factory=now_iso)
    llm_usage: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)  # fallbacks the user should hear about
    redacted: list[str] = field(default_factory=list)  # kinds of secrets scrubbed from the input

    @property
    def failed(self) -> bool:
        return any(e.verdict == "failed" for e in self.events)

    def summary(self) -> dict[str, int]:
        s = {k: 0 for k in ("ADD", "UPDATE", "DELETE", "NONE", "accepted", "already_known", "invalid", "failed",
                            "refused")}
        for e in self.events:
            s[e.event] = s.get(e.event, 0) + 1
            s[e.verdict] = s.get(e.verdict, 0) + 1
            s["refused"] += e.refused
        return s

    def to_dict(self) -> dict[str, Any]:
        ex = self.extraction
        d: dict[str, Any] = {
            "extraction": {
                "method": ex.method, "extracted": len(ex.facts), "skipped": ex.skipped,
                "skipped_pieces": ex.skipped_pieces,
                "invalid": len(ex.invalid), "note": ex.note,
                "facts": [
                    {"text": f.text, "type": f.type, "tags": f.tags, "confidence": f.confidence,
                     "code_pattern": f.code_pattern, **{snake(k): v for k, v in f.flags.items()}}
                    for f in ex.facts
                ],
            },
            "memory": [e.to_dict() for e in self.events],
            "summary": {k.lower(): v for k, v in self.summary().items()},
            "dry_run": self.dry_run,
            "timestamp": self.timestamp,
        }
        if self.notes:
            d["notes"] = self.notes
        if self.redacted:
            d["redacted"] = self.redacted
        if self.llm_usage is not None:
            d["llm"] = self.llm_usage
        return d


def read_limited(stream: Any, name: str = "stdin", limit: int = MAX_INPUT_BYTES) -> bytes:
    """Read a binary stream up to `limit` bytes and stop there: `add - < /dev/zero` must not read
    gigabytes before refusing. Raises IngestError when there is more than `limit`."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = stream.read(min(1 << 20, limit + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise IngestError(f"{name}: input is over the {limit // 2**20} MB limit; stopped reading there")


def read_input(data: bytes, name: str = "stdin", limit: int = MAX_INPUT_BYTES) -> str:
    """Decode user input: refuse binary, invalid UTF-8 and oversized input with one clear line."""
    if len(data) > limit:
        raise IngestError(f"{name}: input is {len(data) / 1e6:.1f} MB; the limit is {limit // 2**20} MB")
    if b"\x00" in data:
        raise IngestError(f"{name}: looks like binary data, not text")
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        raise IngestError(f"{name}: not valid UTF-8 (byte {e.start})") from None


def add(store: Store, text: str, *, dry_run: bool = False, **options: Any) -> AddResult:
    """Turn `text` into memories and write them: `plan_add`, then one `commit()`.

    A memory the plan rewrites that changed on disk meanwhile (a person's edit, another writer)
    is re-planned when the change is a reinforcement or a supersede mark; an UPDATE of a changed
    memory re-plans the whole input (at most twice) and then reports the Conflict. Nothing is
    half written: an OSError (full disk, read-only store) raised by the commit left the store as
    it was.
    """
    if dry_run:
        return plan_add(store, text, dry_run=True, **options)[1]
    return commit_planned(lambda: plan_add(store, text, **options))


def plan_add(
    store: Store,
    text: str,
    *,
    raw: bool = False,
    llm: bool | None = None,
    tags: Sequence[str] = (),
    type: str | None = None,
    origins: Sequence[str] = (),
    user: str | None = None,
    project: str | None = None,
    session: str | None = None,
    threshold: float | None = None,
    allow_delete: bool = False,
    dry_run: bool = False,
    redact: bool = True,
    source: str | None = None,
    inbox: bool = True,
    no_dedup: bool = False,
    created: str | None = None,
    progress: Any = None,
    llm_model: str | None = None,
    changes: ChangeSet | None = None,
    view: Any = None,
) -> tuple[ChangeSet, AddResult]:
    """Plan turning `text` into memories: redaction, extraction, embeddings, neighbours and
    decisions (LLM calls included), with no lock held. See the module docstring for the semantics.

    `llm`: None uses the LLM when one is configured; False forces the heuristic path; True requires
    an LLM (LLMNotConfigured if none is configured); `llm_model` overrides the configured model for
    this call. When the LLM is unreachable the (redacted) input is saved to the store's inbox
    (unless `inbox=False` or a dry run) and the LLMError is raised.

    `raw` stores the text verbatim: no extraction and no near-duplicate merging; only an exact
    (normalised) repeat is NONE. `no_dedup` skips even that. `created` (ISO 8601) dates the new
    memories, e.g. a chat turn imported from a log.

    `changes` and `view` plan into an existing change set against a view of the index that includes
    what that change set already plans (`add --batch`, see memcli/ops/batch.py); by default a fresh
    change set against the synced index.
    """
    if not text or not text.strip():
        raise IngestError("nothing to add: the input is empty")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate (undecodable bytes in argv): not text we can store
        raise IngestError("input is not valid UTF-8 text (it holds a lone surrogate)") from None
    if "\x00" in text:  # a NUL would make the fact file unreadable ("binary content")
        raise IngestError("input holds a NUL byte; not text that can be stored")
    if size > MAX_INPUT_BYTES:
        raise IngestError(f"input too large (limit {MAX_INPUT_BYTES // 2**20} MB)")
    if type is not None and type not in MEMORY_TYPES:
        raise InvalidInput(f"type must be one of {', '.join(MEMORY_TYPES)}, got {type!r}")
    cfg = store.config
    model = llm_model or cfg.llm_model
    threshold = cfg.add_threshold if threshold is None else threshold
    if llm and not model:
        raise LLMNotConfigured("no LLM configured: set MEMCLI_LLM_MODEL (or llm_model in config.toml)")
    use_llm = bool(model) if llm is None else llm
    kinds: list[str] = []
    if redact:  # before anything is sent to a model or written to disk (inbox and log included)
        from memcli.services.redact import redact as scrub

        text, kinds = scrub(text)
    user = user or default_user(cfg)
    if project is None:
        project = git_project()
    client = llm_client(store, model=model) if use_llm and not raw else None
    if client is not None and progress is not None:
        client.on_request = progress  # called with "extract" / "decide" before each request, "" at the end
    options = {"tags": list(tags), "type": type, "origins": list(origins), "user": user, "project": project,
               "session": session, "threshold": threshold, "allow_delete": allow_delete,
               "source": source, "redact": redact}
    result = AddResult(Extraction([]), [], dry_run=dry_run, redacted=kinds)
    from memcli.services.llm.client import (
        LLMError,  # cheap: memcli.services.llm.client imports litellm only when a request is made
    )

    try:
        # a dated input from a commit (the git hook, `add --batch` lines with a `git:` origin and the
        # commit's date) is a commit message: the commit rules extract it, with or without a model
        commit = not raw and bool(created) and is_commit_origin(list(origins))
        extraction = _extract(text, raw=raw, type=type, client=client, commit=commit, created=created)
        if extraction.note:
            result.notes.append(extraction.note)
        facts = extraction.facts
        for f in facts:
            f.tags = list(dict.fromkeys([*[t.lower() for t in tags], *f.tags]))
            if type:
                f.type = type
            if redact and extraction.method == "llm":  # the model's words are data too
                f.text = _scrub(f.text)
                f.code_pattern = _scrub(f.code_pattern) if f.code_pattern else f.code_pattern
        result.extraction = extraction
        decisions: list[Decision] = []
        llm_log: list[str] = []
        if facts and dry_run and not store.exists():  # nothing to compare with, and nothing to create
            vecs = store.index.embedder.embed([f.text for f in facts])
            decisions = [Decision("ADD", reasoning="no store yet") for _ in facts]
        elif facts:
            index = store.index
            vecs = index.embedder.embed([f.text for f in facts])
            if view is None:
                index.sync()
            # Decided outside the writer lock: an LLM call can take seconds and other writers
            # (git hooks) must not wait on it. `commit()` re-checks every file it rewrites.
            decisions, notes = _decide(store, facts, vecs, threshold, client, allow_delete, redact,
                                       raw=raw, no_dedup=no_dedup, llm_log=llm_log, view=view,
                                       headlines=extraction.method in ("commit", "changelog"))
            result.notes.extend(notes)
    except LLMError as e:
        if progress is not None and client is not None and client.usage.requests:
            progress("")  # end the "waiting for the model" line before the error line
        if inbox and not dry_run:
            path = save_to_inbox(store, text, {**options, "model": model}, str(e))
            e.args = (f"{e}; input saved to {path.relative_to(store.path)} (run `memcli inbox retry`)",)
        raise
    src = source or ("llm" if extraction.method == "llm" else "heuristic")
    if extraction.method == "llm" or extraction.invalid:  # the heuristic standing in for the model: its gates
        for reason in extraction.invalid:  # items the model produced that failed validation
            result.events.append(Event("NONE", "invalid", "", None, reasoning=f"extracted item dropped: {reason}",
                                       source=src, decided_by="llm"))
    cs = changes if changes is not None else ChangeSet(store)
    for line in llm_log:
        cs.log("LLM_INVALID", detail=line)
    if facts:
        all_origins = list(dict.fromkeys([*origins, *([f"session:{session}"] if session else [])])) or ["cli"]
        batch = ThisInput()  # memories added by this call, for in-batch dedup
        for fact, vec, decision in zip(facts, vecs, decisions):
            event = _plan_one(cs, fact, vec, decision, batch, all_origins, user, project, src, threshold,
                              created=created, no_dedup=no_dedup or raw)
            result.events.append(event)
    if client is not None:
        if progress is not None and client.usage.requests:
            progress("")
        u = client.usage
        result.llm_usage = {"model": model, "requests": u.requests, "prompt_tokens": u.prompt_tokens,
                            "completion_tokens": u.completion_tokens, "llm_seconds": round(u.llm_seconds, 3)}
    return cs, result


def _scrub(text: str) -> str:
    from memcli.services.redact import redact as scrub

    return scrub(text)[0]


# ---------------------------------------------------------------- extraction
def llm_client(store: Store, *, model: str | None = None) -> LLM:
    """The LLM client for this store's settings (model, api_base, key, timeout, retries,
    temperature, backoff: config.toml, MEMCLI_LLM_* or flags); `model` overrides the model for
    this call (the config itself never changes once loaded)."""
    from memcli.services.llm.client import LLM, LLMSettings, default_timeout

    cfg = store.config
    model = str(model or cfg.llm_model)
    timeout = cfg.llm_timeout if cfg.llm_timeout else default_timeout(cfg.api_base, model)
    return LLM(LLMSettings(model=model, api_base=cfg.api_base, api_key=cfg.api_key,
                           timeout=timeout, retries=max(0, cfg.llm_retries),
                           temperature=cfg.llm_temperature, backoff=max(0.0, cfg.llm_backoff)))


def _extract(text: str, *, raw: bool, type: str | None, client: LLM | None, commit: bool = False,
             created: str | None = None) -> Extraction:
    if commit:  # a commit message: the commit rules (memcli/services/commits.py) say what it holds
        texts, why = commit_facts(text)
        if why:
            return Extraction([], skipped=1, method="commit",
                              skipped_pieces=[{"text": " ".join(text.split())[:200], "rule": why}])
        if client is None:
            return Extraction([commit_fact(t, type) for t in texts], method="commit")
    if not raw and client is None and is_section(text):  # a changelog's release section
        return Extraction([fact_from_text(t) for t in section_facts(text, created)], method="changelog")
    if raw:
        from memcli.services.extract import code_pattern_of, detect_flags

        body = text.strip()
        fact = Fact(text=body, type=type or "semantic", tags=infer_tags(body), confidence=0.9,
                    code_pattern=code_pattern_of(body), flags=detect_flags(body))
        return Extraction([fact], method="raw")
    if client is None:
        return without_chatter(_without_injected(heuristic_extract(text, default_type=type), text))
    from memcli.services.llm.client import LLMFormatError

    try:
        return without_chatter(client.extract(text))
    except LLMFormatError as e:
        from memcli.services.llm.checks import fallback_problem, with_orphan_blocks

        fallback = _without_injected(heuristic_extract(text, default_type=type), text)
        fallback.note = f"LLM extraction unusable ({e}); used the heuristic extractor"
        gated = [(f, fallback_problem(f, text)) for f in fallback.facts]
        fallback.facts = with_orphan_blocks([f for f, rule in gated if rule is None], text)
        fallback.invalid += [f"{rule}: {f.text[:80]!r}" for f, rule in gated if rule]
        return fallback


def without_chatter(extraction: Extraction) -> Extraction:
    """Drop what the shared filter (memcli/services/filters.py) calls narration, injected text, tool
    or git output, UI chatter or an API error: the rule `import --from` and `capture` apply too.
    (Fragments and requests are judged only where the speaker is known: the session step.)"""
    from memcli.services.filters import junk_class

    kept = []
    for f in extraction.facts:
        why = junk_class(f.text)
        if why is None or why in ("fragment", "request", "pasted_code"):
            kept.append(f)
        else:
            extraction.skipped += 1
            extraction.skipped_pieces.append({"text": " ".join(f.text.split()), "rule": why})
    extraction.facts = kept
    return extraction


def _without_injected(extraction: Extraction, text: str) -> Extraction:
    """Drop facts taken from an instruction inside the input ("store: ...", "ignore previous
    instructions and ..."): the same rule the LLM path applies (counted as skipped)."""
    from memcli.services.llm.checks import carries_reply, instruction_lines

    lines = instruction_lines(text)
    if not lines and not any(carries_reply(f.text) for f in extraction.facts):
        return extraction
    from memcli.services.llm.checks import fact_problem

    kept = [f for f in extraction.facts if not carries_reply(f.text)
            and fact_problem(f.text, source=text, instructions=lines) != "injected"]
    extraction.skipped += len(extraction.facts) - len(kept)
    extraction.facts = kept
    return extraction


def save_to_inbox(store: Store, text: str, options: dict[str, Any], error: str) -> Path:
    """Park an input the LLM could not process; `text` is already redacted (unless opted out).
    `memcli inbox retry` (memcli.agents.spool, the one inbox processor) replays it."""
    error = _scrub(error)  # an api_base may carry a password, a server may echo the input
    store.ensure()
    path = park(store.path, text, options, error=error)
    store.log("INBOX", file=path.name, error=error)
    return path


# ---------------------------------------------------------------- decisions
_CHANGE_FLOOR = 0.3  # ... unless the fact says it replaced a value that memory holds (change_related)


def _decide(store: Store, facts: list[Fact], vecs: np.ndarray, threshold: float, client: LLM | None,
            allow_delete: bool, redact: bool = True, *, raw: bool = False,
            no_dedup: bool = False, llm_log: list[str] | None = None,
            view: Any = None, headlines: bool = False) -> tuple[list[Decision], list[str]]:
    """One decision per fact, and notes for the user.

    Exact repeats (NONE), verbatim and undeduplicated adds (ADD) are settled here; every other fact
    goes, with its live neighbours from the candidate floor (superseded memories are never
    candidates; a fact stating a change also sees memories from the change floor that it bears
    on), to the store's decider (`memcli.rules.deciders`: the rules alone, or the LLM checked
    against them).
    """
    from memcli.services.llm.checks import states_change

    index = store.index if view is None else view
    cfg = store.config
    out: list[Decision | None] = []
    neighbours: list[list[dict[str, Any]]] = []
    # superseded memories come back from the graph too (a chain of bumps is mostly history): ask
    # for enough that the live ones near the fact are among them
    near = index.knn(vecs, 16) if not (raw or no_dedup) else [[] for _ in facts]
    floor = min(CANDIDATE_FLOOR, threshold, cfg.decide_threshold, NEIGHBOUR_FLOOR)
    for fact, hits, vec in zip(facts, near, vecs):
        neighbours.append([])
        if no_dedup:
            out.append(Decision("ADD", reasoning="stored as given (no dedup)"))
            continue
        exact = _live_exact(index, fact.text)
        if exact:
            out.append(Decision("NONE", exact.id, reasoning="same text as an existing memory", similarity=1.0,
                                exact=True, matched=_matched(exact.id, exact.text)))
            continue
        if raw:
            out.append(Decision("ADD", reasoning="verbatim: only an exact repeat is merged"))
            continue
        seen: dict[int, Any] = {}  # records read for this fact so far
        if len(hits) >= 16 and hits[-1][1] >= floor:
            # the nearest 16 may all be history (fastapi/typer bumped ty 40 times, so "Bump ty from
            # 0.0.34 to 0.0.35" met only replaced bumps and was added beside the current one)
            seen = index.records([lab for lab, _ in hits])
            if all(lab in seen and seen[lab].superseded_by for lab, _ in hits):
                hits = index.knn(vec[None, :], 256)[0]
        if headlines:
            keyed = _keyed_hits(index, fact.text, vec)
            if keyed:  # first, so the eight candidates kept below include them
                hits = keyed + [h for h in hits if h[0] not in {lab for lab, _ in keyed}]
        # a fact that states a change ("from Yarn to pnpm", a removal, a revert) also sees the memory
        # holding the old value from the change floor, with or without a model
        low_floor = _CHANGE_FLOOR if states_change(fact.text) or _versioned(fact.text) else floor
        close = [(lab, s) for lab, s in hits if s >= low_floor]
        recs = {**seen, **index.records([lab for lab, _ in close if lab not in seen])}
        close = [(lab, s) for lab, s in close
                 if s >= floor or (lab in recs and bears_on(recs[lab].text, fact.text, s, headlines=headlines))]
        live = [(lab, s) for lab, s in close if lab in recs and not recs[lab].superseded_by][:8]
        twin = _replaced_twin(fact.text, close, recs, live) if headlines else None
        if twin:  # a changelog item of a commit whose memory a later commit replaced: history too
            rec, s = twin
            out.append(Decision("NONE", rec.id, reasoning="the same change as a replaced memory (history)",
                                similarity=s, matched=_matched(rec.id, rec.text)))
            continue
        neighbours[-1] = [{"id": recs[lab].id, "text": recs[lab].text, "similarity": round(s, 4)} for lab, s in live]
        out.append(None)
    todo = [i for i, d in enumerate(out) if d is None]
    decider = _decider(cfg.with_overrides(redact=redact), client)
    decided, notes = decider.decide([facts[i] for i in todo], [neighbours[i] for i in todo], threshold,
                                    headlines=headlines)
    for i, d in zip(todo, decided):
        out[i] = d
    if llm_log is not None and isinstance(decider, LLMDecider):
        llm_log.extend(decider.log)
    final = [d for d in out if d is not None]
    for d in final:
        if d.event == "DELETE" and not allow_delete:
            d.refused = True
    return final, notes


def _keyed_hits(index: Any, text: str, vec: np.ndarray) -> list[tuple[int, float]]:
    """Memories the nearest vectors miss among hundreds of near-identical bumps, found by name in
    the keyword index, with their similarity: the memory of the same change (the same cited pull
    requests: `same_change`; typer's "⬆️ Bump ty to 0.0.53. PR [#1877](...)" never met "Bump ty to
    0.0.53 (#1877)"), and the live memories of the one package a versioned fact names (typer's
    release notes of 0.21.2 bumped rich twice and met none of the current rich bump), and the live
    memories naming the one thing a fact removes."""
    said = headline(text)
    refs = cited_refs(said)
    removal = removes(said)
    keys = subject_keys(said) if removal or _versioned(said) else frozenset()
    if not refs and len(keys) != 1:
        return []
    real = getattr(index, "index", index)  # a batch's PendingView reads through to the index
    found = [lab for lab, *_ in real.keyword(sorted(refs), 8)] if refs else []
    if len(keys) == 1:
        found += [lab for lab, *_ in real.keyword([next(iter(keys))], 32)]
    labels = list(dict.fromkeys(found))
    if not labels:
        return []
    recs = index.records(labels)

    def wanted(rec: Any) -> bool:
        old = headline(rec.text)
        if refs and same_change(old, said):
            return True
        if len(keys) != 1 or rec.superseded_by:
            return False
        # (a removal ends what was said of the name in plain words too: rich 14.1.0's "Removed
        # `typing_extensions` from runtime dependencies" and 13.9.1's "Fixed typing_extensions dependency")
        return subject_keys(old) == keys or removal and removal_of(old, said) is not None

    labels = [lab for lab in labels if lab in recs and wanted(recs[lab])]
    vectors: dict[int, np.ndarray] = {}
    real.rank_fields(labels, vectors=vectors)
    return [(lab, float(vectors[lab] @ vec)) for lab in labels if lab in vectors]


def _replaced_twin(text: str, close: list[tuple[int, float]], recs: dict[int, Any],
                   live: list[tuple[int, float]]) -> tuple[Any, float] | None:
    """The superseded memory of the same change as `text` (the same cited pull requests:
    `same_change`), when no live memory is that change: the item restates history, so it joins
    that memory instead of standing as a second, current copy (fastapi/typer: "Bump rich from
    14.3.2 to 14.3.3 (#1565)", replaced by the #1688 bump, then its release-notes line)."""
    if not cited_refs(text):
        return None
    said = headline(text)
    if any(same_change(headline(recs[lab].text), said) for lab, _ in live):
        return None
    return next(((recs[lab], s) for lab, s in close if lab in recs and recs[lab].superseded_by
                 and same_change(headline(recs[lab].text), said)), None)


def _decider(cfg: Config, client: LLM | None) -> Decider:
    """The store's decider: `decider` in config.toml (an installed `memcli.deciders` entry point),
    else the LLM one when a model is configured, else the rules alone. Built-in or plug-in, it is
    made the same way: `factory(client=, config=)`."""
    return load_decider(cfg.decider or ("llm" if client is not None else "heuristic"))(client=client, config=cfg)


def _versioned(text: str) -> bool:
    """The fact gives a named package or tool a version ("Bump rich pin to allow version 13"):
    its older versions are worth deciding against however differently they were worded."""
    return bool(re.search(r"\d", text)) and bool(subject_keys(headline(text)))


def _live_exact(index: Index, text: str) -> Memory | None:
    """The memory with exactly this (normalised) text, unless it was superseded: saying a replaced
    value again is a change back, decided by the rules against the live memories."""
    mid = index.find_exact(text)
    if not mid:
        return None
    labels = index.labels_of([mid])
    rec = index.records(labels.values()).get(labels.get(mid, -1)) if labels else None
    if rec is None:
        return Memory(id=mid, text=text)
    return None if rec.superseded_by else rec


class ThisInput:
    """The memories one `add` call has planned so far, for its in-batch dedup: a later fact that
    repeats an earlier one of the same input (issue 24: `add` in linear time).

    Each fact was compared with every earlier one (a `relate` call each): quadratic, 100 KB of
    input cost ~8x the CPU of 25 KB. Now their vectors are one growing matrix (one product per
    fact) and only the few that `relate` could call the same are candidates: the same normalised
    text, or the `MAX_COMPARED` most similar at or above relate's similarity floor (below it
    relate says DISTINCT without looking). Of those, `relate` reads only the ones `may_be_same`
    lets through: a similar input (a changelog, a chat log, commit messages) has up to
    `MAX_COMPARED` candidates for every fact, nearly all of them another value or another
    subject, and a `relate` call costs as much as planning the fact itself."""

    MAX_COMPARED = 24

    def __init__(self) -> None:
        self.memories: list[Memory] = []
        self._vecs: np.ndarray | None = None
        self._normal: dict[str, int] = {}
        self._said: list[Said | None] = []  # worked out when the memory is first compared

    def append(self, item: tuple[np.ndarray, Memory], said: Said | None = None) -> None:
        vec, memory = item
        n = len(self.memories)
        if self._vecs is None or n == len(self._vecs):
            grown = np.zeros((max(64, 2 * n), len(vec)), dtype=np.float32)
            if self._vecs is not None:
                grown[:n] = self._vecs
            self._vecs = grown
        self._vecs[n] = vec
        self.memories.append(memory)
        self._said.append(said if said is not None and said.text == memory.text else None)
        self._normal.setdefault(_normal(memory.text), n)

    def candidates(self, text: str, vec: np.ndarray, threshold: float) -> list[tuple[float, int]]:
        """(similarity, i) of the earlier memories (`memories[i]`) worth relating to `text`, in
        the order they were planned."""
        n = len(self.memories)
        if not n or self._vecs is None:
            return []
        # einsum, not `@`: a matrix-vector product goes to BLAS, whose threads spin against the
        # embedding model's (6 ms a call, most of a 100 KB add's CPU); one loop here is ~0.1 ms
        sims = np.einsum("ij,j->i", self._vecs[:n], np.asarray(vec, dtype=np.float32))
        close = np.nonzero(sims >= min(CANDIDATE_FLOOR, threshold))[0]
        if len(close) > self.MAX_COMPARED:
            close = _most_similar(close, sims[close], self.MAX_COMPARED)
        picked = set(close.tolist())
        same = self._normal.get(_normal(text))
        if same is not None:
            picked.add(same)
        return [(float(sims[i]), i) for i in sorted(picked)]

    def said(self, i: int) -> Said:
        """What `may_be_same` reads of the text of the `i`-th planned memory (once per text)."""
        said = self._said[i]
        if said is None or said.text != self.memories[i].text:  # (or rewritten since it was planned)
            said = self._said[i] = Said(self.memories[i].text)
        return said


def _most_similar(idx: np.ndarray, sims: np.ndarray, k: int) -> np.ndarray:
    """The `k` entries of `idx` with the highest `sims`, ties going to the earlier entry: the set
    `idx[np.argsort(-sims, kind="stable")[:k]]` is, in linear time (a partition, not a sort of
    every earlier fact for every fact)."""
    kth = np.partition(sims, len(sims) - k)[len(sims) - k]  # the k-th highest similarity
    above = idx[sims > kth]
    return np.concatenate([above, idx[sims == kth][:k - len(above)]])


def _plan_one(cs: ChangeSet, fact: Fact, vec: np.ndarray, d: Decision, batch: ThisInput,
              origins: list[str], user: str, project: str | None, src: str, threshold: float, *,
              created: str | None = None, no_dedup: bool = False) -> Event:
    """Turn one decision into planned changes, and the event the user sees."""
    by = {"decided_by": "llm" if d.by_llm else "heuristic", "decision_confidence": d.confidence}
    base = {"tags": fact.tags, "type": fact.type, "source": src, "matched": d.matched, **by}
    # in-batch dedup: a later fact that says the same as one this call already added
    said = None
    if d.event == "ADD" and not no_dedup:
        for s, i in batch.candidates(fact.text, vec, threshold):
            said = said or Said(fact.text)
            if not may_be_same(batch.said(i), said, s, threshold):
                continue  # relate would not call it the same: another value, another subject
            bmem = batch.memories[i]
            rel = relate(bmem.text, fact.text, s, threshold=threshold)
            if rel.kind == SAME:
                cs.edit(bmem.id, Reinforce(origins, when=created), quiet=True)
                return Event("NONE", "already_known", fact.text, bmem.id, confidence=bmem.confidence,
                             reasoning=f"repeats a fact of this input: {rel.reason}",
                             **{**base, "decided_by": "heuristic", "decision_confidence": None,
                                "matched": _matched(bmem.id, bmem.text)})
    if d.event == "ADD":
        m = _new_memory(fact, src, origins, user, project, created)
        if d.related:
            m.links.append({"rel": "related", "id": d.related})
        cs.add(m, event="ADD", origin=origins, reason=d.reasoning)
        batch.append((vec, m), said)
        return Event("ADD", "accepted", m.text, m.id, confidence=m.confidence, reasoning=d.reasoning,
                     related=d.related, **base)
    try:
        target = cs.memory(d.target) if d.target else None
    except NotFound:  # removed meanwhile (by another writer, or by an earlier fact of this input)
        target = None
    if target is None:
        return Event(d.event, "invalid", fact.text, d.target, reasoning=(
            f"{d.reasoning}; " if d.reasoning else "") + "the target memory does not exist (any more)", **base)
    if d.event in ("SUPERSEDE", "UPDATE") and (d.stale or _older(created, target.created)):
        # (an UPDATE too: an older statement must not rewrite the text of the newer memory)
        # said before the current value was (a commit replayed late, a changelog section of an older
        # release): the fact is history, stored superseded by the current memory, which stays current
        m = _new_memory(fact, src, origins, user, project, created)
        m.extra["superseded_by"] = target.id
        why = f"{d.reasoning}; older ({(created or '?')[:10]}) than the current value ({target.created[:10]})"
        cs.add(m, event="ADD", origin=origins, reason=why)
        batch.append((vec, m))
        return Event("ADD", "accepted", m.text, m.id, confidence=m.confidence, reasoning=why, **base)
    if d.event == "SUPERSEDE":
        m = _new_memory(fact, src, origins, user, project, created)
        m.text = d.text or fact.text
        m.extra["supersedes"] = target.id
        for other in d.newer:  # a later value of the subject is current: this one is history already
            with contextlib.suppress(NotFound):
                if _older(created, cs.memory(other).created):
                    m.extra["superseded_by"] = other
                    break
        cs.add(m, event="SUPERSEDE", old_id=target.id, old=target.text, origin=origins, reason=d.reasoning)
        cs.edit(target.id, Supersede(m.id, when=created), quiet=True)
        for other in d.also:  # the other values the same stated change replaced, unless said after it
            with contextlib.suppress(NotFound):
                if not _older(created, cs.memory(other).created):
                    cs.edit(other, Supersede(m.id, when=created), quiet=True)
        batch.append((vec, m))
        return Event("ADD", "accepted", m.text, m.id, confidence=m.confidence, reasoning=d.reasoning,
                     supersedes=target.id, old_memory=target.text, **base)
    if d.event == "NONE":
        target = cs.edit(target.id, Reinforce(origins, when=created), origin=origins)
        cs.on_commit(_count_use(cs.store, target.id))  # seen again: a use, which ranking counts
        return Event("NONE", "already_known", target.text, target.id, confidence=target.confidence,
                     reasoning=d.reasoning, **{**base, "tags": target.tags})
    if d.event == "UPDATE":
        old = target.text
        new_text = d.text or fact.text
        target = cs.edit(target.id, Update(new_text, tags=fact.tags, origins=origins, confidence=fact.confidence,
                                           code_pattern=fact.code_pattern, flags=dict(fact.flags),
                                           when=created),
                         origin=origins, reason=d.reasoning)
        return Event("UPDATE", "accepted", new_text, target.id, confidence=target.confidence,
                     reasoning=d.reasoning, old_memory=old, **{**base, "tags": target.tags})
    if d.event == "DELETE":
        if d.refused:
            cs.log("DELETE_REFUSED", id=target.id, reason=d.reasoning, origin=origins)
            return Event("DELETE", "invalid", target.text, target.id, reasoning=(
                f"refused without --allow-delete: {d.reasoning or ''}").strip(), old_memory=target.text,
                refused=True, **{**base, "tags": target.tags})
        cs.trash(target.id, d.reasoning or "deleted by add", event="DELETE", origin=",".join(origins))
        return Event("DELETE", "accepted", target.text, target.id, confidence=target.confidence,
                     reasoning=d.reasoning, old_memory=target.text, **{**base, "tags": target.tags})
    return Event(d.event, "invalid", fact.text, None, reasoning=f"unknown event {d.event!r}", **base)


def _older(created: str | None, current: str | None) -> bool:
    """Whether a fact dated `created` was stated before the memory dated `current` (both known)."""
    if not created or not current:
        return False
    from memcli.core.memory import parse_time

    try:
        return parse_time(created) < parse_time(current)
    except (ValueError, TypeError):
        return False


def _count_use(store: Store, mid: str) -> Callable[[], None]:
    def use() -> None:
        from memcli.ops.search import Usage

        Usage(store).use([mid])

    return use


def feedback(store: Store, memory_id: str, *, useful: bool) -> Memory:
    """Explicit feedback: useful raises confidence by 0.05 (capped at 0.95) and counts a use;
    wrong lowers it by 0.05 (not below 0.05). Logged; the Markdown's confidence changes."""
    cs = ChangeSet(store)
    before = cs.memory(memory_id).confidence
    m = cs.edit(memory_id, Feedback(useful), quiet=True)
    cs.log("FEEDBACK", id=m.id, useful=useful, old_confidence=before, confidence=m.confidence)
    if useful:
        cs.on_commit(_count_use(store, m.id))
    cs.commit()
    return m


def _new_memory(fact: Fact, src: str, origins: list[str], user: str, project: str | None,
                created: str | None) -> Memory:
    m = Memory(
        id=new_ulid(), text=fact.text, type=fact.type, tags=list(fact.tags), confidence=fact.confidence,
        source=src, origins=list(origins), user=user, project=project, code_pattern=fact.code_pattern,
        flags=dict(fact.flags),
    )
    if created:
        m.created = m.updated = created
    return m
