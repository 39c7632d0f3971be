"""Read a fetched repository (a bare git dir): its last N non-merge commits and its changelog's releases.

Nothing read here is written into this repository: the harness works on the mirror given on the command
line, and our label / question files refer to commits by sha only.
"""

from __future__ import annotations

import datetime as dt
import re
import subprocess
from dataclasses import dataclass

#: the repositories the label and question files were written for: name -> `fetch`'s mirror folder
#: (OWNER+NAME, holding the bare git dir `repo`)
MIRRORS = {"starlette": "encode+starlette", "pip-tools": "jazzband+pip-tools", "click": "pallets+click",
           "structlog": "hynek+structlog", "httpx": "encode+httpx", "uvicorn": "encode+uvicorn",
           "typer": "fastapi+typer", "black": "psf+black", "flask": "pallets+flask",
           "express": "expressjs+express", "ripgrep": "BurntSushi+ripgrep",
           "gin": "gin-gonic+gin", "sqlite-utils": "simonw+sqlite-utils", "rich": "Textualize+rich"}

CHANGELOGS = ("CHANGES.md", "CHANGELOG.md", "CHANGES.rst", "CHANGELOG.rst", "docs/changelog.rst", "HISTORY.md",
              "docs/changelog.md", "NEWS.md", "History.md", "docs/release-notes.md", "RELEASE_NOTES.md")


@dataclass
class Commit:
    sha: str
    author_date: str  # ISO 8601 UTC, Z
    committer_date: str
    author_raw: str  # git's raw date ("1700000000 +0100"), replayed as is
    committer_raw: str
    message: str

    @property
    def subject(self) -> str:
        return self.message.splitlines()[0] if self.message else ""


@dataclass
class Release:
    version: str
    date: str | None  # ISO 8601 UTC (midnight), or the newest commit's date for an unreleased section
    text: str  # heading + body


def git(gitdir: str, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={gitdir}", *args], capture_output=True, text=True, check=True,
                          encoding="utf-8", errors="replace").stdout


def _iso(ts: int) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def commits(gitdir: str, n: int = 450, rev: str = "HEAD") -> list[Commit]:
    """The last `n` non-merge commits reachable from `rev`, oldest first (git's date order, reversed)."""
    out = git(gitdir, "log", "--no-merges", "--date-order", f"-n{n}", "--reverse",
              "--format=%H%x00%at%x00%ct%x00%ad%x00%cd%x00%B%x1e", "--date=raw", rev)
    res = []
    for rec in out.split("\x1e"):
        rec = rec.lstrip("\n")
        if not rec:
            continue
        sha, at, ct, ad, cd, body = rec.split("\x00", 5)
        res.append(Commit(sha, _iso(int(at)), _iso(int(ct)), ad, cd, body.strip()))
    return res


def changelog_path(gitdir: str, rev: str = "HEAD") -> str | None:
    """The changelog's path; a symlinked one (uvicorn's `CHANGELOG.md` -> `docs/release-notes.md`)
    is followed to its target."""
    entries = {}
    for line in git(gitdir, "ls-tree", "-r", rev).splitlines():
        meta, _, name = line.partition("\t")
        entries[name] = meta.split()
    path = next((p for p in CHANGELOGS if p in entries), None)
    if path and entries[path][0] == "120000":  # a symlink: its blob is the target's path
        target = git(gitdir, "cat-file", "-p", entries[path][2]).strip()
        path = target if target in entries else None
    return path


_MONTHS = {m: i for i, m in enumerate(["january", "february", "march", "april", "may", "june", "july", "august",
                                        "september", "october", "november", "december"], 1)}
_ISO = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_WORDY = re.compile(r"(\d{1,2})(?:st|nd|rd|th)?\s+([A-Za-z]+),?\s+(\d{4})")
_MONTH_FIRST = re.compile(r"([A-Za-z]{3,})\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})")  # "June 28, 2025"
_VERSION = re.compile(r"v?(\d+(?:\.\d+)+(?:-?[a-z]+\.?\d*)?)")


def _date(text: str) -> str | None:
    m = _ISO.search(text)
    if m:
        return f"{m.group(1)}-{m.group(2)}-{m.group(3)}T00:00:00Z"
    m = _WORDY.search(text)
    month = next((v for k, v in _MONTHS.items() if m and len(m.group(2)) >= 3 and k.startswith(m.group(2).lower())),
                 None)
    if m and month:
        return f"{m.group(3)}-{month:02d}-{int(m.group(1)):02d}T00:00:00Z"
    m = _MONTH_FIRST.search(text)
    month = next((v for k, v in _MONTHS.items() if m and k.startswith(m.group(1).lower())), None)
    if m and month:
        return f"{m.group(3)}-{month:02d}-{int(m.group(2)):02d}T00:00:00Z"
    return None


def releases(gitdir: str, newest_date: str, rev: str = "HEAD") -> tuple[str | None, list[Release]]:
    """One Release per `## ` section (Markdown) or per underlined version heading (reST, or Markdown's
    setext headings: express's `5.2.1 / 2025-12-01` over `=====`), newest first."""
    path = changelog_path(gitdir, rev)
    if path is None:
        return None, []
    text = git(gitdir, "show", f"{rev}:{path}")
    lines = text.splitlines()
    starts = []
    for i, line in enumerate(lines):
        if path.endswith(".md") and line.startswith(("## ", "# ")):
            head = line.lstrip("#").strip()
            if line.startswith("## ") or "unreleased" in head.lower():
                starts.append((i, head))
        elif i + 1 < len(lines) and re.fullmatch(r"[-=~^]{3,}", lines[i + 1].strip() or "x") and line.strip():
            starts.append((i, line.strip()))
    # a heading that names no release (express's `## 🐞 Bug fixes` under `# Unreleased Changes`) is part of
    # the section above it
    starts = [(i, h) for i, h in starts if "unreleased" in h.lower() or _VERSION.search(h)]
    out = []
    for k, (i, head) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(lines)
        body = "\n".join(lines[i:end]).strip()
        vm = _VERSION.search(re.sub(r"\(http[^)]*\)", "", head))
        near = "\n".join(lines[i + 1:min(end, i + 6)])
        if "unreleased" in head.lower() or (vm and _date(near) is None and "unreleased" in near.lower()):
            version, date = (vm.group(1) if vm else "unreleased"), newest_date
        elif vm:
            version = vm.group(1)
            date = _date(head) or _date(near)
        else:
            continue
        out.append(Release(version, date, body))
    dated = [r for r in out if r.date]
    if len(dated) * 2 >= len(out):
        return path, dated  # a changelog that dates its releases: its undated headings are not releases
    # one that mostly does not (psf/black's "## Version 24.1.0", gin-gonic/gin's "## Gin v1.12.0"): each
    # release is dated by its git tag, else by the commit that wrote its heading, as its history tells
    tags = {}
    for line in git(gitdir, "for-each-ref", "--format=%(refname:short) %(creatordate:unix)", "refs/tags").splitlines():
        name, _, ts = line.rpartition(" ")
        tm = _VERSION.search(name)
        if tm and ts.isdigit():
            tags.setdefault(tm.group(1), _iso(int(ts)))
    return path, [r if r.date else Release(r.version, tags.get(r.version) or _added(gitdir, rev, path, r.text), r.text)
                  for r in out]


def _added(gitdir: str, rev: str, path: str, text: str) -> str:
    """The author date of the oldest commit whose change to `path` added or removed its heading line."""
    dates = git(gitdir, "log", "--format=%at", f"-S{text.splitlines()[0]}", rev, "--", path).split()
    return _iso(int(dates[-1]))
