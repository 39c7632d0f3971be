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
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from memcli.config import default_user, git_project
from memcli.errors import InputRejected, InvalidInput, LLMNotConfigured, NotFound
from memcli.extract import heuristic_extract, infer_tags, normalise
from memcli.facts import MEMORY_TYPES, Extraction, Fact
from memcli.memory import Memory, new_ulid, now_iso
from memcli.store import Store, atomic_write

MAX_INPUT_BYTES = 10 * 1024 * 1024
REINFORCE = 0.05
CONFIDENCE_CAP = 0.95
_WORD = re.compile(r"[a-z0-9][a-z0-9_.+#/-]*", re.I)


class IngestError(InputRejected):
    """Input that cannot be added (empty, too large, binary, not UTF-8); one line for the user."""


@dataclass
class Event:
    """What happened to one extracted fact."""

    event: str  # ADD | UPDATE | DELETE | NONE
    verdict: str  # accepted | already_known | invalid | failed
    text: str
    id: str | None = None
    tags: list[str] = field(default_factory=list)
    confidence: float | None = None
    type: str | None = None
    reasoning: str | None = None
    old_memory: str | None = None
    source: str | None = None
    refused: bool = False  # a DELETE the model asked for, not applied (no --allow-delete)
    decided_by: str | None = None  # "llm" when the model made the decision, else "heuristic"
    decision_confidence: float | None = None  # the model's confidence in its decision

    def to_dict(self) -> dict[str, Any]:
        d = {
            "id": self.id, "text": self.text, "event": self.event, "verdict": self.verdict, "type": self.type,
            "tags": self.tags, "confidence": self.confidence, "source": self.source, "reasoning": self.reasoning,
        }
        if self.old_memory is not None:
            d["old_memory"] = self.old_memory
        if self.refused:
            d["refused"] = True
        if self.decided_by is not None:
            d["decided_by"] = self.decided_by
        if self.decision_confidence is not None:
            d["decision_confidence"] = self.decision_confidence
        return d


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
                "invalid": len(ex.invalid), "note": ex.note,
                "facts": [
                    {"text": f.text, "type": f.type, "tags": f.tags, "confidence": f.confidence,
                     "code_pattern": f.code_pattern, **f.flags}
                    for f in ex.facts
                ],
            },
            "memory": [e.to_dict() for e in self.events],
            "summary": self.summary(),
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


