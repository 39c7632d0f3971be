"""The Memory record and its Markdown + YAML front-matter form.

Files are the source of truth and are edited by hand, so parsing is lenient where it is safe
(no front matter at all, missing fields, dates that YAML turned into datetimes) and strict where
guessing would lose data (bad YAML, binary content, empty body): those raise `MalformedMemory`.
Unknown front-matter keys are kept in `extra` and written back untouched.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import re
from dataclasses import dataclass, field
from typing import Any

import frontmatter
import yaml

from memcli.core.facts import MEMORY_TYPES
from memcli.core.ulid import new_ulid  # memories are named by it (callers import it from here too)

# Extractor flags (camelCase in Fact.flags) and their front-matter / JSON keys.
FLAG_KEYS = {"hasCodeBlock": "has_code_block", "hasCommand": "has_command"}
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")  # used with fullmatch: `$` lets "id\\n" through
# Bounds on what one record may hold: a YAML alias bomb or a deeply nested import record is
# rejected after this many values / levels instead of being expanded (exponential in its size).
MAX_NODES = 20_000
MAX_DEPTH = 32


class MalformedMemory(ValueError):
    """A fact file that cannot be read as a memory; the message names the problem briefly."""


# ---------------------------------------------------------------- time and ids
def now_iso() -> str:
    return iso(dt.datetime.now(dt.timezone.utc))


def iso(value: dt.datetime | dt.date | str | None) -> str | None:
    """Normalise a timestamp to `YYYY-MM-DDTHH:MM:SSZ` (UTC). Strings are parsed leniently."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        value = parse_time(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        try:
            u = value.astimezone(dt.timezone.utc)
        except OverflowError:  # 0001-01-01T00:00+14:00 is before year 1 in UTC
            raise ValueError(f"{value.isoformat()} is out of range") from None
        # not strftime("%Y"): glibc writes year 999 as "999", which no ISO 8601 reader accepts
        return f"{u.year:04d}-{u.month:02d}-{u.day:02d}T{u.hour:02d}:{u.minute:02d}:{u.second:02d}Z"
    if isinstance(value, dt.date):
        return f"{value.isoformat()}T00:00:00Z"
    raise ValueError(f"expected an ISO 8601 date/time string, got {_kind(value)}")


def parse_time(text: str) -> dt.datetime:
    """Parse ISO 8601 (with `Z`, offsets, or a bare date); raise ValueError otherwise."""
    if not isinstance(text, str):
        raise ValueError(f"expected an ISO 8601 date/time string, got {_kind(text)}")
    s = text.strip()
    if s.endswith(("Z", "z")):
        s = s[:-1] + "+00:00"
    d = dt.datetime.fromisoformat(s)
    if d.tzinfo:
        try:
            d.astimezone(dt.timezone.utc)
        except OverflowError:
            raise ValueError(f"{text!r} is out of range") from None
    return d if d.tzinfo else d.replace(tzinfo=dt.timezone.utc)


_AGE = re.compile(r"^(\d+(?:\.\d+)?)\s*(m|min|h|d|w|mo|y)$", re.I)
_AGE_SECONDS = {"min": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "mo": 30 * 86400, "m": 30 * 86400,
                "y": 365 * 86400}


def parse_when(text: str, *, end: bool = False) -> str:
    """`--since/--until` values: an ISO date/time, an age (`90d`, `2w`, `3m` = months, `1y`,
    `12h`, `30min`), `today` or `yesterday`. A bare date used as `until` means the end of that day.
    """
    s = text.strip().lower()
    now = dt.datetime.now(dt.timezone.utc)
    if s in ("today", "yesterday"):
        day = now.date() - dt.timedelta(days=1 if s == "yesterday" else 0)
        start = dt.datetime.combine(day, dt.time(23, 59, 59) if end else dt.time(), dt.timezone.utc)
        return str(iso(start))
    m = _AGE.fullmatch(s)
    if m:
        try:
            return str(iso(now - dt.timedelta(seconds=float(m.group(1)) * _AGE_SECONDS[m.group(2)])))
        except (OverflowError, ValueError):  # 99999999999d reaches before year 1
            raise ValueError(f"{text!r} reaches back before year 1") from None
    try:
        when = parse_time(text)
    except ValueError:
        raise ValueError(f"cannot read {text!r} as a date or an age (try 2026-01-31, 7d, 2w, 3m, 1y)") from None
    if end and len(text.strip()) == 10:
        when = when.replace(hour=23, minute=59, second=59)
    return str(iso(when))


