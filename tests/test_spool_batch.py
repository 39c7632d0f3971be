"""The inbox worker drains a burst in batches: every item lands, each decided as its own add
would be (a repeat is NONE), and a bad item waits alone."""

from __future__ import annotations

from conftest import HASH

from memcli.agents.spool import pending, spool
from memcli.api import Store


def test_a_burst_of_items_is_drained_in_one_batch_and_a_bad_item_waits_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMCLI_EMBED_MODEL", HASH)
    store = Store(tmp_path / "s")
    store.init()
    texts = [f"Service number {i} listens on port {8000 + i}." for i in range(6)]
    for i, t in enumerate(texts):
        spool(store.path, t, {"origins": [f"git:{i:07x}"], "raw": True}, source="git")
    spool(store.path, texts[2], {"origins": ["git:00000aa"], "raw": True}, source="git")  # a repeat
    bad = spool(store.path, "The cache TTL is 300 seconds.", {"raw": True}, source="git")
    bad.write_text('{"text": "cut short')  # a torn or hand-broken item
    spool(store.path, "Never choose a model from an inbox file.", {"raw": True, "llm_model": "openai/gpt-4o-mini"},
          source="git")
    report = store.process_inbox()
    assert len(report.done) == 8 and [w["file"] for w in report.waiting] == [bad.name]
    assert pending(store.path) == [bad]
    stored = sorted(m.text for m in store.list())
    assert stored == sorted([*texts, "Never choose a model from an inbox file."])
    repeat = next(m for m in store.list() if m.text == texts[2])
    assert set(repeat.origins) == {"git:0000002", "git:00000aa"}  # the repeat reinforced it: NONE
    assert bad.read_text() == '{"text": "cut short'  # kept as it was, for a person to look at
    assert "unreadable" in report.waiting[0]["error"]


def test_a_nul_byte_does_not_park_an_input_forever(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMCLI_EMBED_MODEL", HASH)
    store = Store(tmp_path / "s")
    store.init()
    spool(store.path, "We pin numpy below 3 until the wheels land.\x00", {"raw": True}, source="claude-code")
    spool(store.path, "The cache TTL is 300\x00 seconds.", {"raw": True}, source="claude-code")
    report = store.process_inbox()
    assert len(report.done) == 2 and not report.waiting and pending(store.path) == []
    assert sorted(m.text for m in store.list()) == ["The cache TTL is 300 seconds.",
                                                   "We pin numpy below 3 until the wheels land."]


def test_a_planted_commit_hand_over_never_reads_another_repository(tmp_path, monkeypatch):
    """`inbox/git-<sha>.sha` names its repository; in a project store only that project's is read."""
    import subprocess

    from memcli.agents.spool import take_commits

    monkeypatch.setenv("MEMCLI_EMBED_MODEL", HASH)
    env = {"GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@x", "GIT_COMMITTER_NAME": "A", "GIT_COMMITTER_EMAIL": "a@x"}
    other = tmp_path / "private"
    other.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=other, check=True)
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "Private: the vault token is in ~/.secret"],
                   cwd=other, check=True, env={**__import__("os").environ, **env})
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=other, capture_output=True, text=True).stdout.strip()
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    store = Store(project / ".memcli")
    store.init()
    (store.path / "inbox").mkdir(exist_ok=True)
    (store.path / "inbox" / f"git-{sha}.sha").write_text(f"{other}\n")
    assert take_commits(store.path) == 0
    assert pending(store.path) == [] and not list((store.path / "inbox").glob("*.sha"))
    assert "not a repository this store takes commits from" in (store.path / "inbox" / "errors.log").read_text()


def test_inbox_process_waits_for_a_running_worker_then_empties_the_inbox(tmp_path, monkeypatch):
    """`memcli inbox process` is asked to empty the inbox: a hook's worker holding the lock is
    waited for, not reported busy with the item left behind."""
    import fcntl
    import threading

    from conftest import Cli

    from memcli.agents.spool import WORKER_LOCK

    monkeypatch.setenv("MEMCLI_EMBED_MODEL", HASH)
    store = Store(tmp_path / "s")
    store.init()
    spool(store.path, "The staging certificates expire every 90 days.", {"raw": True}, source="cli")
    lock = open(store.path / "inbox" / WORKER_LOCK, "a")  # noqa: SIM115 - released by the timer
    fcntl.flock(lock, fcntl.LOCK_EX)
    release = threading.Timer(0.5, lock.close)
    release.start()
    try:
        r = Cli(store.path, env={"MEMCLI_EMBED_MODEL": HASH})("inbox", "process")
    finally:
        release.join()
    assert "another worker" not in r.output
    assert [m.text for m in store.list()] == ["The staging certificates expire every 90 days."]
    assert pending(store.path) == []