def read_input(data: bytes, name: str = "stdin") -> str:
    """Decode user input: refuse binary, invalid UTF-8 and oversized input with one clear line."""
    if len(data) > MAX_INPUT_BYTES:
        raise IngestError(f"{name}: input is {len(data) / 1e6:.1f} MB; the limit is {MAX_INPUT_BYTES // 2**20} MB")
    if b"\x00" in data:
        raise IngestError(f"{name}: looks like binary data, not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise IngestError(f"{name}: not valid UTF-8 (byte {e.start})") from None


def _words(text: str) -> set[str]:
    return {w.lower().strip(".") for w in _WORD.findall(text)}


def more_informative(new: str, old: str) -> bool:
    """Heuristic UPDATE test: the new text says something the old one does not, at least as fully."""
    nw, ow = _words(new), _words(old)
    return bool(nw - ow) and len(nw) >= len(ow)


def add(
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
) -> AddResult:
    """Turn `text` into memories and write them. See the module docstring for the semantics.

    `llm`: None uses the LLM when one is configured; False forces the heuristic path; True requires
    an LLM (LLMNotConfigured if none is configured). When the LLM is unreachable the (redacted) input
    is saved to the store's inbox (unless `inbox=False`) and the LLMError is raised.
    """
    if not text or not text.strip():
        raise IngestError("nothing to add: the input is empty")
    if len(text.encode("utf-8")) > MAX_INPUT_BYTES:
        raise IngestError(f"input too large (limit {MAX_INPUT_BYTES // 2**20} MB)")
    if type is not None and type not in MEMORY_TYPES:
        raise InvalidInput(f"type must be one of {', '.join(MEMORY_TYPES)}, got {type!r}")
    cfg = store.config
    threshold = cfg.add_threshold if threshold is None else threshold
    if llm and not cfg.llm_model:
        raise LLMNotConfigured("no LLM configured: set MEMCLI_LLM_MODEL (or llm_model in config.toml)")
    use_llm = bool(cfg.llm_model) if llm is None else llm
    kinds: list[str] = []
    if redact:  # before anything is sent to a model or written to disk (inbox and log included)
        from memcli.redact import redact as scrub

        text, kinds = scrub(text)
    user = user or default_user(cfg)
    if project is None:
        project = git_project()
    client = llm_client(store) if use_llm and not raw else None
    options = {"tags": list(tags), "type": type, "origins": list(origins), "user": user, "project": project,
               "session": session, "threshold": threshold, "allow_delete": allow_delete,
               "source": source, "redact": redact}
    result = AddResult(Extraction([]), [], dry_run=dry_run, redacted=kinds)
    from memcli.llm import LLMError  # cheap: memcli.llm imports litellm only when a request is made

    try:
        extraction = _extract(text, raw=raw, type=type, client=client)
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
        decisions: list[_Decision] = []
        if facts and dry_run and not store.exists():  # nothing to compare with, and nothing to create
            vecs = store.index.embedder.embed([f.text for f in facts])
            decisions = [_Decision("ADD", reasoning="no store yet") for _ in facts]
        elif facts:
            index = store.index
            vecs = index.embedder.embed([f.text for f in facts])
            index.sync()
            # Decided outside the writer lock: an LLM call can take seconds and other writers
            # (git hooks) must not wait on it. Targets are re-read under the lock when applied.
            decisions, notes = _decide(store, facts, vecs, threshold, client, allow_delete, redact)
            result.notes.extend(notes)
    except LLMError as e:
        if inbox and not dry_run:
            path = save_to_inbox(store, text, {**options, "model": cfg.llm_model}, str(e))
            e.args = (f"{e}; input saved to {path.relative_to(store.path)} (run `memcli inbox retry`)",)
        raise
    src = source or ("llm" if extraction.method == "llm" else "heuristic")
    if extraction.method == "llm":
        for reason in extraction.invalid:  # items the model produced that failed validation
            result.events.append(Event("NONE", "invalid", "", None, reasoning=f"extracted item dropped: {reason}",
                                       source=src, decided_by="llm"))
    if facts:
        all_origins = list(dict.fromkeys([*origins, *([f"session:{session}"] if session else [])])) or ["cli"]
        with contextlib.nullcontext() if dry_run else store.lock():
            batch: list[tuple[np.ndarray, Memory]] = []  # memories added by this call, for in-batch dedup
            for fact, vec, decision in zip(facts, vecs, decisions):
                event = _apply(store, fact, vec, decision, batch, all_origins, user, project, dry_run, src, threshold)
                result.events.append(event)
            if not dry_run:
                index.sync()
    if client is not None:
        u = client.usage
        result.llm_usage = {"model": cfg.llm_model, "requests": u.requests, "prompt_tokens": u.prompt_tokens,
                            "completion_tokens": u.completion_tokens, "llm_seconds": round(u.llm_seconds, 3)}
    return result


def _scrub(text: str) -> str:
    from memcli.redact import redact as scrub

    return scrub(text)[0]


# ---------------------------------------------------------------- extraction
def llm_client(store: Store) -> Any:
    """The LLM client for this store's settings (model, api_base, key, timeout, retries,
    temperature, backoff: config.toml, MEMCLI_LLM_* or flags)."""
    from memcli.llm import LLM, LLMSettings, default_timeout

    cfg = store.config
    timeout = cfg.llm_timeout if cfg.llm_timeout else default_timeout(cfg.api_base, str(cfg.llm_model))
    return LLM(LLMSettings(model=str(cfg.llm_model), api_base=cfg.api_base, api_key=cfg.api_key,
                           timeout=timeout, retries=max(0, cfg.llm_retries),
                           temperature=cfg.llm_temperature, backoff=max(0.0, cfg.llm_backoff)))


def _extract(text: str, *, raw: bool, type: str | None, client: Any) -> Extraction:
    if raw:
        from memcli.extract import code_pattern_of, detect_flags

        body = text.strip()
        fact = Fact(text=body, type=type or "semantic", tags=infer_tags(body), confidence=0.9,
                    code_pattern=code_pattern_of(body), flags=detect_flags(body))
        return Extraction([fact], method="raw")
    if client is None:
        return _without_injected(heuristic_extract(text, default_type=type), text)
    from memcli.llm import LLMFormatError

    try:
        return client.extract(text)
    except LLMFormatError as e:
        fallback = _without_injected(heuristic_extract(text, default_type=type), text)
        fallback.note = f"LLM extraction unusable ({e}); used the heuristic extractor"
        return fallback


def _without_injected(extraction: Extraction, text: str) -> Extraction:
    """Drop facts taken from an instruction inside the input ("store: ...", "ignore previous
    instructions and ..."): the same rule the LLM path applies (counted as skipped)."""
    from memcli.llm_checks import instruction_lines

    lines = instruction_lines(text)
    if not lines:
        return extraction
    from memcli.llm_checks import fact_problem

    kept = [f for f in extraction.facts if fact_problem(f.text, source=text, instructions=lines) != "injected"]
    extraction.skipped += len(extraction.facts) - len(kept)
    extraction.facts = kept
    return extraction


def save_to_inbox(store: Store, text: str, options: dict[str, Any], error: str) -> Path:
    """Park an input the LLM could not process; `text` is already redacted (unless opted out)."""
    error = _scrub(error)  # an api_base may carry a password, a server may echo the input
    store.ensure()
    store.inbox_dir.mkdir(exist_ok=True)
    path = store.inbox_dir / f"{new_ulid()}.json"
    record = {"at": now_iso(), "error": error, "attempts": 1, "options": options, "text": text}
    atomic_write(path, json.dumps(record, ensure_ascii=False, indent=1).encode("utf-8"))
    store.log("INBOX", file=path.name, error=error)
    return path


# ---------------------------------------------------------------- decisions
@dataclass
class _Decision:
    event: str  # ADD | UPDATE | DELETE | NONE
    target: str | None = None
    text: str | None = None
    reasoning: str | None = None
    confidence: float | None = None  # the model's confidence; None for heuristic decisions
    similarity: float | None = None
    exact: bool = False
    refused: bool = False
    by_llm: bool = False


_NEIGHBOUR_FLOOR = 0.45  # below this a memory is not related enough to be worth showing the model


def _decide(store: Store, facts: list[Fact], vecs: np.ndarray, threshold: float, client: Any,
            allow_delete: bool, redact: bool = True) -> tuple[list[_Decision], list[str]]:
    """One decision per fact, and notes for the user.

    Every fact first gets the heuristic decision (exact repeat: NONE; a neighbour at or above
    `threshold`: UPDATE when the fact says more, else NONE; otherwise ADD). With a client, the
    facts that have neighbours at or above the decide threshold (0.8; up to 5 each) then go to
    the model in ONE request; exact repeats and facts without neighbours never do.
    """
    index = store.index
    cfg = store.config
    out: list[_Decision] = []
    notes: list[str] = []
    neighbours: list[list[dict[str, Any]]] = []
    near = index.knn(vecs, 5)
    for fact, hits in zip(facts, near):
        exact = index.find_exact(fact.text)
        if exact:
            out.append(_Decision("NONE", exact, reasoning="same text as an existing memory", similarity=1.0,
                                 exact=True))
            neighbours.append([])
            continue
        close = [(lab, s) for lab, s in hits if s >= min(cfg.decide_threshold, threshold, _NEIGHBOUR_FLOOR)]
        recs = index.records([lab for lab, _ in close])
        nb = [{"id": recs[lab]["id"], "text": recs[lab]["text"], "similarity": round(s, 4)}
              for lab, s in close if lab in recs][:5]
        neighbours.append(nb)
        if not nb or nb[0]["similarity"] < threshold:
            out.append(_Decision("ADD", reasoning="no similar memory" if not nb else
                                 f"closest memory {nb[0]['similarity']:.2f} < threshold {threshold:.2f}"))
            continue
        top = nb[0]
        if more_informative(fact.text, top["text"]):
            out.append(_Decision("UPDATE", top["id"], fact.text, similarity=top["similarity"],
                                 reasoning=f"similar ({top['similarity']:.2f}) and says more than the stored text"))
        else:
            out.append(_Decision("NONE", top["id"], similarity=top["similarity"],
                                 reasoning=f"already known (similarity {top['similarity']:.2f})"))
    asks = [i for i, d in enumerate(out) if not d.exact and neighbours[i]]
    if client is not None:
        # The model sees a fact when a memory is close (cosine >= llm_decide_threshold, 0.6: a
        # correction such as PG16 -> PG17 or "no longer on Jenkins" scores well below 0.8), or when
        # the fact states a change and a memory is at least loosely related. Still one request.
        from memcli.llm_checks import states_change

        bar = cfg.llm_decide_threshold
        asks = [i for i in asks if neighbours[i][0]["similarity"] >= bar
                or (states_change(facts[i].text) and neighbours[i][0]["similarity"] >= _NEIGHBOUR_FLOOR)]
    else:
        asks = []
    if client is not None and asks:
        from memcli.llm import LLMFormatError

        shown = [[n for n in neighbours[i] if n["similarity"] >= _NEIGHBOUR_FLOOR][:3] for i in asks]
        sent = [[{**n, "text": _scrub(n["text"])} for n in nb] if redact else nb for nb in shown]
        try:
            decisions, invalid = client.decide([facts[i] for i in asks], sent)
        except LLMFormatError as e:
            notes.append(f"LLM decisions unusable ({e}); used the heuristic decisions")
            store.log("LLM_INVALID", detail=str(e))
            decisions, invalid = [], []
        decided: set[int] = set()
        for dec in decisions:
            if not 0 <= dec.fact < len(asks):
                continue
            i = asks[dec.fact]
            decided.add(dec.fact)
            text = _scrub(dec.text) if redact and dec.text else dec.text
            out[i] = _Decision(dec.event, dec.target_id, text or facts[i].text, dec.reasoning or None,
                               dec.confidence, by_llm=True)
        for reason in invalid:
            store.log("LLM_INVALID", detail=reason)
        # A fact the model did not decide on (or decided invalidly) keeps its heuristic decision,
        # and its reasoning says why.
        for j, i in enumerate(asks):
            if j in decided or not invalid:
                continue
            why = [r for r in invalid if re.search(rf"\bfact {j}\b", r)] or ["no valid decision returned"]
            out[i].reasoning = f"LLM decision rejected ({'; '.join(why)}); heuristic: {out[i].reasoning}"
    for d in out:
        if d.event == "DELETE" and not allow_delete:
            d.refused = True
    return out, notes


def _apply(store: Store, fact: Fact, vec: np.ndarray, d: _Decision, batch: list[tuple[np.ndarray, Memory]],
           origins: list[str], user: str, project: str | None, dry_run: bool, src: str,
           threshold: float) -> Event:
    by = {"decided_by": "llm" if d.by_llm else "heuristic", "decision_confidence": d.confidence}
    base = {"tags": fact.tags, "type": fact.type, "source": src, **by}
    # in-batch dedup: a later fact close to one this call already added
    if d.event == "ADD":
        for bvec, bmem in batch:
            s = float(bvec @ vec)
            if normalise(bmem.text) == normalise(fact.text) or s >= threshold:
                if not dry_run:
                    _reinforce(bmem, origins)
                    store.write(bmem)
                return Event("NONE", "already_known", fact.text, bmem.id, confidence=bmem.confidence,
                             reasoning=f"repeats a fact of this input ({s:.2f})",
                             **{**base, "decided_by": "heuristic", "decision_confidence": None})
    try:
        if d.event == "ADD":
            m = Memory(
                id=new_ulid(), text=fact.text, type=fact.type, tags=list(fact.tags), confidence=fact.confidence,
                source=src, origins=list(origins), user=user, project=project, code_pattern=fact.code_pattern,
                flags=dict(fact.flags),
            )
            if not dry_run:
                store.write(m)
                store.log("ADD", id=m.id, text=m.text, origin=origins, reason=d.reasoning)
            batch.append((vec, m))
            return Event("ADD", "accepted", m.text, m.id, confidence=m.confidence, reasoning=d.reasoning, **base)
        try:
            target = store.read(d.target) if d.target else None
        except NotFound:  # removed meanwhile (by another writer, or by an earlier fact of this input)
            target = None
        if target is None:
            return Event(d.event, "invalid", fact.text, d.target, reasoning=(
                f"{d.reasoning}; " if d.reasoning else "") + "the target memory does not exist (any more)", **base)
        if d.event == "NONE":
            if not dry_run:
                _reinforce(target, origins)
                store.write(target)
                store.log("NONE", id=target.id, origin=origins)
            return Event("NONE", "already_known", target.text, target.id, confidence=target.confidence,
                         reasoning=d.reasoning, **{**base, "tags": target.tags})
        if d.event == "UPDATE":
            old = target.text
            new_text = d.text or fact.text
            target.history.append({"event": "UPDATE", "at": now_iso(), "old": old})
            target.text = new_text
            target.tags = list(dict.fromkeys([*target.tags, *fact.tags]))
            target.origins = list(dict.fromkeys([*target.origins, *origins]))
            target.confidence = max(target.confidence, fact.confidence)
            target.updated = now_iso()
            if fact.code_pattern and not target.code_pattern:
                target.code_pattern = fact.code_pattern
            target.flags.update(fact.flags)
            if not dry_run:
                store.write(target)
                store.log("UPDATE", id=target.id, old=old, text=new_text, origin=origins, reason=d.reasoning)
            return Event("UPDATE", "accepted", new_text, target.id, confidence=target.confidence,
                         reasoning=d.reasoning, old_memory=old, **{**base, "tags": target.tags})
        if d.event == "DELETE":
            if d.refused:
                if not dry_run:
                    store.log("DELETE_REFUSED", id=target.id, reason=d.reasoning, origin=origins)
                return Event("DELETE", "invalid", target.text, target.id, reasoning=(
                    f"refused without --allow-delete: {d.reasoning or ''}").strip(), old_memory=target.text,
                    refused=True, **{**base, "tags": target.tags})
            if not dry_run:
                store.trash(target.id, d.reasoning or "deleted by add", origin=",".join(origins))
            return Event("DELETE", "accepted", target.text, target.id, confidence=target.confidence,
                         reasoning=d.reasoning, old_memory=target.text, **{**base, "tags": target.tags})
        return Event(d.event, "invalid", fact.text, None, reasoning=f"unknown event {d.event!r}", **base)
    except OSError as e:
        return Event(d.event, "failed", fact.text, d.target, reasoning=f"write failed: {e.strerror or e}", **base)


def _reinforce(m: Memory, origins: list[str]) -> None:
    """A fact seen again: its new origins join the support set and confidence rises a little."""
    m.origins = list(dict.fromkeys([*m.origins, *origins]))
    m.confidence = min(CONFIDENCE_CAP, max(m.confidence, m.confidence + REINFORCE))
    m.updated = now_iso()


# ---------------------------------------------------------------- inbox
def inbox_items(store: Store) -> list[tuple[Path, dict[str, Any]]]:
    """Parked inputs, oldest first (file names are ULIDs)."""
    if not store.inbox_dir.is_dir():
        return []
    out = []
    for p in sorted(store.inbox_dir.glob("*.json")):
        try:
            item = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(item, dict) and isinstance(item.get("text"), str):
            out.append((p, item))
    return out


_ADD_OPTIONS = ("tags", "type", "origins", "user", "project", "session", "threshold", "allow_delete", "source")


def retry_inbox(store: Store, *, model: str | None = None) -> list[tuple[str, AddResult | str]]:
    """Replay parked inputs through the LLM pipeline; each one that succeeds leaves the inbox.

    The model is `model` if given, else the store's configured one, else the one the input was
    parked with. An input that fails again stays, with its error and attempt count updated.
    """
    results: list[tuple[str, AddResult | str]] = []
    configured = store.config.llm_model
    for path, item in inbox_items(store):
        opts = {k: v for k, v in (item.get("options") or {}).items() if k in _ADD_OPTIONS}
        use = model or configured or item.get("options", {}).get("model")
        if use and use != store.config.llm_model:
            store.config = store.config.with_overrides(llm_model=use)
        try:
            # redact=False: what was parked was redacted already (unless the user opted out)
            res = add(store, item["text"], llm=True, inbox=False, redact=False, **opts)
        except Exception as e:  # noqa: BLE001 - LLMError, StoreError...: keep the item, report
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            results.append((path.name, msg))
            item["error"], item["attempts"] = _scrub(msg), int(item.get("attempts") or 1) + 1
            item["last_attempt"] = now_iso()
            try:
                atomic_write(path, json.dumps(item, ensure_ascii=False, indent=1).encode("utf-8"))
            except OSError:
                pass
            continue
        if res.failed:  # a write did not land: keep the input for another go
            results.append((path.name, "some memories could not be written"))
            continue
        path.unlink(missing_ok=True)
        store.log("INBOX_DONE", file=path.name)
        results.append((path.name, res))
    return results
