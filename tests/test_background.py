"""Work on another core (memcli/services/background.py): the result is the work's, whichever process ran
it, and nothing is left running behind."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from memcli.services import background as background_mod
from memcli.services.background import background, can_fork

two_cores = pytest.mark.skipif(not (background_mod.cores() > 1 and sys.platform.startswith("linux")),
                               reason="needs Linux and a second core")


@pytest.fixture(autouse=True)
def _alone(monkeypatch) -> None:
    """This suite's process may run other tests' threads (fake model servers); the CLI forks from
    a process with none. Tests that want the other case start a thread themselves."""
    monkeypatch.setattr(background_mod, "_one_thread", lambda: True)


@two_cores
def test_the_work_runs_in_another_process_and_its_result_comes_back() -> None:
    parent = os.getpid()
    with background(lambda: (os.getpid(), {("a", "b"): (0.93, "new value: 8080 -> 9090")})) as result:
        pid, data = result()
        assert result() == (pid, data)  # asked twice: one run
    assert pid != parent and data == {("a", "b"): (0.93, "new value: 8080 -> 9090")}


def test_one_core_or_no_fork_runs_the_work_here(monkeypatch) -> None:
    monkeypatch.setenv("MEMCLI_WORKERS", "1")
    assert not can_fork()
    with background(os.getpid) as result:
        assert result() == os.getpid()
    monkeypatch.delenv("MEMCLI_WORKERS")
    with background(os.getpid, fork=False) as result:
        assert result() == os.getpid()


@two_cores
def test_a_child_that_fails_leaves_the_work_to_the_parent() -> None:
    parent = os.getpid()

    def work() -> str:
        if os.getpid() != parent:
            raise RuntimeError("the child fails")
        return "done here"

    with background(work) as result:
        assert result() == "done here"


@two_cores
def test_leaving_without_asking_stops_the_child(monkeypatch) -> None:
    from memcli.services import background as bg

    started: list[int] = []
    start = bg._start
    monkeypatch.setattr(bg, "_start", lambda work: (r := start(work), started.append(r[0]))[0])
    t0 = time.monotonic()
    with pytest.raises(KeyError), background(lambda: time.sleep(60)):
        raise KeyError("the plan failed meanwhile")
    assert time.monotonic() - t0 < 10 and len(started) == 1 and started[0] > 0
    with pytest.raises(ChildProcessError):  # reaped: no child left behind, not even a zombie
        os.waitpid(started[0], os.WNOHANG)


@two_cores
def test_a_process_running_another_thread_does_the_work_itself(monkeypatch) -> None:
    """A thread may hold a lock at the instant of a fork (the MCP server's store thread, a library
    user's own): the child could wait on it forever, so no child is forked then."""
    monkeypatch.undo()  # the real thread count
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not can_fork()
        with background(os.getpid) as result:
            assert result() == os.getpid()
    finally:
        stop.set()
        other.join()
