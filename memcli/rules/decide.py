"""The decision rule, in one place: what to do with a new fact given the stored memories near it.

Every decider of memcli comes here. `add` (one input, `add --batch`, the git hook, imports) asks
`heuristic_decision`; the LLM's decisions are checked against the same rules (`check_llm`,
`llm_supersedes`, from memcli.rules.relate); which neighbours a model is shown for a stated change
is `change_related`; `merge --auto` and `consolidate` ask `texts_mergeable` (curate's `_opposed`).
The rules themselves are `memcli.rules.relate.relate` (subject, stated change, value change,
novelty) reading `memcli.rules.subjects` (references are provenance; options, code names and
packages are the subject). Ordering by time (an older-dated fact never replaces a newer memory)
is applied where the decision is planned (memcli/ops/add.py `_plan_one`), as it needs both dates.
"""

from __future__ import annotations

import re
from typing import Any

from memcli.core.decision import Decision
from memcli.core.lazy_re import lazy_compile
from memcli.core.refs import cited_refs
from memcli.rules.relate import (
    DISTINCT,
    REFINES,
    SAME,
    STOPWORDS,
    SUPERSEDES,
    Relation,
    another_commit,
    check_llm,
    llm_supersedes,
    relate,
    same_change,
    switched_from,
    texts_mergeable,
)
from memcli.rules.subjects import headline, older_release, subject_keys

__all__ = ["bears_on", "change_related", "check_llm", "heuristic_decision", "llm_supersedes", "matched",
           "texts_mergeable"]

RELATED_SIMILARITY = 0.75  # an added memory this close to another (about another subject) links to it


def matched(mid: str, text: str) -> dict[str, str]:
    """The memory a decision names: its id and a short text, for the user."""
    text = " ".join(text.split())
    return {"id": mid, "text": text if len(text) <= 80 else text[:79] + "…"}


def heuristic_decision(text: str, neighbours: list[dict[str, Any]], threshold: float, *,
                       headlines: bool = False) -> Decision:
    """NONE / UPDATE / SUPERSEDE against the closest neighbour with the same subject, else ADD.
    `headlines`: commit subjects and changelog items: compare first lines only (a commit's subject
    states the change; its body the why), and strictly (`relate`'s `strict`)."""
    first = None
    # the memory of the same change (a commit, then the changelog item citing its pull request) is
    # asked first: closer neighbours (the previous release's item) would otherwise take the fact
    if headlines and cited_refs(text):
        neighbours = sorted(neighbours, key=lambda n: not same_change(headline(n["text"]), headline(text)))
    for n in neighbours:
        old, new = (headline(n["text"]), headline(text)) if headlines else (n["text"], text)
        rel = relate(old, new, float(n["similarity"]), threshold=threshold, strict=headlines)
        if headlines and rel.kind in (SAME, REFINES) and not same_change(old, new):
            other = another_commit(n["text"], text)
            rel = Relation(DISTINCT, other) if other else rel
        first = first or (n, rel)
        if rel.kind == DISTINCT:
            continue
        sim = float(n["similarity"])
        named = matched(n["id"], n["text"])
        if rel.kind == SAME:
            return Decision("NONE", n["id"], similarity=sim, matched=named,
                             reasoning=f"already known: {rel.reason}")
        if rel.kind == REFINES:
            return Decision("UPDATE", n["id"], text, similarity=sim, matched=named,
                             reasoning=f"same subject, {rel.reason}")
        stale = older_release(old, new)
        return Decision("SUPERSEDE", n["id"], text, similarity=sim, matched=named, reasoning=rel.reason,
                        stale=stale, also=() if stale else _also_replaced(text, neighbours, n, headlines),
                        newer=() if stale or not headlines else _other_values(text, neighbours, n))
    if first is None:
        return Decision("ADD", reasoning="no similar memory")
    n, rel = first
    related = n["id"] if float(n["similarity"]) >= RELATED_SIMILARITY else None
    return Decision("ADD", reasoning=f"new fact ({rel.reason})", similarity=float(n["similarity"]),
                     matched=matched(n["id"], n["text"]), related=related)


