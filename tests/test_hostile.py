"""Issue 24: a cloned repository with a crafted `.memcli/`. Whatever the store holds, no command
reads, writes or lists anything outside it; each ends in output or a one-line error, never a
traceback; `doctor` names the crafted entry and `doctor --fix` repairs the store.

The outside world is a directory of sentinel files next to the store. A read is caught by its
access time: each sentinel's atime is set far before its mtime, so any read updates it (relatime
updates an atime older than the mtime, as strictatime does). Its text must never appear in any
output, and its content and mtime must not change.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memcli.cli.app import app

ENV = {"MEMCLI_EMBED_MODEL": "hash:256", "MEMCLI_NO_BACKGROUND": "1"}
SECRET = "SENTINEL-7f3a outside text"
FACT = ("---\nid: 01HZZZZZZZZZZZZZZZZZZZZZZZ\ncreated: 2024-01-01T00:00:00Z\n"
        "updated: 2024-01-01T00:00:00Z\n---\n" + SECRET + "\n")


def run(store: Path, *args: str, input: str | None = None):
    result = CliRunner().invoke(app, ["--store", str(store), *args], input=input, env=ENV)
    exc = result.exception
    assert exc is None or isinstance(exc, SystemExit), f"{args}: {type(exc).__name__}: {exc}"
    assert "Traceback" not in result.output and "internal error" not in result.output, (args, result.output)
    return result


class Outside:
    """Files and a directory outside the store, each with a recorded (atime, mtime, content)."""

    def __init__(self, root: Path) -> None:
        self.dir = root / "outside"
        self.dir.mkdir()
        (self.dir / "01HZZZZZZZZZZZZZZZZZZZZZZZ.md").write_text(FACT)
        (self.dir / "notes.md").write_text(FACT)
        (self.dir / "config.toml").write_text(f'user = "{SECRET}"\n')
        (self.dir / "secret.txt").write_text(SECRET + "\n")
        (self.dir / "item.json").write_text(json.dumps({"text": SECRET, "options": {}}))
        db = sqlite3.connect(self.dir / "state.sqlite")
        db.execute("CREATE TABLE t (x)")
        db.execute("INSERT INTO t VALUES (?)", (SECRET,))
        db.commit()
        db.close()
        self.snapshot()

    def paths(self) -> list[Path]:
        """The directory and its files, named once (listing the directory would set its atime)."""
        if not hasattr(self, "_paths"):
            self._paths = [self.dir, *sorted(self.dir.iterdir())]
        return self._paths

    def snapshot(self) -> None:
        contents = {p.name: b"" if p.is_dir() else p.read_bytes() for p in self.paths()}
        old = time.time() - 100_000
        self.before = {}
        for p in self.paths():  # after reading: reading sets the atime
            st = os.stat(p)
            os.utime(p, ns=(int(old * 1e9), st.st_mtime_ns))
            st = os.stat(p)
            self.before[p.name] = (st.st_atime_ns, st.st_mtime_ns, contents[p.name])

    def assert_untouched(self, what: str) -> None:
        after = {}
        for p in self.paths():
            try:
                st = os.stat(p)
            except FileNotFoundError:
                raise AssertionError(f"{what}: removed {p.name} outside the store") from None
            after[p.name] = (st.st_atime_ns, st.st_mtime_ns)
        for p in self.paths():  # content last: reading it sets the atime
            name = p.name
            assert name in self.before, f"{what}: created {name} outside the store"
            atime, mtime, content = self.before[name]
            assert after[name][1] == mtime, f"{what}: changed {name} outside the store"
            assert after[name][0] == atime, f"{what}: read {name} outside the store"
            if not p.is_dir():
                assert p.read_bytes() == content, f"{what}: wrote {name} outside the store"
        self.snapshot()
        assert sorted(os.listdir(self.dir)) == sorted(p.name for p in self.paths()[1:]), (
            f"{what}: created or removed a file outside the store")
        self.snapshot()


def make_store(root: Path) -> Path:
    s = root / "clone" / ".memcli"
    assert run(s, "add", "--create", "--raw", "deploy with make release on fridays").exit_code == 0
    assert run(s, "add", "--raw", "the api uses postgres 16").exit_code == 0
    run(s, "list")  # the index exists, as in a clone that committed it
    return s


def _replace_with_link(path: Path, target: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        for p in path.iterdir():
            p.unlink() if not p.is_dir() else None
        import shutil

        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        path.unlink()
    path.symlink_to(target)


# Each crafts one clone: (name, function(store, outside dir)).
def _link(name: str, target: str):
    def craft(s: Path, out: Path) -> None:
        _replace_with_link(s / name, out / target if target else out)
    return craft


def _hnsw_file(s: Path, out: Path) -> None:
    db = sqlite3.connect(s / ".index" / "catalog.sqlite")
    db.execute("UPDATE meta SET value=? WHERE key='hnsw_file'", (str(out / "secret.txt"),))
    db.commit()
    db.close()


def _hnsw_relative(s: Path, out: Path) -> None:
    db = sqlite3.connect(s / ".index" / "catalog.sqlite")
    db.execute("UPDATE meta SET value=? WHERE key='hnsw_file'", ("../../../outside/secret.txt",))
    db.commit()
    db.close()


def _fact_link(s: Path, out: Path) -> None:
    (s / "facts" / "01HZZZZZZZZZZZZZZZZZZZZZZY.md").symlink_to(out / "notes.md")


def _inbox_item_link(s: Path, out: Path) -> None:
    (s / "inbox").mkdir(exist_ok=True)
    (s / "inbox" / "01HZZZZZZZZZZZZZZZZZZZZZZZ.json").symlink_to(out / "item.json")


CLONES = {
    "facts dir": _link("facts", ""),
    "fact file": _fact_link,
    "inbox dir": _link("inbox", ""),
    "inbox item": _inbox_item_link,
    "capture dir": _link(".capture", ""),
    "config.toml": _link("config.toml", "config.toml"),
    "state.sqlite": _link(".state.sqlite", "state.sqlite"),
    "gitignore": _link(".gitignore", "secret.txt"),
    "trash dir": _link(".trash", ""),
    "index dir": _link(".index", ""),
    "catalog": _link(".index/catalog.sqlite", "state.sqlite"),
    "log": _link("log.jsonl", "secret.txt"),
    "lock": _link(".lock", "secret.txt"),
    "hnsw_file absolute": _hnsw_file,
    "hnsw_file relative": _hnsw_relative,
}

COMMANDS = [
    ("list",), ("search", "postgres"), ("stats",), ("context",), ("export", "--format", "jsonl"),
    ("doctor",), ("add", "--raw", "a new memory about redis"), ("reindex",),
    ("capture", "text", "we use tox for tests"), ("inbox", "process"), ("rm", "--yes", "{id}"),
]


@pytest.mark.parametrize("clone", list(CLONES))
def test_crafted_clone_stays_inside(tmp_path: Path, clone: str) -> None:
    s = make_store(tmp_path)
    mid = json.loads(run(s, "list", "--json").stdout)["memories"][0]["id"]
    out = Outside(tmp_path)
    CLONES[clone](s, out.dir)
    out.snapshot()
    for cmd in COMMANDS:
        args = [a.replace("{id}", mid) for a in cmd]
        r = run(s, *args)
        assert SECRET not in r.output, (clone, args, r.output)
        out.assert_untouched(f"{clone}: {' '.join(args)}")
    r = run(s, "doctor")
    if clone not in ("hnsw_file absolute", "hnsw_file relative"):
        assert r.exit_code == 1, (clone, r.output)  # doctor names it
    r = run(s, "doctor", "--fix")
    out.assert_untouched(f"{clone}: doctor --fix")
    assert SECRET not in r.output
    r = run(s, "doctor")
    assert "containment" not in r.output and "facts entries: all regular" in r.output, (clone, r.output)
    r = run(s, "list")
    assert r.exit_code == 0, (clone, r.output)
    r = run(s, "add", "--raw", "after the repair, adding works")
    assert r.exit_code == 0, (clone, r.output)
    out.assert_untouched(f"{clone}: after the repair")
    # the link was moved aside, never followed: the target is still there, as it was
    assert (out.dir / "secret.txt").read_text() == SECRET + "\n"


def test_refused_store_names_the_link(tmp_path: Path) -> None:
    s = make_store(tmp_path)
    out = Outside(tmp_path)
    _replace_with_link(s / "facts", out.dir)
    r = run(s, "list")
    assert r.exit_code == 1
    assert "facts is a symbolic link" in r.stderr and "doctor --fix" in r.stderr
    r = run(s, "doctor")
    assert r.exit_code == 1 and "containment" in r.stdout and "facts is a symbolic link" in r.stdout
