"""`memcli edit`: a memory's file opened in the user's editor, checked on save and committed.

The editor works on a copy; a broken edit (bad YAML, empty body, a changed id) is kept aside in
`<store>/.edits/` so nothing typed is lost, and the original stays untouched.
"""

from __future__ import annotations

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


def editor_command() -> list[str]:
    """$VISUAL, else $EDITOR, else vi (as git does); split like a shell would."""
    value = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    return shlex.split(value)


def edit(store: Store, mid: str) -> tuple[Memory, bool]:
    """Open a memory's file in the editor on a copy; on save, validate and write it back
    through one ChangeSet commit. Returns (memory, changed).

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
        if path.read_bytes() != original:
            kept = _keep(store, mid, edited)
            raise EditFailed(f"memory {mid} changed on disk while you edited it; not overwriting",
                             hint=f"your edit is kept in {kept}")
        # one commit, like every change a user makes: the old text goes to history, the file is
        # written atomically (a change on disk since it was read stops it), the index follows
        cs = ChangeSet(store)
        cs.put(memory, event="EDIT")
        cs.commit()
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
