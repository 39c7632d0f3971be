"""A changelog's release section into facts: each item states its release, and the release itself
is a fact.

A section ("## 0.28.0 (28th November, 2024)", its "### Removed" subsections and their bullets)
went through the sentence extractor as prose: "Released 2014-05-21" was dropped as too short, an
item lost the release it belongs to and the "Removed" heading that gives it its meaning
("Python 3.8 and 3.9 support." under "### Removed"). Here every item becomes one fact,
"Removed: Python 3.8 and 3.9 support. (version 26.1.0)", and the section adds "Version 26.1.0 was
released on 2026-06-06"; the version in parentheses is provenance (memcli.core.refs strips it
before texts are compared), and the release statements of successive versions supersede one
another (memcli.rules.subjects.release_change), so the newest release is the current one.

Used by the add pipeline on the heuristic path for an input that is one release section (a
heading that names a version, then list items).
"""

from __future__ import annotations

import re

from memcli.core.lazy_re import lazy_compile

_HEADING_RE = lazy_compile(
    r"^\s*(?:#{1,4}\s*)?\[?(?:version\s+|release\s+|v(?=\d))?(\d+(?:\.\d+)+[\w.\-+]*|unreleased)\]?"
    r"(?:\([^)]*\))?\s*(.*)$", re.I)
# a heading that names the product before its version: "## Gin v1.12.0", "## Gin 1.2.0", "## Gin 1.0rc1
# (May 22, 2015)" (gin-gonic/gin): a "v", three numbers or a date after it, and nothing else, so that a
# note's "## Python 3.12" or "## Python 3.12 support" is no release
_NAMED_HEADING_RE = lazy_compile(r"^\s*#{1,4}\s*[A-Za-z][\w.\-]*\s+"
                                 r"(?:v(\d+(?:\.\d+)+[\w.\-+]*)|(\d+\.\d+\.\d+[\w.\-+]*)"
                                 r"|(\d+(?:\.\d+)+[\w.\-+]*)(?=\s*(?:\(|[-\u2013\u2014:]?\s*\d{4}-\d{2}-\d{2})))"
                                 r"(\s*(?:\(.*\)|[-\u2013\u2014:]?\s*\d{4}-\d{2}-\d{2}.*))?\s*$")
_UNRELEASED_RE = lazy_compile(r"^\W*(?:unreleased|not (?:yet )?released|in development|tbd|tba)\W*$|\(unreleased\)",
                              re.I | re.M)
_UNDERLINE_RE = lazy_compile(r"^\s*[-=~^]{3,}\s*$")
_DATE_RE = lazy_compile(r"(\d{4}-\d{2}-\d{2})")
_ITEM_RE = lazy_compile(r"^(\s*)[-*+]\s+(.*)$")
_RST_MARKUP_RE = lazy_compile(r"^\.\.(?:\s|$)")
_SUBHEADING_RE = lazy_compile(r"^\s*#{2,6}\s+(.+?)\s*$")
_CATEGORIES = frozenset("added changed deprecated removed fixed security breaking changes features bug fixes "
                        "deprecations removals improved documentation".split())
_LABEL_RE = lazy_compile(r"^\*{0,2}([A-Za-z][\w -]{0,30}?)\*{0,2}:\*{0,2}\s*$")
_NOISE_RE = lazy_compile(r"^\s*(?:\[#\d+\]\([^)]*\)[\s,]*)+$|^\s*\*?prs and issues:?\*?|^\s*--\s*by\s+"
                         r"|^\s*\{(?:issue|pr)\}`", re.I)
_ROLE_RE = lazy_compile(r"\{(?:func|class|meth|exc|attr|data|mod|obj|pypi|doc|ref)\}`([^`]*)`")
_REF_ROLE_RE = lazy_compile(r"\s*\{(?:issue|pr|gh|user)\}`[^`]*`")
#: towncrier's byline, wrapped or not: "... normalization -- by {user}`sirosen`." (jazzband/pip-tools)
_BYLINE_RE = lazy_compile(r"\s*--\s*by\s+\{user\}`[^`]*`(?:\s*(?:,|and)\s*\{user\}`[^`]*`)*")


