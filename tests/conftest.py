"""Shared fixtures: every test runs against temporary stores and a temporary cache.

The embedding cache is shared by the whole session (one directory), so the real model embeds each
distinct text once per run; nothing touches the user's own stores or cache.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
import typer.testing
from typer.testing import CliRunner

from memcli.api import Store
from memcli.cli.app import app
from memcli.core import discovery
from memcli.core.config import Config
from memcli.core.memory import Memory
from memcli.ops import handle as _handle

HASH = "hash:256"  # deterministic embedder: plumbing tests only, never search quality or dedup
# `MEMCLI_STRESS=long pytest`: the seeded stress tests run their longer sizes (CI runs the bounded
# ones; read at import, before the session fixture clears MEMCLI_* from the environment)
STRESS_LONG = os.environ.get("MEMCLI_STRESS") == "long"


def pytest_configure(config: pytest.Config) -> None:
    """Temporary directories (tmp_path) on a RAM filesystem when there is one with room: memcli
    fsyncs every write, and hundreds of test stores' fsyncs on a shared disk were about half the
    wall time of the I/O-heavy files (test_decisions + test_index: 97 s -> 48 s under load), with
    nothing to show for it (no test cuts the power). `MEMCLI_TEST_TMP=disk`, `--basetemp` or
    PYTEST_DEBUG_TEMPROOT keep them where pytest puts them."""
    if config.option.basetemp or os.environ.get("PYTEST_DEBUG_TEMPROOT") or os.environ.get("MEMCLI_TEST_TMP") == "disk":
        return
    shm = "/dev/shm"
    try:
        st = os.statvfs(shm)
    except OSError:
        return
    if st.f_bavail * st.f_frsize >= 2 << 30 and os.access(shm, os.W_OK | os.X_OK):  # not a 64 MB container shm
        os.environ["PYTEST_DEBUG_TEMPROOT"] = shm  # pytest keeps the last 3 runs' directories, as in /tmp


@pytest.fixture(autouse=True, scope="session")
def _isolated_env(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("env")
    saved = dict(os.environ)
    for key in list(os.environ):
        if key.startswith("MEMCLI_"):
            del os.environ[key]
    os.environ["MEMCLI_CACHE_DIR"] = str(base / "cache")
    os.environ["XDG_DATA_HOME"] = str(base / "data")
    os.environ["XDG_CACHE_HOME"] = str(base / "xdg-cache")
    os.environ["XDG_CONFIG_HOME"] = str(base / "xdg-config")  # the user's trust list (memcli trust)
    os.environ["MEMCLI_LOCK_TIMEOUT"] = "30"
    # One onnxruntime thread, in this process and every memcli subprocess: its idle pool threads
    # spin, which doubled the CPU of embedding one text at a time (same vectors either way).
    os.environ["MEMCLI_EMBED_THREADS"] = "1"
    # No detached refresh of provisional vectors after a bulk commit (memcli/services/detached.py): a test
    # process must not leave workers behind; tests/test_provisional.py turns it on where it checks it.
    os.environ["MEMCLI_NO_BACKGROUND"] = "1"
    yield
    os.environ.clear()
    os.environ.update(saved)


_COMMANDS: dict[int, tuple[typer.Typer, object]] = {}


def _command_of(typer_app: typer.Typer) -> object:
    """The click command of `typer_app`, built on its first use in this process: what a real
    `memcli` process does once (it runs one command), instead of once per CliRunner call.
    Building memcli's command is ~90% of an in-process `memcli list` (the global options are made
    from a template Typer app for each of its ~30 subcommands)."""
    key = id(typer_app)
    if key not in _COMMANDS:
        _COMMANDS[key] = (typer_app, typer.main.get_command(typer_app))  # the app kept: its id stays its own
    return _COMMANDS[key][1]


@pytest.fixture(autouse=True, scope="session")
def _command_built_once():
    """Every CliRunner.invoke of the session reuses the command built for its app (a click
    command is made to be invoked again: memcli resets its per-command state in Group.main)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(typer.testing, "_get_command", _command_of)
        yield


def files(store: Store) -> _handle.Store:
    """The store's internal handle (its files and index, what the operations take): for tests that
    plant or inspect files directly, as an editor, a crash or a second process would. The public
    `Store` has no `write` or `lock`: every change a user makes goes through a ChangeSet."""
    return store._store


@pytest.fixture
def hash_store(tmp_path: Path) -> Store:
    """A store whose embedder is the hash embedder (fast, meaningless)."""
    s = Store(tmp_path / "store", Config(embed_model=HASH))
    s.init()
    yield s
    s.close()


