"""A store shared by a team through git: merge rules, conflict detection and `memcli sync`.

Facts are one file each, so two people adding memories never touch the same file. The one file
everybody appends to is `log.jsonl`: `.gitattributes` gives it git's built-in `union` merge
driver, so a pull keeps both sides' lines instead of stopping on a conflict.

`memcli sync` publishes the store's changes and nothing else. The store's changes are committed
on the local branch (only the store's paths), then merged, file by file, into the store of the
upstream branch as git has it after a fetch (base: where the two histories meet; a fact changed
on one side only takes that side, the log keeps both sides' lines), and ONE commit whose parent
is the upstream tip is pushed: a local work-in-progress commit is never pushed, and the project's
history gains no merge commit. The local branch then moves onto that commit (`reset --keep`
when it held store commits only; otherwise its own commits are replayed on top, as `git pull
--rebase` would, and left unpushed).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memcli.core.errors import StoreError
from memcli.ops.conflicts import conflict_advice, conflicted_files
from memcli.ops.handle import Store
from memcli.storage.atomic import atomic_write

GITATTRIBUTES = "# memcli: the change log is append-only; keep both sides' lines on a merge\nlog.jsonl merge=union\n"


class SyncError(StoreError):
    """git refused (no repository, no upstream, a conflict); the message says what to do."""


def write_gitattributes(store: Store) -> bool:
    """Give `log.jsonl` the union merge driver (kept if the user wrote their own). True if written."""
    path = store.path / ".gitattributes"
    try:
        current = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        current = ""
    if "log.jsonl" in current:
        return False
    atomic_write(path, (current + ("\n" if current and not current.endswith("\n") else "") + GITATTRIBUTES).encode())
    return True


def _git(args: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    except FileNotFoundError:
        raise SyncError("git is not installed") from None
    except subprocess.TimeoutExpired:
        raise SyncError(f"git {args[0]} took longer than 5 minutes") from None
    if check and out.returncode != 0:
        msg = (out.stderr.strip() or out.stdout.strip()).splitlines()
        raise SyncError(f"git {args[0]} failed: {msg[-1] if msg else f'exit {out.returncode}'}")
    return out


@dataclass
class SyncReport:
    repository: str
    committed: bool = False
    pulled: str = ""
    pushed: bool = False
    memories: int = 0
    steps: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"repository": self.repository, "committed": self.committed, "pulled": self.pulled,
                "pushed": self.pushed, "memories": self.memories, "steps": self.steps}


def _out(args: list[str], cwd: Path, **kw: Any) -> str:
    return _git(args, cwd, **kw).stdout.strip()


def _upstream(root: Path) -> tuple[str, str]:
    """(remote, branch name on it) of the current branch: its upstream, else `origin` and the
    same name."""
    branch = _git(["symbolic-ref", "-q", "--short", "HEAD"], root, check=False).stdout.strip()
    if not branch:
        raise SyncError("HEAD is detached: check out the branch the store is shared on, then sync")
    remote = _git(["config", f"branch.{branch}.remote"], root, check=False).stdout.strip()
    merge = _git(["config", f"branch.{branch}.merge"], root, check=False).stdout.strip()
    if not remote:
        remotes = _out(["remote"], root).split()
        if "origin" not in remotes:
            raise SyncError(f"branch {branch} has no upstream and there is no `origin` remote "
                            "(set one: git push -u <remote> " + branch + ")")
        remote = "origin"
    return remote, merge.removeprefix("refs/heads/") if merge else branch


def _tree(root: Path, commit: str | None, rel: str) -> dict[str, tuple[str, str]]:
    """path -> (mode, blob) of the store's files in `commit` (empty for None)."""
    if not commit:
        return {}
    out = _git(["ls-tree", "-r", "-z", "--full-tree", commit, *(["--", rel] if rel != "." else [])], root).stdout
    files = {}
    for entry in out.split("\0"):
        if not entry:
            continue
        meta, path = entry.split("\t", 1)
        mode, _kind, blob = meta.split()
        files[path] = (mode, blob)
    return files


def _blob(root: Path, sha: str) -> bytes:
    return subprocess.run(["git", "cat-file", "blob", sha], cwd=root, capture_output=True, check=True).stdout


def _union_lines(theirs: bytes, ours: bytes) -> bytes:
    """The log of both sides: theirs, then our lines they lack (the log is append-only)."""
    have = theirs.splitlines()
    seen = set(have)
    extra = [line for line in ours.splitlines() if line not in seen]
    out = b"\n".join([*have, *extra])
    return out + b"\n" if out else b""