def _also_replaced(text: str, neighbours: list[dict[str, Any]], first: dict[str, Any],
                   headlines: bool) -> tuple[str, ...]:
    """The other neighbours a stated change replaces too: "Use ruff instead of flake8, autoflake and
    isort" ends the isort pin and the flake8 plugins' pins alike. Changes stated outright (a
    switch, a removal, a revert) reach past the first neighbour, and so does a new version of one
    package: every other live version of that package is older too (two bumps of rich listed in
    one release section of fastapi/typer both stayed current, and the next bump ended only one)."""
    out = []
    # (whatever replaced the first: "ci: support Go 1.25" -> "... Go version support to 1.25+" is a
    # word's change, and the floor "bump minimum Go version to 1.24" a version of Go, gin-gonic/gin)
    key = subject_keys(headline(text))
    # the neighbours before `first` were DISTINCT in heuristic_decision's loop, and a stated change
    # is read before any threshold: only those after it are asked again
    for n in neighbours[neighbours.index(first) + 1:]:
        old, new = (headline(n["text"]), headline(text)) if headlines else (n["text"], text)
        rel = relate(old, new, float(n["similarity"]), strict=headlines)
        if rel.kind == SUPERSEDES and rel.reason.startswith(("states a change:", "states a removal:", "reverts")):
            out.append(n["id"])
        elif len(key) == 1 and rel.kind == SUPERSEDES and rel.reason.startswith("new version:") \
                and subject_keys(old) == key:
            out.append(n["id"])
    return tuple(out)


def _other_values(text: str, neighbours: list[dict[str, Any]], first: dict[str, Any]) -> tuple[str, ...]:
    """The other neighbours that give the fact's one subject a new version: when one was said after
    the fact (a changelog replayed after the commits), the fact is history as soon as it is stored.
    jazzband/pip-tools 7.0.0's "Drop support for Python 3.7" ended 6.5.0's floor and stayed live beside
    the 2025 commit "Remove support for Python 3.8". Dates are the writer's to compare."""
    head = headline(text)
    key = subject_keys(head)
    if len(key) != 1:
        return ()
    out = []
    for n in neighbours:
        other = headline(n["text"])
        if n is first or subject_keys(other) != key:
            continue
        rel = relate(head, other, float(n["similarity"]), strict=True)
        if rel.kind == SUPERSEDES and rel.reason.startswith("new version:"):
            out.append(n["id"])
    return tuple(out)


# The value a change statement says is gone: "from Yarn to pnpm", "no longer on Jenkins",
# "instead of Celery", "replaced Nginx", "moved off Heroku", "Yarn -> pnpm".
_REPLACED_RE = lazy_compile(
    r"\bfrom\s+(?:the\s+)?([\w.+#-]+)\s+(?:to|with)\b|\bno\s+longer\s+(?:use\s+|uses\s+|on\s+|run\s+on\s+|in\s+)?"
    r"(?:the\s+)?([\w.+#-]+)|\binstead\s+of\s+(?:the\s+)?([\w.+#-]+)|\breplaced\s+(?:the\s+)?([\w.+#-]+)"
    r"|\bmoved\s+(?:off|away\s+from)\s+(?:the\s+)?([\w.+#-]+)|([\w.+#-]+)\s*(?:->|→)",
    re.I,
)
_STOP = STOPWORDS | {"use", "uses", "used", "using", "now"}


def change_related(fact: str, memory: str) -> bool:
    """Whether ``fact`` states a change away from a value ``memory`` holds ("We switched the web
    frontend from Yarn to pnpm" and "The web frontend uses Yarn 1"): such a pair is what decide
    is for, yet measured at cosine 0.44, below the bar that shows a memory to the model. The same
    reading as `relate`'s stated switch, plus single-word values ("no longer on Jenkins")."""
    if switched_from(memory, fact):
        return True
    olds = {g.lower() for m in _REPLACED_RE.finditer(fact) for g in m.groups() if g} - _STOP
    low = memory.lower()
    return any(re.search(rf"(?<![\w.-]){re.escape(o)}(?![\w-])", low) for o in olds)


def bears_on(memory: str, fact: str, similarity: float, *, headlines: bool = False) -> bool:
    """Whether a memory below the candidate floor is still one to decide `fact` against: the fact
    states a change away from a value the memory holds, or the rules read a stated change of it
    (a removal of its name, a revert, a newer release). `headlines`: also as `heuristic_decision`
    reads commits, first lines only ("Add sphinx<9 pin" and a pasted warning below it)."""
    if change_related(fact, memory) or relate(memory, fact, similarity).kind == SUPERSEDES:
        return True
    return headlines and relate(headline(memory), headline(fact), similarity, strict=True).kind == SUPERSEDES