def valid_id(value: str) -> bool:
    """Ids become file names: letters, digits, `_ . -`; no path separators, no leading dot."""
    return isinstance(value, str) and _ID_RE.fullmatch(value) is not None


# ---------------------------------------------------------------- the record
@dataclass
class Memory:
    """One memory. `text` is the Markdown body; everything else is front matter."""

    id: str
    text: str
    type: str = "semantic"
    tags: list[str] = field(default_factory=list)
    domain: str | None = None
    confidence: float = 0.8
    source: str = "manual"
    origins: list[str] = field(default_factory=list)
    user: str = "default"
    project: str | None = None
    created: str = field(default_factory=now_iso)
    updated: str = field(default_factory=now_iso)
    code_pattern: str | None = None
    flags: dict[str, bool] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    links: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    # -- serialisation
    def front_matter(self) -> dict[str, Any]:
        """The front matter in its one key order (the export's too), unset optional fields left
        out, with the YAML wrappers that keep timestamps as written."""
        fm: dict[str, Any] = {"id": self.id, "type": self.type, "tags": list(self.tags)}
        if self.domain is not None:
            fm["domain"] = self.domain
        fm["confidence"] = round(float(self.confidence), 4)
        fm["source"] = self.source
        fm["origins"] = list(self.origins)
        fm["user"] = self.user
        if self.project is not None:
            fm["project"] = self.project
        fm["created"], fm["updated"] = _Stamp(self.created), _Stamp(self.updated)
        if self.code_pattern is not None:
            fm["code_pattern"] = self.code_pattern
        for name, key in FLAG_KEYS.items():  # snake_case on disk and in JSON, like every other key
            if self.flags.get(name):
                fm[key] = True
        if self.history:
            fm["history"] = [_Block({k: (_Stamp(v) if k == "at" and v else v) for k, v in h.items()})
                             if isinstance(h, dict) else h for h in self.history]
        if self.links:
            fm["links"] = list(self.links)
        fm.update({k: _blockify(v) for k, v in self.extra.items()})
        return fm

    def to_markdown(self) -> str:
        fm = self.front_matter()
        head = _dump(fm, _Dumper)
        if "\\U" in head:  # libyaml escapes characters beyond the BMP (emoji): keep them readable
            head = _dump(fm, _PyDumper)
        body = self.text.strip("\n")
        return f"---\n{head}---\n{body}\n"

    def to_dict(self) -> dict[str, Any]:
        """The export / `--json` record: the front matter as JSON, and the text."""
        return {**_jsonable(self.front_matter()), "text": str(self.text)}

    @property
    def superseded_by(self) -> str | None:
        """The id of the memory that replaced this one (kept in `extra`), or None while it is current."""
        newer = self.extra.get("superseded_by")
        return str(newer) if newer else None

    def clone(self) -> Memory:
        """A copy whose lists and mappings are copied too (plain data: cheaper than `copy.deepcopy`)."""
        return dataclasses.replace(
            self, tags=list(self.tags), origins=list(self.origins), flags=dict(self.flags),
            history=_clone(self.history), links=_clone(self.links), extra=_clone(self.extra),
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, default_id: str | None = None) -> Memory:
        """Build from a front-matter mapping (or an export record with `text`), checking every
        field's type: hand-edited files and imports get here, and a wrong type must be a
        `MalformedMemory` naming the field, not an AttributeError in a later command."""
        check_value(data, "record")
        d = dict(data)
        text = d.pop("text", None)
        if text is not None and not isinstance(text, str):
            raise MalformedMemory(f"text must be a string, got {_kind(text)}")
        text = text or ""
        if "\x00" in text:
            raise MalformedMemory("text contains a NUL byte")
        created = _time_field(d, "created") or now_iso()
        updated = _time_field(d, "updated") or created
        raw_id = d.pop("id", None)
        if raw_id is not None and not isinstance(raw_id, (str, int)) or isinstance(raw_id, bool):
            raise MalformedMemory(f"id must be a string, got {_kind(raw_id)}")
        # A new id carries the memory's own creation time, so ids sort like `created`.
        mid = str(raw_id if raw_id not in (None, "") else default_id or new_ulid(parse_time(created).timestamp()))
        if not valid_id(mid):
            raise MalformedMemory(f"invalid id {mid!r}")
        mtype = _opt_str(d.pop("type", None), "type") or "semantic"
        if mtype not in MEMORY_TYPES:
            raise MalformedMemory(f"type must be one of {', '.join(MEMORY_TYPES)}, got {mtype!r}")
        raw_conf = d.pop("confidence", None)
        if isinstance(raw_conf, bool) or not (raw_conf is None or isinstance(raw_conf, (int, float, str))):
            raise MalformedMemory(f"confidence must be a number, got {_kind(raw_conf)}")
        try:
            confidence = 0.8 if raw_conf is None else float(raw_conf)
        except (TypeError, ValueError, OverflowError):
            raise MalformedMemory("confidence must be a number") from None
        if not math.isfinite(confidence):
            raise MalformedMemory("confidence must be a finite number")
        history = d.pop("history", None) or []
        if not isinstance(history, list) or not all(isinstance(h, dict) for h in history):
            raise MalformedMemory("history must be a list of mappings")
        try:
            history = [{str(k): (_at(v) if k == "at" else v) for k, v in h.items()} for h in history]
        except ValueError as e:
            raise MalformedMemory(f"history: at: {e}") from None
        links = d.pop("links", None) or []
        if not isinstance(links, list) or not all(isinstance(lk, dict) for lk in links):
            raise MalformedMemory("links must be a list of mappings (rel, id)")
        for lk in links:
            for key in ("rel", "id"):
                if key in lk and not isinstance(lk[key], str):
                    raise MalformedMemory(f"links: {key} must be a string, got {_kind(lk[key])}")
        flags = {}
        for name, key in FLAG_KEYS.items():  # files written before 0.2 spell them camelCase
            if d.pop(key, False) | bool(d.pop(name, False)):
                flags[name] = True
        code = d.pop("code_pattern", None)
        if code is not None and not isinstance(code, str):
            raise MalformedMemory(f"code_pattern must be a string, got {_kind(code)}")
        return cls(
            id=mid, text=text, type=mtype, tags=_str_list(d.pop("tags", None), "tags"),
            domain=_opt_str(d.pop("domain", None), "domain"), confidence=max(0.0, min(1.0, confidence)),
            source=_opt_str(d.pop("source", None), "source") or "manual",
            origins=_str_list(d.pop("origins", None), "origins"),
            user=_opt_str(d.pop("user", None), "user") or "default",
            project=_opt_str(d.pop("project", None), "project"),
            created=created, updated=updated, code_pattern=code, flags=flags,
            history=history, links=[{str(k): v for k, v in lk.items()} for lk in links], extra=_restamp(d),
        )

    @classmethod
    def from_catalog(cls, rec: dict[str, Any]) -> Memory:
        """A memory from its catalog record (validated when its file was indexed), not validated
        again: list, export and curation read thousands. `rec` is consumed (its keys are popped)."""
        pop = rec.pop
        flags = {name: True for name, key in FLAG_KEYS.items() if pop(key, False)}
        return cls(
            id=pop("id"), text=pop("text", ""), type=pop("type", "semantic"), tags=pop("tags", None) or [],
            domain=pop("domain", None), confidence=pop("confidence", 0.8), source=pop("source", "manual"),
            origins=pop("origins", None) or [], user=pop("user", "default"), project=pop("project", None),
            created=pop("created"), updated=pop("updated"), code_pattern=pop("code_pattern", None),
            flags=flags, history=pop("history", None) or [], links=pop("links", None) or [],
            extra=_restamp(rec) if rec else {},
        )

    @classmethod
    def parse(cls, raw: bytes, *, file_id: str) -> Memory:
        """Parse a fact file's bytes. The file name is the id (a hand-made file may omit `id`)."""
        if b"\x00" in raw:
            raise MalformedMemory("binary content")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise MalformedMemory("not valid UTF-8") from None
        text = text.removeprefix("\ufeff")  # a BOM (Windows editors) is not part of the front matter
        handler = _HANDLER
        meta: Any = {}
        body = text.strip()
        if handler.detect(body):
            try:
                fm, body = handler.split(body)
                _bound_front_matter(fm)
                meta = handler.load(fm)
            except (yaml.YAMLError, ValueError) as e:
                first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                raise MalformedMemory(f"bad YAML front matter ({first})") from None
            except RecursionError:
                raise MalformedMemory("bad YAML front matter (nested too deeply)") from None
        if meta is None:
            meta = {}
        if not isinstance(meta, dict):
            raise MalformedMemory("front matter is not a mapping")
        check_value(meta, "front matter")  # before anything walks it: an alias bomb stops here
        body = body.strip("\n")
        if not body.strip():
            raise MalformedMemory("no body text")
        declared = meta.get("id")
        meta = {**meta, "id": file_id, "text": body}
        if isinstance(declared, (str, int)) and str(declared) != file_id:
            meta.setdefault("declared_id", str(declared))
        return cls.from_dict(meta)


