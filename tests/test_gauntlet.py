"""The reproductions of issue 9, exact: each ends in a one-line error (exit 1 or 2) or a healed
store, never an internal error. Hostile files, damaged indexes, read-only and full stores, kill -9
and concurrent writers have their own sections below."""

from __future__ import annotations

import json
import os
import random
import shutil
import stat
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memcli.cli.app import app

sys.path.insert(0, str(Path(__file__).parent))
import llm_server as fake_llm  # noqa: E402

llm_server = fake_llm.llm_server  # the pytest fixture

ENV = {"MEMCLI_EMBED_MODEL": "hash:256"}


def run(store: Path, *args: str, input: bytes | str | None = None):
    result = CliRunner().invoke(app, ["--store", str(store), *args], input=input, env=ENV)
    exc = result.exception
    assert exc is None or isinstance(exc, SystemExit), f"{args}: {type(exc).__name__}: {exc}"
    return result


# "Fails fast", judged so that a busy machine cannot fail it: CPU time (what a parse blow-up, a
# rebuild loop or retries spend; these commands take ~0.03-0.1 s) and the seconds the command asked
# to sleep (what waiting on a lock, which polls, or sleeping between retries adds up), never the
# wall clock, which a loaded machine stretches.
FAST_CPU, FAST_SLEEP = 1.0, 2.0


def run_fast(store: Path, *args: str, input: bytes | str | None = None):
    """`run`, asserting that the command returned fast."""
    slept = [0.0]
    real_sleep = time.sleep

    def sleep(seconds: float) -> None:
        slept[0] += seconds
        real_sleep(seconds)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(time, "sleep", sleep)
        cpu = time.process_time()
        result = run(store, *args, input=input)
        cpu = time.process_time() - cpu
    assert cpu < FAST_CPU and slept[0] < FAST_SLEEP, (args, f"{cpu:.2f} s CPU, {slept[0]:.2f} s asleep")
    return result


def one_line_error(result, code: tuple[int, ...] = (1, 2)) -> str:
    assert result.exit_code in code, (result.exit_code, result.output)
    lines = [x for x in result.stderr.splitlines() if x.strip() and not x.startswith("hint: ")]
    assert len(lines) == 1 and lines[0].startswith("memcli: error: "), result.stderr
    return lines[0]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    s = tmp_path / "S"
    assert run(s, "add", "--create", "--raw", "deploy with make release on fridays").exit_code == 0
    assert run(s, "add", "--raw", "the api uses postgres 16").exit_code == 0
    return s


@pytest.mark.parametrize("record, field", [
    ({"text": "\ud800 lone surrogate"}, "text"),
    ({"text": "x", "created": 123}, "created"),
    ({"text": "x", "created": 1.5}, "created"),
    ({"text": "x", "created": True}, "created"),
    ({"text": "x", "created": [1]}, "created"),
    ({"text": "x", "created": {"a": 1}}, "created"),
    ({"text": "x", "updated": 5}, "updated"),
    ({"text": "x", "history": [{"at": 5}]}, "history"),
    ({"text": "x", "history": 5}, "history"),
    ({"text": "x", "links": 5}, "links"),
    ({"id": "l1", "text": "links as a string", "links": "abc"}, "links"),
    ({"id": "abc\n", "text": "an id with a trailing newline"}, "id"),
    ({"text": "x", "tags": [{"a": 1}]}, "tags"),
    ({"text": "x", "confidence": "NaN"}, "confidence"),
    ({"text": "x", "user": ["a"]}, "user"),
])
def test_bad_import_record_is_one_line_error_naming_the_field(store: Path, record: dict, field: str) -> None:
    before = sorted(p.name for p in (store / "facts").iterdir())
    r = run(store, "import", "-", input=json.dumps(record).encode())
    assert field in one_line_error(r)
    assert sorted(p.name for p in (store / "facts").iterdir()) == before  # nothing written
    assert run(store, "consolidate", "--dry-run").exit_code == 0  # the store is not poisoned


