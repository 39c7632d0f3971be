"""`memcli edit`: a memory's file opened in the user's editor, checked on save and committed."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from memcli.core.errors import InputRejected, NotFound
from memcli.core.memory import MalformedMemory, Memory, now_iso
from memcli.ops.changes import ChangeSet

if TYPE_CHECKING:
    from memcli.ops.handle import Store


class EditFailed(InputRejected):
    """The edited file is not a valid memory; it was kept aside and the original left in place."""


def edit(store: Store, mid: str) -> tuple[Memory, bool]:
    """Open a copy of a memory's file in the editor; on save, validate and commit it. Returns
    (memory, changed). A broken edit raises EditFailed and is kept in `<store>/.edits/`."""
    path = store.fact_path(mid)
    if not path.is_file():
        raise NotFound(f"no memory with id {mid}")
    original = path.read_bytes()
    fd, tmp = tempfile.mkstemp(prefix=f"memcli-{mid}-", suffix=".md")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(original)
        cmd = shlex.split(os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi")  # as git does
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
        if path.read_bytes() != original:
            kept = _keep(store, mid, edited)
            raise EditFailed(f"memory {mid} changed on disk while you edited it; not overwriting",
                             hint=f"your edit is kept in {kept}")
        cs = ChangeSet(store)
        cs.put(memory, event="EDIT")
        cs.commit()
        return memory, True
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _keep(store: Store, mid: str, data: bytes) -> Path:
    folder = store.path / ".edits"
    folder.mkdir(exist_ok=True)
    target = folder / f"{mid}.{now_iso().replace(':', '')}.md"
    target.write_bytes(data)
    return target