# YAML parses ~30 us a line: a million-line front matter in a clone made `list` run for minutes.
# These bounds are far above what memcli writes and keep one file's parse under ~0.3 s.
MAX_FRONT_MATTER_LINES = 10_000
MAX_FRONT_MATTER_BYTES = 8 << 20


def _bound_front_matter(fm: str) -> None:
    if len(fm) > MAX_FRONT_MATTER_BYTES:
        raise MalformedMemory(f"front matter is too large (over {MAX_FRONT_MATTER_BYTES >> 20} MB)")
    if fm.count("\n", 0, len(fm)) > MAX_FRONT_MATTER_LINES:
        raise MalformedMemory(f"front matter is too large (over {MAX_FRONT_MATTER_LINES} lines)")


def _time_field(d: dict[str, Any], key: str) -> str | None:
    try:
        return iso(d.pop(key, None))
    except ValueError as e:
        raise MalformedMemory(f"{key}: {e}") from None


def _at(v: object) -> object:
    """A history entry's time: strings stay as written; anything else must be a date."""
    return v if v is None or isinstance(v, str) else iso(v)  # type: ignore[arg-type]


_KINDS = ((type(None), "null"), (bool, "a boolean"), ((int, float), "a number"), ((list, tuple), "a list"),
          (dict, "a mapping"), (dt.date, "a date"), (str, "a string"))


