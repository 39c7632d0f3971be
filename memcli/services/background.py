"""Work on another core: a pure computation run in a forked copy of this process.

A curation pass spends most of its time in pure Python string work (`memcli.rules.relate`) that the GIL
keeps on one core, while users' machines have several. `background(work)` forks once: the child
runs `work()` on the memory it shares with the parent (copy-on-write, nothing to send over) and
pipes back the pickled result, while the parent goes on with the rest of the plan.

Only for work that reads nothing but Python objects already in memory (no file, database or
network handle is touched in the child, which leaves with `os._exit`, so no finaliser of the
parent's runs twice). Where forking is unavailable or unsafe (not Linux, one usable core,
`MEMCLI_WORKERS=1`), or the child fails, `work()` simply runs in the parent when its result is
asked for: the result is the same either way, only the wall time differs.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


def cores() -> int:
    """Cores this process may run on (1 when `MEMCLI_WORKERS=1` asks for no second process)."""
    if os.environ.get("MEMCLI_WORKERS", "").strip() == "1":
        return 1
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def can_fork() -> bool:
    """Forking a copy is cheap and safe here: Linux (macOS system libraries are not fork-safe
    without an exec) with a second core to run it on, from a process running one Python thread.
    Another thread (the MCP server's store thread, a library user's own) may hold a lock at the
    instant of the fork that the child would then wait on forever. Native pools are left to
    their own fork handlers (OpenBLAS has one; the child calls no native library that does not)."""
    return (sys.platform.startswith("linux") and hasattr(os, "fork") and cores() > 1
            and _one_thread())


def _one_thread() -> bool:
    return threading.active_count() == 1


@contextlib.contextmanager
def background(work: Callable[[], T], *, fork: bool = True) -> Iterator[Callable[[], T]]:
    """Start `work()` in a forked child (when `fork` and `can_fork()`); yield a function that
    returns its result, waiting for the child if need be (or running `work()` right there if no
    child could do it). Leaving the block without asking stops a child still running."""
    pid, fd = _start(work) if fork and can_fork() else (0, -1)
    done: list[T] = []

    def result() -> T:
        nonlocal pid
        if not done:
            data = b""
            if pid:
                try:
                    with os.fdopen(fd, "rb") as f:
                        data = f.read()
                finally:
                    _, status = os.waitpid(pid, 0)
                    pid = 0
                if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
                    data = b""
            done.append(pickle.loads(data) if data else work())
        return done[0]

    try:
        yield result
    finally:
        if pid:  # never asked (the plan failed meanwhile): stop and reap the child
            with contextlib.suppress(OSError):
                os.close(fd)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.waitpid(pid, 0)


def _start(work: Callable[[], object]) -> tuple[int, int]:
    """Fork a child that writes `pickle(work())` to a pipe and exits; (pid, read end), or (0, -1)
    when the fork fails (no memory, too many processes)."""
    r, w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return 0, -1
    if pid == 0:  # the child: compute, send, leave without running the parent's finalisers
        code = 1
        try:
            os.close(r)
            data = pickle.dumps(work(), protocol=pickle.HIGHEST_PROTOCOL)
            view = memoryview(data)
            while view:
                view = view[os.write(w, view):]
            code = 0
        except BaseException:  # noqa: BLE001 - any failure: the parent computes it itself
            pass
        finally:
            os._exit(code)
    os.close(w)
    return pid, r


def in_thread(name: str, work: Callable[..., T], *args: Any) -> Future[T]:
    """Run `work(*args)` on a thread of its own (named `name`) and return its future: for a
    system call or a C library that releases the GIL (renames and fsyncs, hnswlib) while this
    thread goes on. The thread ends with that one task (`result()` joins it); a pool of its own
    per call, since a module-wide one would be a dead thread in a forked child."""
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
    future = pool.submit(work, *args)
    pool.shutdown(wait=False)
    return future
