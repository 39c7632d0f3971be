"""A commit proves that a file it trashes or rewrites is as planned from one `stat` (`changes.Seen`:
inode, size, mtime, ctime) when the file was settled before it was read, and compares content
otherwise. What a user would check: an edit that keeps the size and even puts the mtime back is
still caught, in both cases; a prune of settled files reads none of them, and what reaches the
trash is still the file as it was."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from conftest import HASH, Cli, files

import memcli.ops.changes as changes
from memcli.api import Store
from memcli.core.config import Config
from memcli.core.errors import Conflict
from memcli.core.memory import Memory
from memcli.ops.changes import ChangeSet, Update
from memcli.ops.curate import prune

OLD = "2024-01-15T10:00:00Z"


@pytest.fixture
def store(tmp_path: Path) -> tuple[Store, Cli, list[str]]:
    cli = Cli(tmp_path / "store", env={"MEMCLI_EMBED_MODEL": HASH})
    records = [{"text": f"Alice owns the billing module number {i}.", "created": OLD} for i in range(changes.BATCH + 2)]
    cli("import", "-", input=json.dumps(records))
    ids = sorted(m["id"] for m in json.loads(cli("list", "--json").stdout)["memories"])
    s = Store(cli.store, Config(embed_model=HASH))
    s.index.sync()
    yield s, cli, ids
    s.close()


def _sneaky_edit(path: Path) -> bytes:
    """Change one letter in place, then put the mtime back: same inode, size and mtime."""
    st = os.stat(path)
    time.sleep(0.02)  # the next tick of the file system's clock
    data = path.read_bytes().replace(b"Alice", b"Alicf")
    with open(path, "r+b") as f:
        f.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(path)[6:9] == st[6:9] or os.stat(path).st_mtime_ns == st.st_mtime_ns
    return data


@pytest.mark.parametrize("settled", [True, False], ids=["settled (stat)", "recent (content)"])
@pytest.mark.parametrize("change", ["trash", "bulk trash", "update"])
def test_an_edit_that_keeps_size_and_mtime_is_still_a_conflict(store, monkeypatch, settled: bool,
                                                               change: str) -> None:
    s, cli, ids = store
    if settled:  # every file counts as settled once its clock tick has passed
        monkeypatch.setattr(changes, "RACY_NS", 0)
        time.sleep(0.02)
    cs = ChangeSet(files(s))
    cs.known(s.index.catalog_entries(ids))
    if change == "trash":  # a trash copy
        cs.trash(ids[0], "test")
    elif change == "bulk trash":  # moved as they are
        for mid in ids:
            cs.trash(mid, "test")
    else:
        cs.edit(ids[0], Update("Bob owns the billing module number 0."))
    path = cli.store / "facts" / f"{ids[0]}.md"
    edited = _sneaky_edit(path)
    with pytest.raises(Conflict, match=ids[0]):
        cs.commit()
    assert path.read_bytes() == edited
    assert not (cli.store / ".trash" / f"{ids[0]}.md").exists()


def _count_reads(monkeypatch) -> list[str]:
    reads: list[str] = []
    real = changes.read_seen

    def counting(path: str) -> tuple[bytes, changes.Seen]:
        reads.append(path)
        return real(path)

    monkeypatch.setattr(changes, "read_seen", counting)
    return reads


def test_a_prune_of_settled_files_reads_none_and_moves_them_as_they_were(tmp_path: Path, monkeypatch) -> None:
    cli = Cli(tmp_path / "store", env={"MEMCLI_EMBED_MODEL": HASH})
    n = changes.BATCH + 6
    cli("import", "-", input="\n".join(json.dumps({"text": f"release train {i} leaves at {i % 24}:00",
                                                   "created": OLD}) for i in range(n)))
    before = {p.stem: p.read_bytes() for p in (cli.store / "facts").glob("*.md")}
    monkeypatch.setattr(changes, "RACY_NS", 0)
    time.sleep(0.02)
    reads = _count_reads(monkeypatch)
    s = Store(cli.store, Config(embed_model=HASH))
    s.index.sync()
    assert len(prune(files(s), older_than="2025-01-01T00:00:00Z").trashed) == n
    s.close()
    assert reads == []
    assert {p.stem: p.read_bytes() for p in (cli.store / ".trash").glob("*.md")} == before
    assert len(json.loads(cli("trash", "--json").stdout)["memories"]) == n
    assert json.loads(cli("list", "--json").stdout)["memories"] == []


def test_a_small_trash_of_settled_files_copies_each_file_as_it_is_at_commit(store, monkeypatch) -> None:
    """Planned without reading them, the files are read under the lock for their trash copies."""
    s, cli, ids = store
    gone = ids[:3]
    monkeypatch.setattr(changes, "RACY_NS", 0)
    time.sleep(0.02)
    before = {mid: (cli.store / "facts" / f"{mid}.md").read_bytes() for mid in gone}
    reads = _count_reads(monkeypatch)
    cs = ChangeSet(files(s))
    cs.known(s.index.catalog_entries(gone))
    for mid in gone:
        cs.trash(mid, "pruned: a test reason")
    assert reads == []
    cs.commit()
    assert len(reads) == len(gone)  # one read per trash copy, under the lock
    for mid in gone:
        copy = (cli.store / ".trash" / f"{mid}.md").read_bytes()
        kept = Memory.parse(copy, file_id=mid)
        assert kept.extra.pop("trashed")["reason"] == "pruned: a test reason"
        assert kept.to_dict() == Memory.parse(before[mid], file_id=mid).to_dict()
        assert not (cli.store / "facts" / f"{mid}.md").exists()
    listed = json.loads(cli("trash", "--json").stdout)["memories"]
    assert {m["id"]: m["reason"] for m in listed} == dict.fromkeys(gone, "pruned: a test reason")
