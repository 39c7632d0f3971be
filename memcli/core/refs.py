"""Reference numbers and links in developer text: provenance, never a value.

`#382`, `GH-12`, "closes #382", PR/issue/commit links and bare shas say where a statement came from;
compared as words they look like changed values ("#381 -> #382"). `strip_refs` removes them before
texts are compared (the stored text keeps them); in core because extraction and the rules read it.
"""

from __future__ import annotations

import functools
import re

from memcli.core.lazy_re import lazy_compile

_REF_WORDS = (r"(?:(?:closes|closed|close|fixes|fixed|fix|resolves|resolved|resolve|refs?|see|issue|pr|pull"
             r"|pull request)\s*:?\s*)")
_REF_RE = lazy_compile(
    # a Markdown link labelled by its reference: "[BUG #418](https://...issues/418): " (BurntSushi/ripgrep)
    r"\[[^\]\n]{0,40}?(?:#|gh-)\d+\]\([^)\s]*\)(?:\s*[,:])?"
    r"|https?://\S+/(?:pull|issues|commit|compare|pulls)/[\w.\-]+\S*"  # github/gitlab links
    r"|\(\s*" + _REF_WORDS + r"?(?:[\w.-]+/[\w.-]+)?(?:#|gh-)\d+(?:\s*[,;&]\s*(?:and\s+)?(?:#"
    r"|gh-)\d+)*\s*\)"  # (#1, #2)
    r"|\b" + _REF_WORDS + r"(?:[\w.-]+/[\w.-]+)?(?:#|gh-)\d+(?:\s*(?:,|and|&)\s*(?:#|gh-)\d+)*"  # closes #382
    r"|(?<![\w/])(?:[\w.-]+/[\w.-]+)?#\d+\b"  # #123, owner/repo#123
    r"|\bgh-\d+\b"  # GH-12
    r"|:(?:pr|issue|issues|ghsa|cve|user|gh):`[^`\n]{1,60}`"  # Sphinx roles: ":pr:`5496`" (pallets/flask's changelog)
    r"|\(version \d+(?:\.\d+)+[\w.\-+]*\)"  # the release a changelog item belongs to (memcli.services.changelog)
    # a commit sha, but for the values of a bump ("Bump pypa/gh-action-pypi-publish from 68e62d48... to 81e9d935...")
    r"|(?<!from )(?<!to )\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b",
    re.I,
)
#: the release suffix memcli.services.changelog gives each item: "... (version 5.1.0)"
RELEASE_SUFFIX_RE = lazy_compile(r"\(version (\d+(?:\.\d+)+[\w.\-+]*)\)\s*$")
_SPACES_RE = lazy_compile(r"[ \t]{2,}")
_DANGLING_RE = lazy_compile(r"^[ \t]*[,;:][ \t]*|\s*(?:[,;:-]|\(\s*\))\s*$|\s+(?=[,.;:])", re.M)


@functools.lru_cache(maxsize=65536)
def strip_refs(text: str) -> str:
    """`text` without its reference numbers and links: what it says, not where it came from."""
    if not re.search(r"#|gh-|https?://|[0-9a-f]{7}|\(version |:`", text, re.I):
        return text
    out = _REF_RE.sub(" ", text)
    out = _DANGLING_RE.sub("", out)
    return _SPACES_RE.sub(" ", out).strip()


_NUMBER_RE = lazy_compile(r"(?<![\w/&])#(\d+)\b|:(?:pr|issue|issues):`(\d+)`")
#: a reference the sentence is about ("regression test for #1765", "Fix #4653 If guard explosion"),
#: not its provenance ("(#4530)", "closes #382")
_NAMED_RE = lazy_compile(r"(?<!\()\b(?:for|of|about|regarding)\s+#(\d+)\b|^\W*\w+\s+#(\d+)\s+[A-Za-z]", re.I)


def cited_refs(text: str) -> set[str]:
    """The `#N` reference numbers `text` cites, whatever their role."""
    return {a or b for a, b in _NUMBER_RE.findall(text)}


#: a reference cited as the issue worked on ("refs #450", "closes #382", ":issue:`440`"): an issue is
#: worked on by several commits, a pull request ("(#4530)", ":pr:`5496`") is one change
_ISSUE_RE = lazy_compile(r"\b(?:closes|closed|close|fixes|fixed|fix|resolves|resolved|resolve|refs?|see|issues?)"
                         r"\s*:?\s*#\d+(?:\s*(?:,|and|&)\s*#\d+)*|:issues?:`\d+`", re.I)


def issue_refs(text: str) -> set[str]:
    """The `#N` numbers `text` cites as the issue worked on, not as its pull request."""
    return {n for m in _ISSUE_RE.finditer(text) for n in re.findall(r"\d+", m.group())}


def named_refs(text: str) -> set[str]:
    """The `#N` numbers that are what `text` is about: its subject, not its provenance."""
    return {g for m in _NAMED_RE.finditer(text) for g in m.groups() if g}
