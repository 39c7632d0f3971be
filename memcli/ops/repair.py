"""`doctor`'s checks of the parts of a store that can be damaged, and `doctor --fix`'s repairs: what
heals by itself anyway (a damaged catalog) and what no command trips over (temp files of a killed
writer, a memory in both `facts/` and `.trash/`, planted links). Nothing here raises.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import time
from pathlib import Path
from typing import Any

from memcli.ops.handle import Store
from memcli.storage import safety
from memcli.storage.atomic import fsync_dir

Check = dict[str, Any]


def nonregular_entries(facts_dir: Path) -> list[tuple[str, str]]:
    """`*.md` entries of facts/ that are not regular files, with what they are (lstat: never followed)."""
    out = []
    try:
        entries = list(os.scandir(facts_dir))
    except OSError:
        return out
    for e in entries:
        if not e.name.endswith(".md") or e.name.startswith("."):
            continue
        try:
            mode = e.stat(follow_symlinks=False).st_mode
        except OSError:
            continue
        if not stat.S_ISREG(mode):
            out.append((e.name, safety.file_kind(mode)))
    return sorted(out)


def temp_files(store: Store) -> list[Path]:
    """`.*.tmp` files a killed writer left in facts/ or .trash/ (a live writer holds the lock)."""
    out: list[Path] = []
    for d in (store.facts_dir, store.trash_dir):
        with contextlib.suppress(OSError):
            out += [d / n for n in os.listdir(d) if n.startswith(".") and n.endswith(".tmp")]
    return sorted(out)


def in_both(store: Store) -> list[str]:
    """Ids present in facts/ and in .trash/: a trash move (rm, merge, prune) cut short."""
    try:
        trashed = {n[:-3] for n in os.listdir(store.trash_dir) if n.endswith(".md")}
        live = {n[:-3] for n in os.listdir(store.facts_dir) if n.endswith(".md")}
    except OSError:
        return []
    return sorted(trashed & live)


def finish_trash_moves(store: Store, ids: list[str]) -> tuple[list[str], list[str]]:
    """Settle the memories in both facts/ and .trash/: the live copy goes where it is the trashed one
    (a trash move cut short), else it came back another way (a `git pull`) and the trash copy moves
    to `.quarantine/`. Returns (settled, left as they are: unreadable)."""
    from memcli.core.memory import MalformedMemory, Memory

    done, left = [], []
    quarantine = store.path / ".quarantine"
    for mid in ids:
        trash_file = store.trash_dir / f"{mid}.md"
        try:
            live = Memory.parse(safety.read_regular(store.fact_path(mid)), file_id=mid)
            gone = Memory.parse(safety.read_regular(trash_file), file_id=mid)
        except (OSError, MalformedMemory):
            left.append(mid)
            continue
        gone.extra.pop("trashed", None)
        if live.to_markdown() == gone.to_markdown():
            os.unlink(store.fact_path(mid))
        else:
            quarantine.mkdir(mode=0o700, exist_ok=True)
            os.replace(trash_file, quarantine / f"trash-{mid}.{time.strftime('%Y%m%dT%H%M%S')}.md")
        done.append(mid)
    if done:
        fsync_dir(store.facts_dir)
        fsync_dir(store.trash_dir)
    return done, left


def containment(store: Store, *, fix: bool = False) -> Check | None:
    """The `containment` check (safety.unsafe_entries), None when there is nothing to say. `fix`
    moves each link itself (never its target) into `.quarantine/`, and makes an empty `facts/` when
    that was one."""
    bad = safety.unsafe_entries(store.path)
    if not bad:
        return None
    listing = "; ".join(f"{name} is {kind}" for name, kind in bad)
    if not fix:
        return {"check": "containment", "ok": False, "detail":
                f"{listing} (never followed: every command refuses this store; doctor --fix moves them aside)"}
    if not safety.writable(store.path):
        return {"check": "containment", "ok": False, "detail": listing + ": the store cannot be written"}
    try:
        moved = quarantine_links(store.path, [name for name, _ in bad])
    except OSError as e:
        return {"check": "containment", "ok": False, "detail": f"{listing}: {e.strerror or e}"}
    left = safety.unsafe_entries(store.path)
    detail = f"{listing}: moved to .quarantine/ ({', '.join(moved)})"
    if left:
        detail += "; still there: " + "; ".join(f"{n} is {k}" for n, k in left)
    return {"check": "containment", "ok": not left, "detail": detail}


def quarantine_links(root: Path, names: list[str]) -> list[str]:
    """Rename each entry into `root/.quarantine/`; returns the new names. No lock: the lock file may
    be one of them, and no other command opens such a store. A `.quarantine` that is itself a link
    or a file is moved out of the way first."""
    stamp = f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    q = root / ".quarantine"
    if q.is_symlink():
        os.unlink(q)
    elif os.path.lexists(q) and not q.is_dir():
        os.replace(q, root / f".quarantine.broken-{stamp}")
    q.mkdir(mode=0o700, exist_ok=True)
    moved = []
    for name in names:
        if name == ".quarantine":
            continue
        src = root / name
        if not os.path.lexists(src):
            continue
        dest = q / f"{name.replace('/', '__')}.{stamp}"
        os.replace(src, dest)
        moved.append(dest.name)
    if "facts" in names and not os.path.lexists(root / "facts"):
        (root / "facts").mkdir(mode=0o700)
    fsync_dir(root)
    return moved


def _sqlite_ok(path: Path) -> str | None:
    """None when the database opens and passes `quick_check`; else what is wrong."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            rows = db.execute("PRAGMA quick_check").fetchall()
        finally:
            db.close()
    except sqlite3.Error as e:
        return str(e)
    return None if rows == [("ok",)] else str(rows[0][0])


