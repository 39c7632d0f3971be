"""The batched commit (a change set of `changes.BATCH` files or more, what prune, merge --auto and
consolidate write at scale): staged without an fsync per file and flushed once, trashed files
moved as they are with their reason in `.trash/trashed.jsonl`. What a user would check: the trash
still says when and why, restore brings a memory back as it was, a kill between the renames is
finished by the next command, and a flush that fails applies nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import HASH, Cli

import memcli.ops.changes as changes
import memcli.storage.atomic as atomic
from memcli.core.memory import Memory

N = 2 * changes.BATCH + 4  # enough for a batch of merged files too (one per pair)


@pytest.fixture
def old_store(tmp_path: Path) -> Cli:
    """N memories from two years ago, none ever returned by a search: prune trashes them all."""
    cli = Cli(tmp_path / "store", env={"MEMCLI_EMBED_MODEL": HASH})
    records = [{"text": f"release note {i}: the train for module m{i} leaves at {i % 24}:00",
                "created": "2024-01-15T10:00:00Z"} for i in range(N)]
    cli("import", "-", input="\n".join(json.dumps(r) for r in records))
    return cli


def _facts(cli: Cli) -> dict[str, bytes]:
    return {p.stem: p.read_bytes() for p in (cli.store / "facts").glob("*.md")}


def test_a_bulk_prune_moves_the_files_and_the_trash_says_when_and_why(old_store: Cli) -> None:
    before = _facts(old_store)
    out = json.loads(old_store("prune", "--older-than", "180d", "--json").stdout)
    assert len(out["trashed"]) == N
    assert _facts(old_store) == {}
    trash = old_store.store / ".trash"
    # moved as they were: byte for byte the file that left facts/
    assert {p.stem: p.read_bytes() for p in trash.glob("*.md")} == before
    listed = json.loads(old_store("trash", "--json").stdout)["memories"]
    assert len(listed) == N
    assert {m["reason"] for m in listed} == {out["trashed"][0]["reason"]}
    assert all(m["trashed_at"][:2] == "20" and m["trashed_at"].endswith("Z") for m in listed)
    assert not [n for n in os.listdir(old_store.store / "facts") if n.endswith(".tmp")]
    # restore brings one back as it was; the others stay listed with their reason
    mid = listed[0]["id"]
    old_store("restore", mid)
    back = Memory.parse((old_store.store / "facts" / f"{mid}.md").read_bytes(), file_id=mid)
    assert back.to_dict() == Memory.parse(before[mid], file_id=mid).to_dict()
    assert "trashed" not in back.extra
    assert mid in {m["id"] for m in json.loads(old_store("list", "--json").stdout)["memories"]}
    assert len(json.loads(old_store("trash", "--json").stdout)["memories"]) == N - 1


def _store(cli: Cli):
    from memcli.core.config import load_config
    from memcli.ops.handle import Store

    return Store(cli.store, load_config(cli.store).with_overrides(embed_model=HASH))


def test_a_bulk_merge_killed_between_its_renames_is_finished_by_the_next_command(
        old_store: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    from memcli.ops.curate import merge_groups

    before = _facts(old_store)
    ids = sorted(before)
    groups = [ids[i:i + 2] for i in range(0, N, 2)]  # N/2 merges: a batch of new files, N moves
    real = os.replace
    calls = [0]

    def dies_half_way(src: str, dst: str) -> None:
        calls[0] += 1
        if calls[0] > len(groups) + 10:  # the merged files are in place, a few sources moved
            raise KeyboardInterrupt  # what a kill looks like from inside: nothing after this runs
        real(src, dst)

    monkeypatch.setattr(changes.os, "replace", dies_half_way)
    with pytest.raises(KeyboardInterrupt):
        merge_groups(_store(old_store), groups, use_llm=False)
    monkeypatch.undo()
    assert (old_store.store / ".journal.json").exists()
    r = old_store("list", "--json")
    assert "interrupted" in r.stderr
    live = _facts(old_store)
    trashed = {p.stem: p.read_bytes() for p in (old_store.store / ".trash").glob("*.md")}
    assert trashed == before  # every source moved, as it was
    assert len(live) == len(groups) and not set(live) & set(before)
    texts = {Memory.parse(raw, file_id=m).text for m, raw in live.items()}
    assert len(texts) == len(groups)  # whole files, one per merge
    assert not [n for n in os.listdir(old_store.store / "facts") if n.endswith(".tmp")]
    assert len(json.loads(r.stdout)["memories"]) == len(groups)
    reasons = {m["reason"] for m in json.loads(old_store("trash", "--json").stdout)["memories"]}
    assert {r.split()[0] for r in reasons} == {"merged"} and len(reasons) == len(groups)


def test_a_failed_flush_applies_nothing(old_store: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """syncfs reports an error (or is missing): each file is fsynced instead, and an fsync that
    fails stops the commit before any rename, the staged files removed."""
    from memcli.ops.curate import prune
    from memcli.ops.io import import_memories

    before = _facts(old_store)
    monkeypatch.setattr(atomic, "_syncfs", lambda dirs: False)  # the atomic writes' one flush

    def broken_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(atomic.os, "fsync", broken_fsync)
    new = [Memory(id=f"NEW{i:04d}", text=f"a new note {i} about the cache warm-up") for i in range(changes.BATCH)]
    with pytest.raises(OSError):
        import_memories(_store(old_store), new)
    monkeypatch.undo()
    assert _facts(old_store) == before
    assert not [n for n in os.listdir(old_store.store / "facts") if n.endswith(".tmp")]
    assert not (old_store.store / ".journal.json").exists()
    # with a working disk the same store takes the import, and prunes as usual
    import_memories(_store(old_store), new)
    assert len(_facts(old_store)) == N + changes.BATCH
    assert len(prune(_store(old_store), older_than="2025-01-01T00:00:00Z").trashed) == N


def test_a_batch_replacing_files_leaves_no_second_name_even_when_killed(old_store: Cli,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch that rewrites existing files gives each old file a second name before the renames
    (freed after them): the normal path removes those names, and a kill before that leaves
    `.*.tmp` files that the next command removes; the memories are the new ones either way."""
    from memcli.ops.changes import ChangeSet, Reinforce

    ids = sorted(_facts(old_store))
    facts = old_store.store / "facts"

    def reinforce(origin: str) -> None:
        cs = ChangeSet(_store(old_store))
        for mid in ids:
            cs.edit(mid, Reinforce([origin]), origin=[origin])
        cs.commit()

    reinforce("git:aaa1111")
    assert not [n for n in os.listdir(facts) if n.endswith(".tmp")]
    assert all(os.stat(facts / f"{mid}.md").st_nlink == 1 for mid in ids)

    def killed(names: list[str]) -> None:
        raise KeyboardInterrupt  # the process dies after the renames, before the old files are freed

    monkeypatch.setattr(changes, "_release", killed)
    with pytest.raises(KeyboardInterrupt):
        reinforce("git:bbb2222")
    monkeypatch.undo()
    assert len([n for n in os.listdir(facts) if n.endswith(".old.tmp")]) == N
    listed = json.loads(old_store("list", "--json", "--limit", str(2 * N)).stdout)["memories"]
    assert not [n for n in os.listdir(facts) if n.endswith(".tmp")]
    assert sorted(m["id"] for m in listed) == ids
    assert all(m["origins"][-2:] == ["git:aaa1111", "git:bbb2222"] for m in listed)
    for mid in ids:
        assert Memory.parse((facts / f"{mid}.md").read_bytes(), file_id=mid).origins[-1] == "git:bbb2222"


