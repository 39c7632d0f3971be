"""Import files read as a stream of records (json, jsonl, csv, memcli's Markdown export, folders of
notes), one record at a time: the size limit is each text's, so a large store's export imports back.
Every record says where it was found, for an error to name it.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
import io
import json
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import yaml

from memcli.core.errors import InputRejected
from memcli.core.memory import MalformedMemory, Memory, iso

MAX_RECORD_BYTES = 10 * 1024 * 1024  # one memory's text; the file itself may be any size
_LIMIT = f"the limit for one memory is {MAX_RECORD_BYTES // 2**20} MB"
CHUNK = 1 << 20
IMPORT_FORMATS = ("json", "jsonl", "md", "csv")
# memcli's Markdown export: each memory's full record (minus its text) as JSON in an HTML comment
# under a heading, the text after it. Invisible when the Markdown is rendered; lossless to import.
MD_MARKER = re.compile(r"^<!-- memcli (\{.*\})(?: lines=(\d+))? -->\s*$")


_EXTENSIONS = {".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".md": "md",
               ".markdown": "md", ".txt": "md"}


class RecordError(InputRejected):
    """A record that cannot be imported; the message names the file and the line or record."""


@dataclass
class Record:
    data: dict[str, Any]
    where: str  # "backup.jsonl:12", "notes/deploy.md", "backup.json: record 7"


# ---------------------------------------------------------------- format detection
def detect_format(path: Path | None, head: bytes, declared: str | None = None) -> str:
    """The format of an import source: --format if given, else the extension, else the content."""
    if declared:
        if declared not in IMPORT_FORMATS:
            raise RecordError(f"unknown import format {declared!r} (one of {', '.join(IMPORT_FORMATS)})")
        return declared
    if path is not None and path.is_dir():
        return "md"
    if path is not None and path.suffix.lower() in _EXTENSIONS:
        return _EXTENSIONS[path.suffix.lower()]
    text = head.lstrip(b"\xef\xbb\xbf").lstrip()
    if text.startswith(b"["):
        return "json"
    if text.startswith(b"{"):
        first = text.split(b"\n", 1)[0].strip()
        try:
            json.loads(first)
            return "jsonl"
        except ValueError:
            return "json"
    if text.startswith((b"---", b"#", b"<!--")):
        return "md"
    if text.startswith((b"id,", b"text,", b'"id"')):
        return "csv"
    return "jsonl"


def _check_size(text: str, where: str) -> None:
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_RECORD_BYTES:
        raise RecordError(f"{where}: the text is {size / 1e6:.1f} MB; {_LIMIT}")


def _decode(data: bytes, where: str) -> str:
    if b"\x00" in data:
        raise RecordError(f"{where}: looks like binary data, not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RecordError(f"{where}: not valid UTF-8 (byte {e.start})") from None


# ---------------------------------------------------------------- json lines
def jsonl_records(f: IO[bytes], name: str) -> Iterator[Record]:
    count = 0
    for no, raw in enumerate(_lines(f, name), 1):
        line = _decode(raw, f"{name}:{no}")
        if no == 1:
            line = line.lstrip("\ufeff")
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as e:  # reported with every other bad line (import_source)
            yield Record(RecordError(f"{name}: line {no} is not valid JSON ({e.msg})"), f"{name}:{no}")
            continue
        if isinstance(data, dict) and "memories" in data and "text" not in data and isinstance(data["memories"], list):
            for n, rec in enumerate(data["memories"], 1):  # a one-line JSON document
                yield Record(rec, f"{name}: record {n}")
            continue
        count += 1
        yield Record(data, f"{name}: record {count} (line {no})")


def _lines(f: IO[bytes], name: str) -> Iterator[bytes]:
    """Lines of a binary stream; one longer than a record may be is an error before it is read whole."""
    no = 0
    while True:
        line = f.readline(MAX_RECORD_BYTES * 2 + 2)
        if not line:
            return
        no += 1
        if len(line) > MAX_RECORD_BYTES * 2 and not line.endswith(b"\n"):
            raise RecordError(f"{name}:{no}: the line is over {MAX_RECORD_BYTES * 2 // 2**20} MB; {_LIMIT}")
        yield line


# ---------------------------------------------------------------- json (an array, or {"memories": [...]})
_MEMORIES_KEY = re.compile(r'"memories"\s*:\s*\[')


def json_records(f: IO[bytes], name: str) -> Iterator[Record]:
    """Elements of a top-level JSON array (or an export document's `memories`), decoded one at a
    time from a sliding buffer."""
    reader = io.TextIOWrapper(f, encoding="utf-8", errors="strict", newline="")
    decoder = json.JSONDecoder()
    buf = ""
    pos = 0
    eof = False

    def fill() -> bool:
        nonlocal buf, pos, eof
        if eof:
            return False
        try:
            chunk = reader.read(CHUNK)
        except UnicodeDecodeError as e:
            raise RecordError(f"{name}: not valid UTF-8 ({e.reason})") from None
        if "\x00" in chunk:
            raise RecordError(f"{name}: looks like binary data, not text")
        if not chunk:
            eof = True
            return False
        buf = buf[pos:] + chunk
        pos = 0
        return True

    def skip_ws() -> None:
        nonlocal pos
        while True:
            while pos < len(buf) and buf[pos] in " \t\r\n\ufeff":
                pos += 1
            if pos < len(buf) or not fill():
                return

    fill()
    skip_ws()
    if pos >= len(buf):
        raise RecordError(f"{name}: empty input")
    if buf[pos] == "{":
        while True:  # an export document: {"schema": 1, ..., "memories": [ ... ]}
            m = _MEMORIES_KEY.search(buf, pos)
            if m:
                pos = m.end()
                break
            if len(buf) - pos > MAX_RECORD_BYTES or not fill():
                yield from _single_object(buf[pos:], reader, name)
                return
    elif buf[pos] == "[":
        pos += 1
    else:
        raise RecordError(f"{name}: expected a JSON array of records")
    n = 0
    while True:
        skip_ws()
        if pos >= len(buf):
            raise RecordError(f"{name}: the JSON array is not closed (truncated file?)")
        if buf[pos] == "]":
            return
        if buf[pos] == "," and n:
            pos += 1
            skip_ws()
        while True:
            try:
                data, end = decoder.raw_decode(buf, pos)
                break
            except json.JSONDecodeError as e:
                if len(buf) - pos > MAX_RECORD_BYTES * 2:
                    raise RecordError(f"{name}: record {n + 1} is over {MAX_RECORD_BYTES * 2 // 2**20} MB "
                                      "or is not valid JSON") from None
                if not fill():
                    raise RecordError(f"{name}: record {n + 1} is not valid JSON ({e.msg})") from None
        pos = end
        n += 1
        yield Record(data, f"{name}: record {n}")


def _single_object(start: str, reader: IO[str], name: str) -> Iterator[Record]:
    """A JSON object that is not an export document: one record (read whole, so bounded)."""
    rest = reader.read(MAX_RECORD_BYTES * 2)
    try:
        data = json.loads(start + rest)
    except json.JSONDecodeError as e:
        raise RecordError(f"{name}: invalid JSON at line {e.lineno}: {e.msg}") from None
    if isinstance(data, dict) and isinstance(data.get("memories"), list):
        for n, rec in enumerate(data["memories"], 1):
            yield Record(rec, f"{name}: record {n}")
    else:
        yield Record(data, f"{name}: record 1")


# ---------------------------------------------------------------- csv
CSV_COLUMNS = ["id", "type", "tags", "domain", "confidence", "source", "origins", "user", "project",
               "created", "updated", "text", "more"]


def csv_records(f: IO[bytes], name: str) -> Iterator[Record]:
    """Rows of memcli's CSV export: `tags` and `origins` `;`-separated, `more` a JSON object of the rest."""
    reader = io.TextIOWrapper(f, encoding="utf-8-sig", errors="strict", newline="")
    csv.field_size_limit(MAX_RECORD_BYTES * 2)
    try:
        rows = csv.DictReader(reader)
        for row in rows:
            where = f"{name}:{rows.line_num}"
            if None in row:
                raise RecordError(f"{where}: more fields than the header has")
            data: dict[str, Any] = {k: v for k, v in row.items() if k and v not in (None, "")}
            for key in ("tags", "origins"):
                if key in data:
                    data[key] = [x for x in data[key].split(";") if x]
            if "confidence" in data:
                try:
                    data["confidence"] = float(data["confidence"])
                except ValueError:
                    raise RecordError(f"{where}: confidence must be a number") from None
            more = data.pop("more", None)
            if more:
                try:
                    extra = json.loads(more)
                except json.JSONDecodeError:
                    raise RecordError(f"{where}: the `more` column is not a JSON object") from None
                if not isinstance(extra, dict):
                    raise RecordError(f"{where}: the `more` column is not a JSON object")
                data.update(extra)
            yield Record(data, where)
    except UnicodeDecodeError as e:
        raise RecordError(f"{name}: not valid UTF-8 ({e.reason})") from None
    except csv.Error as e:
        raise RecordError(f"{name}: not valid CSV ({e})") from None


# ---------------------------------------------------------------- Markdown
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def md_export_records(f: IO[bytes], name: str) -> Iterator[Record]:
    """Sections of memcli's Markdown export, line by line: a heading, a `<!-- memcli {...} -->` line
    with the record, then the text."""
    pending: dict[str, Any] | None = None
    where = name
    body: list[str] = []
    held: str | None = None  # a heading line that may start the next section
    no = 0

    exact: list[str] = []  # the text's lines as exported, when the marker gives their number
    count = 0  # lines of it still to read verbatim (a text may hold a heading or a marker itself)
    skip_blank = False

    def finish() -> Iterator[Record]:
        if pending is not None:
            text = "\n".join(body).strip("\n")
            if exact:
                text = "\n".join(exact) + ("\n" + text if text else "")
            _check_size(text, where)
            yield Record({**pending, "text": text}, where)

    for raw in _lines(f, name):
        no += 1
        if count:
            line = _decode(raw, f"{name}:{no}")
            if skip_blank and not line.strip("\r\n"):
                skip_blank = False  # the blank line between the marker and the text
                continue
            skip_blank = False
            exact.append(line[:-1] if line.endswith("\n") else line)  # a `\r` of the text stays
            count -= 1
            continue
        line = _decode(raw, f"{name}:{no}").rstrip("\r\n")
        m = MD_MARKER.match(line)
        if m:
            yield from finish()
            try:
                pending = json.loads(m.group(1))
            except json.JSONDecodeError as e:
                raise RecordError(f"{name}:{no}: the memcli record comment is not valid JSON ({e.msg})") from None
            where, body, held, exact = f"{name}:{no}", [], None, []
            count, skip_blank = (int(m.group(2)), True) if m.group(2) else (0, False)
            continue
        if held is not None:
            body.append(held)
            held = None
        if line.startswith("## "):
            held = line  # dropped if the marker follows (it is the section's heading)
        elif pending is not None:
            body.append(line)
    if held is not None and pending is not None:
        body.append(held)
    yield from finish()


def note_records(path: Path, *, split: bool, root: Path | None = None) -> Iterator[Record]:
    """A Markdown note: one memory (YAML front matter optional), or with `split` one per heading
    section (the heading kept as its first line)."""
    name = str(path.relative_to(root)) if root else str(path)
    size = path.stat().st_size
    if size > MAX_RECORD_BYTES and not split:
        raise RecordError(f"{name}: the note is {size / 1e6:.1f} MB; {_LIMIT} (split it by heading with --split)")
    with path.open("rb") as f:
        exported = b"<!-- memcli {" in f.read(4096)
        f.seek(0)
        if exported:
            yield from md_export_records(f, name)
            return
        if split:
            yield from _split_note(f, name)
            return
        text = _decode(f.read(), name)
    meta, body = _front_matter(text, name)
    # a note's date: ids sort like the notes
    meta.setdefault("created", iso(dt.datetime.fromtimestamp(path.stat().st_mtime, dt.timezone.utc)))
    if body.strip():
        _check_size(body, name)
        yield Record({**meta, "text": body.strip("\n")}, name)


def _front_matter(text: str, name: str) -> tuple[dict[str, Any], str]:
    text = text.lstrip("\ufeff")
    if not text.startswith("---"):
        return {}, text
    lines = text.split("\n")
    for i in range(1, min(len(lines), 500)):
        if lines[i].strip() in ("---", "..."):
            try:
                meta = yaml.safe_load("\n".join(lines[1:i])) or {}
            except yaml.YAMLError as e:
                first = str(e).strip().splitlines()[0] if str(e).strip() else "bad YAML"
                raise RecordError(f"{name}: bad YAML front matter ({first})") from None
            if not isinstance(meta, dict):
                raise RecordError(f"{name}: front matter is not a mapping")
            meta = {k: v for k, v in meta.items() if k in _NOTE_KEYS}
            return meta, "\n".join(lines[i + 1:])
    return {}, text


# Front-matter keys a note may set; others (a note app's own: aliases, cssclass...) are left out,
# and ids are left to memcli (two notes copied from one template must not collide).
_NOTE_KEYS = ("type", "tags", "domain", "confidence", "user", "project", "created", "updated", "origins")


def _split_note(f: IO[bytes], name: str) -> Iterator[Record]:
    """One record per heading section of a note (and the text before the first), read line by line;
    the front matter applies to every section."""
    meta: dict[str, Any] = {}
    section: list[str] = []
    start = 1
    in_code = False
    first = True
    fm: list[str] | None = None
    no = 0

    def emit() -> Iterator[Record]:
        text = "\n".join(section).strip("\n")
        if text.strip() and not (len(section) == 1 and _HEADING.match(section[0])):
            _check_size(text, f"{name}:{start}")
            yield Record({**meta, "text": text}, f"{name}:{start}")

    for raw in _lines(f, name):
        no += 1
        line = _decode(raw, f"{name}:{no}").rstrip("\r\n")
        if first:
            first = False
            line = line.lstrip("\ufeff")
            if line.strip() == "---":
                fm = []
                continue
        if fm is not None:
            if line.strip() in ("---", "..."):
                meta, _ = _front_matter("---\n" + "\n".join(fm) + "\n---\n", name)
                fm = None
                start = no + 1
            else:
                fm.append(line)
            continue
        if _FENCE.match(line):
            in_code = not in_code
        if not in_code and _HEADING.match(line):
            yield from emit()
            section, start = [line], no
            continue
        section.append(line)
    yield from emit()


def _is_store(d: Path) -> bool:
    return (d / "facts").is_dir() and ((d / ".index").is_dir() or (d / "log.jsonl").is_file())


def note_files(directory: Path) -> Iterator[Path]:
    """Markdown files under a folder, sorted, skipping hidden ones (.git, .obsidian) and memcli
    stores (their facts are memories already)."""
    if _is_store(directory):
        return
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not _is_store(Path(root) / d))
        for fname in sorted(files):
            if not fname.startswith(".") and fname.lower().endswith((".md", ".markdown")):
                p = Path(root) / fname
                if p.is_file() and not p.is_symlink():
                    yield p


