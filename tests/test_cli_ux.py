"""The command line as a new user meets it: help, global options, errors, ids, the trash, and
output that fits an 80- or 120-column terminal. Each test asserts what a person would check."""

from __future__ import annotations

import json
import re

import pytest
import typer
from conftest import HASH, Cli, run_memcli

from memcli.cli.app import app

# --- help ---------------------------------------------------------------------------------------

TYPE_NAMES = re.compile(r"<[^>]*>|\b(?:TEXT|INTEGER|FLOAT|BOOLEAN|PATH|FILENAME|RANGE)\b|list\[")


def _commands():
    """Every command and group of the app, as (path, click command, context)."""
    root = typer.main.get_command(app)
    out = []

    def visit(cmd, ctx, path):
        out.append((path, cmd, ctx))
        for name in getattr(cmd, "list_commands", lambda c: [])(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                visit(sub, sub.context_class(sub, info_name=name, parent=ctx), [*path, name])

    visit(root, root.context_class(root, info_name="memcli"), ["memcli"])
    return out


COMMANDS = _commands()


@pytest.mark.parametrize("path, cmd, ctx", COMMANDS, ids=[" ".join(p) for p, _, _ in COMMANDS])
def test_every_command_and_option_has_help(path, cmd, ctx):
    assert (cmd.help or "").strip(), f"{' '.join(path)} has no help text"
    for p in cmd.get_params(ctx):
        assert (getattr(p, "help", None) or "").strip(), f"{' '.join(path)}: {p.opts or p.name} has no help"


@pytest.mark.parametrize("path, cmd, ctx", COMMANDS[1:], ids=[" ".join(p) for p, _, _ in COMMANDS[1:]])
def test_every_command_help_ends_with_two_to_four_examples(path, cmd, ctx):
    r = run_help(path[1:])
    assert r.exit_code == 0, r.output
    tail = r.stdout.rstrip().split("Examples:")
    assert len(tail) == 2, f"{' '.join(path)} --help has no Examples section"
    examples = [ln.strip() for ln in tail[1].splitlines() if ln.strip()]
    assert 2 <= len(examples) <= 4, examples
    assert all(re.match(r"^(?:[A-Z_]+=\S+ )?(?:memcli|cat|git|echo) ", e) for e in examples), examples
    assert all(len(ln) <= 80 for ln in r.stdout.splitlines()), "help must fit 80 columns"


def run_help(args):
    from typer.testing import CliRunner

    return CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "80"})


@pytest.mark.parametrize("path, cmd, ctx", COMMANDS, ids=[" ".join(p) for p, _, _ in COMMANDS])
def test_help_shows_metavars_never_type_names(path, cmd, ctx):
    r = run_help(path[1:])
    options = r.stdout.split("Options:")[1].split("Commands:")[0].split("Examples:")[0]
    for line in options.splitlines():
        column = line[:28]  # the option column: "  -t, --tag TAG"
        assert not TYPE_NAMES.search(column), line
    usage = r.stdout.splitlines()[0]
    assert not TYPE_NAMES.search(usage.replace("[TEXT]", "")), usage
    for p in cmd.get_params(ctx):
        if p.param_type_name == "option" and getattr(p, "is_flag", False):
            assert not re.search(rf"{re.escape(p.opts[0])} [A-Z]", options), f"flag {p.opts[0]} shows a metavar"


def test_help_names_meaningful_metavars():
    out = run_help(["list"]).stdout
    for expected in ("--tag TAG", "--since WHEN", "--limit N", "--sort KEY"):
        assert expected in out
    assert "--older-than DURATION" in run_help(["prune"]).stdout
    assert "--output FILE" in run_help(["export"]).stdout
    assert "Usage: memcli show [OPTIONS] ID..." in run_help(["show"]).stdout
    assert "Usage: memcli add [OPTIONS] [TEXT]..." in run_help(["add"]).stdout


# --- global options -------------------------------------------------------------------------------


@pytest.fixture
def filled(hash_cli) -> Cli:
    records = [{"text": f"Note number {i} about the deploy pipeline and its rollback.", "tags": ["deploy"]}
               for i in range(3)]
    hash_cli("import", "-", input=json.dumps(records))
    return hash_cli


def invoke(args, env=None, input=None):
    from typer.testing import CliRunner

    return CliRunner().invoke(app, args, env={"MEMCLI_EMBED_MODEL": HASH, **(env or {})}, input=input)


