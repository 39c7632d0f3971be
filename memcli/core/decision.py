"""The decision vocabulary: what to do with one new fact, and what then happened to it.

A `Decision` is made by the rules (`memcli.rules.decide`) or the model (`llm.LLM.decide`) and
planned the same way either way; an `Event` is the outcome the user sees (`add --json`). Here in
core so that neither the LLM client nor the planning layer imports the other to name a type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Decision:
    """What to do with one new fact: ADD, UPDATE (`text` is the merged text), SUPERSEDE, DELETE or
    NONE, about the memory `target` (None for ADD)."""

    event: str  # ADD | UPDATE | SUPERSEDE | DELETE | NONE
    target: str | None = None  # the id of the memory decided against
    text: str | None = None  # the fact's text, or the merged text of an UPDATE
    reasoning: str | None = None
    confidence: float | None = None  # the model's confidence; None for the rules' decisions
    similarity: float | None = None  # cosine of the fact and `target`
    fact: int | None = None  # in a model's reply: the fact's index in the request
    exact: bool = False  # the same text is stored already
    refused: bool = False  # a DELETE that is not applied (no --allow-delete)
    by_llm: bool = False  # made (or downgraded) from the model's reply
    matched: dict[str, str] | None = None  # {id, text} of the memory decided against, for the user
    related: str | None = None  # ADD: a close memory about another subject
    stale: bool = False  # SUPERSEDE: the fact is the older value (an older release): stored superseded by target
    also: tuple[str, ...] = ()  # SUPERSEDE: more memories the fact replaces ("ruff instead of flake8 and isort")
    newer: tuple[str, ...] = ()  # SUPERSEDE: other values of its subject: one said later makes the fact history


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
    matched: dict[str, str] | None = None  # the memory the decision was made against: {id, text}
    supersedes: str | None = None  # the id of the memory this new one replaces (kept, hidden)
    related: str | None = None  # a close memory about another subject, linked `related`

    def to_dict(self) -> dict[str, Any]:
        d = {
            "id": self.id, "text": self.text, "event": self.event, "verdict": self.verdict, "type": self.type,
            "tags": self.tags, "confidence": self.confidence, "source": self.source, "reasoning": self.reasoning,
        }
        for key in ("old_memory", "refused", "decided_by", "decision_confidence", "matched", "supersedes", "related"):
            value = getattr(self, key)
            if value is not None and value is not False:  # optional keys only when set
                d[key] = value
        return d