def test_deeply_nested_json_is_refused(store: Path) -> None:
    assert "nested too deeply" in one_line_error(run(store, "import", "-", input=b"[" * 100_000))


def test_undecodable_argument_is_refused(store: Path) -> None:
    r = run(store, "add", "remember \udcff end")
    assert "not valid UTF-8" in one_line_error(r, (2,))


def test_undecodable_batch_queries_are_refused(store: Path) -> None:
    assert "UTF-8" in one_line_error(run(store, "search", "--batch", input=b"deploy\n\xff\xfe\n"))


@pytest.mark.parametrize("args", [
    ("list", "--since", "0001-01-01T00:00:00+14:00"),
    ("prune", "--older-than", "99999999999d"),
])
def test_out_of_range_dates_are_usage_errors(store: Path, args: tuple[str, ...]) -> None:
    one_line_error(run(store, *args), (2,))


def test_huge_limit_lists_everything(store: Path) -> None:
    r = run(store, "list", "--limit", "99999999999999999999", "--json")
    assert r.exit_code == 0 and len(json.loads(r.stdout)["memories"]) == 2


def test_stdin_over_the_limit_stops_reading_there(store: Path) -> None:
    class Endless:
        """A stdin that never ends; counts what memcli read of it."""

        read_bytes = 0

        def read(self, n: int = -1) -> bytes:
            assert n > 0, "memcli asked for all of an endless stream"
            self.read_bytes += n
            return b"a" * n

    from memcli.ops.add import MAX_INPUT_BYTES, IngestError, read_limited

    stream = Endless()
    with pytest.raises(IngestError, match="limit"):
        read_limited(stream, "stdin")
    assert stream.read_bytes <= MAX_INPUT_BYTES + 2**20


def test_bom_is_accepted_on_stdin_and_in_files(store: Path) -> None:
    r = run(store, "add", "--raw", "-", input="\ufeffthe bom text is here".encode())
    assert r.exit_code == 0
    (store / "facts" / "bom1.md").write_bytes("\ufeff---\ntags: [bom]\n---\nfront matter after a BOM\n".encode())
    out = json.loads(run(store, "show", "bom1", "--json").stdout)
    assert out["tags"] == ["bom"] and out["text"] == "front matter after a BOM"


