"""Regular expressions compiled when first used, not when their module is imported.

The rule modules define about ninety patterns and a command uses a handful: compiling them all
was most of what importing those modules cost (~25 ms CPU). `lazy_compile(pattern, flags)` stands
where `re.compile` stood; once compiled, the pattern's bound methods are plain attributes, so a
hot loop pays no indirection. Two threads compiling at once both get `re`'s cached pattern.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["LazyPattern", "lazy_compile"]

_METHODS = ("search", "match", "fullmatch", "sub", "subn", "split", "findall", "finditer", "scanner")


class LazyPattern:
    """A `re.Pattern` compiled on first use; `pattern` is readable without compiling (a pattern
    built from another's text stays lazy), any other attribute compiles it."""

    __slots__ = ("pattern", "_flags", "_compiled", *_METHODS)

    # set by `compiled()`; annotated for type checkers
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
        """Whether the pattern has been compiled yet (the import-cost test checks it)."""
        return self._compiled is not None

    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            compiled = re.compile(self.pattern, self._flags)
            for name in _METHODS:
                setattr(self, name, getattr(compiled, name))
            self._compiled = compiled
        return self._compiled

    def __getattr__(self, name: str) -> Any:
        # reached only for what is not set yet: a method before first use, or a data attribute
        # (private names are not the pattern's: no recursion)
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.compiled(), name)

    def __repr__(self) -> str:
        state = "compiled" if self._compiled is not None else "not compiled yet"
        return f"lazy_compile({self.pattern!r}, {self._flags!r})  # {state}"


def lazy_compile(pattern: str, flags: int | re.RegexFlag = 0) -> LazyPattern:
    """`re.compile(pattern, flags)`, done when the pattern is first used."""
    return LazyPattern(pattern, flags)
