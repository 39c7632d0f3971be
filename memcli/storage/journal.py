"""A commit's intent, written before its renames, so a commit cut short (kill -9, power loss) is
completed by the next writer instead of leaving half of it applied.

A change set stages every file (fsynced temp files), logs, then renames them into place and
removes the files it trashes. Killed between the first rename and the last unlink, the store
would hold a merged memory beside its sources, or an id both in `facts/` and `.trash/`. The
journal lists the renames (temp -> final) and the unlinks; the next process that takes the
writer lock rolls it forward (a rename whose temp file is gone was done already) and deletes it.
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
    """Roll an interrupted commit forward (the caller holds the writer lock). Returns whether
    there was one. Paths outside the store are ignored: the journal is a file like any other."""
    p = path_of(store)
    try:
        doc = json.loads(p.read_bytes())
    except FileNotFoundError:
        return False
    except (OSError, ValueError):
        doc = {}
    root = Path(store.path).resolve()

    def inside(x: object) -> Path | None:
        if not isinstance(x, str):
            return None
        q = Path(x)
        try:
            q.parent.resolve().relative_to(root)
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
