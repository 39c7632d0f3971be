"""Fuzzed CLI arguments, stdin and import records: every outcome is a clean exit (0, 1 or 2) with
at most a one-line `memcli: error:` message; never an exception escaping to the "internal error"
path, which is for bugs only.

Driven in-process through Typer's runner with the hash embedder, so a thousand cases fit in CI:
a fixed, seeded set of 1,000 across the tests of this file (~25 s of CPU). `MEMCLI_STRESS=long`
runs the seeded set twice as large (2,000), `MEMCLI_GAUNTLET_EXAMPLES=N` N examples per test,
at random.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from conftest import STRESS_LONG
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from memcli.cli.app import app

EXAMPLES = int(os.environ.get("MEMCLI_GAUNTLET_EXAMPLES") or 0) or None


def fuzz(default: int) -> settings:
    """CI runs a fixed, seeded set (400 + 400 + 200 = 1,000 cases; MEMCLI_STRESS=long: 2,000);
    MEMCLI_GAUNTLET_EXAMPLES runs that many per test, at random."""
    return settings(max_examples=EXAMPLES or default * (2 if STRESS_LONG else 1), deadline=None,
                    derandomize=EXAMPLES is None,
                    database=None, suppress_health_check=list(HealthCheck))

# Text that includes what real input brings: lone surrogates (undecodable argv), NUL, controls, BOM.
ANY_CHAR = st.characters(codec=None, exclude_categories=())
WORDS = st.sampled_from(["deploy", "postgres", "make release", "fridays", "api", "\ufeff", "---", "*a", "&a",
                         "\x00", "\udcff", "é", "🦀", "0001-01-01T00:00:00+14:00", "99999999999d", "-1"])
TEXT = st.one_of(st.text(ANY_CHAR, max_size=40), WORDS, st.lists(WORDS, max_size=5).map(" ".join))
NUMBER = st.one_of(st.integers(-10**30, 10**30).map(str), st.floats(allow_nan=True).map(str), TEXT)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    store = tmp_path_factory.mktemp("fuzz") / "store"
    e = {"MEMCLI_EMBED_MODEL": "hash:256", "MEMCLI_STORE": str(store), "MEMCLI_LOCK_TIMEOUT": "5"}
    runner = CliRunner()
    assert runner.invoke(app, ["init", str(store)], env=e).exit_code == 0
    for text in ("deploy with make release on fridays", "the api uses postgres 16", "use ruff for linting"):
        assert runner.invoke(app, ["add", "--raw", text], env=e).exit_code == 0
    return e


def _run(env: dict[str, str], args: list[str], stdin: bytes | None = None) -> Any:
    result = CliRunner().invoke(app, args, input=stdin, env=env, catch_exceptions=True)
    exc = result.exception
    if exc is not None and not isinstance(exc, SystemExit):
        raise AssertionError(f"memcli {args!r} raised {type(exc).__name__}: {exc}") from exc
    assert result.exit_code in (0, 1, 2), (args, result.exit_code, result.output)
    errors = [line for line in result.stderr.splitlines() if line.startswith("memcli: error")] \
        if hasattr(result, "stderr") else []
    assert len(errors) <= 1, (args, result.stderr)
    assert "internal error" not in result.output, (args, result.output)
    return result


COMMANDS = st.one_of(
    st.tuples(st.just(["search"]), st.lists(TEXT, min_size=1, max_size=3)),
    st.tuples(st.sampled_from([["list", "--since"], ["list", "--until"], ["prune", "--dry-run", "--older-than"],
                               ["list", "--limit"], ["search", "x", "-k"], ["search", "x", "--threshold"],
                               ["list", "--sort"], ["list", "--type"], ["export", "--format"],
                               ["search", "deploy", "--since"], ["list", "--tag"], ["show"], ["rm", "--reason", "r"],
                               ["merge", "--dry-run"], ["restore"], ["add", "--dry-run", "--type"]]),
              st.lists(NUMBER, min_size=1, max_size=1)),
    st.tuples(st.sampled_from([["add", "--raw"], ["add"], ["add", "--dry-run"], ["ask"]]),
              st.lists(TEXT, min_size=1, max_size=3)),
)


@fuzz(400)
@given(COMMANDS)
def test_fuzzed_arguments_never_reach_internal_error(env: dict[str, str], cmd: tuple[list[str], list[str]]) -> None:
    head, rest = cmd
    _run(env, [*head, *rest])


STDIN_COMMANDS = st.sampled_from([["add", "-"], ["add", "--raw", "-"], ["search", "--batch"], ["import", "-"],
                                  ["search", "-"]])
BYTES = st.one_of(
    st.binary(max_size=200),
    TEXT.map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.sampled_from([b"[" * 100_000, b"\xef\xbb\xbfhello bom", b'{"text": "\\ud800"}', b"1" * 5000,
                     b'{"text":"x","created":123}', b"\xff\xfe", b"deploy\n\xff\xfe\n"]),
)


@fuzz(400)
@given(STDIN_COMMANDS, BYTES)
def test_fuzzed_stdin_never_reaches_internal_error(env: dict[str, str], head: list[str], data: bytes) -> None:
    _run(env, head, data)


JSON_VALUE = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), st.floats(), TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=3)),
    max_leaves=8,
)
FIELDS = ["id", "text", "type", "tags", "domain", "confidence", "source", "origins", "user", "project",
          "created", "updated", "code_pattern", "hasCodeBlock", "history", "links", "trashed", "extra"]
RECORD = st.dictionaries(st.sampled_from(FIELDS), JSON_VALUE, max_size=6).map(
    lambda d: {"text": "a fuzzed memory about deploys", **d}
)


@fuzz(200)
@given(st.lists(RECORD, min_size=1, max_size=3))
def test_fuzzed_import_records_never_reach_internal_error(
    env: dict[str, str], tmp_path_factory: pytest.TempPathFactory, records: list[dict]
) -> None:
    data = "\n".join(json.dumps(r, ensure_ascii=True) for r in records).encode()
    result = _run(env, ["import", "-"], data)
    if result.exit_code == 0:  # whatever was accepted, the store still answers the commands that read it all
        for args in (["list", "--json"], ["export", "--format", "csv"], ["consolidate", "--dry-run"]):
            _run(env, args)