def check(store: Store, *, fix: bool = False) -> list[Check]:
    """The damage checks, each {check, ok, detail}; with `fix`, each repair made is in `detail`."""
    checks: list[Check] = []
    writable = safety.writable(store.path)

    def add(name: str, ok: bool, detail: str) -> None:
        checks.append({"check": name, "ok": ok, "detail": detail})

    def repair(action: Any) -> str | None:
        if not writable:
            return "the store cannot be written"
        try:
            with store.lock():
                action()
        except Exception as e:  # noqa: BLE001 - doctor reports, never raises
            return str(e).splitlines()[0] if str(e) else type(e).__name__
        return None

    def fixable(name: str, problem: str, action: Any, done: str, advice: str) -> None:
        """A failed check: with `fix`, repaired (or why not), else what `doctor --fix` would do."""
        if fix:
            err = repair(action)
            add(name, err is None, f"{problem}: {err or done}")
        else:
            add(name, False, f"{problem} ({advice})")

    # .index must be a directory (never a file or a link)
    idx = store.index_dir
    if idx.is_symlink() or (idx.exists() and not idx.is_dir()):
        what = "a symbolic link" if idx.is_symlink() else "not a directory"
        fixable("index directory", f".index {'was' if fix else 'is'} {what}",
                lambda: safety.move_aside(idx, ".index"), "moved aside", "doctor --fix moves it aside")
    # the catalog and the usage counts: derived, so a damaged one is rebuilt / restarted
    for name, path, what in (("index catalog", idx / "catalog.sqlite", "rebuilt from facts/"),
                             ("usage counts", store.path / ".state.sqlite", "moved aside, counts restart")):
        if not path.is_file():
            continue
        problem = _sqlite_ok(path)
        if problem is None:
            add(name, True, "ok")
            continue

        fixable(name, problem, lambda path=path: safety.move_aside(path, path.name), what, f"doctor --fix: {what}")
    # facts/ entries that are not regular files: never followed, never indexed
    odd = nonregular_entries(store.facts_dir)
    if odd:
        quarantine = store.path / ".quarantine"

        def move() -> None:
            quarantine.mkdir(mode=0o700, exist_ok=True)
            for n, _k in odd:
                os.replace(store.facts_dir / n, quarantine / n)
        fixable("facts entries", "; ".join(f"facts/{n} is {k}" for n, k in odd), move, "moved to .quarantine/",
                "skipped, never followed; doctor --fix moves them to .quarantine/")
    else:
        add("facts entries", True, "all regular files")
    # leftovers of a killed writer
    tmps = temp_files(store)
    if tmps:
        fixable("temp files", f"{len(tmps)} left by an interrupted write",
                lambda: [p.unlink(missing_ok=True) for p in tmps], "removed", "doctor --fix removes them")
    # a store made by an older memcli: its .gitignore lacks what newer versions may leave behind
    missing = store.missing_ignores()
    if missing:
        if fix:
            err = repair(store.ensure_gitignore)
            add(".gitignore", err is None, f"added {', '.join(missing)}" + (f": {err}" if err else ""))
        else:
            add(".gitignore", False, f"does not ignore {', '.join(missing)} (doctor --fix adds them)")
    both = in_both(store)
    if both:
        if fix:
            result: dict[str, Any] = {}
            err = repair(lambda: result.update(zip(("done", "left"), finish_trash_moves(store, both))))
            left = result.get("left", both)
            add("trash moves", not left and err is None,
                f"{len(result.get('done', []))} completed" + (f"; still in both: {', '.join(left)}" if left else "")
                + (f" ({err})" if err else ""))
        else:
            add("trash moves", False,
                f"in both facts/ and .trash/: {', '.join(both)} (doctor --fix settles them)")
    return checks
