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
        self.reads_seen = self._atime_works(root)
        self.snapshot()

    @staticmethod
    def _atime_works(root: Path) -> bool:
        """Whether this file system records reads (a `noatime` mount does not): else only
        writes and the output are checked."""
        probe = root / "atime-probe"
        probe.write_text("x")
        st = os.stat(probe)
        os.utime(probe, ns=(st.st_mtime_ns - 10**12, st.st_mtime_ns))
        before = os.stat(probe).st_atime_ns
        probe.read_text()
        works = os.stat(probe).st_atime_ns != before
        probe.unlink()
        return works

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
            assert after[name][0] == atime or not self.reads_seen, f"{what}: read {name} outside the store"
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


def _journal(s: Path, out: Path) -> None:
    """A committed journal naming files outside the store and store files no commit touches."""
    (s / ".journal.json").write_text(json.dumps({
        "renames": [[str(out / "secret.txt"), str(s / "facts" / "01HZZZZZZZZZZZZZZZZZZZZZZU.md")],
                    [str(s / "log.jsonl"), str(s / "facts" / "01HZZZZZZZZZZZZZZZZZZZZZZT.md")]],
        "unlinks": [str(out / "notes.md"), str(s / "log.jsonl"), str(s / ".gitignore"),
                    str(s / "facts" / ".." / ".." / ".." / "outside" / "secret.txt")]}))


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
    "journal": _journal,
}
NOT_NAMED_BY_DOCTOR = {"hnsw_file absolute", "hnsw_file relative", "journal"}  # ignored where they are read

COMMANDS = [
    ("list",), ("search", "postgres"), ("stats",), ("context",), ("export", "--format", "jsonl"),
    ("doctor",), ("add", "--raw", "a new memory about redis"), ("reindex",),
    ("capture", "text", "we use tox for tests"), ("inbox", "process"), ("rm", "{id}"),
    ("where",), ("show", "{id}"), ("trash",), ("log",), ("restore", "{id}"), ("consolidate", "--no-llm"),
    ("prune", "--older-than", "1d", "--dry-run"), ("export", "--format", "md"), ("inbox",),
    ("context", "--hook"), ("ask", "which database"), ("feedback", "{id}", "--useful"), ("rollback", "nobody"),
    ("merge", "--auto", "--dry-run"), ("sync",), ("init", "{store}"),
]


@pytest.mark.parametrize("clone", list(CLONES))
def test_crafted_clone_stays_inside(tmp_path: Path, clone: str) -> None:
    s = make_store(tmp_path)
    mid = json.loads(run(s, "list", "--json").stdout)["memories"][0]["id"]
    out = Outside(tmp_path)
    CLONES[clone](s, out.dir)
    out.snapshot()
    for cmd in COMMANDS:
        args = [a.replace("{id}", mid).replace("{store}", str(s)) for a in cmd]
        r = run(s, *args)
        assert SECRET not in r.output, (clone, args, r.output)
        out.assert_untouched(f"{clone}: {' '.join(args)}")
    # the Claude Code hook: its transcript is the user's (read), its state goes to .capture/
    transcript = tmp_path / "transcript.jsonl"
    transcript.write_text(json.dumps({"type": "user", "message": {"role": "user", "content":
                                      "we decided to pin numpy below 3 for the release"}}) + "\n")
    payload = json.dumps({"session_id": "s1", "transcript_path": str(transcript), "cwd": str(tmp_path)})
    r = run(s, "capture", "claude-code", input=payload)
    assert SECRET not in r.output
    out.assert_untouched(f"{clone}: capture claude-code")
    r = run(s, "doctor")
    if clone not in NOT_NAMED_BY_DOCTOR:
        assert r.exit_code == 1, (clone, r.output)  # doctor names it
    else:
        assert (s / "log.jsonl").exists() and (s / ".gitignore").exists()
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


