"""The decider seam: what `add` asks to turn (fact, close memories) into ADD / NONE / UPDATE /
SUPERSEDE / DELETE.

A decider gets the facts that need deciding (exact repeats and verbatim adds are settled before)
with their live neighbours, closest first, and returns one `Decision` per fact plus notes for the
user. The two built-ins, `heuristic` (the rules of `memcli.rules.decide`, no model) and `llm` (one
request for the facts with a close memory, its answers checked against the same rules), are found
the way an extension is: the `memcli.deciders` entry-point group (pyproject.toml), so a plug-in
decider replaces a built-in by registering a name and setting `decider = "name"` in config.toml.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Protocol

from memcli.core.config import Config
from memcli.core.decision import Decision
from memcli.core.errors import ConfigError
from memcli.core.facts import Fact
from memcli.rules.decide import change_related, check_llm, heuristic_decision, llm_supersedes, matched
from memcli.services.llm.checks import states_change
from memcli.services.redact import redact

if TYPE_CHECKING:  # types only: search and list never import the LLM client (litellm)
    from memcli.services.llm.client import LLM

__all__ = ["Decider", "HeuristicDecider", "LLMDecider", "load_decider"]

GROUP = "memcli.deciders"
NEIGHBOUR_FLOOR = 0.45  # below this a memory is not related enough to be worth showing the model


class Decider(Protocol):
    """Decides each fact against its neighbours (dicts with `id`, `text`, `similarity`)."""

    def decide(self, facts: Sequence[Fact], neighbours: Sequence[list[dict[str, Any]]], threshold: float, *,
               headlines: bool = False) -> tuple[list[Decision], list[str]]: ...


@dataclass
class HeuristicDecider:
    """The rules alone: the closest neighbour with the same subject decides; none, ADD."""

    def decide(self, facts: Sequence[Fact], neighbours: Sequence[list[dict[str, Any]]], threshold: float, *,
               headlines: bool = False) -> tuple[list[Decision], list[str]]:
        return [heuristic_decision(f.text, nb, threshold, headlines=headlines)
                for f, nb in zip(facts, neighbours)], []


def shown(fact: str, neighbour: dict[str, Any]) -> bool:
    """Whether the model is shown this neighbour of `fact` in the decide request."""
    return neighbour["similarity"] >= NEIGHBOUR_FLOOR or change_related(fact, str(neighbour.get("text") or ""))


@dataclass
class LLMDecider:
    """The heuristic decision first, then ONE request for the facts with a close memory (cosine >=
    `bar`: a correction such as PG16 -> PG17 scores well below 0.8) or a stated change and a loosely
    related memory; what the model says is checked against the rules (another subject is ADD, an
    UPDATE that gives a new value is a supersede). A fact the model leaves undecided keeps the rules'."""

    client: LLM
    bar: float = 0.6
    scrub: Callable[[str], str] | None = None  # redaction of what is sent and what comes back
    log: list[str] = field(default_factory=list)

    def decide(self, facts: Sequence[Fact], neighbours: Sequence[list[dict[str, Any]]], threshold: float, *,
               headlines: bool = False) -> tuple[list[Decision], list[str]]:
        out, notes = HeuristicDecider().decide(facts, neighbours, threshold, headlines=headlines)
        asks = [i for i, nb in enumerate(neighbours) if nb and (
            nb[0]["similarity"] >= self.bar or (states_change(facts[i].text) and any(shown(facts[i].text, n)
                                                                                   for n in nb)))]
        if not asks:
            return out, notes
        from memcli.services.llm.client import LLMFormatError

        scrub = self.scrub or (lambda t: t)
        sent = [[{**n, "text": scrub(n["text"])} for n in neighbours[i] if shown(facts[i].text, n)][:3]
                for i in asks]
        try:
            decisions, invalid = self.client.decide([facts[i] for i in asks], sent)
        except LLMFormatError as e:
            notes.append(f"LLM decisions unusable ({e}); used the heuristic decisions")
            self.log.append(str(e))
            return out, notes
        decided: set[int] = set()
        for dec in decisions:
            if not 0 <= dec.fact < len(asks):
                continue
            i = asks[dec.fact]
            decided.add(dec.fact)
            out[i] = self._checked(dec, facts[i].text, neighbours[i], scrub)
        self.log.extend(invalid)
        for j, i in enumerate(asks):  # undecided or invalid: the rules' decision, saying why
            if j in decided or not invalid:
                continue
            why = [r for r in invalid if re.search(rf"\bfact {j}\b", r)] or ["no valid decision returned"]
            out[i].reasoning = f"LLM decision rejected ({'; '.join(why)}); heuristic: {out[i].reasoning}"
        return out, notes

    @staticmethod
    def _checked(dec: Any, fact: str, neighbours: list[dict[str, Any]], scrub: Callable[[str], str]) -> Decision:
        """The model's decision, held to the rules against the memory it names."""
        text = scrub(dec.text) if dec.text else dec.text
        out = Decision(dec.event, dec.target, text or fact, dec.reasoning or None, dec.confidence, by_llm=True)
        target = next((n for n in neighbours if n["id"] == dec.target), None)
        if target is None:
            return out
        out.matched = named = matched(target["id"], target["text"])
        downgrade = check_llm(dec.event, target["text"], fact, target["similarity"])
        if downgrade:
            return Decision("ADD", reasoning=f"LLM {dec.event} downgraded to ADD: {downgrade}",
                            confidence=dec.confidence, by_llm=True, matched=named)
        change = llm_supersedes(dec.event, target["text"], fact, target["similarity"])
        if change:  # a new value: the fact becomes the current memory, the old one is kept
            why = f"LLM {dec.event} is a new value, so it supersedes: {change}"
            return Decision("SUPERSEDE", target["id"], fact, why, dec.confidence, by_llm=True, matched=named)
        return out


def heuristic_decider(*, client: LLM | None, config: Config) -> Decider:
    """The `heuristic` entry point: the decision rules alone."""
    return HeuristicDecider()


def llm_decider(*, client: LLM | None, config: Config) -> Decider:
    """The `llm` entry point: the rules, then one request to the model, its answers held to the
    rules (what is sent and what comes back is scrubbed unless `config.redact` is off); with no
    model, the rules alone."""
    if client is None:
        return HeuristicDecider()
    return LLMDecider(client, bar=config.llm_decide_threshold, scrub=_scrub if config.redact else None)


def _scrub(text: str) -> str:
    return redact(text)[0]


#: the built-ins when memcli runs from a source tree that was never installed (no entry points)
BUILTIN: dict[str, Callable[..., Decider]] = {"heuristic": heuristic_decider, "llm": llm_decider}


def load_decider(name: str) -> Callable[..., Decider]:
    """The factory registered under `name` in the `memcli.deciders` entry points (the built-ins are
    registered there too); the built-in of that name when memcli runs from a source tree that was
    never installed."""
    for ep in entry_points(group=GROUP):
        if ep.name == name:
            return ep.load()
    if name in BUILTIN:
        return BUILTIN[name]
    known = sorted({*BUILTIN, *(ep.name for ep in entry_points(group=GROUP))})
    raise ConfigError(f"decider {name!r} is not installed (known: {', '.join(known)})")