def _kind(v: object) -> str:
    """A value's type as a user reads it in an error line (JSON/YAML words, not Python's)."""
    return next((word for types, word in _KINDS if isinstance(v, types)), type(v).__name__)


def _opt_str(v: object, name: str = "value") -> str | None:
    """A scalar field: strings as they are, numbers spelled out; lists and mappings are errors."""
    if v is None or v == "":
        return None
    if isinstance(v, (list, tuple, dict)):
        raise MalformedMemory(f"{name} must be a string, got {_kind(v)}")
    return str(v)


def _str_list(v: object, name: str) -> list[str]:
    if v is None:
        return []
    if isinstance(v, str):
        return [s.strip() for s in v.split(",") if s.strip()]
    if isinstance(v, (list, tuple)):
        if any(isinstance(x, (list, tuple, dict)) for x in v):
            raise MalformedMemory(f"{name} must be a list of strings")
        return [str(x) for x in v if x is not None and str(x) != ""]
    raise MalformedMemory(f"{name} must be a list of strings, got {_kind(v)}")


def check_value(value: Any, name: str = "value") -> None:
    """Refuse lone surrogates (they cannot be written as UTF-8) and trees deeper than MAX_DEPTH or
    larger than MAX_NODES (an alias bomb: the walk stops at the bound, not at its expanded size)."""
    budget = [MAX_NODES]

    def walk(v: Any, depth: int, where: str) -> None:
        budget[0] -= 1
        if budget[0] < 0:
            raise MalformedMemory(f"{name} is too large (over {MAX_NODES} values; YAML aliases?)")
        if depth > MAX_DEPTH:
            raise MalformedMemory(f"{where} is nested too deeply (over {MAX_DEPTH} levels)")
        if isinstance(v, str):
            if not encodable(v):
                raise MalformedMemory(f"{where} is not valid UTF-8 text (it holds a lone surrogate)")
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(k, depth + 1, where)
                walk(x, depth + 1, str(k) if depth == 0 and isinstance(k, str) and encodable(k) else where)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x, depth + 1, where)
        elif isinstance(v, float) and not math.isfinite(v):
            raise MalformedMemory(f"{where} holds a number that is not finite")

    walk(value, 0, name)


