"""The decision vocabulary: what to do with one new fact, and what then happened to it.

A `Decision` is made either by the rules (`memcli.rules.decide.heuristic_decision`, reading
`memcli.rules.relate`)
or by the model (`llm.LLM.decide`); ingest takes either kind through the same checks and plans
the same changes from it, so both deciders speak this one type. An `Event` is the outcome the
user sees (`add --json` prints `Event.to_dict()`), one per extracted fact.

Here, below both deciders and ingest, so that the LLM client does not import the planning layer
and the planning layer does not import the LLM client to name a type.
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
        if self.old_memory is not None:
            d["old_memory"] = self.old_memory
        if self.refused:
            d["refused"] = True
        if self.decided_by is not None:
            d["decided_by"] = self.decided_by
        if self.decision_confidence is not None:
            d["decision_confidence"] = self.decision_confidence
        if self.matched is not None:
            d["matched"] = self.matched
        if self.supersedes is not None:
            d["supersedes"] = self.supersedes
        if self.related is not None:
            d["related"] = self.related
        return d
