"""Which store and which project, found from where the command runs, and why.

Stdlib only: git hooks and `memcli capture` resolve the store through here on a < 100 ms budget.
The store: `--store DIR` > `$MEMCLI_STORE` > the nearest `.memcli/` > the main worktree's
`.memcli/` (a `git worktree` elsewhere uses its repository's) > the global store. The project: the
normalised `origin` remote, else the common dir's name, so every clone and worktree is one project.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from pathlib import Path

PROJECT_STORE_DIR = ".memcli"
HOOK_LOG = "memcli-hook.log"  # in the git common dir: what the hooks' background work reports


class Repo:
    """What git says about the repository around a directory. (Plain classes in this module:
    `dataclasses` costs a hook ~25 ms of imports.)"""

    def __init__(self, toplevel: Path, common_dir: Path, origin: str | None) -> None:
        self.toplevel = toplevel  # this worktree's top directory
        self.common_dir = common_dir  # the shared .git directory (the same for every worktree)
        self.origin = origin  # remote.origin.url as configured

    @property
    def main_worktree(self) -> Path:
        """The main worktree's top directory (a bare repository's own directory)."""
        return self.common_dir.parent if self.common_dir.name == ".git" else self.common_dir


def _git(args: list[str], cwd: Path | None) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None


@functools.lru_cache(maxsize=32)
def _repo_at(cwd: str) -> Repo | None:
    out = _git(["rev-parse", "--path-format=absolute", "--show-toplevel", "--git-common-dir"], Path(cwd))
    if out is None or out.returncode != 0:
        return None
    lines = out.stdout.splitlines()
    if len(lines) < 2:  # a bare repository has no toplevel: rev-parse prints the common dir only
        if not lines:
            return None
        lines = [lines[0], lines[0]]
    origin = _git(["config", "--get", "remote.origin.url"], Path(cwd))
    url = origin.stdout.strip() if origin is not None and origin.returncode == 0 else None
    return Repo(Path(lines[0]), Path(lines[1]), url or None)


def repo(cwd: Path | None = None) -> Repo | None:
    """The git repository around `cwd` (default: the working directory), or None."""
    return _repo_at(str((cwd or Path.cwd()).absolute()))


_SCP = re.compile(r"^(?:[\w.+-]+@)?([\w.-]+):(?!//)(.+)$")


def normalise_remote(url: str) -> str | None:
    """`host/owner/name` from any spelling of a remote URL (https, ssh, scp: lower-cased host, no
    `.git`, user, port or scheme); a local path gives its last component."""
    u = url.strip()
    if not u:
        return None
    m = re.match(r"^[a-z][a-z0-9+.-]*://(?:[^@/]*@)?([^/:]+)(?::\d*)?/*(.*)$", u, re.I)
    if m:
        host, path = m.group(1), m.group(2)
        if u.lower().startswith("file://"):
            host, path = "", path
    else:
        m2 = _SCP.match(u)
        if m2 and "/" not in m2.group(1):
            host, path = m2.group(1), m2.group(2)
        else:  # a local path: /srv/git/ledger.git -> ledger
            name = Path(u.rstrip("/")).name.removesuffix(".git")
            return name or None
    path = path.strip("/").removesuffix(".git").strip("/")
    if not host:
        name = Path(path).name
        return name or None
    return f"{host.lower()}/{path}" if path else host.lower()


def project_identity(cwd: Path | None = None) -> str | None:
    """The normalised origin remote, else the common dir's repository name; None outside a repository."""
    r = repo(cwd)
    if r is None:
        return None
    if r.origin:
        ident = normalise_remote(r.origin)
        if ident:
            return ident
    common = r.common_dir
    # /repo/.git -> "repo"; a bare repo /srv/repo.git -> "repo"
    name = common.parent.name if common.name == ".git" else common.name.removesuffix(".git")
    return name or None


@functools.lru_cache(maxsize=1)
def git_user_email() -> str | None:
    """`git config user.email` (the repository's, else the global one), or None."""
    out = _git(["config", "--get", "user.email"], None)
    if out is None or out.returncode != 0:
        return None
    return out.stdout.strip() or None


def global_store() -> Path:
    value = os.environ.get("XDG_DATA_HOME")
    return (Path(value) if value else Path.home() / ".local/share") / "memcli"


def nearest_store(start: Path) -> Path | None:
    """The nearest `.memcli/` directory in `start` or its parents, found like `.git`."""
    for d in (start, *start.parents):
        candidate = d / PROJECT_STORE_DIR
        if candidate.is_dir():
            return candidate
    return None


class Resolution:
    """A store path and the reason it was chosen (`memcli where` prints both)."""

    def __init__(self, path: Path, why: str, explicit: bool) -> None:
        self.path, self.why = path, why
        self.explicit = explicit  # named by --store: it must exist (a typo must not create a store)


def resolve(explicit: str | os.PathLike[str] | None = None, cwd: Path | None = None) -> Resolution:
    """--store DIR > $MEMCLI_STORE > nearest .memcli/ > the main worktree's .memcli/ > global."""
    if explicit:
        return Resolution(Path(explicit).expanduser(), "--store", True)
    env = os.environ.get("MEMCLI_STORE")
    if env:
        return Resolution(Path(env).expanduser(), "$MEMCLI_STORE", False)
    here = (cwd or Path.cwd()).absolute()
    found = nearest_store(here)
    if found is not None:
        return Resolution(found, f"nearest {PROJECT_STORE_DIR}/ above {here}", False)
    r = repo(here)
    if r is not None and (r.main_worktree / PROJECT_STORE_DIR).is_dir():
        return Resolution(r.main_worktree / PROJECT_STORE_DIR,
                          f"the main worktree's {PROJECT_STORE_DIR}/ (this is a git worktree of {r.main_worktree})",
                          False)
    return Resolution(global_store(), "no project store here: the global store", False)