# ------------------------------------------------------------------ a huge front matter
def test_huge_front_matter_is_skipped_fast(tmp_path: Path) -> None:
    s = make_store(tmp_path)
    lines = "".join(f"k{i}: v{i}\n" for i in range(300_000))  # ~4 MB of YAML: minutes to parse
    (s / "facts" / "01HZZZZZZZZZZZZZZZZZZZZZZX.md").write_text(f"---\n{lines}---\nbody\n")
    cpu = time.process_time()
    r = run(s, "list")
    cpu = time.process_time() - cpu
    assert r.exit_code == 0 and "postgres" in r.stdout
    assert "front matter is too large" in r.stderr
    assert cpu < 5, f"{cpu:.1f} s CPU"  # CPU, not wall clock: bounded work, whatever the load


# ------------------------------------------------------------------ trust
def _item(s: Path, options: dict) -> None:
    (s / "inbox").mkdir(exist_ok=True)
    (s / "inbox" / "01HZZZZZZZZZZZZZZZZZZZZZZW.json").write_text(
        json.dumps({"at": "2024-01-01T00:00:00Z", "attempts": 0, "options": options,
                    "text": "we deploy with helm charts in the infra repo"}))


def test_inbox_item_options_never_choose_the_llm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A committed inbox item naming a provider is processed without any LLM (none configured)."""
    s = make_store(tmp_path)
    _item(s, {"llm_model": "openai/gpt-4o-mini", "model": "openai/gpt-4o-mini", "api_base": "http://127.0.0.1:9"})
    import memcli.services.llm.client as client

    calls = []
    monkeypatch.setattr(client.LLM, "__init__", lambda self, *a, **k: calls.append((a, k)) or None)
    r = run(s, "inbox", "process")
    assert r.exit_code == 0, r.output
    assert not calls
    assert "helm charts" in run(s, "list").stdout
    _item(s, {"model": "openai/gpt-4o-mini"})
    r = run(s, "inbox", "retry")
    assert not calls and "openai" not in r.output


def test_untrusted_embed_model_and_git_skip_are_ignored(tmp_path: Path) -> None:
    s = make_store(tmp_path)
    (s / "config.toml").write_text('embed_model = "BAAI/bge-small-en-v1.5"\ngit_skip = "^(a|aa)+$"\n')
    from memcli.core.config import DEFAULT_EMBED_MODEL, load_config
    from memcli.storage import safety

    safety.drain()
    cfg = load_config(s)
    assert cfg.embed_model == DEFAULT_EMBED_MODEL and cfg.git_skip != "^(a|aa)+$"
    warning = " ".join(safety.drain())
    assert "embed_model" in warning and "git_skip" in warning and "memcli trust" in warning
    r = CliRunner().invoke(app, ["trust", str(s)], env=ENV)
    assert r.exit_code == 0, r.output
    cfg = load_config(s)
    assert cfg.embed_model == "BAAI/bge-small-en-v1.5" and cfg.git_skip == "^(a|aa)+$"


@pytest.mark.parametrize("setting, key", [
    ("[ranking]\nrecency_days = 0", "ranking.recency_days"),
    ("[ranking]\nrecency_days = -3", "ranking.recency_days"),
    ("[ranking]\ncandidates = 0", "ranking.candidates"),
    ("[ranking]\nmmr_lambda = 1.5", "ranking.mmr_lambda"),
    ("[ranking]\nthreshold = nan", "ranking.threshold"),
    ("[ranking]\nsimilarity = inf", "ranking.similarity"),
    ("add_threshold = 2", "add_threshold"),
    ("llm_timeout = 0", "llm_timeout"),
    ("llm_retries = -1", "llm_retries"),
    ('[ranking]\nrecency_days = "soon"', "ranking.recency_days"),
])
def test_bad_config_value_names_the_key(tmp_path: Path, setting: str, key: str) -> None:
    s = make_store(tmp_path)
    (s / "config.toml").write_text(setting + "\n")
    for cmd in (("search", "postgres"), ("list",), ("add", "--raw", "x y z")):
        r = run(s, *cmd)
        assert r.exit_code == 1, (cmd, r.output)
        lines = [x for x in r.stderr.splitlines() if x.strip() and not x.startswith("hint: ")]
        assert len(lines) == 1 and key in lines[0], r.stderr


# ------------------------------------------------------------------ dates, trash, stdin
def test_dates_before_year_1000_round_trip(tmp_path: Path) -> None:
    s = make_store(tmp_path)
    src = tmp_path / "old.jsonl"
    src.write_text(json.dumps({"text": "the abbey was founded", "created": "0999-05-01T00:00:00Z",
                               "updated": "0999-05-02T00:00:00Z"}) + "\n")
    assert run(s, "import", str(src)).exit_code == 0
    body = "".join(p.read_text() for p in (s / "facts").glob("*.md"))
    assert "created: 0999-05-01T00:00:00Z" in body
    out = tmp_path / "export.jsonl"
    assert run(s, "export", "--format", "jsonl", "-o", str(out)).exit_code == 0
    assert '"0999-05-01T00:00:00Z"' in out.read_text()
    s2 = tmp_path / "S2"
    r = run(s2, "import", str(out))
    assert r.exit_code == 0, r.output
    assert "0999-05-01" in run(s2, "list", "--json").stdout


def test_doctor_fix_settles_a_memory_in_facts_and_trash(tmp_path: Path) -> None:
    """After a pull brought back a teammate's edit of a memory trashed here: the live one stays,
    the stale trash copy is kept aside, doctor is clean; nothing lost."""
    s = make_store(tmp_path)
    mems = json.loads(run(s, "list", "--json").stdout)["memories"]
    a, b = mems[0]["id"], mems[1]["id"]
    assert run(s, "rm", a).exit_code == 0
    assert run(s, "rm", b).exit_code == 0
    # a: the pull brought the same file back; b: it brought an edited one back
    trashed_a = (s / ".trash" / f"{a}.md").read_text()
    (s / "facts" / f"{a}.md").write_text(trashed_a.replace(trashed_a[trashed_a.index("trashed:"):
                                                                      trashed_a.index("---", 4)], ""))
    edited = (s / ".trash" / f"{b}.md").read_text()
    edited = edited[:edited.index("trashed:")] + edited[edited.index("---", 4):]
    (s / "facts" / f"{b}.md").write_text(edited.rstrip("\n") + " (edited by a teammate)\n")
    r = run(s, "doctor")
    assert r.exit_code == 1 and "in both facts/ and .trash/" in r.stdout
    r = run(s, "doctor", "--fix")
    r = run(s, "doctor")
    assert "in both" not in r.stdout and r.exit_code == 0, r.stdout
    listed = run(s, "list").stdout
    assert "edited by a teammate" in listed
    kept = list((s / ".quarantine").glob(f"trash-{b}.*.md"))
    assert len(kept) == 1


def test_capture_text_dash_reads_stdin(tmp_path: Path) -> None:
    s = make_store(tmp_path)
    r = run(s, "capture", "text", "-", input="we pin numpy below 3 in the lockfile\n")
    assert r.exit_code == 0, r.output
    items = [json.loads(p.read_text()) for p in (s / "inbox").glob("*.json")]
    assert [i["text"] for i in items] == ["we pin numpy below 3 in the lockfile\n"] or \
        [i["text"].strip() for i in items] == ["we pin numpy below 3 in the lockfile"]


# ------------------------------------------------------------------ clones converge
def test_two_clones_merging_the_same_pair_converge(tmp_path: Path) -> None:
    import shutil

    a = make_store(tmp_path)
    ids = [m["id"] for m in json.loads(run(a, "list", "--json").stdout)["memories"]]
    b = tmp_path / "clone-b" / ".memcli"
    shutil.copytree(a / "facts", b / "facts")
    shutil.copy(a / ".gitignore", b / ".gitignore")
    for s in (a, b):
        r = run(s, "merge", *ids)
        assert r.exit_code == 0, r.output
        time.sleep(1.1)  # the clones merge at different times
    fa = {p.name: p.read_bytes() for p in (a / "facts").glob("*.md")}
    fb = {p.name: p.read_bytes() for p in (b / "facts").glob("*.md")}
    assert len(fa) == 1 and fa == fb  # same id, same bytes: git merges them cleanly
    # merging the same sources again (restored) makes a memory of its own, never one in the trash
    for mid in ids:
        assert run(a, "restore", mid).exit_code == 0
    assert run(a, "merge", *ids).exit_code == 0
    assert len(list((a / "facts").glob("*.md"))) == 2
    assert "in both" not in run(a, "doctor").stdout


# ------------------------------------------------------------------ round trips
HOSTILE_TEXTS = [
    "line one\nline two", 'say "hi", then \'bye\'', "---", "---\nid: x\n---", "key: value", "- a\n- b", "# heading",
    "## 01HZZ · semantic", "<!-- memcli {} -->", "-->", "a,b,c", "tab\there", "ünïcødé ✓ 日本語 🙂", "\r\ncrlf\r\n",
    "a\rb", "\rstart", "end\r", "null", "true", "123", "[1, 2]", "{a: 1}", "\\backslash\\", "semi;colon",
    "ends with newline\n", "\n\n## fake heading\n<!-- memcli {\"id\": \"ZZ\"} lines=1 -->\n\ntext",
    "=cmd|' /C calc'!A0",
    "line\n\n\n\nmany blank", "~~~\ncode\n~~~", "\u2028sep\u2029", '"', '""', "x" * 2000,
]


@pytest.fixture(scope="module")
def hostile_export(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A store of 2,000 memories with hostile texts, and its jsonl export (the reference)."""
    root = tmp_path_factory.mktemp("roundtrip")
    src = root / "in.jsonl"
    with src.open("w", encoding="utf-8") as f:
        for i in range(2000):
            h = HOSTILE_TEXTS[i % len(HOSTILE_TEXTS)]
            rec = {"text": f"memory {i}: {h} end {i}" if i % 3 else f"{h} #{i}", "tags": [f"t{i % 7}"]}
            if i == 5:
                rec["created"] = "0999-05-01T00:00:00Z"  # a date before year 1000 survives too
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    s = root / "S"
    r = run(s, "import", str(src))
    assert r.exit_code == 0, r.output
    ref = root / "ref.jsonl"
    assert run(s, "export", "--format", "jsonl", "-o", str(ref)).exit_code == 0
    return s, ref