def _merged_store(root: Path, rel: str, log_rel: str, base: str | None, ours: str, theirs: str,
                  report: SyncReport) -> dict[str, tuple[str, str] | None]:
    """The changes to make to `theirs`' store: path -> (mode, blob), or None to delete."""
    b, o, t = _tree(root, base, rel), _tree(root, ours, rel), _tree(root, theirs, rel)
    changes: dict[str, tuple[str, str] | None] = {}
    kept_ours = 0
    for path in sorted(set(b) | set(o)):
        mine, was, now = o.get(path), b.get(path), t.get(path)
        if mine == was or mine == now:
            continue  # we did not change it, or both sides agree
        if path == log_rel and mine is not None:
            data = _union_lines(_blob(root, now[1]) if now else b"", _blob(root, mine[1]))
            blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=root, input=data,
                                  capture_output=True, check=True).stdout.decode().strip()
            changes[path] = (mine[0], blob)
        elif mine is None:
            if now == was:
                changes[path] = None  # we removed it (trash, merge); they left it alone
        else:
            if now is not None and was is not None and now != was:
                kept_ours += 1  # both edited one memory: ours wins, theirs stays in git's history
            changes[path] = mine
    if kept_ours:
        report.steps.append(f"{kept_ours} memories edited on both sides: kept this clone's version")
    return changes


def _commit_on(root: Path, parent: str, changes: dict[str, tuple[str, str] | None], message: str) -> str | None:
    """A commit of `parent`'s tree with `changes`, parent `parent`; None when nothing changes."""
    fd, index = tempfile.mkstemp(prefix="memcli-sync-", suffix=".index")
    os.close(fd)
    env = {**os.environ, "GIT_INDEX_FILE": index}
    try:
        os.unlink(index)
        subprocess.run(["git", "read-tree", parent], cwd=root, env=env, check=True, capture_output=True)
        info = "".join(f"{v[0]} {v[1]}\t{p}\n" if v else f"0 {'0' * 40}\t{p}\n" for p, v in changes.items())
        subprocess.run(["git", "update-index", "--index-info"], cwd=root, env=env, input=info,
                       text=True, check=True, capture_output=True)
        tree = subprocess.run(["git", "write-tree"], cwd=root, env=env, check=True, capture_output=True,
                              text=True).stdout.strip()
    finally:
        with contextlib.suppress(OSError):
            os.unlink(index)
    if tree == _out(["rev-parse", f"{parent}^{{tree}}"], root):
        return None
    return _out(["commit-tree", tree, "-p", parent, "-m", message], root)


def _store_only(root: Path, commit: str, rel: str) -> bool:
    paths = _out(["diff-tree", "--no-commit-id", "--name-only", "-r", "-m", "--root", commit], root).splitlines()
    prefix = "" if rel == "." else rel.rstrip("/") + "/"
    return all(p.startswith(prefix) for p in paths)


_DROP = ("import sys\ntodo, drop = sys.argv[1], sys.argv[2:]\nlines = open(todo).read().splitlines(True)\n"
         "def dropped(x):\n    w = x.split()\n    return len(w) > 1 and w[0] == 'pick' and any(\n"
         "        d.startswith(w[1]) or w[1].startswith(d) for d in drop)\n"
         "open(todo, 'w').writelines(x for x in lines if not dropped(x))\n")


def _seq_editor(drop: list[str]) -> str:
    """A GIT_SEQUENCE_EDITOR that removes the `pick` lines of `drop` (commits already published)
    from the rebase's todo list (git appends the todo file's path: `$0` of `sh -c`)."""
    inner = f'{shlex.quote(sys.executable)} -c {shlex.quote(_DROP)} "$0" {" ".join(drop)}'
    return f"sh -c {shlex.quote(inner)}"


