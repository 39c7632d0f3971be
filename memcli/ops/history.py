"""The history of a store, from `log.jsonl`, for people: `memcli log [ID]`; and `memcli edit ID`.

The log is append-only JSON lines (`{"at", "event", "id", ...}`); this module reads it as a stream
(a 100k-memory import logs 100k lines), filters it by memory, event and time, and renders each
entry as one line. `edit` opens a memory's file in $EDITOR and checks the result: a broken edit
is reported and kept aside (never lost), and the original file is left as it was.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memcli.core.errors import InputRejected, NotFound
from memcli.core.memory import MalformedMemory, Memory, now_iso

if TYPE_CHECKING:
    from memcli.ops.handle import Store


@dataclass(frozen=True)
class LogFilter:
    """Which entries to show: memory id prefix, events (upper-case), a time window (ISO strings)."""

    id_prefix: str | None = None
    events: tuple[str, ...] = ()
    since: str | None = None
    until: str | None = None

    def ids_of(self, entry: dict[str, Any]) -> list[str]:
        ids = [entry["id"]] if isinstance(entry.get("id"), str) else []
        for key in ("ids", "sources"):
            if isinstance(entry.get(key), list):
                ids += [i for i in entry[key] if isinstance(i, str)]
        return ids

    def matches(self, entry: dict[str, Any]) -> bool:
        if self.events and str(entry.get("event", "")).upper() not in self.events:
            return False
        at = str(entry.get("at") or "")
        if self.since and at < self.since:
            return False
        if self.until and at > self.until:
            return False
        if self.id_prefix:
            p = self.id_prefix.upper()
            return any(i.upper().startswith(p) for i in self.ids_of(entry))
        return True


def entries(log_path: Path, flt: LogFilter) -> Iterator[dict[str, Any]]:
    """Matching log entries, oldest first, read line by line; a damaged line is skipped."""
    if not log_path.is_file():
        return
    with log_path.open("rb") as f:
        for raw in f:
            try:
                entry = json.loads(raw)
            except (ValueError, UnicodeDecodeError):
                continue  # a torn last line (kill -9 mid-append) is not history
            if isinstance(entry, dict) and flt.matches(entry):
                yield entry


def ids_in_log(log_path: Path, prefix: str) -> set[str]:
    """Distinct memory ids in the log that start with `prefix` (to tell an ambiguous prefix)."""
    out: set[str] = set()
    flt = LogFilter(id_prefix=prefix)
    for e in entries(log_path, flt):
        out.update(i for i in flt.ids_of(e) if i.upper().startswith(prefix.upper()))
    return out


# ---------------------------------------------------------------- edit
class EditFailed(InputRejected):
    """The edited file is not a valid memory; it was kept aside and the original left in place."""


def editor_command() -> list[str]:
    """$VISUAL, else $EDITOR, else vi (as git does); split like a shell would."""
    value = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    return shlex.split(value)


def edit(store: Store, mid: str) -> tuple[Memory, bool]:
    """Open a memory's file in the editor on a copy; on save, validate and write it back
    atomically (the index catches up at the next sync). Returns (memory, changed).

    A broken edit (bad YAML, empty body, a changed id) raises EditFailed and the edited copy is
    kept at `<store>/.edits/<id>.<time>.md` so nothing typed is lost; the original is untouched."""
    path = store.fact_path(mid)
    if not path.is_file():
        raise NotFound(f"no memory with id {mid}")
    original = path.read_bytes()
    fd, tmp = tempfile.mkstemp(prefix=f"memcli-{mid}-", suffix=".md")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(original)
        cmd = editor_command()
        if not shutil.which(cmd[0]):
            raise InputRejected(f"editor {cmd[0]!r} not found", hint="set $EDITOR, e.g. export EDITOR=nano")
        rc = subprocess.call([*cmd, tmp])
        if rc != 0:
            raise InputRejected(f"the editor exited with status {rc}; the memory was not changed")
        edited = Path(tmp).read_bytes()
        if edited == original:
            return Memory.parse(original, file_id=mid), False
        try:
            memory = Memory.parse(edited, file_id=mid)
            declared = memory.extra.get("declared_id")
            if declared is not None:
                raise MalformedMemory(f"the id was changed to {declared!r} (ids are the file names)")
        except MalformedMemory as e:
            kept = _keep(store, mid, edited)
            raise EditFailed(f"the edit is not a valid memory: {e}; the memory was not changed",
                             hint=f"your edit is kept in {kept}; fix it and run memcli edit {mid} again") from None
        memory.updated = now_iso()
        with store.lock():
            if path.read_bytes() != original:
                kept = _keep(store, mid, edited)
                raise EditFailed(f"memory {mid} changed on disk while you edited it; not overwriting",
                                 hint=f"your edit is kept in {kept}")
            store.write(memory)
            store.log("EDIT", id=mid, text=memory.text)
        return memory, True
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _keep(store: Store, mid: str, data: bytes) -> Path:
    folder = store.path / ".edits"
    folder.mkdir(exist_ok=True)
    target = folder / f"{mid}.{now_iso().replace(':', '')}.md"
    target.write_bytes(data)
    return target
