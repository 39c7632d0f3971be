"""Regular expressions compiled when first used, not when their module is imported.

Why: the rule modules (extract, decide, llm_checks) define about ninety patterns, and compiling
them all is most of what importing those modules costs (~25 ms CPU, ~100 ms under a profiler),
while a command uses a handful: consolidate needs `extract.normalise` and
`llm_checks.without_superseded_code`, not the extraction and chat rules those modules also hold.
`lazy_compile(pattern, flags)` stands where `re.compile(pattern, flags)` stood; the call sites stay
as they are (`_X_RE.search(text)`). The first method call compiles through `re.compile` itself, so
the pattern and what it matches are exactly the same; after that the compiled pattern's bound
methods are plain attributes of the object, so a hot loop pays no extra indirection.

Two threads may use a pattern for the first time together (a library user's threads, the MCP
server's): both compile, `re`'s own cache hands both the same compiled pattern, and either
assignment is right.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["LazyPattern", "lazy_compile"]

#: the methods of `re.Pattern` a caller may use; each becomes an attribute once compiled
_METHODS = ("search", "match", "fullmatch", "sub", "subn", "split", "findall", "finditer", "scanner")


class LazyPattern:
    """A `re.Pattern` compiled on first use. `pattern` is readable without compiling (a pattern
    built from another one's text, e.g. `lazy_compile(f"({_TOKEN_RE.pattern})...")`, stays lazy);
    any other attribute (`flags`, `groups`, `groupindex`) compiles it."""

    __slots__ = ("pattern", "_flags", "_compiled", *_METHODS)

    # The compiled pattern's methods, set by `compiled()`; annotated for readers and type checkers.
    search: Callable[..., re.Match[str] | None]
    match: Callable[..., re.Match[str] | None]
    fullmatch: Callable[..., re.Match[str] | None]
    sub: Callable[..., str]
    subn: Callable[..., tuple[str, int]]
    split: Callable[..., list[Any]]
    findall: Callable[..., list[Any]]
    finditer: Callable[..., Iterator[re.Match[str]]]
    scanner: Callable[..., Any]

    def __init__(self, pattern: str, flags: int | re.RegexFlag = 0) -> None:
        self.pattern = pattern
        self._flags = flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def is_compiled(self) -> bool:
        """Whether the pattern has been compiled yet (what the import-cost test checks)."""
        return self._compiled is not None

    def compiled(self) -> re.Pattern[str]:
        """The compiled pattern, compiling it now if this is the first use."""
        if self._compiled is None:
            compiled = re.compile(self.pattern, self._flags)
            for name in _METHODS:
                setattr(self, name, getattr(compiled, name))
            self._compiled = compiled
        return self._compiled

    def __getattr__(self, name: str) -> Any:
        # Only reached for an attribute not set yet: a method before the first use, or one of the
        # compiled pattern's data attributes. Private names are not the pattern's: no recursion.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.compiled(), name)

    def __repr__(self) -> str:
        state = "compiled" if self._compiled is not None else "not compiled yet"
        return f"lazy_compile({self.pattern!r}, {self._flags!r})  # {state}"


def lazy_compile(pattern: str, flags: int | re.RegexFlag = 0) -> LazyPattern:
    """`re.compile(pattern, flags)`, done when the pattern is first used."""
    return LazyPattern(pattern, flags)
