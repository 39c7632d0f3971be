"""A commit's remaining renames and unlinks, written before the first rename, so that the next
writer rolls a commit killed half way forward (never a merged memory beside its sources).
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from memcli.core.notices import notice
from memcli.storage.atomic import atomic_write, fsync_dir

NAME = ".journal.json"


def path_of(store: Any) -> Path:
    return Path(store.path) / NAME


def begin(store: Any, renames: list[tuple[str, Path]], unlinks: list[Path]) -> None:
    """Record the commit's remaining steps (fsynced) before the first rename."""
    doc = {"renames": [[str(t), str(p)] for t, p in renames], "unlinks": [str(p) for p in unlinks]}
    atomic_write(path_of(store), json.dumps(doc).encode("utf-8"))


def end(store: Any) -> None:
    """The commit is complete: forget its journal."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path_of(store))


def recover(store: Any) -> bool:
    """Roll an interrupted commit forward (under the writer lock); returns whether there was one."""
    p = path_of(store)
    try:
        doc = json.loads(p.read_bytes())
    except FileNotFoundError:
        return False
    except (OSError, ValueError):
        doc = {}
    root = Path(store.path).resolve()
    # a commit renames and unlinks memory files and their temp files in facts/ and .trash/,
    # nothing else: a journal planted in a clone cannot move or delete any other file
    own_dirs = {root / "facts", root / ".trash"}

    def inside(x: object) -> Path | None:
        if not isinstance(x, str):
            return None
        q = Path(x)
        try:
            if q.parent.resolve() not in own_dirs or not q.name.endswith((".md", ".tmp")):
                return None
        except (ValueError, OSError):
            return None
        return q

    dirs: set[Path] = set()
    for pair in doc.get("renames", []) if isinstance(doc, dict) else []:
        if not (isinstance(pair, list) and len(pair) == 2):
            continue
        tmp, final = inside(pair[0]), inside(pair[1])
        if tmp is None or final is None or final.is_symlink():
            continue
        with contextlib.suppress(FileNotFoundError):
            os.replace(tmp, final)  # a temp file still there: this rename had not happened
            dirs.add(final.parent)
    for x in doc.get("unlinks", []) if isinstance(doc, dict) else []:
        q = inside(x)
        if q is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(q)
                dirs.add(q.parent)
    for d in dirs:
        fsync_dir(d)
    end(store)
    notice("completed a write that was interrupted (kill or crash) before it finished")
    return True
