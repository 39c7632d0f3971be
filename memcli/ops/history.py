"""`memcli log [ID]`: the append-only `log.jsonl`, read as a stream and filtered by memory, event and time."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class LogFilter:
    """Which entries: memory id prefix, events (upper-case), a time window (ISO strings)."""

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