@pytest.fixture
def real_store(tmp_path: Path) -> Store:
    """A store with the real default model."""
    s = Store(tmp_path / "store")
    s.init()
    yield s
    s.close()


class Cli:
    """Drive the CLI in-process through Typer's runner, against one store."""

    def __init__(self, store: Path, env: dict[str, str] | None = None) -> None:
        self.store = store
        self.runner = CliRunner()
        self.env = env or {}

    def __call__(self, *args: str, input: str | bytes | None = None, ok: bool = True):
        if args and args[0] in ("add", "import") and not self.store.exists():
            args = (args[0], "--create", *args[1:])  # a missing --store is an error unless asked to create it
        result = self.runner.invoke(app, ["--store", str(self.store), *args], input=input, env=self.env,
                                    catch_exceptions=False)
        if ok and result.exit_code != 0:
            raise AssertionError(f"memcli {' '.join(args)} exited {result.exit_code}:\n{result.output}"
                                 f"\n{getattr(result, 'stderr', '')}")
        return result


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "store")


@pytest.fixture
def hash_cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "store", env={"MEMCLI_EMBED_MODEL": HASH})


def run_memcli(*args: str, input: str | bytes | None = None, env: dict[str, str] | None = None,
               cwd: Path | None = None) -> subprocess.CompletedProcess:
    """A real subprocess, as a shell user or a git hook would run it."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "memcli", *args], input=input, capture_output=True,
                          env=full_env, cwd=cwd, text=isinstance(input, str) or input is None, timeout=300)


def invoke_memcli(*args: str, input: str | bytes | None = None, env: dict[str, str] | None = None,
                  cwd: Path | None = None) -> subprocess.CompletedProcess:
    """What `run_memcli` returns, from this process: Typer's runner in `cwd`, with `env` over this
    process's environment, and the same exit status, stdout and stderr as a real `memcli` there
    (~0.05 s CPU against ~0.7 s for a new Python importing memcli). For tests of what a command
    does; what only a real process shows (the console script, pipes, signals, imports, detached
    workers, a hook run by git) keeps run_memcli."""
    # what a real process starts without: the git lookups memcli keeps for its one command
    discovery._repo_at.cache_clear()
    discovery.git_user_email.cache_clear()
    before = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        result = CliRunner().invoke(app, list(args), input=input, env=env, catch_exceptions=True)
    finally:
        os.chdir(before)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception  # a real process would have ended on a traceback: show it
    return subprocess.CompletedProcess(["memcli", *args], result.exit_code, result.stdout, result.stderr)


def listed(store: Path, *flags: str, env: dict[str, str] | None = None) -> list[dict]:
    """`memcli --store STORE list --json FLAGS` in-process: for tests that poll a store while real
    processes (hooks, workers) write to it, where a subprocess per poll cost ~0.5 s CPU each."""
    result = Cli(store, env={"MEMCLI_EMBED_MODEL": HASH, **(env or {})})("list", "--json", *flags)
    return json.loads(result.stdout)["memories"]


def fill(cli: Cli, rich: Memory) -> Cli:
    """Three plain adds (tags, origin, user, project, an episodic type, commas and new lines) and
    one memory with every field set, written directly: what export/import round trips must keep."""
    cli("add", "--raw", "-t", "ops", "--origin", "git:abc", "--user", "bob", "--project", "infra",
        "The staging database is reset every Sunday at 02:00 UTC.")
    cli("add", "--raw", "--type", "episodic", "On 2026-03-02 the payment service went down, \"TLS\" expired.")
    cli("add", "--raw", "Commas, semicolons; and\nnew lines survive CSV.")
    s = Store(cli.store)
    files(s).write(rich)
    s.close()
    return cli


# Plain developer notes on distinct subjects (tests of the index and of the kNN pass)
DEV_NOTES = [
    "The staging database is reset every Sunday at 02:00 UTC.",
    "Frontend bundles are built by Vite and served from a CDN.",
    "Logs are shipped to Grafana Loki and kept for 14 days.",
    "Feature flags are managed in LaunchDarkly.",
    "Redis is the job queue backend via RQ.",
    "The API gateway rate-limits clients to 100 requests per minute.",
    "Database migrations run with Alembic before each deploy.",
    "Alice owns the billing module and reviews its pull requests.",
    "Integration tests need Docker running locally.",
    "Secrets are stored in HashiCorp Vault, never in the repository.",
    "The mobile app talks to the backend over GraphQL.",
    "Nightly backups of Postgres go to an S3 bucket in eu-west-1.",
]