@pytest.mark.parametrize("fmt", ["csv", "md", "json", "jsonl"])
def test_own_exports_import_back(tmp_path: Path, hostile_export: tuple[Path, Path], fmt: str) -> None:
    s, ref = hostile_export
    out = tmp_path / f"S.{fmt}"
    assert run(s, "export", "--format", fmt, "-o", str(out)).exit_code == 0
    t = tmp_path / "T"
    r = run(t, "import", str(out))
    assert r.exit_code == 0, r.output
    back = tmp_path / "back.jsonl"
    assert run(t, "export", "--format", "jsonl", "-o", str(back)).exit_code == 0
    assert back.read_text(encoding="utf-8") == ref.read_text(encoding="utf-8")


def test_every_malformed_jsonl_line_is_named(tmp_path: Path) -> None:
    lines = ['{"text": "good one"}', "{bad json", '{"text": "good two"}', '{"text": ""}', "[1, 2]",
             '{"text": "x", "created": 5}', '"just a string"', '{"text": "good three"}', '{"text": "unterminated']
    src = tmp_path / "bad.jsonl"
    src.write_text("\n".join(lines) + "\n")
    s = tmp_path / "S"
    r = run(s, "import", str(src))
    assert r.exit_code == 1
    err = [x for x in r.stderr.splitlines() if x.startswith("memcli: error")]
    assert len(err) == 1
    for no in (2, 4, 5, 6, 7, 9):
        assert f"line {no}" in err[0], (no, err[0])
    for no in (1, 3, 8):
        assert f"line {no})" not in err[0] and f"line {no} " not in err[0]
    assert not (s / "facts").exists() or not list((s / "facts").glob("*.md"))  # nothing imported