def test_a_batch_gives_a_second_name_only_to_the_files_it_replaces(old_store: Cli,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """New files in a batch have no old blocks to free: only the rewritten ones get a second name
    (seen when a kill leaves them behind), and the new memories are written all the same."""
    from memcli.ops.changes import ChangeSet, Reinforce

    ids = sorted(_facts(old_store))[: changes.BATCH // 2]
    facts = old_store.store / "facts"
    linked: list[str] = []
    real_link = os.link

    def link(src: str, dst: str, **kw: object) -> None:
        linked.append(os.path.basename(src))
        real_link(src, dst, **kw)

    def killed(names: list[str]) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(changes.os, "link", link)
    monkeypatch.setattr(changes, "_release", killed)
    cs = ChangeSet(_store(old_store))
    for mid in ids:
        cs.edit(mid, Reinforce(["git:ccc3333"]), origin=["git:ccc3333"])
    new = [cs.add(Memory(id=f"NEW{i:04d}", text=f"a new note {i} about the cache warm-up")).id
           for i in range(changes.BATCH)]
    with pytest.raises(KeyboardInterrupt):
        cs.commit()
    monkeypatch.undo()
    assert sorted(linked) == sorted(f"{mid}.md" for mid in ids)
    aside = sorted(n.split(".")[1] for n in os.listdir(facts) if n.endswith(".old.tmp"))
    assert aside == sorted(ids)
    assert all((facts / f"{mid}.md").is_file() for mid in new)


def test_a_batch_edited_while_it_is_staged_is_replanned_and_indexed_as_written(old_store: Cli,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch is published in a thread while the index writes its rows: a file a person saves
    while the batch is being staged is found by the recheck there, the rows written meanwhile
    are rolled back, and the commit is planned again on the person's text. The index then says
    what the files say (nothing from the first attempt)."""
    from memcli.ops.changes import ChangeSet, Reinforce

    ids = sorted(_facts(old_store))
    facts = old_store.store / "facts"
    store = _store(old_store)
    store.index.sync()
    edited = ids[5]
    real_stage_many = changes.stage_many
    calls = []

    def stage_many_then_edit(writes, staged, **kw):  # noqa: ANN001, ANN202
        out = real_stage_many(writes, staged, **kw)
        if not calls:  # a person's editor saves one of the files, once, while the batch is staged
            path = facts / f"{edited}.md"
            path.write_text(path.read_text().replace("release note 5:", "release note five:"))
        calls.append(len(writes))
        return out

    monkeypatch.setattr(changes, "stage_many", stage_many_then_edit)
    cs = ChangeSet(store)
    for mid in ids:
        cs.edit(mid, Reinforce(["git:ddd4444"]), origin=["git:ddd4444"])
    report = cs.commit()
    assert len(calls) == 2 and report.rebased == [edited]  # staged twice: the recheck said Conflict once
    m = Memory.parse((facts / f"{edited}.md").read_bytes(), file_id=edited)
    assert m.text.startswith("release note five:") and m.origins[-1] == "git:ddd4444"
    listed = {r["id"]: r for r in json.loads(old_store("list", "--json", "--limit", str(2 * N)).stdout)["memories"]}
    assert listed[edited]["text"] == m.text
    assert all(r["origins"][-1] == "git:ddd4444" for r in listed.values())
    assert store.index.sync().touched is False  # the catalog already matched every file


def test_a_bulk_trash_with_a_few_new_files_is_indexed_as_written(old_store: Cli,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """The usual shape of a merge at medium size: many sources moved to the trash (a batch,
    published in a thread) and fewer than BATCH merged files written. The new files are indexed
    from what staging wrote, not by a stat of a name the thread may not have renamed yet."""
    from memcli.ops.changes import ChangeSet

    ids = sorted(_facts(old_store))
    store = _store(old_store)
    store.index.sync()
    cs = ChangeSet(store)
    merged = Memory(id="01JNEWMERGED0000000000000A", text="all the release notes, merged into one")
    cs.add(merged, event="MERGE", sources=ids)
    for mid in ids:
        cs.trash(mid, f"merged into {merged.id}", event="MERGED")
    cs.commit()
    assert "could not be updated" not in capsys.readouterr().err
    assert store.index.count() == 1
    assert store.index.sync().touched is False  # the catalog already matched every file
