"""Plain-text helpers every layer may use: terminal cell widths, clipping a text to a width at a
word, the shortest unique id prefix, snake_case keys. Pure functions of strings (no terminal, no I/O):
the presentation layer decides widths, the layers below only clip what they hand it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from memcli.core.lazy_re import lazy_compile

#: a Python version named by its number alone at the start of a subject, as Python projects write
#: it: "Drop 3.9", "Add 3.15 to CI", "Use 3.13 in dev", "Test on 2.7" (read as Python by the
#: subject rules and tagged #python, so "Which Python ..." finds it)
PYTHON_VERSION_ALONE_RE = lazy_compile(r"^\W*(?:drop|add|use|support|require|test|run|build|remove|deprecate)\w*"
                                      r"(?:\s+(?:support\s+for|on|with|in))?\s+(?:py(?:thon)?\s*)?(?:2\.7|3\.\d{1,2})\b",
                                      re.I)

#: what a bump names in place of a number ("to the latest version", "to patched versions"), for the
#: rules (memcli.rules.subjects) and for splitting commits (memcli.services.commits) alike
NO_NUMBER_WORDS = r"(?:latest|newest|newer|patched|fixed|secure|current)"
MIN_ID_CHARS = 8  # the shortest id prefix shown, even when fewer characters would be unique

_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")


def snake(key: str) -> str:
    return _CAMEL.sub(r"_\1", key).lower()


def cell_width(text: str) -> int:
    """Columns a string takes (wide East Asian characters and most emoji take two)."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def head(text: str, width: int) -> str:
    """The longest start of `text` that fits in `width` columns."""
    used = 0
    for n, c in enumerate(text):
        used += cell_width(c)
        if used > width:
            return text[:n]
    return text


def clip(text: str, width: int) -> str:
    """`text` on one line in at most `width` columns, cut at a word boundary with `…`."""
    one = " ".join(text.split())
    if cell_width(one) <= width:
        return one
    if width <= 1:
        return "…"[:width]
    cut = head(one, width - 1)
    space = cut.rfind(" ")
    if space >= width // 2:  # end at a word boundary unless that throws away half the room
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "…"


def shortest_prefix(mid: str, neighbours: Iterable[str], minimum: int = MIN_ID_CHARS) -> str:
    """The shortest prefix of `mid` that no neighbour shares (case-insensitive, as id resolution
    is), at least `minimum` characters: git's abbreviated hashes. The neighbours that matter are
    the ids just before and after `mid` in sorted order."""
    u = mid.upper()
    need = minimum
    for other in neighbours:
        o = other.upper()
        if o == u:
            continue
        common = 0
        for a, b in zip(u, o):
            if a != b:
                break
            common += 1
        need = max(need, common + 1)
    return mid[: min(need, len(mid))]


_HUMP = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")


def camel_parts(word: str) -> list[str]:
    """The words of a camel-case name, else []: a question names `IterationSpeedColumn`, the commit
    that removed it says "revert iteration speed column" (Textualize/rich), and the other way round;
    both the index and the query terms add them. Three words at least: "GitHub", "JavaScript" and
    "FastAPI" are brands, and "git" or "hub" would match what they do not say."""
    if not re.search(r"[a-z][A-Z]", word):
        return []
    parts = _HUMP.findall(word)
    return parts if len(parts) > 2 else []