# ------------------------------------------------------------------ hooks never lose input
def test_nul_byte_does_not_park_a_capture(tmp_path: Path) -> None:
    from memcli.agents import spool

    s = make_store(tmp_path)
    spool.spool(s, "we release from the main branch\x00 every tuesday", {"origins": ["claude-code"]})
    # an item an older memcli parked with its NUL
    (s / "inbox" / "01HZZZZZZZZZZZZZZZZZZZZZZV.json").write_text(json.dumps(
        {"attempts": 1, "error": "input holds a NUL byte", "options": {}, "text": "the cache\x00 ttl is 5 minutes"}))
    r = run(s, "inbox", "process")
    assert r.exit_code == 0, r.output
    listed = run(s, "list").stdout
    assert "every tuesday" in listed and "ttl is 5 minutes" in listed
    assert not list((s / "inbox").glob("*.json"))


def test_large_input_does_not_starve_small_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A large spooled input is added a chunk at a time, small items first; nothing is lost."""
    from memcli.agents import spool
    from memcli.ops.handle import Store  # what the worker processes with

    s = make_store(tmp_path)
    n = 1600  # ~105 kB: four chunks (it was 3,000 lines, seven chunks: the same path, twice the CPU)
    big = "\n\n".join(f"Service number {i} listens on port {8000 + i} in the staging cluster." for i in range(n))
    assert len(big) > 3 * spool.CHUNK_CHARS
    spool.spool(s, big, {"origins": ["claude-code"]})
    time.sleep(0.002)
    spool.spool(s, "the small note queued after the big one", {"origins": ["cli"]})
    order: list[str] = []
    real = spool._run

    def watch(store, item):
        order.append("small" if "small note" in (item.get("text") or "") else "chunk")
        if order.count("chunk") == 1:  # a capture spooled while the large input is being added
            spool.spool(s, "another small note spooled meanwhile", {"origins": ["cli"]})
        return real(store, item)

    monkeypatch.setenv("MEMCLI_EMBED_MODEL", "hash:256")
    monkeypatch.setattr(spool, "_run", watch)
    store = Store(s)
    try:
        spool.process(store)
    finally:
        store.close()
    assert order[0] == "small" and order.count("chunk") >= 3
    listed = run(s, "list", "--limit", "10000").stdout
    assert "another small note" in listed
    # the note spooled while the large input was being added did not wait for all of it
    assert order.index("small", 1) < len(order) - 1, order
    for i in (0, n // 2, n - 1):
        assert f"Service number {i} listens" in listed, i
    assert not list((s / "inbox").glob("*.json"))


def test_huge_commit_message_is_kept_truncated(tmp_path: Path) -> None:
    import subprocess

    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.email=a@b.c", "-c", "user.name=a"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "f").write_text("x")
    subprocess.run([*git, "add", "f"], check=True)
    msg = "feat: import the vendored parser\n\n" + "".join(f"log line {i} of a pasted build\n" for i in range(400_000))
    assert len(msg) > 12 << 20
    subprocess.run([*git, "commit", "-q", "-F", "-"], input=msg.encode(), check=True)
    s = repo / ".memcli"
    assert run(s, "init").exit_code == 0
    from memcli.agents.capture import MAX_COMMIT_CHARS, capture_git

    got = capture_git("HEAD", store=str(s), cwd=repo)
    assert got.item is not None
    item = json.loads(got.item.read_text())
    assert item["text"].startswith("feat: import the vendored parser")
    assert len(item["text"]) <= MAX_COMMIT_CHARS + 200 and "truncated" in item["text"]
    r = run(s, "inbox", "process")
    assert r.exit_code == 0, r.output
    assert "vendored parser" in run(s, "list").stdout


def test_hook_failure_on_a_store_that_cannot_take_it_is_recorded(tmp_path: Path) -> None:
    """A hook never prints into its host; when the store cannot hold its error log (read-only,
    full, a planted link), the line goes to the user's own cache, naming the store."""
    from memcli.agents import spool

    s = make_store(tmp_path)
    out = Outside(tmp_path)
    _replace_with_link(s / "inbox", out.dir)
    spool.record_failure(s, "worker: OSError: read-only file system")
    out.assert_untouched("record_failure")
    log = Path(os.environ["MEMCLI_CACHE_DIR"]) / "hook-errors.log"
    assert "read-only file system" in log.read_text() and str(s) in log.read_text()


