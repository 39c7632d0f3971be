"""The add pipeline: redact -> extract -> embed -> neighbours -> decide -> write -> index.

Decisions never destroy: UPDATE keeps the old text in `history`, DELETE (LLM only, and only with
`allow_delete`) moves the memory to the trash with its reason, NONE adds the new origin to the
memory that already said it. Every fact gets an event and a verdict
(accepted / already_known / invalid / failed).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from memcli.config import git_project
from memcli.extract import heuristic_extract, infer_tags, normalise
from memcli.facts import MEMORY_TYPES, Extraction, Fact
from memcli.memory import Memory, new_ulid, now_iso
from memcli.store import Store, StoreError, atomic_write

MAX_INPUT_BYTES = 10 * 1024 * 1024
REINFORCE = 0.05
CONFIDENCE_CAP = 0.95
_WORD = re.compile(r"[a-z0-9][a-z0-9_.+#/-]*", re.I)


class IngestError(StoreError):
    """Input that cannot be added (empty, too large, LLM unreachable...); one line for the user."""


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

    def to_dict(self) -> dict[str, Any]:
        d = {
            "id": self.id, "text": self.text, "event": self.event, "verdict": self.verdict, "type": self.type,
            "tags": self.tags, "confidence": self.confidence, "source": self.source, "reasoning": self.reasoning,
        }
        if self.old_memory is not None:
            d["old_memory"] = self.old_memory
        return d


@dataclass
class AddResult:
    extraction: Extraction
    events: list[Event]
    dry_run: bool = False
    timestamp: str = field(default_factory=now_iso)
    llm_usage: dict[str, Any] | None = None

    @property
    def failed(self) -> bool:
        return any(e.verdict == "failed" for e in self.events)

    def summary(self) -> dict[str, int]:
        s = {k: 0 for k in ("ADD", "UPDATE", "DELETE", "NONE", "accepted", "already_known", "invalid", "failed")}
        for e in self.events:
            s[e.event] = s.get(e.event, 0) + 1
            s[e.verdict] = s.get(e.verdict, 0) + 1
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
    an LLM (IngestError if none is configured). When the LLM is unreachable the (redacted) input
    is saved to the store's inbox (unless `inbox=False`) and the LLMError is raised.
    """
    if not text or not text.strip():
        raise IngestError("nothing to add: the input is empty")
    if len(text.encode("utf-8")) > MAX_INPUT_BYTES:
        raise IngestError(f"input too large (limit {MAX_INPUT_BYTES // 2**20} MB)")
    if type is not None and type not in MEMORY_TYPES:
        raise IngestError(f"--type must be one of {', '.join(MEMORY_TYPES)}")
    cfg = store.config
    threshold = cfg.add_threshold if threshold is None else threshold
    if llm and not cfg.llm_model:
        raise IngestError("no LLM configured: set MEMCLI_LLM_MODEL (or llm_model in config.toml), or use --no-llm")
    use_llm = bool(cfg.llm_model) if llm is None else llm
    if redact:
        from memcli.redact import redact as scrub

        text, _kinds = scrub(text)
    client = llm_client(store) if use_llm and not raw else None
    options = {"tags": list(tags), "type": type, "origins": list(origins), "user": user, "project": project,
               "session": session, "threshold": threshold, "allow_delete": allow_delete}
    from memcli.llm import LLMError

    try:
        extraction = _extract(text, raw=raw, type=type, client=client)
        facts = extraction.facts
        for f in facts:
            f.tags = list(dict.fromkeys([*[t.lower() for t in tags], *f.tags]))
            if type:
                f.type = type
        result = AddResult(extraction, [], dry_run=dry_run)
        if not facts:
            return result
        index = store.index
        vecs = index.embedder.embed([f.text for f in facts])
        index.sync()
        # Decided outside the writer lock: an LLM call can take seconds and other writers
        # (git hooks) must not wait on it. Targets are re-read under the lock when applied.
        decisions = _decide(store, facts, vecs, threshold, client, allow_delete)
    except LLMError as e:
        if inbox and not dry_run:
            path = save_to_inbox(store, text, options, str(e))
            e.args = (f"{e}; input saved to {path.relative_to(store.path)} (run `memcli inbox retry`)",)
        raise
    all_origins = list(dict.fromkeys([*origins, *([f"session:{session}"] if session else [])])) or ["cli"]
    user = user or cfg.user
    if project is None:
        project = git_project()
    with _null() if dry_run else store.lock():
        batch: list[tuple[np.ndarray, Memory]] = []  # memories added by this call, for in-batch dedup
        for fact, vec, decision in zip(facts, vecs, decisions):
            event = _apply(store, fact, vec, decision, batch, all_origins, user, project, dry_run, source,
                           client is not None, threshold)
            result.events.append(event)
        if not dry_run:
            index.sync()
    if client is not None:
        u = client.usage
        result.llm_usage = {"model": cfg.llm_model, "requests": u.requests, "prompt_tokens": u.prompt_tokens,
                            "completion_tokens": u.completion_tokens, "llm_seconds": round(u.llm_seconds, 3)}
    return result


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *a: object) -> None:
        return None


