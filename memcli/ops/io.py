"""export / import: memories to and from json, jsonl, md and csv. `import` reads what `export` writes
and gives back the same files; it loads records as they are (no extraction, no dedup) and validates
every record before writing any, so a bad line leaves the store untouched.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memcli.core.errors import InputRejected
from memcli.core.memory import Memory
from memcli.core.vocab import JSON_SCHEMA, ExportFormat
from memcli.ops.changes import ChangeSet
from memcli.ops.handle import Store
from memcli.ops.records import CSV_COLUMNS, Record, RecordError, detect_format, read_records, to_memory

FORMATS = ExportFormat.values()


class ImportError_(InputRejected):
    """A file that cannot be imported; names the record at fault."""


@dataclass
class ImportReport:
    added: int = 0
    updated: int = 0
    unchanged: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"added": self.added, "updated": self.updated, "unchanged": self.unchanged}


# ---------------------------------------------------------------- export
_JSON = json.JSONEncoder(ensure_ascii=False).encode  # one encoder, not one per record (json.dumps)


def export_chunks(memories: Iterable[Memory], fmt: str) -> Iterator[str]:
    """The export piece by piece, every format lossless: md puts each record (but its text) as JSON in
    an HTML comment, invisible when rendered; csv has a column per common field and `more`, a JSON
    object of the rest."""
    records = (m.to_dict() for m in memories)
    if fmt == "json":
        yield f'{{"schema": {JSON_SCHEMA}, "memories": ['
        for n, r in enumerate(records):
            yield ("\n " if n == 0 else ",\n ") + _JSON(r)
        yield "\n]}\n"
    elif fmt == "jsonl":
        for r in records:
            yield _JSON(r) + "\n"
    elif fmt == "md":
        yield "# memcli export\n"
        for r in records:
            meta = {k: v for k, v in r.items() if k != "text"}
            title = " · ".join(x for x in (r["id"], r.get("type"), " ".join("#" + t for t in r.get("tags") or []),
                                           str(r.get("created") or "")[:10]) if x)
            marker = json.dumps(meta, ensure_ascii=False).replace("-->", "--\\u003e")
            text = r["text"]
            # `lines=N`: the text is the N lines after the blank one, read verbatim on import (a
            # text may hold "## ..." and a marker of its own: issue 24's md round trip)
            yield f"\n## {title}\n<!-- memcli {marker} lines={text.count(chr(10)) + 1} -->\n\n{text}\n"
    elif fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        # a field holding a lone `\r` is not quoted by the minimal writer (its line end is `\n`),
        # and a reader takes the `\r` for a line end: such rows are written all quoted
        quoted = csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_ALL)
        w.writerow(CSV_COLUMNS)
        yield buf.getvalue()
        for r in records:
            buf.seek(0)
            buf.truncate()
            more = {k: v for k, v in r.items() if k not in CSV_COLUMNS}
            row = [";".join(r.get(c) or []) if c in ("tags", "origins")
                   else json.dumps(more, ensure_ascii=False) if c == "more" and more
                   else "" if r.get(c) is None or c == "more" else r.get(c) for c in CSV_COLUMNS]
            (quoted if any(isinstance(v, str) and "\r" in v for v in row) else w).writerow(row)
            yield buf.getvalue()
    else:
        raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")


def write_stream(path: Path, chunks: Iterable[str]) -> None:
    """Write chunks atomically to `path`; a device or a pipe (`-o /dev/null`, a FIFO) is written to as
    it is (a rename would put a regular file in its place)."""
    import os
    import stat

    from memcli.storage.atomic import atomic_write_chunks

    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = stat.S_IFREG  # not there yet (or not reachable: the temporary file says why)
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        with open(path, "w", encoding="utf-8", newline="") as out:
            for chunk in chunks:
                out.write(chunk)
        return
    atomic_write_chunks(path, chunks)


# ---------------------------------------------------------------- import
def to_memories(records: list[Any], name: str, origin: str, *, redact: bool = True) -> list[Memory]:
    """Every record validated (and redacted) by `records.to_memory`, before anything is written."""
    out = []
    seen: set[str] = set()
    for no, rec in enumerate(records, 1):
        m = to_memory(Record(rec, f"{name}: record {no}"), origin, redact=redact)
        if m.id in seen:
            raise ImportError_(f"{name}: record {no} repeats id {m.id}")
        seen.add(m.id)
        out.append(m)
    return out


def plan_import(store: Store, memories: list[Memory]) -> tuple[ChangeSet, ImportReport]:
    """Plan writing validated memories: an existing id is updated (old text to history), an identical
    one left alone."""
    report = ImportReport()
    cs = ChangeSet(store)
    for m in memories:
        outcome = cs.put(m, event="IMPORT", origin=m.origins)
        setattr(report, outcome, getattr(report, outcome) + 1)
    return cs, report


def import_memories(
    store: Store, memories: list[Memory], *, on_progress: Callable[[int, int], None] | None = None
) -> ImportReport:
    """Write validated memories: embeddings first (the slow part, cached, no lock), then one commit."""
    total = len(memories)
    done = [0]

    def tick(n: int) -> None:
        done[0] += n
        if on_progress:
            on_progress(min(done[0], total), total)

    store.index.embedder.embed([m.text for m in memories], on_progress=tick)
    cs, report = plan_import(store, memories)
    cs.commit()
    return report


BATCH = 2000  # memories embedded and written at a time: bounds memory whatever the file's size


MAX_NAMED = 10  # bad records named in the one error line; the rest are counted


def _errors_line(name: str, errors: list[str]) -> str:
    """One line naming every bad record of an import (nothing was imported)."""
    if len(errors) == 1:
        return errors[0]
    named = [e.removeprefix(f"{name}: ").removeprefix(f"{name}:") for e in errors[:MAX_NAMED]]
    more = f"; and {len(errors) - MAX_NAMED} more" if len(errors) > MAX_NAMED else ""
    return f"{name}: {len(errors)} records cannot be imported (nothing was): {'; '.join(named)}{more}"


def import_source(store: Store, path: Path, fmt: str | None, *, name: str, split: bool = False,
                  redact: bool = True, prepare: Callable[[], None] | None = None,
                  on_progress: Callable[[int, int], None] | None = None,
                  batch: int = BATCH) -> ImportReport:
    """Import every record of a file or folder: a first pass validates them all (nothing is written
    if one is bad), a second writes them in batches."""
    if path.is_dir():
        fmt = "md"
    else:
        with path.open("rb") as f:
            fmt = detect_format(path if name != "stdin" else None, f.read(4096), fmt)
    origin = f"import:{name}"
    explicit: set[str] = set()
    total = 0
    errors: list[str] = []  # every bad record is named (by line where the format has lines)
    try:
        for rec in read_records(path, fmt, split=split):
            if isinstance(rec.data, RecordError):
                errors.append(str(rec.data))
                continue
            try:
                m = to_memory(rec, origin, redact=redact)
            except RecordError as e:
                errors.append(str(e))
                continue
            if isinstance(rec.data.get("id"), str):
                if m.id in explicit:
                    errors.append(f"{rec.where}: repeats id {m.id}")
                    continue
                explicit.add(m.id)
            total += 1
    except RecordError as e:  # a file that cannot be read on (bad JSON document, CSV, UTF-8)
        errors.append(str(e))
    if errors:
        raise RecordError(_errors_line(name, errors))
    if not total:
        raise RecordError(f"{name}: no records to import")
    if prepare is not None:
        prepare()
    explicit.clear()
    report = ImportReport()
    done = 0
    pending: list[Memory] = []

    def flush() -> None:
        nonlocal done
        base = done

        def tick(d: int, _t: int) -> None:
            if on_progress:
                on_progress(min(base + d, total), total)

        part = import_memories(store, pending, on_progress=tick)
        report.added += part.added
        report.updated += part.updated
        report.unchanged += part.unchanged
        done += len(pending)
        pending.clear()

    for rec in read_records(path, fmt, split=split):
        if isinstance(rec.data, RecordError):  # the file changed since the first pass
            raise rec.data
        pending.append(to_memory(rec, origin, redact=redact))
        if len(pending) >= batch:
            flush()
    if pending:
        flush()
    return report
