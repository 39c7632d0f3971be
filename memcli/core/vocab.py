"""The closed vocabularies shared by every layer: memory types, export formats, sort keys.

Validation, the CLI's help and choices, shell completion and the LLM prompts all read these
enums, so adding a value is a change in one place. They are `str` enums: a member compares equal
to its value and serialises as it (`MemoryType.SEMANTIC == "semantic"`).
"""

from __future__ import annotations

from enum import Enum

# The version of the JSON shapes memcli prints and exports (README "JSON output"). Bump when a key
# changes meaning or disappears; adding a key is not a new version.
JSON_SCHEMA = 1


class _StrEnum(str, Enum):
    def __str__(self) -> str:  # "semantic", not "MemoryType.SEMANTIC" (Python 3.10's str/Enum mix)
        return str(self.value)

    @classmethod
    def values(cls) -> tuple[str, ...]:
        """The spellings, in declaration order (for help texts, completion, validation)."""
        return tuple(str(m.value) for m in cls)

    @classmethod
    def choices(cls) -> str:
        """`a | b | c`: how a help text lists the values."""
        return " | ".join(cls.values())


class MemoryType(_StrEnum):
    """What kind of knowledge a memory holds."""

    SEMANTIC = "semantic"  # a fact, preference or convention
    EPISODIC = "episodic"  # something that happened, at a time
    PROCEDURAL = "procedural"  # how to do something: steps, commands


class ExportFormat(_StrEnum):
    """What `export` writes (json and jsonl round-trip through `import`)."""

    JSON = "json"
    JSONL = "jsonl"
    MD = "md"
    CSV = "csv"


class SortKey(_StrEnum):
    """Catalog columns a listing can be sorted by."""

    CREATED = "created"
    UPDATED = "updated"
    CONFIDENCE = "confidence"
    ID = "id"
    TYPE = "type"