# ---------------------------------------------------------------- extraction
def llm_client(store: Store) -> Any:
    from memcli.llm import LLM, LLMSettings

    cfg = store.config
    return LLM(LLMSettings(model=str(cfg.llm_model), api_base=cfg.api_base, api_key=cfg.api_key,
                           timeout=cfg.llm_timeout, retries=cfg.llm_retries, temperature=cfg.llm_temperature))


def _extract(text: str, *, raw: bool, type: str | None, client: Any) -> Extraction:
    if raw:
        from memcli.extract import code_pattern_of, detect_flags

        body = text.strip()
        fact = Fact(text=body, type=type or "semantic", tags=infer_tags(body), confidence=0.9,
                    code_pattern=code_pattern_of(body), flags=detect_flags(body))
        return Extraction([fact], method="raw")
    if client is None:
        return heuristic_extract(text, default_type=type)
    from memcli.llm import LLMFormatError

    try:
        return client.extract(text)
    except LLMFormatError as e:
        fallback = heuristic_extract(text, default_type=type)
        fallback.note = f"LLM extraction unusable ({e}); used the heuristic extractor"
        return fallback


def save_to_inbox(store: Store, text: str, options: dict[str, Any], error: str) -> Path:
    store.ensure()
    store.inbox_dir.mkdir(exist_ok=True)
    path = store.inbox_dir / f"{new_ulid()}.json"
    record = {"at": now_iso(), "error": error, "options": options, "text": text}
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
    confidence: float | None = None
    similarity: float | None = None
    exact: bool = False
    refused: bool = False


def _decide(store: Store, facts: list[Fact], vecs: np.ndarray, threshold: float, client: Any,
            allow_delete: bool) -> list[_Decision]:
    index = store.index
    cfg = store.config
    out: list[_Decision] = []
    neighbours: list[list[dict[str, Any]]] = []
    near = index.knn(vecs, 5)
    for fact, hits in zip(facts, near):
        exact = index.find_exact(fact.text)
        if exact:
            out.append(_Decision("NONE", exact, reasoning="same text as an existing memory", similarity=1.0,
                                 exact=True))
            neighbours.append([])
            continue
        close = [(lab, s) for lab, s in hits if s >= min(cfg.decide_threshold, threshold)]
        recs = index.records([lab for lab, _ in close])
        nb = [{"id": recs[lab]["id"], "text": recs[lab]["text"], "similarity": round(s, 4)}
              for lab, s in close if lab in recs]
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
    if client is not None:
        asks = [i for i, d in enumerate(out) if not d.exact and neighbours[i]]
        if asks:
            decisions, invalid = client.decide([facts[i] for i in asks], [neighbours[i] for i in asks])
            for dec in decisions:
                if not 0 <= dec.fact < len(asks):
                    continue
                i = asks[dec.fact]
                out[i] = _Decision(dec.event, dec.target_id, dec.text or facts[i].text, dec.reasoning,
                                   dec.confidence)
            # facts the model did not decide on (or decided invalidly) keep the heuristic decision
            for reason in invalid:
                store.log("LLM_INVALID", detail=reason)
    for d in out:
        if d.event == "DELETE" and not allow_delete:
            d.refused = True
    return out


