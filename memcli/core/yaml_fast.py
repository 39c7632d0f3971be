"""A fast writer for memcli's own front matter, byte for byte what `yaml.dump` (libyaml, the
options of `memory._dump`) writes, for the shapes a memory usually has: a mapping of scalars,
flow lists of strings (tags, origins), block lists of block mappings (history entries) and block
lists of flow mappings of strings (links), told apart by the value's shape, under any key, as
yaml.dump tells them. Anything else (an unknown key holding a mapping, a string with
a line break, a control character or a character beyond the BMP) returns None and goes through
`yaml.dump` as before.

Why: the representer, the resolver and the emitter cost ~130 µs per memory in Python; a merge
of 1,600 groups writes ~1,900 memories whose history holds every merged text. The rules below
are libyaml's (emitter.c: analyze_scalar, select_scalar_style, write_plain / write_single_quoted,
the flow-sequence and flow-mapping wraps); tests/test_yaml_fast.py checks the output against `yaml.dump` on
generated memories, odd strings included.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.nodes import ScalarNode

WIDTH = 100  # memory._dump's `width`
# libyaml's printable characters without its line breaks (NEL, LS, PS) and beyond the BMP
_SAFE = re.compile("[\x20-\x7e\u00a0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd]*\\Z")
_RESOLVER = yaml.resolver.Resolver()
_STR = "tag:yaml.org,2002:str"
_TS = "tag:yaml.org,2002:timestamp"
_RESOLVED_FIRST = set("yYnNtTfFoO-+0123456789.<~=")  # first characters of YAML 1.1's implicit types
_FIRST_BOTH = set("#,[]{}&*!|>'\"%@`")
_SPACE = re.compile(" ")


class _Decline(Exception):
    pass


_FLOW_CHARS = re.compile(r"[,?\[\]{}:]")


def _analyze(s: str) -> tuple[bool, bool]:
    """(flow plain allowed, block plain allowed) for a printable one-line string, as libyaml's
    yaml_emitter_analyze_scalar decides."""
    if not s:
        return False, True
    if s[0] == " " or s[-1] == " ":
        return False, False
    first = s[0]
    followed = len(s) == 1 or s[1] == " "
    if first in _FIRST_BOTH or s.startswith(("---", "...")) or (first == "-" and followed):
        return False, False
    comment = " #" in s  # a `#` after whitespace starts a comment, in either context
    flow_ind = first in "?:" or comment or _FLOW_CHARS.search(s, 1) is not None
    block_ind = (first in "?:" and followed) or comment or ": " in s or s.endswith(":")
    return not flow_ind, not block_ind


def _plain_is_str(s: str) -> bool:
    """Whether `s` written plain reads back as a string (not a number, bool, null, date...)."""
    if s and s[0] not in _RESOLVED_FIRST:
        return True
    return _RESOLVER.resolve(ScalarNode, s, (True, False)) == _STR


_CACHE: dict[str, tuple[str, str]] = {}  # short strings (ids, types, tags...): their styles
_CACHE_MAX = 50_000


def _styles(s: str) -> tuple[str, str]:
    """How libyaml writes `s` in flow and in block context: "p" plain, "q" single-quoted; raises
    _Decline for what this writer leaves to yaml.dump (double quotes: breaks, control chars)."""
    got = _CACHE.get(s)
    if got is not None:
        return got
    if not _SAFE.match(s):
        raise _Decline
    flow_plain, block_plain = _analyze(s)
    implicit = bool(s) and _plain_is_str(s)
    got = ("p" if flow_plain and implicit else "q", "p" if block_plain and implicit else "q")
    if len(s) < 80 and len(_CACHE) < _CACHE_MAX:
        _CACHE[s] = got
    return got


def _scalar(s: str, style: str, col: int, indent: int) -> str:
    """`s` written in `style` starting at column `col` (folded lines continue at `indent`)."""
    if style == "p":
        if col + len(s) <= WIDTH + 1 or " " not in s:  # no space past the width: no fold
            return s
        return _fold(s, col, indent, quoted=False)
    body = s.replace("'", "''")
    if col + 1 + len(body) <= WIDTH + 1 or " " not in s:
        return "'" + body + "'"
    return "'" + _fold(s, col + 1, indent, quoted=True) + "'"


def _fold(s: str, col: int, indent: int, *, quoted: bool) -> str:
    """libyaml's line folding of a plain or single-quoted scalar: at a single space (not one of a
    run, not the first or last character of a quoted one) once the column is past the width."""
    n = len(s)
    pieces: list[str] = []
    piece_start = prev = 0
    if not quoted or "'" not in s:
        # The column at a space is then its distance from the piece's start: jump to the first
        # space past the width instead of visiting every space (a merge writes ~3,000 long texts)
        while True:
            i = s.find(" ", piece_start + max(0, WIDTH - col + 1))
            while i != -1 and not (s[i - 1:i] != " " and s[i + 1:i + 2] != " "
                                   and (not quoted or (i != 0 and i != n - 1))):
                i = s.find(" ", i + 1)
            if i == -1:
                break
            pieces.append(s[piece_start:i])
            piece_start, col = i + 1, indent
        pieces.append(s[piece_start:])
        return ("\n" + " " * indent).join(pieces)
    for m in _SPACE.finditer(s):
        i = m.start()
        seg = s[prev:i]
        col += len(seg) + (seg.count("'") if quoted else 0)
        prev = i
        if (col > WIDTH and s[i - 1:i] != " " and s[i + 1:i + 2] != " "
                and (not quoted or (i != 0 and i != n - 1))):
            pieces.append(s[piece_start:i])
            piece_start = prev = i + 1
            col = indent
    pieces.append(s[piece_start:])
    if quoted:
        pieces = [p.replace("'", "''") for p in pieces]
    return ("\n" + " " * indent).join(pieces)


def _value(v: Any, col: int, indent: int, stamp: type) -> str:
    """A block mapping's value after `key:` (ending at column `col`), the key at `indent`:
    the text to append, leading space included."""
    t = type(v)
    if t is str:
        return " " + _scalar(v, _styles(v)[1], col + 1, indent + 2)
    if t is stamp:
        s = str(v)
        if _stamp_plain(s):
            return " " + s
        raise _Decline  # libyaml would quote or tag it
    if t is bool:
        return " true" if v else " false"
    if t is int:
        return f" {v}"
    if t is float:
        return " " + _float_text(v)
    if v is None:
        return " null"
    if t is list:
        return _flow_list(v, col, indent)
    raise _Decline


_STAMPS: set[str] = set()


def _stamp_plain(s: str) -> bool:
    """A timestamp written plain and untagged: it reads back as a timestamp, on one line."""
    if s in _STAMPS:
        return True
    ok = (" " not in s and _SAFE.match(s) is not None and _analyze(s)[1]
          and _RESOLVER.resolve(ScalarNode, s, (True, False)) == _TS)
    if ok and len(_STAMPS) < _CACHE_MAX:
        _STAMPS.add(s)
    return ok


def _separate(parts: list[str], i: int, col: int, inner: int) -> int:
    """Before flow item `i`: libyaml's comma after the previous item, then a line break (to
    column `inner`) once past the width, else a space. Returns the column after it."""
    if i:
        parts.append(",")
        col += 1
    if col > WIDTH:
        parts.append("\n" + " " * inner)
        return inner
    if i:
        parts.append(" ")
        col += 1
    return col


def _flow_list(items: list[Any], col: int, indent: int) -> str:
    """`[a, b, ...]` of strings, wrapped before an item once past the width."""
    parts = [" ["]
    col += 2
    inner = indent + 2
    for i, s in enumerate(items):
        if type(s) is not str:
            raise _Decline
        col = _separate(parts, i, col, inner)
        text = _scalar(s, _styles(s)[0], col, inner + 2)
        parts.append(text)
        nl = text.rfind("\n")
        col = col + len(text) if nl < 0 else len(text) - nl - 1
    parts.append("]")
    return "".join(parts)


def _flow_map(d: dict[Any, Any], col: int, inner: int) -> str:
    """`{k: v, ...}` of plain keys and string values (a link), starting at column `col`, wrapped
    before a key once past the width (continuing at `inner`), as libyaml writes a flow mapping."""
    parts = ["{"]
    col += 1
    for i, (k, v) in enumerate(d.items()):
        if type(k) is not str or type(v) is not str or not k or len(k) >= 128 or _styles(k)[0] != "p":
            raise _Decline  # a key libyaml would quote or not write as a simple key: left to yaml.dump
        col = _separate(parts, i, col, inner)
        parts.append(k + ":")
        col += len(k) + 1
        text = _scalar(v, _styles(v)[0], col + 1, inner + 2)
        parts.append(" " + text)
        nl = text.rfind("\n")
        col = col + 1 + len(text) if nl < 0 else len(text) - nl - 1
    parts.append("}")
    return "".join(parts)


_KEYS: dict[str, str] = {}


def _key(k: Any) -> str:
    got = _KEYS.get(k) if type(k) is str else None
    if got is not None:
        return got
    if type(k) is not str or not k or len(k) >= 128 or _styles(k)[1] != "p":
        raise _Decline  # a quoted or long key: rare, left to yaml.dump
    if len(_KEYS) < 1000:
        _KEYS[k] = k + ":"
    return k + ":"


def dump(fm: dict[str, Any], *, stamp: type, block: type) -> str | None:
    """The front matter as `yaml.dump(fm, Dumper=CSafeDumper, sort_keys=False, allow_unicode=True,
    default_flow_style=None, width=100)` writes it, with `stamp` (a str subclass) written as an
    implicit timestamp and `block` (a dict subclass) as a block mapping; None if outside the subset."""
    lines: list[str] = []
    try:
        for k, v in fm.items():
            key = _key(k)
            # chosen by the value's shape, as yaml.dump chooses: a list of `block` mappings
            # (history) is a block list of block mappings; a list of plain mappings (links) a block
            # list of flow mappings; anything else a scalar or a flow list after the key
            if type(v) is list and v and all(type(h) is block for h in v):
                lines.append(key)
                for h in v:
                    if not h:
                        raise _Decline
                    prefix = "- "
                    for hk, hv in h.items():
                        head = prefix + _key(hk)
                        if type(hv) is list:
                            raise _Decline
                        lines.append(head + _value(hv, len(head), 2, stamp))
                        prefix = "  "
            elif type(v) is list and v and all(type(lk) is dict and lk for lk in v):
                lines.append(key)  # a block list of flow mappings: `- {rel: contradicts, id: ...}`
                lines.extend("- " + _flow_map(lk, 2, 2) for lk in v)
            else:
                lines.append(key + _value(v, len(key), 0, stamp))
    except _Decline:
        return None
    lines.append("")
    return "\n".join(lines)


def _float_text(data: float) -> str:
    """SafeRepresenter.represent_float's spelling."""
    if data != data:
        return ".nan"
    if data == float("inf"):
        return ".inf"
    if data == -float("inf"):
        return "-.inf"
    value = repr(data).lower()
    if "." not in value and "e" in value:
        value = value.replace("e", ".0e", 1)
    return value
