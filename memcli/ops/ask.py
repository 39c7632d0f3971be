"""Ask: answer a question from the top memories with the LLM, citing memory ids. The library decides
everything (which memories, whether to call the model, what is redacted); the CLI only streams.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memcli.ops.search import Hit, search_many

if TYPE_CHECKING:
    from memcli.ops.handle import Store


@dataclass
class Answer:
    """One question and what memory makes of it: `stream()` the answer (nothing when `error` says no
    request was made), then read `text`, `cited()` and `usage()`."""

    question: str
    hits: list[Hit]
    model: str | None = None
    error: str | None = None
    pieces: Iterator[str] = field(default_factory=lambda: iter(()))
    _client: Any = None
    _store: Any = None
    _counted: bool = False
    _parts: list[str] = field(default_factory=list)

    def stream(self) -> Iterator[str]:
        """The answer as it is produced, collected into `text`."""
        for piece in self.pieces:
            self._parts.append(piece)
            yield piece

    @property
    def text(self) -> str:
        return "".join(self._parts)

    def cited(self) -> list[str]:
        """The retrieved memories' ids the answer mentions (a unique 8+ character prefix counts: small
        models shorten ids), in order; each counts as a use, once."""
        found = {h.id: _mention(self.text, h.id, [o.id for o in self.hits]) for h in self.hits}
        ids = sorted((i for i, pos in found.items() if pos >= 0), key=found.__getitem__)
        if self._store is not None and not self._counted:
            from memcli.ops.search import Usage

            Usage(self._store).use(ids)
            self._counted = True
        return ids

    def header_echo(self) -> bool:
        """Whether the answer only repeats a memory's header ("[id] (type: ..., tags: ...)"), as small
        models do."""
        rest = _META.sub(" ", _CITATION.sub(" ", self.text))
        return bool(self.text.strip()) and not re.search(r"[^\W_]{2,}", rest)

    def unknown_citations(self) -> list[str]:
        """Bracketed id-like strings in the answer that match no memory it was given (invented)."""
        ids = [h.id.lower() for h in self.hits]
        return [c for c in dict.fromkeys(_CITATION.findall(self.text))
                if not any(i.startswith(c.lower()) for i in ids)]

    def matched(self) -> list[str]:
        """The retrieved memories the answer visibly repeats (values, commands, names), best first;
        not counted as uses: the model did not say so."""
        from memcli.services.llm.checks import supporting

        return supporting(self.text, [(h.id, h.memory.text) for h in self.hits])

    def usage(self) -> dict[str, Any] | None:
        if self._client is None:
            return None
        u = self._client.usage
        return {"model": self.model, "requests": u.requests, "prompt_tokens": u.prompt_tokens,
                "completion_tokens": u.completion_tokens, "llm_seconds": round(u.llm_seconds, 3)}


_CITATION = re.compile(r"\[([0-9A-Za-z]{8,26})\]")
# The metadata memcli puts after each memory's id in the prompt: "(type: semantic, tags: a, b, ...)".
_META = re.compile(r"\((?:\s*(?:type|tags|created|updated)\s*:[^()]*)+\)", re.I)


def _mention(text: str, mid: str, others: list[str]) -> int:
    """Where ``text`` first cites ``mid`` (whole, or as a unique 8+ character prefix in brackets); -1."""
    pos = text.find(mid)
    if pos >= 0:
        return pos
    low = mid.lower()
    for m in _CITATION.finditer(text):
        c = m.group(1).lower()
        if low.startswith(c) and sum(o.lower().startswith(c) for o in others) == 1:
            return m.start()
    return -1


def ask(store: Store, question: str, *, k: int = 8, llm_model: str | None = None, redact: bool = True) -> Answer:
    """The top `k` memories for the question and, when a model is set and something matched, a
    streamed request to it (question and memories redacted unless `redact=False`)."""
    hits = search_many(store, [question], k=k)[0].hits
    model = llm_model or store.config.llm_model
    if not model:
        return Answer(question, hits, error="no LLM configured")
    if not hits:  # nothing to answer from: no request, no invented answer
        return Answer(question, hits, model=model, error="no matching memories")
    from memcli.ops.add import llm_client

    sent = [h.memory for h in hits]
    if redact:  # the question and the memories: hand-written or imported ones were never scrubbed
        from memcli.services.redact import redact as scrub

        question = scrub(question)[0]
        sent = [dataclasses.replace(m, text=scrub(m.text)[0]) for m in sent]
    client = llm_client(store, model=model)
    return Answer(question, hits, model=model, pieces=client.answer(question, sent),
                  _client=client, _store=store)