def test_global_options_work_before_or_after_the_subcommand(filled):
    where = str(filled.store)
    before = invoke(["--store", where, "export", "--format", "jsonl"])
    after = invoke(["export", "--format", "jsonl", "--store", where])
    short = invoke(["export", "-s", where, "--format", "jsonl"])
    assert before.exit_code == after.exit_code == short.exit_code == 0, after.output
    assert before.stdout == after.stdout == short.stdout and len(before.stdout.splitlines()) == 3
    # --json before the subcommand means the subcommand's --json
    assert json.loads(invoke(["--json", "list", "--store", where]).stdout)["count"] == 3
    assert json.loads(invoke(["--store", where, "--json", "stats"]).stdout)["memories"] == 3
    # --debug after the subcommand: a traceback instead of one line
    r = invoke(["show", "NOPE", "--store", where, "--debug"])
    assert r.exit_code != 0 and r.exception is not None


# --- errors and exit codes --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, code, hint",
    [
        (["export", "--zzzzzz"], 2, "see 'memcli export --help'"),
        (["lst"], 2, "did you mean 'list'?"),
        (["search", "-k", "100", "x"], 2, None),
        (["show"], 2, None),
        (["list", "--sort", "colour"], 2, None),
        (["show", "ZZZZZZZZ"], 1, "memcli list shows the ids"),
    ],
)
def test_errors_are_one_line_plus_an_optional_hint(filled, args, code, hint):
    r = invoke(["--store", str(filled.store), *args])
    assert r.exit_code == code, r.output
    lines = r.stderr.splitlines()
    assert lines[0].startswith("memcli: error: ") and "╭" not in r.stderr and "Usage:" not in r.stderr
    assert len(lines) <= 2 and (len(lines) == 1 or lines[1].startswith("hint: "))
    if hint:
        assert hint in lines[1]
    assert r.stdout == ""


def test_json_errors_are_also_a_json_object_on_stderr(filled):
    r = invoke(["--store", str(filled.store), "show", "ZZZZZZZZ", "--json"])
    assert r.exit_code == 1
    err = json.loads(r.stderr.splitlines()[-1])
    assert err["code"] == 1 and "ZZZZZZZZ" in err["error"] and err["schema"] == 1
    r = invoke(["--store", str(filled.store), "--json", "list", "--bogus"])
    assert r.exit_code == 2 and json.loads(r.stderr.splitlines()[-1])["code"] == 2


def test_search_fail_empty_exits_1_when_nothing_matched(filled):
    where = str(filled.store)
    r = invoke(["--store", where, "search", "--threshold", "1", "--fail-empty", "zebra crossing"])
    assert r.exit_code == 1 and r.stdout == ""
    r = invoke(["--store", where, "search", "--threshold", "1", "zebra crossing"])
    assert r.exit_code == 0
    assert invoke(["--store", where, "search", "--fail-empty", "deploy pipeline rollback"]).exit_code == 0


def test_usage_error_in_a_real_process_is_one_line_and_exit_2(filled):
    p = run_memcli("export", "--store", str(filled.store), "--nope", env={"MEMCLI_EMBED_MODEL": HASH})
    assert p.returncode == 2
    assert p.stderr.splitlines()[0] == "memcli: error: no such option: --nope"


# --- ids and the trash ----------------------------------------------------------------------------


def listed(cli: Cli) -> list[dict]:
    return json.loads(cli("list", "--json").stdout)["memories"]


def test_ambiguous_prefix_lists_the_candidates(filled):
    recs = listed(filled)
    common = recs[0]["id"][:4]
    assert all(r["id"].startswith(common) for r in recs)  # same creation second: a shared prefix
    r = filled("show", common, ok=False)
    assert r.exit_code == 1
    error, hint = r.stderr.splitlines()
    assert "ambiguous" in error and "3 memories" in error
    for rec in recs:
        assert rec["id"] in hint
    assert "Note number" in hint


def test_trash_list_show_trashed_restore_by_prefix_and_plain_yaml(filled):
    rec = listed(filled)[1]
    mid = rec["id"]
    filled("rm", mid, "--reason", "outdated after the move")
    trash_file = filled.store / ".trash" / f"{mid}.md"
    text = trash_file.read_text()
    assert "! '" not in text and "!!" not in text
    assert re.search(r"^trashed:\n  at: \d{4}-\d\d-\d\dT[\d:]+Z\n  reason: outdated after the move$", text, re.M)
    # show of a trashed id says so, and how to restore it
    r = filled("show", mid, ok=False)
    assert r.exit_code == 1 and "in the trash" in r.stderr and f"memcli restore {mid}" in r.stderr
    # memcli trash lists id, when, why, text
    out = json.loads(filled("trash", "--json").stdout)
    (item,) = out["memories"]
    assert item["id"] == mid and item["reason"] == "outdated after the move" and item["trashed_at"]
    assert item["text"] == rec["text"]
    human = invoke(["--store", str(filled.store), "trash"], env={"MEMCLI_FORCE_TTY": "1", "COLUMNS": "80"})
    (row,) = human.stdout.splitlines()
    assert row.startswith(mid[-8:]) and "outdated after the move" in row and "Note number" in row
    # restore takes a unique prefix
    prefix = mid[:8] if not any(r["id"].startswith(mid[:8]) for r in listed(filled)) else mid
    filled("restore", mid[-8:])  # the short id the trash shows
    assert mid in {r["id"] for r in listed(filled)} and not trash_file.exists()
    assert prefix


