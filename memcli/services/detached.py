"""Work left to a detached process, like git's auto-gc: the command returns, the work goes on.

`start_worker` launches `python -m memcli.agents.spool --store STORE` in its own session with no
inherited pipes, so the caller (a shell, git, Claude Code) never waits for it and nothing it
prints reaches the caller's output. That worker processes the inbox (memcli/agents/spool.py), then makes
provisional vectors exact (`Index.refresh_provisional`), at a lower priority. Only one worker runs
at a time (`inbox/.worker.lock`): twenty commits in a row start one model, not twenty.

`start_refresh` is what a commit that left provisional vectors calls: it starts the worker unless
background work is turned off (`MEMCLI_NO_BACKGROUND=1`, or `background = false` in the store's
config.toml; the test suite turns it off). Then `memcli reindex --provisional` does the same work
in the foreground. Only the standard library is imported here: a hook calls it on a tight budget.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ERROR_LOG = "errors.log"  # <store>/inbox/errors.log: what a detached worker has to say
REFRESH_RETRY_AFTER = 600.0  # seconds: after a refresh failed (no model), workers leave it alone this long
REFRESH_FAILED = ".refresh-failed"  # in inbox/: touched when a refresh failed


def background_on(setting: bool) -> bool:
    """Whether provisional vectors are refreshed in the background: the store's `background`
    setting (`setting`), unless `MEMCLI_NO_BACKGROUND` is set to anything but 0/false/no/off/empty."""
    value = os.environ.get("MEMCLI_NO_BACKGROUND", "").strip().lower()
    return setting and value in ("", "0", "false", "no", "off")


def inbox_dir(store_path: str | os.PathLike[str]) -> Path:
    """`<store>/inbox/`: the spooled inputs, the worker's lock and its `errors.log`."""
    return Path(store_path) / "inbox"


def refresh_failed_recently(store_path: str | os.PathLike[str]) -> bool:
    """A worker's refresh of provisional vectors failed less than `REFRESH_RETRY_AFTER` ago
    (`inbox/errors.log` says why): the workers leave it alone until then."""
    try:
        failed = (inbox_dir(store_path) / REFRESH_FAILED).stat().st_mtime
    except OSError:
        return False
    return time.time() - failed < REFRESH_RETRY_AFTER


def start_worker(store_path: str | os.PathLike[str]) -> None:
    """Launch a detached worker (`python -m memcli.agents.spool --store STORE`) and return at once."""
    store_path = Path(store_path).absolute()
    d = inbox_dir(store_path)
    d.mkdir(exist_ok=True)
    with open(d / ERROR_LOG, "ab") as err:
        subprocess.Popen(
            [sys.executable, "-m", "memcli.agents.spool", "--store", str(store_path)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
            close_fds=True, cwd=str(store_path),
        )


def start_refresh(store_path: str | os.PathLike[str], *, enabled: bool = True) -> bool:
    """Start the worker that makes provisional vectors exact, unless background work is off
    (`enabled`: the store's `background` setting). Returns whether it was started; a worker that
    cannot be started (no room, no permission) is not an error: the vectors stay provisional until
    the next worker or `memcli reindex --provisional`."""
    if not background_on(enabled):
        return False
    try:
        start_worker(store_path)
    except OSError:
        return False
    return True