# ---------------------------------------------------------------- hostile entries in facts/
def test_symlink_dir_and_fifo_in_facts_are_skipped_reported_never_followed(store: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:the secret password line\n")
    facts = store / "facts"
    (facts / "passwd.md").symlink_to(secret)
    (facts / "adir.md").mkdir()
    os.mkfifo(facts / "fifo.md")
    r = run(store, "search", "secret password line", "--json")
    assert r.exit_code == 0 and "root:x" not in r.stdout
    for name in ("passwd.md", "adir.md", "fifo.md"):
        assert f"facts/{name}" in r.stderr  # reported once, as skipped
    assert "root:x" not in run(store, "export").stdout
    assert "root:x" not in run(store, "list", "--json").stdout
    one_line_error(run(store, "show", "passwd"))
    doctor = run(store, "doctor")
    assert doctor.exit_code == 1 and "symbolic link" in doctor.stdout and "FIFO" in doctor.stdout
    fixed = run(store, "doctor", "--fix")
    assert ".quarantine" in fixed.stdout
    assert run(store, "doctor").exit_code == 0
    assert secret.read_text().startswith("root:")  # the target was never touched


def test_the_log_is_never_written_through_a_symlink(store: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.jsonl"
    target.write_text("")
    (store / "log.jsonl").unlink()
    (store / "log.jsonl").symlink_to(target)
    r = run(store, "add", "--raw", "a fact whose log line must not go through the link")
    assert r.exit_code == 1  # the write is reported as failed
    assert target.read_text() == ""


def test_a_yaml_alias_bomb_is_rejected_fast(store: Path) -> None:
    lines = ["---", 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi"):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    (store / "facts" / "bomb.md").write_text("\n".join([*lines, "---", "the body of a bomb"]))
    r = run_fast(store, "list")
    assert r.exit_code == 0 and "facts/bomb.md" in r.stderr and "too large" in r.stderr


# ---------------------------------------------------------------- damaged derived files
def _ids(store: Path, query: str) -> list[str]:
    r = run(store, "search", query, "--json")
    assert r.exit_code == 0, r.output
    return [h["id"] for h in json.loads(r.stdout)["results"]]


@pytest.fixture
def bigger(tmp_path: Path) -> Path:
    s = tmp_path / "B"
    records = "\n".join(json.dumps({"text": f"fact number {i} about deploy topic{i}"}) for i in range(60))
    assert run(s, "import", "--create", "-", input=records.encode()).exit_code == 0
    return s


@pytest.mark.parametrize("seed", range(8))
def test_garbled_catalog_pages_heal_with_identical_results(bigger: Path, seed: int) -> None:
    base = _ids(bigger, "deploy topic7")
    path = bigger / ".index" / "catalog.sqlite"
    data = bytearray(path.read_bytes())
    rng = random.Random(seed)
    pages = len(data) // 4096
    for page in rng.sample(range(1, pages), min(6, pages - 1)):
        data[page * 4096:(page + 1) * 4096] = rng.randbytes(4096)
    path.write_bytes(bytes(data))
    assert _ids(bigger, "deploy topic7") == base
    assert run(bigger, "doctor").exit_code == 0


def test_garbage_usage_state_is_moved_aside_and_reported(bigger: Path) -> None:
    base = _ids(bigger, "deploy topic7")
    (bigger / ".state.sqlite").write_bytes(os.urandom(8192))
    doctor = run(bigger, "doctor")
    assert doctor.exit_code == 1 and "usage counts" in doctor.stdout
    r = run(bigger, "search", "deploy topic7", "--json")
    assert r.exit_code == 0 and ".state.sqlite" in r.stderr and "moved aside" in r.stderr
    assert [h["id"] for h in json.loads(r.stdout)["results"]] == base
    assert run(bigger, "doctor").exit_code == 0


@pytest.mark.parametrize("kind", ["file", "symlink"])
def test_index_that_is_not_a_directory_is_moved_aside(bigger: Path, tmp_path: Path, kind: str) -> None:
    base = _ids(bigger, "deploy topic7")
    shutil.rmtree(bigger / ".index")
    if kind == "file":
        (bigger / ".index").write_text("garbage")
    else:
        (tmp_path / "elsewhere").mkdir()
        (bigger / ".index").symlink_to(tmp_path / "elsewhere")
    assert run(bigger, "doctor").exit_code == 1
    assert run(bigger, "doctor", "--fix").exit_code == 0
    assert (bigger / ".index").is_dir() and not (bigger / ".index").is_symlink()
    assert _ids(bigger, "deploy topic7") == base
    if kind == "symlink":
        assert list((tmp_path / "elsewhere").iterdir()) == []  # nothing written through the link


def test_temp_files_of_a_killed_writer_are_cleaned_and_ignored(store: Path) -> None:
    stale = store / "facts" / ".01ABC.md.x1y2.tmp"
    stale.write_text("half a file")
    assert run(store, "list").exit_code == 0
    assert not stale.exists()
    assert ".*.tmp" in (store / ".gitignore").read_text().splitlines()


def test_new_stores_are_private(tmp_path: Path) -> None:
    s = tmp_path / "P"
    assert run(s, "add", "--create", "--raw", "a private fact").exit_code == 0
    assert stat.S_IMODE(s.stat().st_mode) == 0o700
    for p in [s / "facts", s / ".index"]:
        assert stat.S_IMODE(p.stat().st_mode) == 0o700, p
    for p in [*(s / "facts").iterdir(), s / "log.jsonl", s / ".lock"]:
        assert stat.S_IMODE(p.stat().st_mode) == 0o600, p


def test_a_shared_store_opts_in_to_group_readable(tmp_path: Path) -> None:
    s = tmp_path / "T"
    r = CliRunner().invoke(app, ["--store", str(s), "add", "--create", "--raw", "a team fact"],
                           env={**ENV, "MEMCLI_SHARED": "1"})
    assert r.exit_code == 0
    assert stat.S_IMODE((s / "facts").stat().st_mode) == 0o750
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o640 for p in (s / "facts").iterdir())


# ---------------------------------------------------------------- a hostile store config
def test_an_untrusted_store_config_sends_nothing(tmp_path: Path, llm_server) -> None:
    s = tmp_path / "H"
    assert run(s, "add", "--create", "--raw", "the deploy key rotation happens monthly").exit_code == 0
    (s / "config.toml").write_text(f'llm_model = "openai/evil"\napi_base = "{llm_server.url}"\napi_key = "x"\n')
    env = {**ENV, "MEMCLI_LLM_API_KEY": "sk-user-secret-key-123456"}
    for args in (["add", "We deploy on Fridays with make release"], ["ask", "when do we deploy"],
                 ["doctor"], ["consolidate"]):
        r = CliRunner().invoke(app, ["--store", str(s), *args], env=env)
        assert r.exception is None or isinstance(r.exception, SystemExit), (args, r.exception)
        assert "not trusted" in r.stderr, (args, r.stderr)
    assert llm_server.requests == []
    # once the user trusts the store, its config is used
    assert run(s, "trust").exit_code == 0
    llm_server.script([json.dumps({"facts": [{"text": "The team deploys on Fridays", "type": "semantic",
                                              "tags": ["deploy"], "confidence": 0.9}]})])
    r = CliRunner().invoke(app, ["--store", str(s), "add", "--json", "We deploy on Fridays"],
                           env={**env, "MEMCLI_LLM_BACKOFF": "0.001", "MEMCLI_LLM_RETRIES": "0"})
    assert "not trusted" not in r.stderr
    assert llm_server.requests and llm_server.requests[0]["model"] == "evil"


def test_ask_redacts_the_memories_it_sends(tmp_path: Path, llm_server) -> None:
    s = tmp_path / "R"
    secret = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 2
    (s / "facts").mkdir(parents=True)
    (s / "facts" / "hand.md").write_text(f"The deploy key for staging is {secret}\n")
    env = {**ENV, "MEMCLI_LLM_MODEL": "openai/m", "MEMCLI_LLM_API_BASE": llm_server.url, "MEMCLI_LLM_RETRIES": "0"}
    llm_server.script(["The key is [hand]."])
    CliRunner().invoke(app, ["--store", str(s), "ask", "what is the deploy key for staging"], env=env)
    assert llm_server.requests and secret not in json.dumps(llm_server.requests)


# ---------------------------------------------------------------- read-only and full stores
def _mount(*args: str) -> bool:
    import subprocess

    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


def _umount(path: Path) -> None:
    import subprocess

    subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.fixture
def readonly_store(bigger: Path, tmp_path: Path):
    """The same store through a read-only bind mount (root's chmod override does not apply to a
    read-only mount, so this tests what a user without write permission meets)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    if os.geteuid() != 0 or not _mount("--bind", str(bigger), str(ro)):
        pytest.skip("cannot bind-mount here (needs root and mount permission)")
    try:
        if not _mount("-o", "remount,ro,bind", str(ro)):
            pytest.skip("cannot remount read-only here")
        yield ro
    finally:
        _umount(ro)


def test_a_read_only_store_reads_fast_and_writes_fail_at_once(readonly_store: Path, bigger: Path) -> None:
    base = _ids(bigger, "deploy topic7")
    def snapshot() -> tuple:
        return (sorted(os.listdir(bigger)), sorted(os.listdir(bigger / "facts")),
                (bigger / "log.jsonl").read_bytes())

    before = snapshot()
    for args in (["search", "deploy topic7"], ["list"], ["stats"], ["export"], ["show", "nothing"], ["doctor"]):
        r = run_fast(readonly_store, *args)
        assert r.exit_code in (0, 1) and "internal error" not in r.output, (args, r.output)
    assert _ids(readonly_store, "deploy topic7") == base
    for args in (["add", "--raw", "a new fact"], ["import", "-"], ["rm", base[0]]):
        r = run_fast(readonly_store, *args, input=b'{"text": "imported"}')
        assert "Read-only file system" in one_line_error(r, (1,)), args
    assert snapshot() == before  # nothing written
@pytest.fixture
def tiny_disk(tmp_path: Path):
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    if os.geteuid() != 0 or not _mount("-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)):
        pytest.skip("cannot mount a tmpfs here (needs root and mount permission)")
    try:
        yield mnt
    finally:
        _umount(mnt)


def _fill(disk: Path, leave: int) -> Path:
    """Fill the disk until `leave` bytes are free."""
    filler = disk / "filler"
    st = os.statvfs(disk)
    free = st.f_bavail * st.f_frsize
    with open(filler, "ab") as f:
        f.write(b"\0" * max(0, free - leave))
    return filler


@pytest.mark.parametrize("leave", [0, 8 * 1024, 32 * 1024, 128 * 1024])
def test_a_full_disk_never_reports_failure_as_success_nor_leaves_half_a_write(tiny_disk: Path, leave: int) -> None:
    s = tiny_disk / "S"
    for i in range(3):
        assert run(s, "add", "--create", "--raw", f"fact {i} about the deploy pipeline").exit_code == 0
    base = sorted(os.listdir(s / "facts"))
    filler = _fill(tiny_disk, leave)
    outcomes = []
    for args in (["add", "--raw", "a fact written on a full disk"], ["search", "deploy"], ["list"],
                 ["import", "-"], ["rm", base[0][:-3]]):
        r = run_fast(s, *args, input=b'{"text": "an imported fact on a full disk"}')
        assert "internal error" not in r.output, (args, r.output)
        if r.exit_code != 0:
            one_line_error(r, (1,))
        outcomes.append((args[0], r.exit_code))
    facts = sorted(os.listdir(s / "facts"))
    assert not [n for n in facts if n.endswith(".tmp")]
    filler.unlink()
    # once there is room again: the store is whole, and what was reported as added is there
    listed = json.loads(run(s, "list", "--json").stdout)["memories"]
    texts = {m["text"] for m in listed}
    if ("add", 0) in outcomes:
        assert "a fact written on a full disk" in texts
    else:
        assert "a fact written on a full disk" not in texts
    if ("import", 0) in outcomes:
        assert "an imported fact on a full disk" in texts
    assert run(s, "doctor").exit_code == 0


def test_a_commit_cut_short_between_its_renames_is_finished_by_the_next_command(bigger: Path, monkeypatch) -> None:
    """merge writes the merged memory and the sources' trash copies, then removes the sources:
    killed in between, the next command (even a read) completes it from the journal."""
    import memcli.ops.changes as changes

    ids = [m["id"] for m in json.loads(run(bigger, "list", "--json", "--sort", "id").stdout)["memories"]][:3]
    real = os.replace
    calls = [0]

    def dies_after_two(src, dst):
        calls[0] += 1
        if calls[0] > 2:
            raise KeyboardInterrupt  # what a kill looks like from inside: nothing after this runs
        return real(src, dst)

    monkeypatch.setattr(changes.os, "replace", dies_after_two)
    with pytest.raises(KeyboardInterrupt):
        from memcli.core.config import load_config
        from memcli.ops.curate import merge
        from memcli.ops.handle import Store

        store = Store(bigger, load_config(bigger).with_overrides(embed_model="hash:256"))
        merge(store, ids, use_llm=False)
    monkeypatch.undo()
    assert (bigger / ".journal.json").exists()
    r = run(bigger, "list", "--json")
    assert r.exit_code == 0 and "interrupted" in r.stderr
    live = {n[:-3] for n in os.listdir(bigger / "facts")}
    trashed = {n[:-3] for n in os.listdir(bigger / ".trash")}
    assert set(ids) <= trashed and not (set(ids) & live)  # the merge is complete
    assert not [n for n in os.listdir(bigger / "facts") if n.endswith(".tmp")]
    assert not (bigger / ".journal.json").exists()
