"""The output type shared by every extractor (heuristic or LLM): candidate facts, before dedup."""

from __future__ import annotations

from dataclasses import dataclass, field

from memcli.core.vocab import MemoryType

MEMORY_TYPES = MemoryType.values()


@dataclass
class Fact:
    """One candidate memory; `flags` are the extractor's hints (``hasCodeBlock``, ``hasCommand``)."""

    text: str
    type: str = "semantic"
    tags: list[str] = field(default_factory=list)
    confidence: float = 0.8
    code_pattern: str | None = None
    flags: dict[str, bool] = field(default_factory=dict)


@dataclass
class Extraction:
    """What an extractor made of one input: `skipped` counts pieces not worth keeping, `invalid`
    describes items that failed validation (LLM path), `method` names the extractor ("heuristic",
    "llm", "raw") and `note` any fallback shown to the user."""

    facts: list[Fact]
    skipped: int = 0
    invalid: list[str] = field(default_factory=list)
    method: str = "heuristic"
    note: str | None = None
    skipped_pieces: list[dict[str, str]] = field(default_factory=list)  # {text, rule}: what was skipped, why
