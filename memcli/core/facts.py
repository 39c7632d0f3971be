"""The output type shared by every extractor (heuristic or LLM): candidate facts, before dedup."""

from __future__ import annotations

from dataclasses import dataclass, field

from memcli.core.vocab import MemoryType

MEMORY_TYPES = MemoryType.values()


@dataclass
class Fact:
    """One candidate memory produced from input text.

    `flags` carries boolean hints the extractor noticed (``hasCodeBlock``, ``hasCommand``); they
    are stored in the front matter only when true.
    """

    text: str
    type: str = "semantic"
    tags: list[str] = field(default_factory=list)
    confidence: float = 0.8
    code_pattern: str | None = None
    flags: dict[str, bool] = field(default_factory=dict)


@dataclass
class Extraction:
    """What an extractor made of one input.

    `skipped` counts pieces judged not worth keeping (questions, greetings, filler, too short);
    `invalid` holds items an extractor produced but that failed validation (LLM path), each a
    short description; `method` says which extractor ran ("heuristic", "llm", "raw") and `note`
    any fallback explanation shown to the user.
    """

    facts: list[Fact]
    skipped: int = 0
    invalid: list[str] = field(default_factory=list)
    method: str = "heuristic"
    note: str | None = None
    skipped_pieces: list[dict[str, str]] = field(default_factory=list)  # {text, rule}: what was skipped, why