def _apply(store: Store, fact: Fact, vec: np.ndarray, d: _Decision, batch: list[tuple[np.ndarray, Memory]],
           origins: list[str], user: str, project: str | None, dry_run: bool, source: str | None,
           via_llm: bool, threshold: float) -> Event:
    src = source or ("llm" if via_llm else "heuristic")
    base = {"tags": fact.tags, "type": fact.type, "source": src}
    # in-batch dedup: a later fact close to one this call already added
    if d.event == "ADD":
        for bvec, bmem in batch:
            s = float(bvec @ vec)
            if normalise(bmem.text) == normalise(fact.text) or s >= threshold:
                d = _Decision("NONE", bmem.id, reasoning=f"repeats a fact of this input ({s:.2f})")
                if not dry_run:
                    _reinforce(bmem, origins)
                    store.write(bmem)
                return Event("NONE", "already_known", fact.text, bmem.id, confidence=bmem.confidence,
                             reasoning=d.reasoning, **base)
    try:
        if d.event == "ADD":
            m = Memory(
                id=new_ulid(), text=fact.text, type=fact.type, tags=list(fact.tags), confidence=fact.confidence,
                source=src, origins=list(origins), user=user, project=project, code_pattern=fact.code_pattern,
                flags=dict(fact.flags),
            )
            if not dry_run:
                store.write(m)
                store.log("ADD", id=m.id, text=m.text, origin=origins)
            batch.append((vec, m))
            return Event("ADD", "accepted", m.text, m.id, confidence=m.confidence, reasoning=d.reasoning, **base)
        target = store.read(d.target) if d.target else None
        if target is None:
            return Event(d.event, "invalid", fact.text, None, reasoning="decision without a target memory", **base)
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
            target.confidence = max(target.confidence, d.confidence or fact.confidence)
            target.updated = now_iso()
            if fact.code_pattern and not target.code_pattern:
                target.code_pattern = fact.code_pattern
            target.flags.update(fact.flags)
            if not dry_run:
                store.write(target)
                store.log("UPDATE", id=target.id, old=old, text=new_text, origin=origins, reason=d.reasoning)
            return Event("UPDATE", "accepted", new_text, target.id, confidence=target.confidence,
                         reasoning=d.reasoning, old_memory=old, **base)
        if d.event == "DELETE":
            if d.refused:
                return Event("DELETE", "invalid", target.text, target.id, reasoning=(
                    f"refused without --allow-delete: {d.reasoning or ''}").strip(), old_memory=target.text, **base)
            if not dry_run:
                store.trash(target.id, d.reasoning or "deleted by add", origin=",".join(origins))
            return Event("DELETE", "accepted", target.text, target.id, reasoning=d.reasoning,
                         old_memory=target.text, **base)
        return Event(d.event, "invalid", fact.text, None, reasoning=f"unknown event {d.event!r}", **base)
    except OSError as e:
        return Event(d.event, "failed", fact.text, d.target, reasoning=f"write failed: {e.strerror or e}", **base)


def _reinforce(m: Memory, origins: list[str]) -> None:
    """A fact seen again: its new origins join the support set and confidence rises a little."""
    m.origins = list(dict.fromkeys([*m.origins, *origins]))
    m.confidence = min(CONFIDENCE_CAP, max(m.confidence, m.confidence + REINFORCE))
    m.updated = now_iso()


def inbox_items(store: Store) -> list[tuple[Path, dict[str, Any]]]:
    if not store.inbox_dir.is_dir():
        return []
    out = []
    for p in sorted(store.inbox_dir.glob("*.json")):
        try:
            out.append((p, json.loads(p.read_text(encoding="utf-8"))))
        except (OSError, ValueError):
            continue
    return out


def retry_inbox(store: Store) -> list[tuple[str, AddResult | str]]:
    """Replay parked inputs; each one that succeeds leaves the inbox."""
    results: list[tuple[str, AddResult | str]] = []
    for path, item in inbox_items(store):
        opts = dict(item.get("options") or {})
        opts["redact"] = False  # what was parked was already redacted (unless the user opted out)
        try:
            res = add(store, item["text"], llm=True, inbox=False, **opts)
        except StoreError as e:
            results.append((path.name, str(e)))
            continue
        except Exception as e:  # LLMError and friends: keep the item, report
            results.append((path.name, str(e).splitlines()[0] if str(e) else type(e).__name__))
            continue
        os.unlink(path)
        store.log("INBOX_DONE", file=path.name)
        results.append((path.name, res))
    return results