def _heading(text: str) -> tuple[str | None, str, str] | None:
    """(version or None for "Unreleased", the rest of the heading line, the product the heading names
    or "") of a section, else None."""
    lines = [line for line in text.strip().splitlines()]
    if not lines:
        return None
    m = _HEADING_RE.match(lines[0])
    named = None if m else _NAMED_HEADING_RE.match(lines[0])
    if named:
        product = lines[0].strip().lstrip("#").split()[0]
        return named.group(1) or named.group(2) or named.group(3), named.group(4) or "", product
    if not m or not (lines[0].lstrip().startswith("#") or (len(lines) > 1 and _UNDERLINE_RE.match(lines[1]))):
        return None
    version = None if m.group(1).lower() == "unreleased" else m.group(1)
    return version, m.group(2), ""


def is_section(text: str) -> bool:
    """One release section: a heading naming a version (or "Unreleased") and at least one list item."""
    return _heading(text) is not None and any(_ITEM_RE.match(line) for line in text.splitlines())


def section_facts(text: str, created: str | None = None) -> list[str]:
    """The facts of one release section: its release statement, then one text per item."""
    head = _heading(text)
    if head is None:
        return []
    version, rest, product = head
    top = "\n".join(text.splitlines()[:4])
    date_m = _DATE_RE.search(rest) or _DATE_RE.search(top)
    date = date_m.group(1) if date_m else (created[:10] if created else None)
    out: list[str] = []
    if version and (_UNRELEASED_RE.search(rest) or (not date_m and _UNRELEASED_RE.search(top))):
        # "## Version 8.5.0" then "Unreleased" (pallets' style): the version in development, not a release
        out.append(f"Version {version} is in development (unreleased)")
    elif version:
        # the product the heading names stays in the statement: "What is the latest Gin release?" finds it
        said = f"{product} version {version}" if product else f"Version {version}"
        out.append(f"{said} was released on {date}" if date else f"{said} was released")
    category: str | None = None
    label: str | None = None  # a top-level item that only names a category ("* remove:")
    indent = 0  # its items' indent
    item: list[str] | None = None

    def close() -> None:
        if item:
            body = " ".join(" ".join(item).split()).replace(" ; ", "; ").replace(".;", ";").replace(",;", ";")
            body = _ROLE_RE.sub(r"`\1`", _REF_ROLE_RE.sub("", _BYLINE_RE.sub("", body)))
            body = re.sub(r"\s+\(\s*[,;]?\s*\)", "", body).strip()  # "(...)" emptied of its references
            if body:
                said = f"{category}: {body}" if category else body
                out.append(f"{said} (version {version})" if version else said)

    for line in text.splitlines()[1:]:
        if _RST_MARKUP_RE.match(line):  # ".. _v4_0a1:" (the next section's label), ".. note::": no item's text
            close()
            item = None
            continue
        sub = _SUBHEADING_RE.match(line)
        if sub:
            close()
            item = None
            name = sub.group(1).strip("*: ")
            category = name if name.lower() in _CATEGORIES else None
            label = None
            continue
        m = _ITEM_RE.match(line)
        if m and len(m.group(1)) <= 1:
            close()
            label_m = _LABEL_RE.match(m.group(2))
            # "* remove:" over its own items (expressjs/express): a category in list form, each item its own
            label, item = (label_m.group(1), None) if label_m else (None, [m.group(2)])
            continue
        if m and label and (item is None or len(m.group(1)) <= indent):
            close()
            item, indent = [f"{label}: {m.group(2)}"], len(m.group(1))
            continue
        if item is not None and line.strip() and not _NOISE_RE.match(line):
            nested = _ITEM_RE.match(line)  # a sub-item belongs to its item: "...; Support Bash >= 4.4"
            item.append(f"; {nested.group(2).strip()}" if nested else line.strip())
        elif item is not None and not line.strip():
            continue
    close()
    return out