def test_show_several_ids(filled):
    recs = listed(filled)
    r = filled("show", recs[0]["id"], recs[2]["id"])
    assert r.stdout.count("---\n") == 4 and recs[0]["text"] in r.stdout and recs[2]["text"] in r.stdout
    both = json.loads(filled("show", "--json", recs[0]["id"], recs[2]["id"]).stdout)
    assert [m["id"] for m in both["memories"]] == [recs[0]["id"], recs[2]["id"]]
    one = json.loads(filled("show", "--json", recs[1]["id"]).stdout)
    assert one["id"] == recs[1]["id"] and one["schema"] == 1


# --- output ------------------------------------------------------------------------------------------

LONG = ("The staging database is reset every Sunday at 02:00 UTC by the cron job in infra/cron, so "
        "never keep demo data there; restore it from the seed dump with make seed-staging afterwards.")
CODE = "Roll back the API with this:\n\n```sh\nkubectl -n ledgerly rollout undo deploy/api\nkubectl get pods\n```"
MARKUP = ":x: and [red]alarm[/red] are plain text here."


@pytest.fixture
def varied(hash_cli) -> Cli:
    notes = [LONG, CODE, MARKUP] + [f"Filler memory {i} with a few words in it." for i in range(40)]
    # created over several weeks, as real notes are (ids carry their creation time)
    hash_cli("import", "-", input=json.dumps([{"text": t, "tags": ["ops", "staging"],
                                               "created": f"2026-{1 + n // 28:02d}-{1 + n % 28:02d}T10:00:00Z"}
                                              for n, t in enumerate(notes)]))
    return hash_cli


def tty(cli: Cli, *args: str, columns: int, lines: int = 24):
    return invoke(["--store", str(cli.store), *args],
                  env={"MEMCLI_FORCE_TTY": "1", "COLUMNS": str(columns), "LINES": str(lines), "NO_COLOR": "1"})


@pytest.mark.parametrize("columns", [80, 120])
def test_list_fits_the_terminal_with_short_ids_and_no_mid_word_wrap(varied, columns):
    r = tty(varied, "list", "--limit", "50", columns=columns)
    assert r.exit_code == 0, r.output
    rows = r.stdout.splitlines()
    assert all(len(row) <= columns for row in rows), max(rows, key=len)
    full = {m["id"]: m for m in listed(varied)}
    shown_ids = [row.split()[0] for row in rows if row[:1].isalnum()]
    assert len(shown_ids) == len(full)
    for sid in shown_ids:
        matches = [i for i in full if i.endswith(sid) or i.startswith(sid)]  # short ids: the random tail
        assert len(matches) == 1 and len(sid) >= 8 and len(sid) < 26  # unique, short
    long_row = next(row for row in rows if "staging database" in row)
    text_part = long_row.split("semantic", 1)[1].split("#")[0].strip()
    assert text_part.endswith("…")
    last_word = text_part[:-1].split()[-1]
    assert last_word in LONG.split() or last_word.rstrip(",;:") in [w.rstrip(",;:") for w in LONG.split()]
    # the code block is shown as code: its lines, not one flattened line
    assert any(row.strip() == "kubectl -n ledgerly rollout undo deploy/api" for row in rows)
    assert any(row.strip() == "kubectl get pods" for row in rows)
    # literal text: no emoji, the markup kept as typed
    assert ":x:" in r.stdout and "[red]alarm[/red]" in r.stdout and "❌" not in r.stdout


def test_list_caps_on_a_terminal_and_prints_everything_to_a_pipe(varied):
    r = tty(varied, "list", columns=80, lines=24)
    rows = [row for row in r.stdout.splitlines() if row[:1].isalnum()]
    assert len(rows) < 43
    assert r.stdout.rstrip().splitlines()[-1] == f"… {43 - len(rows)} more (use --limit N, or pipe the output)"
    piped = varied("list")
    lines = piped.stdout.splitlines()
    assert len(lines) == 43 and "more (use --limit" not in piped.stdout
    first = lines[0].split("\t")
    assert len(first[0]) == 26 and first[2] == "semantic"  # full ids, tab-separated