def test_planted_journal_touches_only_memory_files(tmp_path: Path) -> None:
    s = make_store(tmp_path)
    out = Outside(tmp_path)
    log_before = (s / "log.jsonl").read_text()
    ignore_before = (s / ".gitignore").read_text()
    _journal(s, out.dir)
    assert run(s, "add", "--raw", "a memory that takes the writer lock").exit_code == 0
    out.assert_untouched("journal recovery")
    assert (s / "log.jsonl").read_text().startswith(log_before)
    assert (s / ".gitignore").read_text() == ignore_before
    assert not (s / ".journal.json").exists()


@pytest.mark.parametrize("worded", ["same", "differently"])
def test_clones_merging_the_same_pair_converge_through_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          worded: str) -> None:
    """Issue 24's sync: two clones consolidate the same near-duplicate pair, then sync: one
    memory, the same in both, nothing in both facts/ and .trash/, doctor clean. `differently`:
    the two merges worded the text differently (as two LLM merges may): sync keeps one of them,
    the same one in both clones."""
    import subprocess

    for k, v in {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b.c", "GIT_COMMITTER_NAME": "a",
                 "GIT_COMMITTER_EMAIL": "a@b.c"}.items():
        monkeypatch.setenv(k, v)

    def git(*args: str, cwd: Path = tmp_path) -> None:
        subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)

    git("init", "-q", "--bare", "remote.git")
    git("clone", "-q", "remote.git", "a")
    a, b = tmp_path / "a" / ".memcli", tmp_path / "b" / ".memcli"
    assert run(a, "add", "--create", "--raw", "the api uses postgres 16").exit_code == 0
    assert run(a, "add", "--raw", "the api uses postgres version 16").exit_code == 0
    git("add", "-A", cwd=tmp_path / "a")
    git("commit", "-qm", "init", cwd=tmp_path / "a")
    git("push", "-q", "origin", "HEAD", cwd=tmp_path / "a")
    git("clone", "-q", "remote.git", "b")
    ids = [m["id"] for m in json.loads(run(a, "list", "--json").stdout)["memories"]]
    assert len(ids) == 2
    for s in (a, b):
        assert run(s, "merge", *ids).exit_code == 0
        time.sleep(1.1)  # the clones merge at different times
    if worded == "differently":
        (merged,) = (b / "facts").glob("*.md")
        body = merged.read_text()
        merged.write_text(body.rstrip("\n") + " (as worded by another model)\n")
    for s in (a, b, a):
        r = run(s, "sync")
        assert r.exit_code == 0, r.output
    fa = {p.name: p.read_bytes() for p in (a / "facts").glob("*.md")}
    fb = {p.name: p.read_bytes() for p in (b / "facts").glob("*.md")}
    assert len(fa) == 1 and fa == fb
    for s in (a, b):
        r = run(s, "doctor")
        assert r.exit_code == 0, r.stdout


def test_two_clones_consolidating_converge(tmp_path: Path) -> None:
    """With the real model (near-duplicates are its judgement, not the hash embedder's)."""
    import shutil

    def run(store: Path, *args: str):
        result = CliRunner().invoke(app, ["--store", str(store), *args], env={"MEMCLI_NO_BACKGROUND": "1"})
        assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
        return result

    src = tmp_path / "nd.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in (
        "the api uses postgres 16", "The API uses Postgres 16.",
        "deploys happen on fridays with make release", "Deploys happen on Fridays with make release!")))
    a, b = tmp_path / "A", tmp_path / "B"
    assert run(a, "import", str(src)).exit_code == 0
    shutil.copytree(a / "facts", b / "facts")
    for s in (a, b):
        r = run(s, "consolidate", "--no-llm")
        assert r.exit_code == 0 and "2 merged" in r.stderr, r.output
        time.sleep(1.1)
    fa = {p.name: p.read_bytes() for p in (a / "facts").glob("*.md")}
    fb = {p.name: p.read_bytes() for p in (b / "facts").glob("*.md")}
    assert len(fa) == 2 and fa == fb