def _clone(v: Any) -> Any:
    """Plain data with new lists and mappings all the way down (a `_Stamp` stays a `_Stamp`)."""
    if isinstance(v, dict):
        out = {k: _clone(x) for k, x in v.items()}
        return out if type(v) is dict else type(v)(out)
    if isinstance(v, list):
        return [_clone(x) for x in v]
    return v


def encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _jsonable(v: Any) -> Any:
    """Plain JSON data: strings (a `_Stamp` too) as `str`, keys as strings, dates in ISO 8601."""
    if isinstance(v, str):
        return str(v)
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (dt.datetime, dt.date)):
        return iso(v) if isinstance(v, dt.datetime) else v.isoformat()
    return v


class _Stamp(str):
    """A timestamp kept as spelled, written plain: YAML would read `2026-02-01T10:00:00Z` as a
    datetime and write it back as `2026-02-01 10:00:00+00:00`."""


class _Block(dict):  # type: ignore[type-arg]
    """A mapping written in block style (history entries: their timestamps stay plain)."""


_SafeDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml when available: much faster
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Dumper(_SafeDumper):  # type: ignore[misc,valid-type]
    pass


class _PyDumper(yaml.SafeDumper):
    pass


def _dump(fm: dict[str, Any], dumper: type) -> str:
    return yaml.dump(fm, Dumper=dumper, sort_keys=False, allow_unicode=True, default_flow_style=None, width=100)


class _Loader(_SafeLoader):  # type: ignore[misc,valid-type]
    pass


for _d in (_Dumper, _PyDumper):
    _d.add_representer(_Stamp, lambda d, v: d.represent_scalar("tag:yaml.org,2002:timestamp", str(v)))
    _d.add_representer(_Block, lambda d, v: d.represent_mapping("tag:yaml.org,2002:map", v, flow_style=False))
_Loader.add_constructor("tag:yaml.org,2002:timestamp", lambda loader, node: _Stamp(loader.construct_scalar(node)))
_TIMESTAMP = re.compile(  # YAML 1.1's timestamp: a date, or a date and time with an optional zone
    r"^\d{4}-\d{2}-\d{2}(?:[Tt ]\d{1,2}:\d{2}:\d{2}(?:\.\d+)?\s*(?:[Zz]|[-+]\d{1,2}(?::?\d{2})?)?)?$"
)


def _has_stamp(v: Any) -> bool:
    if isinstance(v, _Stamp):
        return True
    if isinstance(v, dict):
        return any(_has_stamp(x) for x in v.values())
    if isinstance(v, list):
        return any(_has_stamp(x) for x in v)
    return False


def _blockify(v: Any) -> Any:
    """Mappings holding a timestamp are written in block style: in a flow mapping YAML cannot
    write the timestamp plain and tags it (`trashed: {at: ! '2026-...'}`)."""
    if isinstance(v, dict) and not isinstance(v, _Block):
        inner = {k: _blockify(x) for k, x in v.items()}
        return _Block(inner) if _has_stamp(v) else inner
    if isinstance(v, list):
        return [_blockify(x) for x in v]
    return v


def _restamp(v: Any) -> Any:
    """Strings that are timestamps (e.g. from a JSON export) become stamps again."""
    if isinstance(v, str) and not isinstance(v, _Stamp) and _TIMESTAMP.match(v):
        return _Stamp(v)
    if isinstance(v, dict):
        return {k: _restamp(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_restamp(x) for x in v]
    return v


class _Handler(frontmatter.YAMLHandler):
    def load(self, fm: str, **kwargs: object) -> Any:
        return yaml.load(fm, Loader=_Loader)  # noqa: S506 - a safe loader


_HANDLER = _Handler()
