"""A store shared by a team through git: merge rules, conflict detection and `memcli sync`.

Facts are one file each, so two people adding memories never touch the same file. The one file
everybody appends to is `log.jsonl`: `.gitattributes` gives it git's built-in `union` merge
driver, so a pull keeps both sides' lines instead of stopping on a conflict. `sync` is plain git
underneath (commit the store's changes, pull, re-index, push): nothing home-made to trust.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memcli.ops.conflicts import conflict_advice, conflicted_files
from memcli.ops.handle import Store, StoreError, atomic_write

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


def sync(store: Store, *, push: bool = True, message: str = "memcli: sync memories") -> SyncReport:
    """Commit the store's own changes, `git pull` (a merge, so the union driver applies),
    re-index, `git push`. Only the store's paths are committed; a conflict stops with advice."""
    top = _git(["rev-parse", "--show-toplevel"], store.path, check=False)
    if top.returncode != 0:
        raise SyncError(f"{store.path} is not inside a git repository (commit the store to one to share it)")
    root = Path(top.stdout.strip())
    report = SyncReport(str(root))
    if write_gitattributes(store):
        report.steps.append("wrote .gitattributes (log.jsonl merge=union)")
    store.ensure_gitignore()  # per-machine state (index, trash, inbox) never enters the shared history
    before = conflicted_files(store)
    if before:
        raise SyncError(f"conflict markers in {', '.join(before)}: {conflict_advice(before)}")
    rel = str(store.path.relative_to(root)) if store.path != root else "."
    _git(["add", "--", rel], root)
    staged = _git(["diff", "--cached", "--quiet", "--", rel], root, check=False)
    if staged.returncode == 1:
        _git(["commit", "--no-verify", "-q", "-m", message, "--", rel], root)
        report.committed = True
        report.steps.append("committed the store's changes")
    pulled = _git(["pull", "--no-rebase", "--no-edit", "-q"], root, check=False)
    if pulled.returncode != 0:
        conflicts = conflicted_files(store)
        if conflicts:
            raise SyncError(f"git pull left conflicts in {', '.join(conflicts)}: {conflict_advice(conflicts)}")
        msg = (pulled.stderr.strip() or pulled.stdout.strip()).splitlines()
        raise SyncError(f"git pull failed: {msg[-1] if msg else f'exit {pulled.returncode}'}")
    report.pulled = "ok"
    report.steps.append("pulled")
    store.index.sync()
    report.memories = store.index.count()
    report.steps.append(f"re-indexed ({report.memories} memories)")
    if push:
        _git(["push", "-q"], root)
        report.pushed = True
        report.steps.append("pushed")
    return report
