"""`<store>/inbox/`: inputs parked by a hook that must not wait for a model, or by an `add` whose LLM
was unreachable; `memcli.agents.spool` replays them. An item is `<ULID>.json` (`.remap`: a git
rewrite's origin remap) holding `{"at", "kind", "source", "attempts", "options", "text", "error"?}`.
Standard library only: a git hook spools with it on a < 100 ms budget.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from memcli.core.ulid import new_ulid
from memcli.storage.atomic import atomic_write

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: importing typing costs a hook ~10 ms

if TYPE_CHECKING:
    from typing import Any

INBOX = "inbox"


def inbox_dir(store_path: str | os.PathLike[str]) -> Path:
    """`<store>/inbox/`: the parked inputs, the worker's lock and its `errors.log`."""
    return Path(store_path) / INBOX


def now() -> str:
    """An item's time stamps (UTC, to the second)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def write_item(path: Path, item: dict[str, Any]) -> None:
    """Write (or rewrite, after a failed attempt) one item atomically."""
    atomic_write(path, json.dumps(item, ensure_ascii=False, indent=1).encode("utf-8"))


def park(store_path: str | os.PathLike[str], text: str, options: dict[str, Any], *, kind: str = "add",
         source: str | None = None, error: str | None = None) -> Path:
    """Park one input (already redacted); returns its path. `error`: why its first attempt failed."""
    d = inbox_dir(store_path)
    d.mkdir(exist_ok=True)
    item: dict[str, Any] = {"at": now(), "kind": kind, "source": source, "attempts": 1 if error else 0,
                            "options": options, "text": text}
    if error is not None:
        item["error"] = error
    path = d / f"{new_ulid()}.{'json' if kind in ('add', 'session') else kind}"  # a session part replays as input
    write_item(path, item)
    return path


def pending(store_path: str | os.PathLike[str]) -> list[Path]:
    """Every item (inputs and remaps), oldest first (names are ULIDs)."""
    d = inbox_dir(store_path)
    if not d.is_dir():
        return []
    return sorted([*d.glob("*.json"), *d.glob("*.remap")], key=lambda p: p.name)


def inputs(store_path: str | os.PathLike[str]) -> list[tuple[Path, dict[str, Any]]]:
    """The inputs (not remaps) that can be read, oldest first, with their contents."""
    out = []
    for p in pending(store_path):
        if p.suffix != ".json":
            continue
        try:
            item = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(item, dict) and isinstance(item.get("text"), str):
            out.append((p, item))
    return out
