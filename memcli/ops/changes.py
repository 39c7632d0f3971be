"""The one write path: a planned set of typed changes, previewed (`--dry-run`) or committed as one unit.

Planning (reads, embeddings, LLM calls) holds no lock. `commit()` takes the writer lock, re-checks
every file the plan read (a file changed meanwhile is re-planned when each change to it is a pure
function of its state, else `Conflict`), stages every file durably before the first rename, logs and
journals, renames, then updates the index once. The steps are in docs/how-it-works.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from memcli.core.errors import Conflict, MemcliError, NotFound, StoreError
from memcli.core.memory import Memory, now_iso
from memcli.core.notices import notice
from memcli.ops.handle import Store
from memcli.services.embed import text_hash
from memcli.services.threads import in_thread
from memcli.storage import journal
from memcli.storage.atomic import Staged, flush_files, fsync_dir, stage_file, stage_many

# From this many texts to embed, a memory made from others (a merge, a distillation) is indexed with
# its closest source's vector and a detached process embeds it exactly: the model would otherwise be
# most of a bulk curation's time and memory. Fewer cost less than starting the model elsewhere.
PROVISIONAL_MIN = 128
PUBLISH_ATTEMPTS = 20  # verify -> stage -> recheck rounds under the lock before a Conflict
REINFORCE = 0.05
CONFIDENCE_CAP = 0.95


T = TypeVar("T")
PLAN_ATTEMPTS = 3  # plan -> commit rounds when a file changed between planning and commit


def commit_planned(plan: Callable[[], tuple[ChangeSet, T]]) -> T:
    """Plan (no lock), then commit; on a `Conflict` plan again from the new files, at most
    PLAN_ATTEMPTS times. Returns what the last plan returned."""
    for attempt in range(PLAN_ATTEMPTS):
        cs, result = plan()
        try:
            cs.commit()
            return result
        except Conflict:
            if attempt == PLAN_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def file_hash(raw: bytes) -> str:
    """What `commit` compares: the whole file, front matter included."""
    return hashlib.sha256(raw).hexdigest()


RACY_NS = 2_000_000_000  # a file changed less than this before it was read is compared by content


class Seen(NamedTuple):
    """A file's identity when it was read, so that one `stat` later proves it unchanged without
    hashing it again. Any write sets the ctime, which no user call can set back, so the same inode,
    size, mtime and ctime prove the same bytes, unless the ctime was within the clock's granularity
    of the read (git's "racy" files): those are compared by content."""

    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int
    read_ns: int  # the clock just before the read

    @classmethod
    def of(cls, st: os.stat_result, read_ns: int) -> Seen:
        return cls(st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, read_ns)

    @property
    def settled(self) -> bool:
        """Changed long enough before it was read that any later write shows in its ctime."""
        return self.ctime_ns < self.read_ns - RACY_NS

    def same_file(self, other: Seen) -> bool:
        return self[:4] == other[:4]  # inode, size, mtime, ctime

    def still(self, st: os.stat_result) -> bool:
        """Whether `st`, a stat taken now, proves the file unchanged since it was read."""
        return self.settled and self.same_file(Seen.of(st, self.read_ns))


def _changed(mid: str) -> Conflict:
    return Conflict(f"facts/{mid}.md changed while this command ran; nothing was written (run it again)")


def _removed(mid: str) -> Conflict:
    return Conflict(f"memory {mid} was removed while this command ran; nothing was written")


def stat_seen(path: str) -> Seen:
    """A file's identity now, without reading it (FileNotFoundError if it is gone)."""
    read_ns = time.time_ns()
    return Seen.of(os.stat(path), read_ns)


def read_seen(path: str) -> tuple[bytes, Seen]:
    """A file's bytes and its identity as they were read (FileNotFoundError if it is gone)."""
    read_ns = time.time_ns()
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        data = os.read(fd, st.st_size + 1)  # a regular file reads short only at its end
        if len(data) > st.st_size:  # it grew meanwhile: read the rest
            chunks = [data]
            while chunk := os.read(fd, 1 << 16):
                chunks.append(chunk)
            data = b"".join(chunks)
    finally:
        os.close(fd)
    return data, Seen.of(st, read_ns)


def touch(m: Memory, when: str | None) -> None:
    """`updated` is now, or when an input from the past said it (a replayed chat log is not new)."""
    m.updated = max(m.updated, when) if when else now_iso()


# ---------------------------------------------------------------- edits of an existing memory
@dataclass
class Reinforce:
    """Seen again: the new origins join the support set and confidence rises a little."""

    origins: list[str]
    event: str = "NONE"
    when: str | None = None  # when it was said (an input from the past), else now
    rebasable = True

    def apply(self, m: Memory) -> None:
        m.origins = list(dict.fromkeys([*m.origins, *self.origins]))
        m.confidence = min(CONFIDENCE_CAP, max(m.confidence, m.confidence + REINFORCE))
        touch(m, self.when)


@dataclass
class Update:
    """New text for a memory; the old text goes to `history` (never lost)."""

    text: str
    tags: list[str] = field(default_factory=list)
    origins: list[str] = field(default_factory=list)
    confidence: float | None = None
    code_pattern: str | None = None
    flags: dict[str, bool] = field(default_factory=dict)
    when: str | None = None
    event: str = "UPDATE"
    rebasable = False  # the new text was decided against the old one: a changed file needs a new decision

    def apply(self, m: Memory) -> None:
        m.history.append({"event": "UPDATE", "at": now_iso(), "old": m.text})
        m.text = self.text
        m.tags = list(dict.fromkeys([*m.tags, *self.tags]))
        m.origins = list(dict.fromkeys([*m.origins, *self.origins]))
        if self.confidence is not None:
            m.confidence = max(m.confidence, self.confidence)
        touch(m, self.when)
        if self.code_pattern and not m.code_pattern:
            m.code_pattern = self.code_pattern
        m.flags.update(self.flags)


@dataclass
class Link:
    """A typed relation to another memory (`contradicts`, `distilled_into`, ...), added once."""

    rel: str
    other: str
    event: str = "LINK"
    rebasable = True

    def apply(self, m: Memory) -> None:
        if not any(lk.get("rel") == self.rel and lk.get("id") == self.other for lk in m.links):
            m.links.append({"rel": self.rel, "id": self.other})


@dataclass
class Supersede:
    """A newer memory replaces this one: it stays, marked `superseded_by`, hidden by default."""

    by: str
    event: str = "SUPERSEDE"
    when: str | None = None
    rebasable = True

    def apply(self, m: Memory) -> None:
        m.extra["superseded_by"] = self.by
        touch(m, self.when)


@dataclass
class Detach:
    """An origin withdraws its support (rollback); the memory stays for its other origins."""

    origin: str
    event: str = "ROLLBACK"
    rebasable = True

    def apply(self, m: Memory) -> None:
        m.origins = [o for o in m.origins if o != self.origin]
        m.updated = now_iso()


@dataclass
class Feedback:
    """A user said the memory was useful (confidence +0.05, capped) or wrong (-0.05, floor 0.05)."""

    useful: bool
    event: str = "FEEDBACK"
    rebasable = True

    def apply(self, m: Memory) -> None:
        m.confidence = round(min(CONFIDENCE_CAP, m.confidence + REINFORCE) if self.useful
                             else max(0.05, m.confidence - REINFORCE), 4)
        m.updated = now_iso()


@dataclass
class Retarget:
    """git history was rewritten (amend, rebase): `mapping` renames old commit origins to new ones."""

    mapping: dict[str, str]
    event: str = "REMAP"
    rebasable = True

    def apply(self, m: Memory) -> None:
        m.origins = list(dict.fromkeys(self.mapping.get(o, o) for o in m.origins))
        m.updated = now_iso()


Edit = Reinforce | Update | Link | Supersede | Detach | Feedback | Retarget


# ---------------------------------------------------------------- file-level changes
@dataclass
class _Target:
    """An existing memory the plan edits: as read (with its file hash), and as it will be."""

    base: Memory
    hash: str
    working: Memory
    edits: list[Edit] = field(default_factory=list)
    raw: bytes = b""
    seen: Seen | None = None


@dataclass
class _Trash:
    memory: Memory
    hash: str
    reason: str
    event: str
    raw: bytes = b""
    seen: Seen | None = None


@dataclass
class _Put:
    """A whole memory written as given: new (`hash` None) or replacing the file read at planning."""

    memory: Memory
    hash: str | None
    exists: bool = False
    seen: Seen | None = None
    like: str | None = None  # a memory whose vector may stand in for this one's (see PROVISIONAL_MIN)


@dataclass
class CommitReport:
    written: list[str] = field(default_factory=list)
    trashed: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    rebased: list[str] = field(default_factory=list)  # re-planned because their file changed meanwhile
    provisional: int = 0  # new memories indexed with a provisional vector (see PROVISIONAL_MIN)


class ChangeSet:
    """Planned changes to one store, then `preview()` or `commit()`; reading through it
    (`memory(id)`) sees the plan's own changes. A `preview` one (a dry run) cannot commit, so it
    takes what the catalog knows without opening the files."""

    def __init__(self, store: Store, *, preview: bool = False) -> None:
        self.store = store
        self.preview_only = preview
        self._puts: dict[str, _Put] = {}
        self._targets: dict[str, _Target] = {}
        self._trash: dict[str, _Trash] = {}
        self._restore: dict[str, Memory] = {}
        self._log: list[dict[str, Any]] = []
        self._order: list[tuple[str, str, str]] = []  # (op, id, detail) for preview
        self._after: list[Callable[[], None]] = []
        self._known: dict[str, tuple[Memory, tuple[int, int]]] = {}
        self._path = store.fact_file  # `facts/<id>.md` as a string, the id checked
        self.committed = False

    # ------------------------------------------------------------ reading
    def known(self, entries: dict[str, tuple[Memory, tuple[int, int]]]) -> None:
        """Catalog memories with the file signature (mtime_ns, size) they were read from: a file
        still matching is not parsed again (as `Index.sync` trusts). Edits go to a clone."""
        self._known.update(entries)

    def _read(self, mid: str) -> tuple[Memory, str, bytes, Seen | None]:
        """(memory, file hash, bytes, identity). A settled file the catalog knows as it is now is not
        read: its identity proves at commit that it did not change (no hash: any change counts)."""
        if self.preview_only and mid in self._known:
            return self._known[mid][0], "", b"", None
        path = self._path(mid)
        entry = self._known.get(mid)
        try:
            if entry is not None:
                seen = stat_seen(path)
                if seen.settled and entry[1] == (seen.mtime_ns, seen.size):
                    return entry[0], "", b"", seen
            raw, seen = read_seen(path)
        except FileNotFoundError:
            raise NotFound(f"no memory with id {mid}") from None
        if entry is not None and entry[1] == (seen.mtime_ns, seen.size):
            return entry[0], file_hash(raw), raw, seen
        return Memory.parse(raw, file_id=mid), file_hash(raw), raw, seen

    def memory(self, mid: str) -> Memory:
        """The memory as this plan leaves it (a planned new memory, or an edited working copy)."""
        m = self.peek(mid)
        t = self._targets.get(mid)
        if t is not None and t.working is t.base:  # read by `peek` only so far: edits go to a copy
            t.working = m = t.base.clone()
        return m

    def peek(self, mid: str) -> Memory:
        """`memory(mid)` to read only: not copied (a merge reads its sources and trashes them as is)."""
        if mid in self._puts:
            return self._puts[mid].memory
        if mid in self._trash:
            raise NotFound(f"memory {mid} is trashed by this change set")
        t = self._targets.get(mid)
        if t is None:
            base, h, raw, seen = self._read(mid)
            t = self._targets[mid] = _Target(base, h, base, raw=raw, seen=seen)
        return t.working

    # ------------------------------------------------------------ planning
    def add(self, memory: Memory, *, event: str = "ADD", sources: list[str] | None = None,
            like: str | None = None, **log: Any) -> Memory:
        """A new memory file. `sources`: what it was made from (logged); `like`: the source whose
        vector stands in for its own in a bulk commit (PROVISIONAL_MIN), by default the newest."""
        like = like or (sources[-1] if sources else None)
        if sources is not None:
            log = {"sources": sources, **log}
        self._plan_put(_Put(memory, None, like=like), event, log)
        return memory

    def _plan_put(self, put: _Put, event: str, log: dict[str, Any]) -> None:
        memory = put.memory
        self._puts[memory.id] = put
        self._order.append((event, memory.id, memory.text))
        self._log.append({"event": event, "id": memory.id, "text": memory.text, **log})

    def put(self, memory: Memory, *, event: str = "IMPORT", **log: Any) -> str:
        """Write a memory as given (import): 'added', 'updated' (old text to history) or
        'unchanged' (nothing planned)."""
        try:
            raw, seen = read_seen(self._path(memory.id))
        except FileNotFoundError:
            self._plan_put(_Put(memory, None), event, log)
            return "added"
        from memcli.core.memory import MalformedMemory

        try:
            old: Memory | None = Memory.parse(raw, file_id=memory.id)
        except MalformedMemory:
            old = None
        if old is not None and old.to_dict() == memory.to_dict():
            return "unchanged"
        if old is not None and old.text != memory.text:
            memory.history = [*old.history, {"event": "UPDATE", "at": memory.updated, "old": old.text}]
        self._plan_put(_Put(memory, file_hash(raw), exists=True, seen=seen), event, log)
        return "updated"

    def edit(self, mid: str, change: Edit, *, quiet: bool = False, **log: Any) -> Memory:
        """Apply one edit to a memory; `quiet`: no log line (it is part of one the caller logs)."""
        if mid in self._puts:
            change.apply(self._puts[mid].memory)
        else:
            m = self.memory(mid)
            old = m.text
            change.apply(m)
            self._targets[mid].edits.append(change)
            if isinstance(change, Update):
                log = {"old": old, "text": change.text, **log}
        self._order.append((change.event, mid, _detail(change)))
        if not quiet:
            self._log.append({"event": change.event, "id": mid, **log})
        return self.memory(mid)

    def trash(self, mid: str, reason: str, *, event: str = "DELETE", **log: Any) -> Memory:
        """Move a memory to `.trash/` with the reason (restorable)."""
        if mid in self._puts and self._puts[mid].hash is None:
            raise StoreError(f"memory {mid} is new in this change set; it cannot be trashed")
        m = self.peek(mid)  # it leaves as it is: no working copy is made (prune trashes thousands)
        target = self._targets.pop(mid)
        self._trash[mid] = _Trash(target.base, target.hash, reason, event, target.raw, target.seen)
        self._order.append((event, mid, reason))
        self._log.append({"event": event, "id": mid, "old": m.text, "reason": reason, **log})
        return m

    def restore(self, mid: str) -> Memory:
        """Bring a memory back from `.trash/`, exactly as it was before it left."""
        src = self.store.trash_dir / f"{mid}.md"
        try:
            raw = src.read_bytes()
        except (FileNotFoundError, ValueError):
            raise NotFound(f"no memory with id {mid} in the trash") from None
        if self.store.fact_path(mid).exists():
            raise StoreError(f"memory {mid} exists already; not overwriting it")
        memory = Memory.parse(raw, file_id=mid)
        memory.extra.pop("trashed", None)
        if not self._restore:  # once committed, the restored memories' notes leave trashed.jsonl
            self.on_commit(self.store.compact_trash_notes)
        self._restore[mid] = memory
        self._order.append(("RESTORE", mid, memory.text))
        self._log.append({"event": "RESTORE", "id": mid, "text": memory.text})
        return memory

    def on_commit(self, action: Callable[[], None]) -> None:
        """Run `action` after a successful commit, outside the lock."""
        self._after.append(action)

    def log(self, event: str, **fields: Any) -> None:
        """A log line written with the commit (a refused DELETE, a flagged contradiction)."""
        self._log.append({"event": event, **fields})

    @property
    def empty(self) -> bool:
        return not (self._puts or any(t.edits for t in self._targets.values()) or self._trash or self._restore)

    def preview(self) -> list[dict[str, Any]]:
        """What `commit()` would do, one entry per change in planning order."""
        return [{"op": op, "id": mid, "detail": detail} for op, mid, detail in self._order]

    # ------------------------------------------------------------ commit
    def commit(self) -> CommitReport:
        """Apply the plan under the writer lock (see the module docstring), once."""
        if self.committed:
            raise StoreError("this change set was committed already")
        if self.preview_only:
            raise StoreError("a preview (dry-run) change set cannot be committed; plan it again to commit")
        report = CommitReport()
        store = self.store
        if self.empty and not self._log:
            self.committed = True
            return report
        store.ensure()
        vectors, provisional = self._vectors()
        report.provisional = len(provisional)
        with store.lock():
            if self._trash:
                store.trash_dir.mkdir(exist_ok=True)
            store.facts_dir.mkdir(parents=True, exist_ok=True)
            # A bulk trash moves the files as they are (a rename each, no copy) and notes when and
            # why in the trash's own log; a few are copied with that note in their front matter.
            move = len(self._trash) >= BATCH
            trash_dir = os.fspath(store.trash_dir)
            moves = [(self._path(mid), f"{trash_dir}/{mid}.md") for mid in self._trash] if move else []
            unlinks: list[str | Path] = [] if move else [self._path(mid) for mid in self._trash]
            unlinks += [store.trash_dir / f"{mid}.md" for mid in self._restore]

            def publish(staged: list[tuple[str, Path]]) -> None:
                # logged before the renames: a commit killed after this is logged, and the journal
                # lets the next writer finish it; a full disk fails here with nothing applied
                if staged:  # else nothing happened since _verify: the files are as it found them
                    self._recheck()
                store.log_many(self._log)
                if moves:
                    at = now_iso()
                    store.note_trashed([(mid, at, tr.reason) for mid, tr in self._trash.items()])
                journal.begin(store, [*staged, *moves], unlinks)

            def finish(staged: list[tuple[str, Path]], replaced: list[Path]) -> None:
                """The renames and unlinks, each directory fsynced once, the journal closed."""
                _rename_all(staged, replaced)
                for src, dst in moves:
                    os.replace(src, dst)
                _unlink_all(unlinks)
                fsync_dir(store.facts_dir)
                if self._trash or self._restore:
                    fsync_dir(store.trash_dir)
                journal.end(store)

            gone_names = [f"{mid}.md" for mid in self._trash]
            for attempt in range(PUBLISH_ATTEMPTS):
                self._verify(report)  # re-plans what can be re-planned, else Conflict
                writes, fresh = self._render(copy_trash=not move)
                overlap = bool(fresh or gone_names) and len(writes) + len(moves) >= BATCH
                try:
                    staged, written = _stage_all(writes)

                    def publish_all(staged: list[tuple[str, Path]] = staged, written: Staged = written,
                                    flush: bool = len(writes) >= BATCH) -> None:
                        # (this attempt's values bound as defaults: the loop rebinds the names)
                        _publish_staged(staged, publish, flush=flush)
                        finish(staged, written.replaced)
                    if not (fresh or gone_names):
                        publish_all()
                    else:
                        signatures = {path.name: sig for path, sig in written.signatures.items()
                                      if path.parent == store.facts_dir}
                        self._publish_and_index(publish_all, overlap, fresh, gone_names, signatures, vectors,
                                                provisional)
                    break
                except Conflict:  # edited while staging: verify (and re-plan) again
                    if attempt == PUBLISH_ATTEMPTS - 1:
                        raise
        self.committed = True
        for action in self._after:
            action()
        report.written = [n[:-3] for n in fresh]
        report.rebased = list(dict.fromkeys(report.rebased))
        report.trashed = list(self._trash)
        report.restored = list(self._restore)
        if provisional:
            from memcli.services.detached import start_refresh

            start_refresh(store.path, enabled=store.config.background)
        return report

    def _vectors(self) -> tuple[dict[str, Any], dict[str, str]]:
        """The new texts' vectors by text hash (cached or computed, before the lock), and the new
        memories given a provisional vector instead (file name -> the stand-in's file name)."""
        puts = self._puts.values()
        new_texts = [p.memory.text for p in puts]
        new_texts += [t.working.text for t in self._targets.values() if t.working.text != t.base.text]
        new_texts += [m.text for m in self._restore.values()]
        if not new_texts:
            return {}, {}
        embedder = self.store.index.embedder
        hashes = {t: text_hash(t) for t in new_texts}  # each distinct text once, in order
        vectors: dict[str, Any] = dict(embedder.cached(list(hashes)))
        missing = {h for h in hashes.values() if h not in vectors}
        provisional: dict[str, str] = {}
        if len(missing) >= PROVISIONAL_MIN:
            stand_in = [p for p in puts if p.like and p.hash is None and hashes[p.memory.text] in missing]
            provisional = {f"{p.memory.id}.md": f"{p.like}.md" for p in stand_in}
            missing -= {hashes[p.memory.text] for p in stand_in}
        rest = [t for t, h in hashes.items() if h in missing]
        if rest:
            vectors.update(zip((hashes[t] for t in rest), embedder.embed(rest)))
        return vectors, provisional

    def _publish_and_index(self, finish: Callable[[], None], overlap: bool, fresh: dict[str, Memory],
                           gone: list[str], signatures: dict[str, tuple[int, int]],
                           vectors: dict[str, Any], provisional: dict[str, str]) -> None:
        """Run `finish` (publish the staged files) and record them in the index. For a batch
        (`overlap`) `finish` runs in a thread (its system calls release the GIL) while the index
        writes its rows, committing them only once `finish` is done: files are durable first, and
        a `Conflict` rolls the rows back. A failed index update does not fail the commit: the next
        command's sync catches up."""
        store = self.store
        if overlap:
            published = in_thread("memcli-publish", finish)
            before_commit = published.result
        else:
            finish()
            before_commit = None
        try:
            store.index.apply_files(fresh, gone, signatures=signatures, vectors=vectors,
                                    provisional=provisional, before_commit=before_commit)
        except BaseException as e:
            if overlap:
                failed = published.exception()  # waits: the files are finished first, whatever failed
                if failed is e:
                    raise
                if failed is not None:
                    raise failed from e
            if _failed_index(e):
                store.index.close()
                notice(f"written, but the index could not be updated ({e}); the next command will")
                return
            raise
        if overlap:
            published.result()

    def _render(self, copy_trash: bool = True) -> tuple[list[tuple[Path, bytes]], dict[str, Memory]]:
        """Every file the commit writes (facts, and unless moved the trash copies), and the memories
        written to `facts/`."""
        store = self.store
        writes: list[tuple[Path, bytes]] = []
        fresh: dict[str, Memory] = {}
        live = [(mid, p.memory) for mid, p in self._puts.items()]
        live += [(mid, t.working) for mid, t in self._targets.items() if t.edits]
        for mid, m in [*live, *self._restore.items()]:
            writes.append((store.fact_path(mid), m.to_markdown().encode("utf-8")))
            fresh[f"{mid}.md"] = m
        at = now_iso()
        for mid, tr in self._trash.items() if copy_trash else ():
            if not tr.hash:  # planned from its identity alone (see `trash`): read it now
                try:
                    raw, seen = read_seen(self._path(mid))
                except FileNotFoundError:
                    raise _removed(mid) from None
                if tr.seen is None or not seen.same_file(tr.seen):
                    raise _changed(mid)
                tr.raw, tr.hash = raw, file_hash(raw)
            writes.append((store.trash_dir / f"{mid}.md", _trashed_bytes(tr, at)))
        return writes, fresh

    def _recheck(self) -> None:
        """Right before the renames: no file changed while staging (an editor takes no lock)."""
        expected = [*((mid, t) for mid, t in self._targets.items() if t.edits), *self._trash.items(),
                    *((mid, p) for mid, p in self._puts.items() if p.hash is not None)]
        for mid, planned in expected:
            if not self._unchanged(mid, planned.hash, planned.seen)[0]:
                raise _changed(mid)

    def _unchanged(self, mid: str, expected: str, seen: Seen | None) -> tuple[bool, bytes | None, Seen | None]:
        """(whether `facts/<mid>.md` still holds the bytes hashed `expected`, its bytes if read
        (None: not read, or gone), its identity now); one stat proves it when `seen` can."""
        path = self._path(mid)
        if seen is not None:
            try:
                if seen.still(os.stat(path)):
                    return True, None, seen
            except FileNotFoundError:
                return False, None, None
        try:
            raw, now = read_seen(path)
        except FileNotFoundError:
            return False, None, None
        return file_hash(raw) == expected, raw, now

    def _verify(self, report: CommitReport) -> None:
        """Under the lock: each file read at planning is as it was, or re-planned, or `Conflict`."""
        for mid, t in self._targets.items():
            if not t.edits:
                continue
            same, raw, seen = self._unchanged(mid, t.hash, t.seen)
            if same:
                t.seen = seen
                continue
            if raw is None:
                raise _removed(mid)
            if not all(e.rebasable for e in t.edits):
                raise _changed(mid)
            fresh = Memory.parse(raw, file_id=mid)
            for e in t.edits:
                e.apply(fresh)
            t.base, t.hash, t.working, t.raw, t.seen = Memory.parse(raw, file_id=mid), file_hash(raw), fresh, raw, seen
            report.rebased.append(mid)
        for mid, tr in self._trash.items():
            same, raw, seen = self._unchanged(mid, tr.hash, tr.seen)
            if not same:
                raise _removed(mid) if raw is None else _changed(mid)
            tr.seen = seen
        for mid, put in self._puts.items():
            if put.hash is None:
                if os.path.exists(self._path(mid)):
                    raise Conflict(f"memory {mid} appeared while this command ran; nothing was written")
                continue
            same, raw, seen = self._unchanged(mid, put.hash, put.seen)
            if not same:
                raise _changed(mid)
            put.seen = seen
        for mid in self._restore:
            if os.path.exists(self._path(mid)):
                raise StoreError(f"memory {mid} exists already; not overwriting it")
            if not (self.store.trash_dir / f"{mid}.md").is_file():
                raise Conflict(f"memory {mid} left the trash while this command ran; nothing was written")


_PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9 _.,/()'-]*\Z")


def _trashed_bytes(tr: _Trash, at: str) -> bytes:
    """The trash copy: the file as it was, with `trashed: {at, reason}` added to its front matter
    (no re-rendering: cheap, and a hand-written file keeps its layout)."""
    text = tr.raw.decode("utf-8", "replace")
    end = text.find("\n---\n", 3)
    if text.startswith("---\n") and end != -1 and "\ntrashed:" not in text[:end]:
        # a reason that is not a safe plain scalar is a JSON string: YAML reads it double-quoted
        reason = tr.reason if _PLAIN.match(tr.reason) else json.dumps(tr.reason)
        extra = f"trashed:\n  at: {at}\n  reason: {reason}\n"
        return (text[: end + 1] + extra + text[end + 1 :]).encode("utf-8")
    gone = Memory.from_dict({**tr.memory.to_dict(), "trashed": {"at": at, "reason": tr.reason}})
    return gone.to_markdown().encode("utf-8")


def _unlink_all(paths: list[str | Path]) -> None:
    """Remove files (trashed by copy, restored); no threads: an unlink without fsync is microseconds."""
    for p in paths:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(p)


def _detail(change: Edit) -> str:
    if isinstance(change, Update):
        return change.text
    if isinstance(change, Reinforce):
        return "origins " + ", ".join(change.origins)
    if isinstance(change, Link):
        return f"{change.rel} {change.other}"
    if isinstance(change, Supersede):
        return f"superseded by {change.by}"
    if isinstance(change, Feedback):
        return "useful" if change.useful else "wrong"
    if isinstance(change, Retarget):
        return ", ".join(f"{old} -> {new}" for old, new in change.mapping.items())
    return f"origin {change.origin} removed"


# ---------------------------------------------------------------- writing
BATCH = 64  # from this many files a commit stages them without an fsync each, then flushes once


def _stage_all(writes: Iterable[tuple[Path, bytes]]) -> tuple[list[tuple[str, Path]], Staged]:
    """Stage every file: a few fsynced one by one, a batch unflushed (`_publish_staged` flushes it);
    returns the (temp, final) pairs and what staging learnt. A failure removes what was staged."""
    writes = list(writes)
    staged: list[tuple[str, Path]] = []
    written = Staged([], {})
    try:
        if len(writes) < BATCH:
            for path, data in writes:
                tmp, written.signatures[path] = stage_file(path, data)
                staged.append((tmp, path))
        else:
            written = stage_many(writes, staged)
    except BaseException:
        _discard(staged)
        raise
    return staged, written


def _publish_staged(staged: list[tuple[str, Path]], before_publish: Callable[[list[tuple[str, Path]]], None],
                    *, flush: bool) -> None:
    """After `_stage_all`: flush a batch, then `before_publish`; a failure removes the staged files
    (nothing was applied)."""
    try:
        if flush:
            flush_files(staged)
        before_publish(staged)
    except BaseException:
        _discard(staged)
        raise


def _discard(staged: list[tuple[str, Path]]) -> None:
    for tmp, _ in staged:
        _unlink_quietly(tmp)


def _unlink_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _rename_all(staged: list[tuple[str, Path]], replaced: list[Path]) -> None:
    """Rename the staged files into place, the replaced ones given a second name first (`_set_aside`)."""
    aside = _set_aside(replaced)
    try:
        for tmp, path in staged:
            os.replace(tmp, path)
    finally:
        _release(aside)


def _failed_index(e: BaseException) -> bool:
    """An index update's failure (full disk, broken catalog, hnswlib's RuntimeError), a notice once
    the files are written: they are the truth, and the next sync indexes them."""
    # RuntimeError itself only: its subclasses (RecursionError, NotImplementedError) are bugs
    return isinstance(e, (sqlite3.Error, OSError, MemcliError)) or type(e) is RuntimeError


def _set_aside(paths: list[Path]) -> list[str]:
    """A second name (`.<name>.<token>.old.tmp`) for each file a batch will replace; returns them.
    Replacing a file frees its blocks inside rename(2), one after the other; with a second name the
    rename only swaps names and `_release` frees the files in parallel. A kill leaves the names as
    `.*.tmp` files, which the next sync removes."""
    token = f"{os.getpid():x}{os.urandom(3).hex()}"
    names = []
    for path in paths:
        old = f"{path.parent}/.{path.name}.{token}.old.tmp"
        try:
            os.link(path, old, follow_symlinks=False)
        except OSError:  # gone meanwhile (nothing to free), or no hard links here: renamed over as is
            continue
        names.append(old)
    return names


def _release(names: list[str]) -> None:
    """Unlink the second names in parallel: each mostly waits on the file system's journal."""
    if not names:
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=8) as pool:
        for _ in pool.map(_unlink_quietly, names):
            pass