def _move_local(root: Path, rel: str, base: str, published: str, report: SyncReport) -> None:
    """Put the local branch on `published`: its store-only commits are in it; any other commit of
    the user's is replayed on top (not pushed). A replay that fails leaves the branch as it was."""
    local = _out(["rev-list", "--reverse", f"{base}..HEAD"], root).splitlines()
    own = [c for c in local if not _store_only(root, c, rel)]
    quiet = ["-c", "core.hooksPath=/dev/null"]  # memcli's own post-rewrite hook has nothing to do here
    if not own:
        _git([*quiet, "reset", "-q", "--keep", published], root)
        return
    drop = [c for c in local if c not in own]
    moved = subprocess.run(["git", *quiet, "rebase", "-q", "-i", "--autostash", "--onto", published, base],
                           cwd=root, capture_output=True, text=True, timeout=300,
                           env={**os.environ, "GIT_SEQUENCE_EDITOR": _seq_editor(drop), "GIT_EDITOR": "true"})
    if moved.returncode != 0:
        subprocess.run(["git", "rebase", "--abort"], cwd=root, capture_output=True)
        report.steps.append(f"your {len(own)} own commit(s) could not be replayed on the published store: "
                            "the branch is as it was; run `git pull --rebase` when ready")
        return
    report.steps.append(f"replayed your {len(own)} own commit(s) on top (not pushed)")


def sync(store: Store, *, push: bool = True, message: str = "memcli: sync memories") -> SyncReport:
    """Publish the store's changes, and only them, on the upstream branch; bring the teammates'
    in (module docstring). Re-indexes; a conflict marker in the store stops with advice."""
    top = _git(["rev-parse", "--show-toplevel"], store.path, check=False)
    if top.returncode != 0:
        raise SyncError(f"{store.path} is not inside a git repository (commit the store to one to share it)")
    root = Path(top.stdout.strip())
    report = SyncReport(str(root))
    if write_gitattributes(store):
        report.steps.append("wrote .gitattributes (log.jsonl merge=union)")
    store.ensure_gitignore()  # per-machine state (index, trash, inbox, edit drafts) never enters the history
    before = conflicted_files(store)
    if before:
        raise SyncError(f"conflict markers in {', '.join(before)}: {conflict_advice(before)}")
    rel = str(store.path.resolve().relative_to(root.resolve())) if store.path.resolve() != root.resolve() else "."
    log_rel = str(Path(rel) / store.log_path.name) if rel != "." else store.log_path.name
    _git(["add", "--", rel], root)
    staged = _git(["diff", "--cached", "--quiet", "--", rel], root, check=False)
    if staged.returncode == 1:
        _git(["-c", "core.hooksPath=/dev/null", "commit", "--no-verify", "-q", "-m", message, "--", rel], root)
        report.committed = True
        report.steps.append("committed the store's changes")
    remote, branch = _upstream(root)
    for _attempt in range(3):  # a teammate pushing meanwhile: fetch again and redo
        fetched = _git(["fetch", "-q", remote, f"refs/heads/{branch}"], root, check=False)
        if fetched.returncode != 0:
            msg = (fetched.stderr.strip() or fetched.stdout.strip()).splitlines() or [f"exit {fetched.returncode}"]
            hint = f" (push the branch once: git push -u {remote} {branch})" if "find remote ref" in msg[-1] else ""
            raise SyncError(f"git fetch {remote} {branch} failed: {msg[-1]}{hint}")
        theirs = _out(["rev-parse", "FETCH_HEAD"], root)
        base = _git(["merge-base", "HEAD", theirs], root, check=False).stdout.strip() or None
        if base is None:
            raise SyncError(f"this branch and {remote}/{branch} share no history; pull once by hand")
        changes = _merged_store(root, rel, log_rel, base, "HEAD", theirs, report)
        published = _commit_on(root, theirs, changes, message) or theirs
        if push and published != theirs:
            pushed = _git(["push", "-q", remote, f"{published}:refs/heads/{branch}"], root, check=False)
            if pushed.returncode != 0:
                if "rejected" in pushed.stderr or "fetch first" in pushed.stderr:
                    continue
                msg = (pushed.stderr.strip() or pushed.stdout.strip()).splitlines()
                raise SyncError(f"git push failed: {msg[-1] if msg else 'exit ' + str(pushed.returncode)}")
            report.pushed = True
            report.steps.append(f"pushed the store's changes to {remote}/{branch} (one commit, nothing else)")
        elif published == theirs:
            report.steps.append("nothing of the store's to publish")
        _move_local(root, rel, base, published, report)
        report.pulled = "ok"
        report.steps.append("pulled")
        break
    else:
        raise SyncError(f"{remote}/{branch} kept moving while syncing; run `memcli sync` again")
    store.index.sync()
    report.memories = store.index.count()
    report.steps.append(f"re-indexed ({report.memories} memories)")
    return report