# ---------------------------------------------------------------- one entry point
def read_records(path: Path, fmt: str, *, split: bool = False) -> Iterator[Record]:
    """Every record of an import source (a file, or a folder of notes); json's failures outside
    JSONDecodeError (too deep, an integer too long) become one-line errors here."""
    try:
        yield from _read_records(path, fmt, split=split)
    except RecursionError:
        raise RecordError(f"{path.name}: JSON nested too deeply") from None
    except ValueError as e:
        if isinstance(e, RecordError) or not str(e).startswith("Exceeds the limit"):
            raise
        raise RecordError(f"{path.name}: invalid JSON ({str(e).splitlines()[0]})") from None


def _read_records(path: Path, fmt: str, *, split: bool = False) -> Iterator[Record]:
    if path.is_dir():
        for p in note_files(path):
            yield from note_records(p, split=split, root=path)
        return
    if fmt == "md":
        yield from note_records(path, split=split, root=path.parent)
        return
    reader = {"jsonl": jsonl_records, "json": json_records, "csv": csv_records}[fmt]  # detect_format's
    with path.open("rb") as f:
        yield from reader(f, path.name)


# ---------------------------------------------------------------- import
def to_memory(rec: Record, origin: str, *, redact: bool = True) -> Memory:
    """A validated, redacted Memory from one record (text required), or RecordError."""
    data = rec.data
    if not isinstance(data, dict):
        raise RecordError(f"{rec.where}: not an object")
    text = data.get("text")
    if not isinstance(text, str) or not text.strip():
        raise RecordError(f"{rec.where}: has no text")
    _check_size(text, rec.where)
    d = {k: v for k, v in data.items() if k not in ("score", "similarity", "explain", "schema")}
    d.setdefault("source", "import")
    if not d.get("origins"):
        d["origins"] = [origin]
    try:
        m = Memory.from_dict(d)
    except MalformedMemory as e:
        raise RecordError(f"{rec.where}: {e}") from None
    if redact:
        from memcli.services.redact import redact as scrub

        m.text = scrub(m.text)[0]
    return m


@contextlib.contextmanager
def spool_stdin(stream: IO[bytes]) -> Iterator[Path]:
    """Standard input copied to a temporary file: an import reads its source twice (validate, write)."""
    fd, tmp = tempfile.mkstemp(prefix="memcli-import-", suffix=".stdin")
    try:
        with os.fdopen(fd, "wb") as f:
            while chunk := stream.read(CHUNK):
                if b"\x00" in chunk:  # /dev/zero and other binary streams stop here, not at a full disk
                    raise RecordError("stdin: looks like binary data, not text")
                f.write(chunk)
        yield Path(tmp)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