@pytest.mark.parametrize("columns", [80, 120])
def test_search_output_fits_orders_by_the_shown_score_and_keeps_code(varied, columns):
    r = tty(varied, "search", "-k", "8", "--threshold", "0", "roll back the API kubectl staging", columns=columns)
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert all(len(line) <= columns for line in lines), max(lines, key=len)
    scores = [float(line.split()[0]) for line in lines if re.match(r"^\d\.\d{3}  ", line)]
    assert len(scores) == 8 and scores == sorted(scores, reverse=True)
    assert all(0 <= s <= 1 for s in scores)
    assert "    kubectl -n ledgerly rollout undo deploy/api" in lines
    js = json.loads(varied("search", "--json", "-k", "8", "--threshold", "0", "roll back the API").stdout)
    got = [h["score"] for h in js["results"]]
    assert got == sorted(got, reverse=True) and all(0 <= s <= 1 for s in got)


def test_search_prints_memory_text_literally(varied):
    r = tty(varied, "search", "--threshold", "0", "plain text here alarm", columns=100)
    assert ":x:" in r.stdout and "[red]alarm[/red]" in r.stdout and "❌" not in r.stdout


# --- JSON ------------------------------------------------------------------------------------------------


def _keys(value, path=""):
    if isinstance(value, dict):
        for k, v in value.items():
            yield k, path
            yield from _keys(v, f"{path}.{k}")
    elif isinstance(value, list):
        for v in value:
            yield from _keys(v, path)


@pytest.mark.parametrize(
    "args",
    [["list", "--json"], ["search", "--json", "deploy"], ["stats", "--json"], ["trash", "--json"],
     ["doctor", "--json"], ["add", "--dry-run", "--json", "Run `make lint` before pushing. Thanks!"],
     ["prune", "--dry-run", "--json", "--older-than", "1d"], ["reindex", "--json"]],
    ids=lambda a: a[0],
)
def test_every_json_document_has_a_schema_and_snake_case_keys(varied, args):
    out = json.loads(varied(*args).stdout)
    assert out["schema"] == 1
    bad = [(k, p) for k, p in _keys(out) if not re.fullmatch(r"[a-z][a-z0-9_]*", k)]
    assert not bad, bad


def test_stats_sizes_are_numbers(varied):
    out = json.loads(varied("stats", "--json").stdout)
    assert isinstance(out["facts_bytes"], int) and out["facts_bytes"] > 1000
    assert isinstance(out["index_bytes"], int)
    human = varied("stats").stdout
    assert re.search(r"facts_bytes\s+\d+\.\d (kB|MB)", human)


def test_add_dry_run_lists_skipped_pieces_with_their_rule(hash_cli):
    text = "Thanks a lot!\nHow do we deploy?\nWe deploy with make release VERSION=x.y.z from main."
    out = json.loads(hash_cli("add", "--dry-run", "--json", text).stdout)
    pieces = out["extraction"]["skipped_pieces"]
    rules = {p["rule"] for p in pieces}
    assert out["extraction"]["skipped"] == len(pieces) == 2
    assert {"question", "pleasantry"} <= rules or {"question", "too_short"} <= rules, pieces
    assert any("How do we deploy" in p["text"] for p in pieces)
    human = hash_cli("add", "--dry-run", "-v", text)
    assert "SKIP" in human.stdout and "question" in human.stdout
    assert "SKIP" not in hash_cli("add", "--dry-run", text).stdout


def test_ctrl_c_is_exit_130_with_one_line(filled):
    """A command waiting on stdin, interrupted as a user would (SIGINT): one line, exit 130."""
    import os
    import signal
    import subprocess
    import sys
    import time

    env = {**os.environ, "MEMCLI_EMBED_MODEL": HASH}
    # SIGINT as a terminal delivers it: a suite started in the background (`cmd &` from a script)
    # passes SIGINT on ignored, and Python then keeps ignoring it
    p = subprocess.Popen([sys.executable, "-m", "memcli", "--store", str(filled.store), "add", "-"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until it is blocked reading stdin, past its imports
        try:
            with open(f"/proc/{p.pid}/wchan") as f:
                if "pipe" in f.read():
                    break
        except OSError:  # no /proc: give it time instead
            time.sleep(5)
            break
        time.sleep(0.1)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert err.decode().splitlines() == ["memcli: error: interrupted"] and out == b""


def test_help_lists_each_command_by_its_whole_first_sentence():
    """`memcli --help` at 80 columns: no description cut mid-sentence with "..." (issue 22)."""
    r = invoke(["--help"], env={"COLUMNS": "80"})
    listing = r.stdout.split("Commands:", 1)[1]
    assert not [line for line in listing.splitlines() if re.search(r"\w\.\.\.$", line.rstrip())], listing
    assert "Turn text (a conversation, a note, a commit message) into" in listing and "memories." in listing
