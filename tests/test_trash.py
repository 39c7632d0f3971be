"""The trash as a user sees it, whichever form a memory is in: a copy with its note in the front
matter (a small commit: `rm`), or the file moved as it was with its note in `.trash/trashed.jsonl`
(a bulk commit: prune, merge --auto, consolidate). `memcli trash` lists both, `restore` brings
either back, `trash --empty` deletes either for good; `trashed.jsonl` keeps only the notes of
files still in the trash, and a step cut short (a note without its file, a file without its note)
loses nothing and shows nothing that is not there."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import HASH, Cli

import memcli.api as api
import memcli.ops.changes as changes
import memcli.storage.files as files
from memcli.core.config import load_config
from memcli.ops.handle import Store

N = changes.BATCH + 2  # a prune of this many moves the files (the bulk form)


@pytest.fixture
def both(tmp_path: Path) -> tuple[Cli, list[str], list[str]]:
    """A store whose trash holds N memories in the bulk form (pruned) and 2 in the small form (rm)."""
    cli = Cli(tmp_path / "store", env={"MEMCLI_EMBED_MODEL": HASH})
    old = [{"text": f"release note {i}: module m{i} ships on day {i}", "created": "2024-01-15T10:00:00Z"}
           for i in range(N)]
    new = [{"text": f"a fresh note {i} about the build cache warm-up"} for i in range(2)]
    cli("import", "-", input="\n".join(json.dumps(r) for r in old + new))
    bulk = [t["id"] for t in json.loads(cli("prune", "--older-than", "180d", "--json").stdout)["trashed"]]
    small = [m["id"] for m in json.loads(cli("list", "--json").stdout)["memories"]]
    cli("rm", *small, "--reason", "obsolete by hand")
    assert len(bulk) == N and len(small) == 2
    return cli, bulk, small


def _listed(cli: Cli) -> dict[str, dict]:
    return {m["id"]: m for m in json.loads(cli("trash", "--json").stdout)["memories"]}


def _notes(cli: Cli) -> list[str]:
    """The ids trashed.jsonl has a line for, in file order (none: no file)."""
    path = cli.store / ".trash" / "trashed.jsonl"
    return [json.loads(line)["id"] for line in path.read_text().splitlines()] if path.exists() else []


def _trash_files(cli: Cli) -> set[str]:
    return {p.stem for p in (cli.store / ".trash").glob("*.md")}


def test_the_trash_lists_restores_and_empties_both_forms(both: tuple[Cli, list[str], list[str]]) -> None:
    cli, bulk, small = both
    assert sorted(_notes(cli)) == sorted(bulk)  # only the moved files have a line
    assert all("trashed:" in (cli.store / ".trash" / f"{mid}.md").read_text() for mid in small)
    listed = _listed(cli)
    assert set(listed) == set(bulk) | set(small)
    assert {listed[m]["reason"] for m in small} == {"obsolete by hand"}
    assert {listed[m]["reason"][:23] for m in bulk} == {"pruned: created before "}
    assert all(listed[m]["trashed_at"].endswith("Z") for m in listed)
    # restore one of each form: both come back, and the restored one's note leaves trashed.jsonl
    cli("restore", bulk[0], small[0])
    live = {m["id"] for m in json.loads(cli("list", "--json").stdout)["memories"]}
    assert {bulk[0], small[0]} <= live
    assert sorted(_notes(cli)) == sorted(bulk[1:])
    assert set(_listed(cli)) == set(bulk[1:]) | {small[1]}
    # a dry run deletes nothing
    dry = json.loads(cli("trash", "--empty", "--dry-run", "--json").stdout)
    assert dry["dry_run"] is True and set(dry["purged"]) == set(bulk[1:]) | {small[1]}
    assert _trash_files(cli) == set(bulk[1:]) | {small[1]}
    # emptying deletes both forms for good, and their notes with them; the log says so
    done = json.loads(cli("trash", "--empty", "--json").stdout)
    assert set(done["purged"]) == set(dry["purged"]) and done["dry_run"] is False
    assert _listed(cli) == {} and _trash_files(cli) == set()
    assert not (cli.store / ".trash" / "trashed.jsonl").exists()
    log = [json.loads(line) for line in (cli.store / "log.jsonl").read_text().splitlines()]
    assert {e["id"] for e in log if e["event"] == "PURGE"} == set(done["purged"])
    r = cli("restore", bulk[1], ok=False)
    assert r.exit_code != 0 and "trash" in r.stderr
    assert {bulk[0], small[0]} <= {m["id"] for m in json.loads(cli("list", "--json").stdout)["memories"]}


def test_emptying_what_is_older_than_an_age_keeps_the_rest(both: tuple[Cli, list[str], list[str]]) -> None:
    cli, bulk, small = both
    # half the bulk trash went there in 2024 (its notes say so)
    path = cli.store / ".trash" / "trashed.jsonl"
    early = set(bulk[: N // 2])
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps({**r, "at": "2024-02-01T00:00:00Z"} if r["id"] in early else r) + "\n"
                            for r in lines))
    out = json.loads(cli("trash", "--empty", "--older-than", "30d", "--json").stdout)
    assert set(out["purged"]) == early
    assert set(_listed(cli)) == set(bulk[N // 2:]) | set(small)
    assert sorted(_notes(cli)) == sorted(bulk[N // 2:])
    text = cli("trash", "--empty", "--older-than", "30d").stderr
    assert "0 memories" in text
    r = cli("trash", "--older-than", "30d", ok=False)
    assert r.exit_code == 2 and "--empty" in r.stderr
    r = cli("trash", "--empty", "--older-than", "soon", ok=False)
    assert r.exit_code == 2 and set(_listed(cli)) == set(bulk[N // 2:]) | set(small)



def test_emptying_chooses_under_the_lock_that_purges(both: tuple[Cli, list[str], list[str]],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """What --older-than picks is read under the writer lock: a memory restored and trashed again
    between a choice made outside it and the purge would go on the strength of its old trash time."""
    cli, bulk, small = both
    store = api.Store(cli.store, load_config(cli.store).with_overrides(embed_model=HASH))
    seen: list[bool] = []
    real = Store.trashed  # the files layer's listing, which `api.Store.empty_trash` reads

    def trashed(self: Store) -> list:
        seen.append(self.locked)
        return real(self)

    monkeypatch.setattr(Store, "trashed", trashed)
    purged = store.empty_trash(older_than="2000-01-01")
    assert purged == [] and seen == [True]
    assert set(_listed(cli)) == set(bulk) | set(small)

def test_a_step_cut_short_loses_nothing(both: tuple[Cli, list[str], list[str]]) -> None:
    cli, bulk, small = both
    trash = cli.store / ".trash"
    notes = trash / "trashed.jsonl"
    # a purge killed after deleting a file (its note stays) and a bulk commit killed after noting
    # a move it never made: neither is listed
    (trash / f"{bulk[0]}.md").unlink()
    with notes.open("a") as f:
        f.write(json.dumps({"id": "01NEVERMOVED0000000000000A", "at": "2026-01-01T00:00:00Z", "reason": "x"}) + "\n")
    # a moved file whose note was lost: still listed, with the time it entered the trash
    lost = bulk[1]
    notes.write_text("".join(line + "\n" for line in notes.read_text().splitlines()
                             if json.loads(line)["id"] != lost))
    listed = _listed(cli)
    assert set(listed) == set(bulk[1:]) | set(small)
    assert listed[lost]["reason"] == "" and listed[lost]["trashed_at"].endswith("Z")
    assert abs(os.stat(trash / f"{lost}.md").st_ctime - _epoch(listed[lost]["trashed_at"])) < 2
    # the next time an entry leaves the trash, the notes are compacted: the stray lines go
    cli("restore", bulk[2])
    assert sorted(_notes(cli)) == sorted(bulk[3:])
    # the file without a note is restorable, and emptying the trash deletes it too
    cli("restore", lost)
    assert lost in {m["id"] for m in json.loads(cli("list", "--json").stdout)["memories"]}
    cli("trash", "--empty")
    assert _trash_files(cli) == set() and not notes.exists()


def test_a_compaction_killed_before_its_rename_leaves_the_notes_whole(
        both: tuple[Cli, list[str], list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    cli, bulk, _ = both
    notes = cli.store / ".trash" / "trashed.jsonl"
    (cli.store / ".trash" / f"{bulk[0]}.md").unlink()  # a line to drop
    before = notes.read_bytes()
    store = Store(cli.store, load_config(cli.store).with_overrides(embed_model=HASH))

    def killed(src: object, dst: object) -> None:
        raise KeyboardInterrupt  # what a kill looks like from inside: nothing after this runs

    monkeypatch.setattr(files.os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        store.compact_trash_notes()
    monkeypatch.undo()
    assert notes.read_bytes() == before
    assert not [n for n in os.listdir(cli.store / ".trash") if n.endswith(".tmp")]
    store.compact_trash_notes()
    assert sorted(_notes(cli)) == sorted(bulk[1:])


def _epoch(stamp: str) -> float:
    from memcli.core.memory import parse_time

    return parse_time(stamp).timestamp()


def test_compaction_never_waits_for_another_writer(both: tuple[Cli, list[str], list[str]]) -> None:
    """A restore asks for the compaction after its commit let go of the lock: when another writer
    has it then, the restore is done all the same and the stale note goes at a later compaction
    (it is never listed: its file left the trash)."""
    import time

    cli, bulk, _ = both
    cli("restore", bulk[0])
    holder = Store(cli.store, load_config(cli.store))
    store = Store(cli.store, load_config(cli.store))
    notes = (cli.store / ".trash" / "trashed.jsonl").read_text()
    (cli.store / ".trash" / "trashed.jsonl").write_text(notes + json.dumps({"id": bulk[0], "at": "x"}) + "\n")
    with holder.lock(), pytest.MonkeyPatch.context() as mp:
        mp.setattr(time, "sleep", lambda s: pytest.fail("waited for the writer lock"))  # it polls
        store.compact_trash_notes()  # another Files object: another open file, so the flock conflicts
    assert bulk[0] in _notes(cli) and bulk[0] not in _listed(cli)
    store.compact_trash_notes()
    assert bulk[0] not in _notes(cli)


def test_a_line_torn_by_a_power_loss_costs_only_itself(both: tuple[Cli, list[str], list[str]]) -> None:
    """A power loss mid-append leaves a torn last line in `trashed.jsonl` (and in `log.jsonl`):
    the next append starts on a line of its own, so the notes (and log lines) written after it
    stay readable; only the torn line itself is lost."""
    cli, bulk, _ = both
    notes = cli.store / ".trash" / "trashed.jsonl"
    torn = notes.read_bytes() + b'{"id": "01TORN", "at": "2026-'
    notes.write_bytes(torn)
    with open(cli.store / "log.jsonl", "ab") as f:
        f.write(b'{"event": "ADD", "id": "01TO')
    more = [{"text": f"second batch note {i}: tool t{i} pinned on day {i}", "created": "2024-02-01T10:00:00Z"}
            for i in range(N)]
    cli("import", "-", input="\n".join(json.dumps(r) for r in more))
    again = [t["id"] for t in json.loads(cli("prune", "--older-than", "180d", "--json").stdout)["trashed"]]
    assert len(again) == N
    listed = _listed(cli)
    assert all(listed[mid]["reason"] for mid in again)  # every note of the batch after the torn line
    lines = notes.read_bytes()[len(torn):].splitlines()
    assert lines[0] == b"" and all(json.loads(line)["id"] in again for line in lines[1:])
    log = [json.loads(line) for line in (cli.store / "log.jsonl").read_text().splitlines()[-(2 * N):]
           if line.startswith("{") and line.endswith("}")]
    assert {e["id"] for e in log if e.get("event") in ("DELETE", "PRUNE")} >= set(again)
