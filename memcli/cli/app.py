"""The command line: parse, call the library, print. No logic of its own lives here.

Data goes to stdout (rich text for people, one JSON document with `--json`); messages and
progress go to stderr. Errors are one line on stderr and exit 1 (`--debug` shows the traceback);
usage errors exit 2.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import itertools
import json
import os
import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Any, NoReturn

import typer

from memcli import __version__
from memcli.api import Store
from memcli.cli import render
from memcli.core.errors import ExitStatus, LLMNotConfigured, MemcliError
from memcli.core.memory import encodable
from memcli.core.vocab import ExportFormat, MemoryType, SortKey
from memcli.index import Filters
from memcli.storage import safety

# Flag advice the CLI adds to a library error, by error type and command (the library's messages
# name no flags: the Python API has none).
_ADVICE: dict[type[MemcliError], dict[str, str]] = {
    LLMNotConfigured: {"add": "or use --no-llm", "merge": "or merge with --no-llm", "ask": "or pass --model"},
}


def _advice(e: MemcliError, command: str | None) -> str:
    for kind, by_command in _ADVICE.items():
        if isinstance(e, kind) and command in by_command:
            return f", {by_command[command]}"
    return ""

try:  # typer >= 0.20 vendors its own click
    from typer import _click as click
except ImportError:  # pragma: no cover - older typer
    import click  # type: ignore[no-redef]


def examples(*lines: str) -> str:
    """A command's help ends with these examples (2-4 of them; tests/test_help.py checks)."""
    return "Examples:\n\n\b\n" + "\n".join(f"  {line}" for line in lines)


def _set_store(value: str | None) -> None:
    if value is not None:
        state.store_path = value
        state.store = None


def _set_debug(value: bool) -> None:
    if value:
        state.debug = True


def _global_options(
    store: str | None = typer.Option(None, "--store", "-s", metavar="DIR", expose_value=False, callback=_set_store,
                                     help="Store directory (default: $MEMCLI_STORE, the nearest .memcli/, "
                                          "or ~/.local/share/memcli)."),
    debug: bool = typer.Option(False, "--debug", expose_value=False, callback=_set_debug,
                               help="Show tracebacks on errors."),
) -> None:
    """A template: its options are given to every subcommand (see _add_global_params)."""


def _global_params() -> list[Any]:
    """--store and --debug as click parameters, accepted after the subcommand too (`memcli export --store X`)."""
    template = typer.Typer()
    template.command()(_global_options)
    return [p for p in typer.main.get_command(template).params if p.name in ("store", "debug")]


class _Command(typer.core.TyperCommand):
    """Plain help, like git's and gh's: arguments by their metavar (`ID...`, `[TEXT]...`), never a
    type name (`<list[str]>`); options by a metavar, flags bare; examples at the end (the epilog)."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        return pieces + [_argument_name(p) for p in self.get_params(ctx) if p.param_type_name == "argument"]

    def format_options(self, ctx: Any, formatter: Any) -> None:
        args, opts = [], []
        for p in self.get_params(ctx):
            if p.param_type_name == "argument":
                args.append((_argument_name(p), p.help or ""))
            else:
                record = p.get_help_record(ctx)
                if record:
                    opts.append(record)
        for title, rows in (("Arguments", args), ("Options", opts)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


def _argument_name(p: Any) -> str:
    name = p.metavar or (p.name or "arg").upper()
    if p.nargs != 1:
        name += "..."
    return name if p.required else f"[{name}]" if p.nargs == 1 else f"[{name[:-3]}]..."


def _add_global_params(cmd: Any) -> None:
    """Give every subcommand (and sub-subcommand) the global options, unless it has its own,
    and plain help (_Command)."""
    for sub in getattr(cmd, "commands", {}).values():
        if type(sub) is typer.core.TyperCommand:
            sub.__class__ = _Command
        taken = {o for p in sub.params for o in getattr(p, "opts", [])}
        for p in _global_params():
            p.opts = [o for o in p.opts if o not in taken]  # a subcommand's own -s wins
            if p.opts and p.opts[0].startswith("--"):
                sub.params.append(p)
        _add_global_params(sub)


def _hoist_json(args: list[str], root: Any) -> list[str]:
    """`memcli --json list` means `memcli list --json`: move a --json given before the subcommand
    to after it (before any `--`), where the subcommand's own --json takes it."""
    value_opts = {o for p in root.params if not getattr(p, "is_flag", False) for o in getattr(p, "opts", [])}
    i = 0
    found = None
    while i < len(args):
        a = args[i]
        if a == "--":
            break
        if a == "--json":
            found = i
        elif a in value_opts:
            i += 1
        elif not a.startswith("-"):
            break  # the subcommand
        i += 1
    if found is None or i >= len(args) or args[i] == "--":
        return args
    rest = args[:found] + args[found + 1:]
    tail = rest[i - 1:]  # from the subcommand on
    cut = i - 1 + tail.index("--") if "--" in tail else len(rest)
    return [*rest[:cut], "--json", *rest[cut:]]


def _wants_json(args: list[str]) -> bool:
    return "--json" in (args[: args.index("--")] if "--" in args else args)


class _Group(typer.core.TyperGroup):
    """The root command. It renders every error the same way for every entry point (console
    script, `python -m memcli`, Typer's test runner): `memcli: error: ...` + optional `hint:`
    on stderr (and a JSON object with --json); exit 1 for errors, 2 for usage, 130 on Ctrl-C.
    It also gives every subcommand the global options (--store, --debug)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _add_global_params(self)

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        args = list(sys.argv[1:] if args is None else args)
        state.stdin_text = None
        safety.drain()  # notices are per command: none left over from library calls before this one
        # Python hands undecodable argv bytes over as lone surrogates, which no file or JSON can hold
        bad = next((i for i, a in enumerate(args, 1) if isinstance(a, str) and not encodable(a)), None)
        if bad is not None:
            render.error(f"argument {bad} is not valid UTF-8", code=render.USAGE)
            if not standalone_mode:
                return render.USAGE
            sys.exit(render.USAGE)
        args = _hoist_json(args, self)
        state.json_errors = _wants_json(args)
        state.debug = "--debug" in args
        try:
            rv = super().main(args=args, prog_name=prog_name or "memcli", complete_var=complete_var,
                              standalone_mode=False, **extra)
            code = rv if isinstance(rv, int) else 0
        except click.exceptions.NoArgsIsHelpError as e:
            sys.stdout.write(e.ctx.get_help() + "\n")
            code = 0
        except click.exceptions.UsageError as e:
            path = e.ctx.command_path if e.ctx is not None else "memcli"
            message, hint = render.usage_error(e.format_message(), path)
            render.error(message, hint=hint, code=render.USAGE, as_json=state.json_errors)
            code = render.USAGE
        except click.exceptions.ClickException as e:
            render.error(e.format_message(), code=e.exit_code, as_json=state.json_errors)
            code = e.exit_code
        except (typer.Abort, KeyboardInterrupt):
            code = render.INTERRUPTED
        if code == render.INTERRUPTED:  # Ctrl-C, wherever it landed (typer turns it into Exit(130))
            render.error("interrupted", code=render.INTERRUPTED, as_json=state.json_errors)
        if not standalone_mode:
            return code
        sys.exit(code)

    def _invoke_healing(self, ctx: Any) -> Any:
        """Run the command; if the index catalog turns out to be damaged past what `sync` reads
        (a garbled page met by a search), drop it and run the command once more on a catalog
        rebuilt from facts/ (stdin is kept for the second run): a healed store, the same answer."""
        saved = (list(getattr(ctx, "_protected_args", [])), list(ctx.args))  # invoke() consumes them
        try:
            return super().invoke(ctx)
        except sqlite3.DatabaseError as e:
            if state.store is None or not safety.is_corrupt(e) or state.debug:
                raise
            ctx._protected_args, ctx.args = saved
            index = state.store.index
            index.drop()
            state.store.close()
            safety.notice("the index catalog was damaged: rebuilt from facts/")
            return super().invoke(ctx)

    def invoke(self, ctx: Any) -> Any:
        try:
            return self._invoke_healing(ctx)
        except MemcliError as e:
            if state.debug:
                raise
            msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            render.error(f"{msg}{_advice(e, ctx.invoked_subcommand)}", hint=e.hint, code=int(e.exit_status),
                         as_json=state.json_errors, kind=render.snake(type(e).__name__))
            raise typer.Exit(int(e.exit_status)) from None
        except BrokenPipeError:  # `memcli export | head -1`: the reader has what it wanted; not an error
            with contextlib.suppress(OSError, ValueError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(render.OK) from None
        except OSError as e:  # a full disk, a read-only store, a permission: the system's words, one line
            if state.debug:
                raise
            where = f": {e.filename}" if e.filename else ""
            render.error(f"{e.strerror or e}{where}", as_json=state.json_errors, kind="os_error")
            raise typer.Exit(render.ERROR) from None
        except sqlite3.Error as e:  # the index could not be read or written (disk full, I/O error)
            if state.debug:
                raise
            render.error(f"index: {str(e).splitlines()[0] if str(e) else type(e).__name__}",
                         as_json=state.json_errors, kind="index_error")
            raise typer.Exit(render.ERROR) from None
        finally:
            for message in safety.drain():  # repairs made on the way (a damaged index rebuilt, ...)
                sys.stderr.write(f"memcli: {message}\n")




app = typer.Typer(
    cls=_Group,
    name="memcli",
    help="Local-first long-term memory for developers and AI coding agents.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    add_completion=False,  # static scripts in completions/ (generated by tools.completion)
    context_settings={"help_option_names": ["-h", "--help"]},
)
inbox_app = typer.Typer(help="Inputs parked when the LLM was unreachable.", invoke_without_command=True)
app.add_typer(inbox_app, name="inbox")


class _State:
    store_path: str | None = None
    debug: bool = False
    json_errors: bool = False
    store: Store | None = None
    stdin_text: str | None = None  # kept for a command run again after an index repair


state = _State()


# ---------------------------------------------------------------- helpers
def fail(message: str, code: int = render.ERROR, hint: str | None = None) -> NoReturn:
    """One error line (+ hint) on stderr, and exit: 1 for errors, 2 for usage mistakes."""
    render.error(message, hint=hint, code=code, as_json=state.json_errors)
    raise typer.Exit(code)


def note(message: str) -> None:
    sys.stderr.write(f"memcli: {message}\n")


def _llm_progress() -> Any:
    """For a person at a terminal: which request is waiting on the model (a local model can take
    a minute), then how long it took; one line each on stderr."""
    import time

    started: list[float] = []

    def report(label: str) -> None:
        now = time.monotonic()
        if started:
            sys.stderr.write(f" {now - started[-1]:.1f}s\n")
        if label:
            started.append(now)
            sys.stderr.write(f"memcli: waiting for the model ({label})...")
        sys.stderr.flush()

    return report


def get_store(*, must_exist: bool = True, create: bool = False, bulk: bool = False) -> Store:
    """The store this command works on. A store named by --store that does not
    exist is an error (a typo must not create a store) unless `create`; the global store is
    created by the first write. A bulk load (`import`, `add --batch`) fills a store it may create,
    like a restore into a new directory (`memcli --store new import backup.jsonl`): it says so."""
    if state.store is None:
        from memcli.core.discovery import resolve

        where = resolve(state.store_path)
        path = where.path
        store = Store(path)
        if must_exist and not store.exists():
            fail(f"no store at {path} (create one with `memcli init` or `memcli add`)")
        if where.explicit and bulk and not create and not path.exists():
            note(f"creating a new store at {path}")
        elif where.explicit and not create and not path.exists():
            fail(f"no store at {path} (named by {where.why}); create it with `memcli init {path}` "
                 "or `memcli add --create`")
        store.config  # noqa: B018 - a bad config.toml is reported now, by every command alike
        state.store = store
    return state.store


def synced(store: Store) -> Store:
    """Bring the sidecar in step, with a progress bar when it takes long; report bad files once."""
    progress = _progress("indexing")
    try:
        report = store.index.sync(on_progress=progress.update if progress else None)
    finally:
        if progress:
            progress.close()
    if report.rebuilt and report.rebuilt != "reindex requested" and store.index.count():
        note(f"index rebuilt: {report.rebuilt}")
    for fname, error in report.new_bad:
        note(f"skipping facts/{fname}: {error}")
    return store


class _Bar:
    """A rich progress bar on stderr, shown only on a terminal and only for long jobs."""

    def __init__(self, label: str) -> None:
        self.label = label
        self._progress: Any = None
        self._task: Any = None

    def update(self, done: int, total: int) -> None:
        if self._progress is None:
            if total < 200:
                return
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._progress = Progress(
                TextColumn(f"[bold]{self.label}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                console=Console(stderr=True), transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task(self.label, total=total)
        self._progress.update(self._task, completed=done, total=total)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()


def _progress(label: str) -> _Bar | None:
    return _Bar(label) if sys.stderr.isatty() else None


def read_text(args: list[str] | None, what: str = "text") -> str:
    """Text from arguments, or stdin when the argument is `-` or absent and stdin is not a terminal."""
    if args and args != ["-"]:
        return " ".join(args)
    if sys.stdin is None or (not args and sys.stdin.isatty()):
        fail(f"no {what} given (pass it as arguments or pipe it on stdin)", ExitStatus.USAGE)
    return read_stdin()


def read_stdin() -> str:
    """All of stdin as text, read only up to the input limit, decoded strictly (one-line errors)."""
    from memcli.ops.add import read_input, read_limited

    if state.stdin_text is None:
        if hasattr(sys.stdin, "buffer"):
            state.stdin_text = read_input(read_limited(sys.stdin.buffer, "stdin"), "stdin")
        else:  # a text-only stream (tests): re-encoded so the same checks apply
            state.stdin_text = read_input(sys.stdin.read().encode("utf-8", "surrogateescape"), "stdin")
    return state.stdin_text


def emit_json(data: dict[str, Any]) -> None:
    """One JSON document on stdout, `schema` first (memcli.cli.render.emit_json)."""
    render.emit_json(data)


def short(text: str, width: int = 160) -> str:
    one = " ".join(text.split())
    return one if len(one) <= width else one[: width - 1] + "…"


def make_filters(tag: list[str] | None, type_: str | None, user: str | None, project: str | None,
                 since: str | None, until: str | None, *, current: bool = False) -> Filters:
    from memcli.core.config import git_project
    from memcli.core.memory import parse_when

    check_type(type_)
    if project == ".":
        project = git_project()
        if project is None:
            fail("--project . needs a git repository")
    try:
        return Filters(
            tags=tuple(tag or ()), type=type_, user=user, project=project,
            since=parse_when(since) if since else None, until=parse_when(until, end=True) if until else None,
            current=current,
        )
    except ValueError as e:
        fail(str(e), ExitStatus.USAGE)


def check_type(type_: str | None) -> None:
    if type_ is not None and type_ not in MemoryType.values():
        fail(f"--type must be one of {', '.join(MemoryType.values())}", ExitStatus.USAGE)


def resolve_ids(store: Store, ids: list[str]) -> list[str]:
    """Full ids from ids or unique prefixes; an unknown or ambiguous one is an error whose hint
    lists the candidates (or says the memory is in the trash and how to restore it)."""
    from memcli.storage.ids import resolve

    return [resolve(store, i) for i in ids]


# Filter options shared by search, list and export (one definition, one help text).
TAG_FILTER = typer.Option(None, "--tag", "-t", metavar="TAG",
                          help="Only memories with this tag (repeatable; all must match).")
TYPE_FILTER = typer.Option(None, "--type", metavar="TYPE", help=f"{MemoryType.choices()}: only this type.")
USER_FILTER = typer.Option(None, "--user", metavar="NAME", help="Only this user's memories.")
PROJECT_FILTER = typer.Option(None, "--project", metavar="NAME", help="Project name, or `.` for this repository.")
SINCE_FILTER = typer.Option(None, "--since", metavar="WHEN",
                            help="Created at or after: 2026-01-01, 7d, 2w, 3m, 1y, yesterday.")
UNTIL_FILTER = typer.Option(None, "--until", metavar="WHEN", help="Created at or before (same forms as --since).")
ALL_OPTION = typer.Option(False, "--all", help="Include memories superseded by a newer one.")
JSON_FLAG = typer.Option(False, "--json", help="Print one JSON document on stdout (shapes: README, JSON output).")


def _between(lo: float, hi: float) -> Any:
    """A range check with a plain message (typer's min/max would print `<float range> [0.0<=x<=1.0]` in help)."""
    def check(value: float | None) -> float | None:
        if value is not None and not lo <= value <= hi:
            raise typer.BadParameter(f"must be between {lo:g} and {hi:g}, got {value:g}")
        return value
    return check


def _at_least(lo: int) -> Any:
    def check(value: int | None) -> int | None:
        if value is not None and value < lo:
            raise typer.BadParameter(f"must be {lo} or more, got {value}")
        return value
    return check


# ---------------------------------------------------------------- global options
def _version(value: bool) -> None:
    if value:
        print(f"memcli {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    store: str | None = typer.Option(None, "--store", "-s", metavar="DIR",
                                     help="Store directory (default: $MEMCLI_STORE, "
                                        "the nearest .memcli/, or ~/.local/share/memcli).", envvar=None),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks on errors."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
    as_json: bool = typer.Option(False, "--json", help="JSON output for the command that follows "
                                 "(same as giving --json after it)."),
) -> None:
    state.store_path = store
    state.debug = state.debug or debug
    state.store = None


# ---------------------------------------------------------------- init
@app.command(epilog=examples("memcli init", "memcli init --shared ~/notes/memories"))
def init(
    directory: Path | None = typer.Argument(None, metavar="DIR", help="Where (default: ./.memcli)."),
    shared: bool = typer.Option(False, "--shared", help="For a store committed to git and shared by a team "
                                "(the .gitattributes that lets log.jsonl merge is written in any case)."),
) -> None:
    """Create a store (a project store in ./.memcli by default)."""
    from memcli.agents.sharing import write_gitattributes

    path = directory or (Path(state.store_path) if state.store_path else Path.cwd() / ".memcli")
    store = Store(path)
    created = store.init()
    write_gitattributes(store)
    note(f"{'created' if created else 'store already exists at'} {store.path}")
    if shared:
        note("commit it (git add .memcli && git commit) and run `memcli sync` to pull, re-index and push")


# ---------------------------------------------------------------- add
@app.command(epilog=examples(
    'memcli add "We release with make release VERSION=x.y.z."',
    'git log -1 --format=%B | memcli add --origin git:$(git rev-parse HEAD) -',
    'memcli add --raw --tag deploy "kubectl rollout undo deploy/api"',
    "memcli add --dry-run --json < notes.md",
))
def add(
    text: list[str] | None = typer.Argument(None, metavar="TEXT", help="Text to remember; `-` or nothing reads stdin."),
    raw: bool = typer.Option(False, "--raw", help="Store the text as one memory, no extraction."),
    no_llm: bool = typer.Option(False, "--no-llm", help="Use the heuristic extractor even if an LLM is set."),
    use_llm: bool = typer.Option(False, "--llm", help="Require the LLM (error if none is configured)."),
    model: str | None = typer.Option(None, "--model", metavar="MODEL",
                                     help="LLM model for this call (litellm string)."),
    tag: list[str] | None = typer.Option(None, "--tag", "-t", metavar="TAG", help="Tag the new memories (repeatable)."),
    type_: str | None = typer.Option(None, "--type", metavar="TYPE",
                                     help=f"{MemoryType.choices()}: the type of every new memory."),
    origin: list[str] | None = typer.Option(None, "--origin", metavar="REF",
                                            help="Who vouches: git:SHA, session:ID ..."),
    user: str | None = typer.Option(None, "--user", metavar="NAME",
                                    help="Owner to stamp (default: config user, else $MEMCLI_USER, else default)."),
    project: str | None = typer.Option(None, "--project", metavar="NAME",
                                       help="Project to stamp (default: this git repository's name)."),
    session: str | None = typer.Option(None, "--session", metavar="ID", help="Session id (adds origin session:ID)."),
    threshold: float | None = typer.Option(None, "--threshold", metavar="SIM", callback=_between(0, 1),
                                              help="Similarity (0-1) at which a fact counts as known (0.85)."),
    allow_delete: bool = typer.Option(False, "--allow-delete", help="Let the LLM's DELETE decisions apply."),
    no_redact: bool = typer.Option(False, "--no-redact", help="Do not scrub secrets and personal data."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Decide, report, write nothing."),
    create: bool = typer.Option(False, "--create", help="Create the --store directory if it does not exist."),
    no_dedup: bool = typer.Option(False, "--no-dedup", help="Store every fact, even an exact repeat."),
    batch: str | None = typer.Option(None, "--batch", metavar="FILE", help='JSON lines {"text", "origins"?, '
                                     '"created"?, "tags"?, "type"?}, one add each; - for stdin.'),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Also list the pieces skipped, with the rule "
                                 "that skipped each."),
    spool: bool = typer.Option(False, "--spool", help="Queue the text and return at once; a background worker "
                               "extracts and decides (automatic inside a git hook when an LLM is used)."),
    as_json: bool = JSON_FLAG,
) -> None:
    """Turn text (a conversation, a note, a commit message) into memories."""
    if no_llm and (use_llm or model):
        fail("--no-llm conflicts with --llm/--model", ExitStatus.USAGE)
    check_type(type_)
    if batch is not None and text:
        fail("--batch reads its inputs from FILE; do not pass text too", ExitStatus.USAGE)
    if spool and (dry_run or batch is not None):
        fail(f"--spool queues one input to be decided later; it conflicts with {'--dry-run' if dry_run else '--batch'}",
             ExitStatus.USAGE)
    body = read_text(text) if batch is None else ""
    if batch is None and not body.strip():  # before the store is touched: a failed command creates nothing
        fail("nothing to add: the input is empty")
    store = get_store(must_exist=False, create=create, bulk=batch is not None and not dry_run)
    if not dry_run:
        store.ensure()
    options = dict(raw=raw, llm=False if no_llm else (True if use_llm or model else None), tags=tag or (),
                   type=type_, origins=origin or (), user=user, project=project, session=session,
                   threshold=threshold, allow_delete=allow_delete, dry_run=dry_run, redact=not no_redact,
                   no_dedup=no_dedup, llm_model=model)
    if batch is not None:
        _add_batch(store, batch, options, as_json)
        return
    if not dry_run and (spool or _in_git_hook() and _uses_llm(store, options)):
        _queue_add(store, body, options, as_json)
        return
    result = store.add(body, **options, progress=_llm_progress() if sys.stderr.isatty() else None)
    for message in result.notes:
        note(message)
    if as_json:
        emit_json(result.to_dict())
    else:
        _print_add(result, dry_run, verbose=verbose)
    if result.failed:
        raise typer.Exit(int(ExitStatus.ERROR))


def _in_git_hook() -> bool:
    """Run by git (a hook, `rebase --exec`): git exports GIT_EXEC_PATH to everything it runs. A
    commit must not wait for a model."""
    return bool(os.environ.get("GIT_EXEC_PATH"))


def _uses_llm(store: Store, options: dict[str, Any]) -> bool:
    return not options["raw"] and options["llm"] is not False and bool(options["llm_model"] or store.config.llm_model)


def _queue_add(store: Store, body: str, options: dict[str, Any], as_json: bool) -> None:
    """`add --spool` (or from a git hook with an LLM): redact, park in the inbox, start the worker."""
    from memcli.agents.spool import queue_add

    keep = ("raw", "llm", "tags", "type", "origins", "user", "project", "session", "threshold", "allow_delete",
            "no_dedup", "llm_model")
    opts = {k: list(v) if isinstance(v, tuple) else v for k, v in options.items() if k in keep and v is not None}
    item = queue_add(store.path, body, opts, redact=options["redact"], source="add")
    if as_json:
        emit_json({"queued": item.name, "inbox": str(item)})
    else:
        note(f"queued as inbox/{item.name}; a background worker extracts and decides (`memcli inbox` lists "
             "what waits)")


def _add_batch(store: Store, source: str, options: dict[str, Any], as_json: bool) -> None:
    """`add --batch`: one JSON result line per input line under --json, else the events."""
    from memcli.ops.add import add_batch

    if source == "-":
        stream: Any = sys.stdin
    else:
        try:
            stream = open(source, encoding="utf-8")  # noqa: SIM115 - closed below
        except OSError as e:
            fail(f"cannot read {source}: {e.strerror}")
    failed = False
    try:
        for n, res in add_batch(store, stream, **options):
            if isinstance(res, str):
                failed = True
                if as_json:
                    sys.stdout.write(render.json_line({"line": n, "error": res}))
                else:
                    note(res)
                continue
            failed = failed or res.failed
            if as_json:
                sys.stdout.write(render.json_line({"line": n, **res.to_dict()}))
            else:
                _print_add(res, bool(options.get("dry_run")), summary=False)
    finally:
        if stream is not sys.stdin:
            stream.close()
    if failed:
        raise typer.Exit(int(ExitStatus.ERROR))


def _print_add(result: Any, dry_run: bool, *, summary: bool = True, verbose: bool = False) -> None:
    """One line per fact: event, id, text; then what it was decided against and why. Memory text is
    printed literally (never markup, never emoji codes) and clipped at a word to the terminal."""
    colour = render.colour_enabled()
    colours = {"ADD": "green", "UPDATE": "yellow", "DELETE": "red", "NONE": "dim"}
    width = render.terminal_width() if render.stdout_is_terminal() else 10_000
    room = max(20, width - 34)
    pad = f"{'':<6} {'':<26} "
    out: list[str] = []

    def dim(text: str) -> str:
        return render.style(render.clip(text, room), "dim", colour)

    for e in result.events:
        if e.verdict == "invalid" and not e.refused:
            out.append(f"{render.style('INVALID', 'magenta', colour)} {(e.id or '-'):<26} "
                       f"{render.clip(e.text or '', room // 2)} ({render.clip(e.reasoning or '', room // 2)})")
            continue
        mark = " (refused: use --allow-delete)" if e.refused else ""
        out.append(f"{render.style(f'{e.event:<6}', colours.get(e.event, 'dim'), colour)} {(e.id or '-'):<26} "
                   f"{render.clip(e.text, room - len(mark))}{mark}")
        if e.old_memory is not None and e.event == "UPDATE":
            out.append(pad + dim(f"was: {e.old_memory}"))
        if e.supersedes:
            out.append(pad + dim(f"supersedes {e.supersedes}: {render.clip(e.old_memory or '', 70)} "
                                 f"({e.reasoning or ''})"))
        elif e.matched and e.event in ("NONE", "UPDATE"):
            out.append(pad + dim(f"matched {e.matched['id']}: {e.reasoning or ''}"))
        elif e.related:
            out.append(pad + dim(f"related to {e.related}: {e.reasoning or ''}"))
    if verbose:
        for piece in result.extraction.skipped_pieces:
            out.append(f"{render.style('SKIP  ', 'dim', colour)} {piece['rule']:<26} "
                       f"{render.clip(piece['text'], room)}")
    sys.stdout.write("".join(line + "\n" for line in out))
    if not summary:
        return
    s = result.summary()
    ex = result.extraction
    refused = sum(1 for e in result.events if e.refused)
    invalid = s["invalid"] - refused
    superseded = sum(1 for e in result.events if e.supersedes)
    note(f"{len(ex.facts)} fact(s) extracted, {ex.skipped} skipped: {s['ADD']} added"
         + (f" ({superseded} superseding an older one)" if superseded else "") + f", {s['UPDATE']} updated, "
         f"{s['already_known']} known, {s['DELETE'] - refused} deleted"
         + (f", {refused} delete(s) refused" if refused else "")
         + (f", {invalid} invalid" if invalid else "")
         + (" (dry run, nothing written)" if dry_run else ""))


# ---------------------------------------------------------------- search
@app.command(epilog=examples(
    'memcli search "how do we release?"',
    "memcli search redis eviction -k 3 --explain",
    "memcli search --tag deploy --since 30d rollback --json",
))
def search(
    query: list[str] | None = typer.Argument(None, metavar="QUERY", help="What to look for; `-` reads stdin."),
    top_k: int = typer.Option(5, "--top-k", "-k", metavar="N", callback=_between(1, 50),
                              help="How many results (1-50)."),
    threshold: float | None = typer.Option(None, "--threshold", metavar="SIM", callback=_between(0, 1),
                                              help="Minimum similarity, 0-1 (default 0.3)."),
    tag: list[str] | None = TAG_FILTER,
    type_: str | None = TYPE_FILTER,
    user: str | None = USER_FILTER,
    project: str | None = PROJECT_FILTER,
    since: str | None = SINCE_FILTER,
    until: str | None = UNTIL_FILTER,
    explain: bool = typer.Option(False, "--explain", help="Show each part of the score."),
    fail_empty: bool = typer.Option(False, "--fail-empty", help="Exit 1 when nothing matched (for scripts)."),
    batch: bool = typer.Option(False, "--batch", help="Queries on stdin, one per line; JSON lines out."),
    all_: bool = ALL_OPTION,
    as_json: bool = JSON_FLAG,
) -> None:
    """Ranked memories for a query (meaning + keywords + recency + reliability, diversified)."""
    from memcli.ops.search import search_many

    store = get_store()
    filters = make_filters(tag, type_, user, project, since, until)
    if batch:
        if query:
            fail("--batch reads queries from stdin; do not pass a query too", ExitStatus.USAGE)
        queries = [q.strip() for q in read_stdin().splitlines() if q.strip()]
    else:
        q = " ".join(query or []).strip()
        if not q or q == "-":
            q = read_text(None if not query else ["-"], "query").strip()
        if not q:
            fail("empty query", ExitStatus.USAGE)
        queries = [q]
    synced(store)
    responses = search_many(store, queries, k=top_k, threshold=threshold, filters=filters, include_superseded=all_)
    if batch:
        for r in responses:
            sys.stdout.write(render.json_line({"query": r.query, "results": [h.to_dict(explain) for h in r.hits],
                                               "metadata": r.metadata}))
        if fail_empty and not any(r.hits for r in responses):
            raise typer.Exit(render.ERROR)
        return
    r = responses[0]
    if as_json:
        emit_json({"query": r.query, "results": [h.to_dict(explain) for h in r.hits], "metadata": r.metadata})
        if fail_empty and not r.hits:
            raise typer.Exit(render.ERROR)
        return
    if not r.hits:
        note("no matching memories")
        if fail_empty:
            raise typer.Exit(render.ERROR)
        return
    from memcli.storage.ids import short_ids

    width, colour = render.terminal_width(), render.colour_enabled()
    shorts = short_ids(store, [h.id for h in r.hits])
    lines: list[str] = []
    for n, h in enumerate(r.hits):
        if n:
            lines.append("")
        lines.extend(render.search_hit(h.score, h.memory, shorts[h.id], width, colour,
                                       explain=h.parts if explain else None))
    sys.stdout.write("\n".join(lines) + "\n")


# ---------------------------------------------------------------- show / list
@app.command(epilog=examples("memcli show 01JDQ8ZK", "memcli show 01JDQ8ZK 01M8EJA6 --json"))
def show(
    memory_ids: list[str] = typer.Argument(..., metavar="ID", help="Memory ids (a unique prefix is enough)."),
    history: bool = typer.Option(False, "--history", help="The chain of versions: superseded memories and "
                                 "earlier texts, oldest first."),
    as_json: bool = JSON_FLAG,
) -> None:
    """Memories as stored (the Markdown file; with --json the record, or {memories: [...]} for
    several), and whether a newer one superseded each."""
    from memcli.ops.chain import chain

    store = synced(get_store())
    full = resolve_ids(store, memory_ids)
    if len(full) > 1 and not history:
        memories = [store.read(mid) for mid in full]
        if as_json:
            emit_json({"memories": [m.to_dict() for m in memories]})
            return
        for m in memories:
            if m.superseded_by:
                note(f"{m.id} is superseded by {m.superseded_by}")
        sys.stdout.write("\n".join(m.to_markdown() for m in memories))
        return
    if len(full) > 1:
        fail("--history shows one memory's chain", ExitStatus.USAGE)
    (mid,) = full
    memory = store.read(mid)
    newer = memory.superseded_by
    if history:
        steps = chain(store, memory)
        if as_json:
            emit_json({**memory.to_dict(), "chain": steps})
            return
        for step in steps:
            mark = "*" if step["id"] == mid and step.get("current", True) else " "
            sys.stdout.write(f"{mark} {step['at'] or '-':<20} {step['event']:<10} {step['id']}  "
                             f"{render.clip(step['text'], 90)}\n")
        return
    if as_json:
        emit_json(memory.to_dict())
    else:
        if newer:
            note(f"superseded by {newer} (hidden from search, list and export; shown with --all)")
        sys.stdout.write(memory.to_markdown())


@app.command("list", epilog=examples(
    "memcli list --tag deploy --since 30d",
    "memcli list --sort -updated -n 20",
    "memcli list --json | jq '.memories[].text'",
))
def list_(
    tag: list[str] | None = TAG_FILTER,
    type_: str | None = TYPE_FILTER,
    user: str | None = USER_FILTER,
    project: str | None = PROJECT_FILTER,
    since: str | None = SINCE_FILTER,
    until: str | None = UNTIL_FILTER,
    sort: str = typer.Option("created", "--sort", metavar="KEY", help=f"{SortKey.choices()}; "
                             "prefix with - for descending."),
    limit: int | None = typer.Option(None, "--limit", "-n", metavar="N", callback=_at_least(1),
                                     help="Show at most N memories."),
    all_: bool = ALL_OPTION,
    as_json: bool = JSON_FLAG,
) -> None:
    """A filtered listing of memories (superseded ones only with --all)."""
    if sort.lstrip("-") not in SortKey.values():
        fail(f"--sort must be one of {', '.join(SortKey.values())} (prefix - for descending)", ExitStatus.USAGE)
    store = synced(get_store())
    filters = make_filters(tag, type_, user, project, since, until, current=not all_)
    desc = sort.startswith("-")
    records = store.index.select(filters, order=sort.lstrip("-"), limit=limit, desc=desc)
    if as_json:
        emit_json({"count": len(records), "memories": [m.to_dict() for m in records]})
        return
    if not render.stdout_is_terminal():  # a pipe or a file: every memory, full ids, tab-separated
        sys.stdout.write("".join(line + "\n" for line in render.list_tsv(records)))
        note(render.plural(len(records), "memory", "memories"))
        return
    from memcli.storage.ids import short_ids

    cap = len(records) if limit else max(10, shutil.get_terminal_size((80, 24)).lines - 3)
    shown = records[:cap]
    lines = render.list_rows(shown, render.terminal_width(), short_ids(store, [r.id for r in shown]),
                             render.colour_enabled())
    if len(records) > len(shown):
        lines.append(f"… {len(records) - len(shown)} more (use --limit N, or pipe the output)")
    sys.stdout.write("".join(line + "\n" for line in lines))
    note(render.plural(len(records), "memory", "memories"))


# ---------------------------------------------------------------- rm / restore
@app.command(epilog=examples(
    "memcli rm 01JDQ8ZK",
    'memcli rm 01JDQ8ZK 01M8EJA6 --reason "outdated since the move to k8s"',
))
def rm(
    ids: list[str] = typer.Argument(..., metavar="ID", help="Memories to move to the trash."),
    reason: str = typer.Option("removed by user", "--reason", metavar="WHY",
                               help="Why (kept in the trash and the log)."),
    as_json: bool = JSON_FLAG,
) -> None:
    """Move memories to the trash (`memcli restore` brings them back)."""
    store = synced(get_store())
    full = resolve_ids(store, ids)
    from memcli.ops.changes import ChangeSet

    cs = ChangeSet(store)
    done = [cs.trash(mid, reason, event="RM").id for mid in full]
    cs.commit()
    if as_json:
        emit_json({"trashed": done})
    else:
        for mid in done:
            note(f"trashed {mid}")


@app.command(epilog=examples("memcli trash", "memcli restore 01JDQ8ZK"))
def restore(
    ids: list[str] = typer.Argument(..., metavar="ID", help="Trashed memories (a unique id prefix is enough)."),
    as_json: bool = JSON_FLAG,
) -> None:
    """Bring memories back from the trash."""
    from memcli.ops.changes import ChangeSet
    from memcli.storage.ids import resolve_trashed

    store = synced(get_store())
    full = [resolve_trashed(store, i) for i in ids]
    cs = ChangeSet(store)
    done = [cs.restore(mid).id for mid in full]
    cs.commit()
    if as_json:
        emit_json({"restored": done})
    else:
        for mid in done:
            note(f"restored {mid}")


@app.command("trash", epilog=examples("memcli trash", "memcli trash --json | jq '.memories[].id'",
                                      "memcli trash --empty --older-than 90d --dry-run"))
def trash_(
    empty: bool = typer.Option(False, "--empty", help="Delete what is in the trash for good (no restore)."),
    older_than: str | None = typer.Option(None, "--older-than", metavar="DURATION",
                                          help="With --empty: only what was trashed before: 90d, 6m, 2026-01-01."),
    dry_run: bool = typer.Option(False, "--dry-run", help="With --empty: list what would be deleted, delete nothing."),
    as_json: bool = JSON_FLAG,
) -> None:
    """List the trash: what was removed, when, why (`memcli restore ID` brings one back); or empty it."""
    store = get_store()
    if empty:
        _empty_trash(store, older_than, dry_run, as_json)
        return
    if older_than or dry_run:
        fail("--older-than and --dry-run go with --empty", ExitStatus.USAGE,
             hint="memcli trash --empty --older-than 90d --dry-run")
    items = []
    for m in store.trashed():
        info = m.extra.get("trashed") if isinstance(m.extra.get("trashed"), dict) else {}
        items.append({"id": m.id, "trashed_at": str(info.get("at") or ""), "reason": str(info.get("reason") or ""),
                      "text": m.text})
    items.sort(key=lambda i: i["trashed_at"], reverse=True)
    if as_json:
        emit_json({"count": len(items), "memories": items})
        return
    if not render.stdout_is_terminal():
        sys.stdout.write("".join("\t".join([i["id"], i["trashed_at"], i["reason"], " ".join(i["text"].split())]) + "\n"
                                 for i in items))
        return
    width = render.terminal_width()
    shorts = render.short_ids([i["id"] for i in items])
    id_w = max((len(v) for v in shorts.values()), default=8)
    for i in items:
        head = f"{shorts[i['id']]:<{id_w}}  {i['trashed_at'][:16].replace('T', ' ')}  "
        why = render.clip(i["reason"], min(render.cell_width(i["reason"]), max(12, (width - len(head)) // 2)))
        text = render.clip(i["text"], max(8, width - len(head) - render.cell_width(why) - 2))
        sys.stdout.write(f"{head}{why}  {text}\n")
    note(render.plural(len(items), "memory", "memories") + " in the trash" + (" (memcli restore ID)" if items else ""))


def _empty_trash(store: Store, older_than: str | None, dry_run: bool, as_json: bool) -> None:
    try:
        gone = store.empty_trash(older_than=older_than, dry_run=dry_run)
    except ValueError as e:
        fail(str(e), ExitStatus.USAGE)
    if as_json:
        emit_json({"purged": [m.id for m in gone], "dry_run": dry_run})
        return
    width = render.terminal_width() if render.stdout_is_terminal() else 10_000
    for m in gone:
        why = m.extra["trashed"].get("reason") or "no reason noted"
        sys.stdout.write(render.clip(f"{m.id}  {' '.join(m.text.split())}  ({why})", width) + "\n")
    note(f"{'would delete' if dry_run else 'deleted'} {render.plural(len(gone), 'memory', 'memories')} "
         "from the trash" + ("" if dry_run else ", for good"))


@app.command(epilog=examples("memcli edit 01JDQ8ZK", "EDITOR=nano memcli edit 01JDQ8ZK"))
def edit(
    memory_id: str = typer.Argument(..., metavar="ID", help="The memory to edit (a unique id prefix is enough)."),
) -> None:
    """Open a memory's file in $EDITOR; on save it is checked and re-indexed (a broken edit is kept aside)."""
    from memcli.ops.history import edit as run_editor

    store = synced(get_store())
    (mid,) = resolve_ids(store, [memory_id])
    memory, changed = run_editor(store, mid)
    if changed:
        synced(store)
        note(f"saved {mid}")
    else:
        note(f"no change to {mid}")


@app.command("log", epilog=examples("memcli log", "memcli log 01JDQ8ZK", "memcli log --event RM --since 7d",
                                    "memcli log --json -n 100 | jq '.entries[].event'"))
def log_(
    memory_id: str | None = typer.Argument(None, metavar="ID", help="Only this memory's history (an id prefix)."),
    event: list[str] | None = typer.Option(None, "--event", "-e", metavar="EVENT",
                                           help="Only these events: ADD, UPDATE, RM, MERGE, IMPORT... (repeatable)."),
    since: str | None = typer.Option(None, "--since", metavar="WHEN",
                                     help="Changes at or after: 2026-01-01, 7d, 2w, 3m, 1y, yesterday."),
    until: str | None = typer.Option(None, "--until", metavar="WHEN", help="Changes at or before (same forms)."),
    limit: int | None = typer.Option(None, "--limit", "-n", metavar="N", callback=_at_least(1),
                                     help="Show the N most recent entries."),
    as_json: bool = JSON_FLAG,
) -> None:
    """The history of changes (log.jsonl), newest first: what changed, when, why, from where."""
    from collections import deque

    from memcli.core.memory import parse_when
    from memcli.ops.history import LogFilter, entries, ids_in_log, log_line

    store = get_store()
    if memory_id:
        found = ids_in_log(store.log_path, memory_id)
        if len(found) > 1 and memory_id.upper() not in {i.upper() for i in found}:
            fail(f"id prefix {memory_id} is ambiguous: {len(found)} memories in the log match",
                 hint=f"candidates: {', '.join(sorted(found)[:5])}")
    try:
        flt = LogFilter(id_prefix=memory_id, events=tuple(e.upper() for e in event or ()),
                        since=parse_when(since) if since else None,
                        until=parse_when(until, end=True) if until else None)
    except ValueError as e:
        fail(str(e), ExitStatus.USAGE)
    terminal = render.stdout_is_terminal()
    keep = limit or (max(10, shutil.get_terminal_size((80, 24)).lines - 3) if terminal and not as_json else None)
    total = 0
    recent: deque[dict[str, Any]] = deque(maxlen=keep)  # bounded: the log may hold a 100k import
    for entry in entries(store.log_path, flt):
        total += 1
        recent.append(entry)
    newest = list(reversed(recent))
    if as_json:
        emit_json({"count": len(newest), "total": total, "entries": newest})
        return
    width = render.terminal_width() if terminal else None
    shorts: dict[str, str] = {}
    if terminal:
        from memcli.storage.ids import short_ids

        shorts = short_ids(synced(store), {e["id"] for e in newest if isinstance(e.get("id"), str)})
    sys.stdout.write("".join(log_line(e, width, shorts.get(e.get("id"))) + "\n" for e in newest))
    if terminal and total > len(newest) and not limit:
        sys.stdout.write(f"… {total - len(newest)} older (use --limit N, or pipe the output)\n")
    if not total:
        note("no matching history")


# ---------------------------------------------------------------- export / import
@app.command("export", epilog=examples(
    "memcli export --format jsonl -o backup.jsonl",
    "memcli export --format md --tag deploy > deploy.md",
    "memcli export --format csv --since 30d",
))
def export_(
    fmt: str = typer.Option("json", "--format", "-f", metavar="FORMAT", help=ExportFormat.choices()),
    output: Path | None = typer.Option(None, "--output", "-o", metavar="FILE", help="File to write (default: stdout)."),
    tag: list[str] | None = TAG_FILTER,
    type_: str | None = TYPE_FILTER,
    user: str | None = USER_FILTER,
    project: str | None = PROJECT_FILTER,
    since: str | None = SINCE_FILTER,
    until: str | None = UNTIL_FILTER,
    all_: bool = ALL_OPTION,
) -> None:
    """Write memories as json, jsonl, md or csv (superseded ones only with --all); every format
    imports back (`memcli import`)."""
    from memcli.ops.io import export_chunks, iter_records

    if fmt not in ExportFormat.values():
        fail(f"--format must be one of {', '.join(ExportFormat.values())}", ExitStatus.USAGE)
    store = synced(get_store())
    counted = [0]

    def records() -> Any:
        for r in iter_records(store.index, make_filters(tag, type_, user, project, since, until, current=not all_)):
            counted[0] += 1
            yield r

    chunks = export_chunks(records(), fmt)
    if output is None or str(output) == "-":
        for chunk in chunks:
            sys.stdout.write(chunk)
        return
    from memcli.ops.io import write_stream

    try:
        write_stream(output.absolute(), chunks)
    except OSError as e:
        fail(f"cannot write {output}: {e.strerror}")
    note(f"exported {render.plural(counted[0], 'memory', 'memories')} to {output}")


@app.command("import", epilog=examples(
    "memcli import backup.jsonl",
    "memcli import ~/notes --split",
    "memcli import --format md meeting-notes.md",
    "memcli import --from claude-code session.jsonl",
))
def import_(
    file: str = typer.Argument(..., metavar="FILE|DIR", help="An export (json, jsonl, csv, md), a Markdown note, "
                               "or a folder of notes; `-` reads stdin."),
    fmt: str | None = typer.Option(None, "--format", "-f", metavar="FORMAT",
                                   help=f"{ExportFormat.choices()} (default: from the extension, else the content)."),
    split: bool = typer.Option(False, "--split", help="Markdown notes: one memory per heading section, "
                               "not one per file."),
    create: bool = typer.Option(False, "--create", help="Create the --store directory if it does not exist."),
    from_: str | None = typer.Option(None, "--from", metavar="SOURCE", help="A conversation export instead: "
                                     "claude-code (a session .jsonl) or chatgpt (conversations.json), through "
                                     "the add pipeline."),
    no_redact: bool = typer.Option(False, "--no-redact", help="Keep texts verbatim (no scrubbing of secrets)."),
    as_json: bool = JSON_FLAG,
) -> None:
    """Load memories as they are, no extraction: memcli's exports (lossless) or Markdown notes (front
    matter optional). Streams files of any size; each record's text is limited to 10 MB."""
    from memcli.ops.records import import_source, spool_stdin

    if from_ is not None:  # a conversation: through the session step (memcli/ops/sessions.py)
        return _import_conversations(file, from_, create, as_json, redact=not no_redact)
    if fmt is not None and fmt not in ExportFormat.values():
        fail(f"--format must be one of {', '.join(ExportFormat.values())}", ExitStatus.USAGE)
    with spool_stdin(sys.stdin.buffer) if file == "-" else contextlib.nullcontext(Path(file)) as path:
        name = "stdin" if file == "-" else path.name
        if file != "-" and not path.exists():
            fail(f"cannot read {file}: no such file or directory")
        store = get_store(must_exist=False, create=create, bulk=True)

        def prepare() -> None:  # after every record was checked: a failed import creates nothing
            store.ensure()
            synced(store)

        bar = _progress("importing")
        try:
            report = import_source(store, path, fmt, name=name, split=split, redact=not no_redact,
                                   prepare=prepare, on_progress=bar.update if bar else None)
        finally:
            if bar:
                bar.close()
    if as_json:
        emit_json(report.to_dict())
    else:
        note(f"imported {report.added} new, {report.updated} updated, {report.unchanged} unchanged")


# ---------------------------------------------------------------- reindex / stats / doctor
@app.command(epilog=examples("memcli reindex", "memcli reindex --provisional", "memcli reindex --json"))
def reindex(
    provisional: bool = typer.Option(False, "--provisional",
                                     help="Only make provisional vectors (of a bulk merge) exact."),
    as_json: bool = JSON_FLAG,
) -> None:
    """Rebuild the sidecar (.index/) from facts/; embeddings come from the cache where possible."""
    store = get_store()
    if provisional:
        bar = _progress("embedding")
        done = store.index.refresh_provisional(on_progress=bar.update if bar else None)
        if bar:
            bar.close()
        if as_json:
            emit_json({"refreshed": done, "provisional_vectors": store.index.provisional_count()})
        else:
            note(f"{render.plural(done, 'provisional vector')} made exact")
        return
    bar = _progress("reindexing")
    report = store.index.sync(on_progress=bar.update if bar else None, force=True)
    if bar:
        bar.close()
    for fname, error in report.new_bad:
        note(f"skipping facts/{fname}: {error}")
    info = {"memories": store.index.count(), "embedded": report.embedded, "skipped_files": len(report.new_bad),
            "provisional_vectors": store.index.provisional_count()}
    if as_json:
        emit_json(info)
    else:
        note(f"reindexed {info['memories']} memories ({info['embedded']} embedded, the rest from cache)")


@app.command(epilog=examples("memcli stats", "memcli stats --json | jq .memories"))
def stats(as_json: bool = JSON_FLAG) -> None:
    """Counts and sizes."""
    from memcli.ops.admin import stats as compute

    info = compute(synced(get_store()))
    if as_json:
        emit_json(info)
        return
    sizes = {"facts_bytes", "index_bytes"}
    for key, value in info.items():
        if isinstance(value, list):
            value = ", ".join(f"{c['name']} {c['count']}" for c in value) or "-"
        elif key in sizes and isinstance(value, int):
            value = render.size(value)
        sys.stdout.write(f"{key:<16} {value}\n")


@app.command(epilog=examples("memcli doctor", "memcli doctor --fix", "memcli doctor --json"))
def doctor(
    fix: bool = typer.Option(False, "--fix", help="Repair what is damaged (index, usage counts, leftovers)."),
    as_json: bool = JSON_FLAG,
) -> None:
    """Check config, model, LLM reachability and index consistency; list malformed files."""
    from memcli.ops.admin import doctor as check

    store = get_store()
    checks = check(store, fix=fix)
    ok = all(c["ok"] for c in checks)
    if as_json:
        emit_json({"ok": ok, "checks": checks})
    else:
        colour = render.colour_enabled()
        for c in checks:
            mark = render.style("ok  ", "green", colour) if c["ok"] else render.style("FAIL", "red", colour)
            sys.stdout.write(f"{mark} {c['check']}: {c['detail']}\n")
    if not ok:
        raise typer.Exit(int(ExitStatus.ERROR))


# ---------------------------------------------------------------- curation
def _provisional_note(store: Store) -> int:
    """After a curation commit: one line on stderr when merged memories were indexed with a
    provisional vector (see memcli/ops/changes.py PROVISIONAL_MIN), saying how they become exact.
    Returns how many there are."""
    from memcli.agents.detached import background_on, refresh_failed_recently

    n = store.index.provisional_count()
    if n:
        if not background_on(store.config.background):
            how = "run `memcli reindex --provisional` to compute their exact ones"
        elif refresh_failed_recently(store.path):
            how = ("the last background refresh failed (see inbox/errors.log): "
                   "run `memcli reindex --provisional` to compute their exact ones")
        else:
            how = "a background process is computing their exact ones"
        note(f"{render.plural(n, 'merged memory', 'merged memories')} indexed with a provisional vector "
             f"(a source's, close to its own); {how}")
    return n


@app.command(epilog=examples("memcli merge 01M8EJA6 01M8CY7X", "memcli merge --auto --threshold 0.92 --dry-run"))
def merge(
    ids: list[str] | None = typer.Argument(None, metavar="ID", help="Memories to merge into one."),
    auto: bool = typer.Option(False, "--auto", help="Merge every group of memories above --threshold."),
    threshold: float = typer.Option(0.9, "--threshold", metavar="SIM", callback=_between(0, 1),
                                    help="Similarity (0-1) for --auto groups."),
    no_llm: bool = typer.Option(False, "--no-llm", help="Heuristic merge even if an LLM is configured."),
    model: str | None = typer.Option(None, "--model", metavar="MODEL",
                                     help="LLM model for this call (litellm string)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would be merged, change nothing."),
    as_json: bool = JSON_FLAG,
) -> None:
    """Merge memories into one (LLM merge prompt, or a heuristic merge); originals go to the trash."""
    from memcli.ops.curate import merge_groups, similar_groups

    if no_llm and model:
        fail("--no-llm conflicts with --model", ExitStatus.USAGE)
    store = synced(get_store())
    if auto == bool(ids):
        fail("give two or more IDs, or --auto", ExitStatus.USAGE)
    from memcli.ops.curate import _opposed

    # --auto merges only the same fact: never another subject, a contradiction or a superseded memory
    known: dict[str, Any] = {}  # the catalog entries --auto read, for the merges
    groups = similar_groups(store, threshold, apart=_opposed, known=known) if auto else [
        resolve_ids(store, ids or [])]
    if any(len(set(group)) < 2 for group in groups):
        fail("merge needs at least two different memories", ExitStatus.USAGE)
    results = merge_groups(store, groups, use_llm=False if no_llm else (True if model else None), dry_run=dry_run,
                           llm_model=model, known=known if auto else None)
    for r in results:
        if r.note:
            note(r.note)
    pending = 0 if dry_run or not results else _provisional_note(store)
    if as_json:
        emit_json({"merged": [r.to_dict() for r in results], "dry_run": dry_run, "provisional_vectors": pending})
        return
    width = render.terminal_width() if render.stdout_is_terminal() else 100
    blocks = []
    for n, r in enumerate(results, 1):  # one labelled block per group, all on stdout
        verb = "would merge" if dry_run else "merged"
        lines = [f"group {n}: {verb} {len(r.sources)} memories into {r.merged.id} ({r.method})"]
        for sid, text in zip(r.sources, r.texts):
            lines.append(f"  from {sid}  {render.clip(text, max(20, width - 34))}")
        lines.append("  into:")
        lines.extend(render.body_lines(r.merged.text, width, "    "))
        blocks.append("\n".join(lines))
    if blocks:
        sys.stdout.write("\n\n".join(blocks) + "\n")
    note(f"{'would merge' if dry_run else 'merged'} {render.plural(len(results), 'group')}" if results
         else "nothing to merge")


@app.command(epilog=examples(
    "memcli prune --older-than 180d --unused --dry-run",
    "memcli prune --min-confidence 0.3 --type episodic",
))
def prune(
    older_than: str | None = typer.Option(None, "--older-than", metavar="DURATION",
                                          help="Age or date: 90d, 6m, 2026-01-01."),
    unused: bool = typer.Option(False, "--unused", help="Never returned by a search."),
    min_confidence: float | None = typer.Option(None, "--min-confidence", metavar="LEVEL", callback=_between(0, 1),
                                                   help="Trash memories below this confidence."),
    type_: str | None = typer.Option(None, "--type", metavar="TYPE", help="Only memories of this type."),
    min_age: str = typer.Option("30d", "--min-age", metavar="DURATION", help="Never trash memories younger "
                                "than this, whatever the criteria (0 to allow any age)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="List what would be trashed, change nothing."),
    as_json: bool = JSON_FLAG,
) -> None:
    """Move stale memories to the trash (criteria combine with AND)."""
    from memcli.core.memory import parse_when
    from memcli.ops.curate import prune as do_prune

    check_type(type_)
    if not (older_than or unused or min_confidence is not None):
        fail("prune needs a criterion", ExitStatus.USAGE, hint="give --older-than, --unused or --min-confidence")
    store = synced(get_store())
    try:
        cutoff = parse_when(older_than) if older_than else None
        youngest = None if min_age.strip() in ("0", "0d") else parse_when(min_age)
    except ValueError as e:
        fail(str(e), ExitStatus.USAGE)
    if youngest is not None and (cutoff is None or youngest < cutoff):
        cutoff = youngest  # criteria combine with AND: older than both
    result = do_prune(store, older_than=cutoff, unused=unused, min_confidence=min_confidence, type=type_,
                      dry_run=dry_run)
    if as_json:
        emit_json({**result.to_dict(), "dry_run": dry_run})
        return
    width = render.terminal_width() if render.stdout_is_terminal() else 10_000
    for p in result.trashed:
        sys.stdout.write(render.clip(f"{p.memory.id}  {' '.join(p.memory.text.split())}  ({p.reason})", width) + "\n")
    note(f"{'would trash' if dry_run else 'trashed'} {len(result.trashed)} memories")


@app.command(epilog=examples("memcli rollback git:3f2a1c9 --dry-run", "memcli rollback import:backup.jsonl"))
def rollback(
    origin: str = typer.Argument(..., metavar="ORIGIN", help="An origin: git:SHA, session:ID, import:FILE, cli ..."),
    dry_run: bool = typer.Option(False, "--dry-run", help="List what would be trashed or detached, change nothing."),
    as_json: bool = JSON_FLAG,
) -> None:
    """Undo what one origin contributed: memories only it vouched for go to the trash."""
    from memcli.ops.curate import rollback as do_rollback

    store = synced(get_store())
    involved = {r.id: r.text for r in store.index.select() if origin in r.origins}
    if not involved and not _origin_in_log(store, origin):  # rolled back already: nothing to do, not an error
        known = sorted({o for r in store.index.select() for o in r.origins
                        if o.split(":")[0] == origin.split(":")[0]})
        fail(f"no memory comes from {origin}",
             hint=f"origins of that kind: {', '.join(known[:6])}{' ...' if len(known) > 6 else ''}" if known
             else "memcli show ID lists a memory's origins")
    result = do_rollback(store, origin, dry_run=dry_run)
    if as_json:
        emit_json({**result.to_dict(), "dry_run": dry_run})
        return
    width = render.terminal_width() if render.stdout_is_terminal() else 10_000
    for verb, ids_ in (("trash ", result.trashed), ("detach", result.detached)):
        for mid in ids_:
            text = " ".join(involved.get(mid, "").split())
            sys.stdout.write(render.clip(f"{verb}  {mid}  {text}", width) + "\n")
    note(f"{'would trash' if dry_run else 'trashed'} {len(result.trashed)}, "
         f"{'would detach' if dry_run else 'detached'} {origin} from {len(result.detached)}")


def _origin_in_log(store: Store, origin: str) -> bool:
    """Whether any change was ever made from `origin` (log.jsonl), read as a stream."""
    from memcli.ops.history import LogFilter, entries

    for entry in entries(store.log_path, LogFilter()):
        o = entry.get("origin")
        if o == origin or (isinstance(o, list) and origin in o):
            return True
    return False


@app.command(epilog=examples("memcli consolidate --dry-run", "memcli consolidate --no-llm --json"))
def consolidate(
    dry_run: bool = typer.Option(False, "--dry-run", help="Report what would change, change nothing."),
    no_llm: bool = typer.Option(False, "--no-llm", help="Heuristic merges even if an LLM is configured."),
    supersede_older: bool = typer.Option(False, "--supersede-older",
                                         help="Resolve each contradiction: the newer memory supersedes the older."),
    as_json: bool = JSON_FLAG,
) -> None:
    """Maintenance: merge near-duplicates, flag contradictions, distil recurring episodes."""
    from memcli.ops.curate import consolidate as run

    store = synced(get_store())
    report = run(store, dry_run=dry_run, use_llm=False if no_llm else None,
                 supersede_older=supersede_older, sync=False)
    pending = 0 if dry_run or not (report.merged or report.distilled) else _provisional_note(store)
    if as_json:
        emit_json({**report.to_dict(), "provisional_vectors": pending})
        return
    verb = "would " if dry_run else ""
    for m in report.merged:
        note(f"{verb}merge {', '.join(m['merged_from'])} -> {m['id']}")
    for c in report.contradictions:
        if c.get("superseded"):
            note(f"{verb}supersede {c['superseded']['old']} by {c['superseded']['new']}: {c['why']}")
        else:
            note(f"{verb}flag contradiction to resolve: {c['ids'][0]} <> {c['ids'][1]}: {c['why']} "
                 "(--supersede-older resolves it)")
    for d in report.distilled:
        note(f"{verb}distil {len(d['from'])} episodes -> {d['id']}: {short(d['text'], 80)}")
    note(f"{len(report.merged)} merged, {len(report.contradictions)} contradictions, {len(report.distilled)} distilled")


# ---------------------------------------------------------------- ask
@app.command(epilog=examples(
    'memcli ask "how do we rotate the staging DB password?"',
    'memcli ask -k 5 --model ollama/llama3.1 "what broke in the last release?"',
))
def ask(
    question: list[str] | None = typer.Argument(None, metavar="QUESTION",
                                                help="A question to answer from memory; `-` reads stdin."),
    top_k: int = typer.Option(8, "--top-k", "-k", metavar="N", callback=_between(1, 50),
                              help="Memories to give the model (1-50)."),
    model: str | None = typer.Option(None, "--model", metavar="MODEL",
                                     help="LLM model for this call (litellm string)."),
    no_redact: bool = typer.Option(False, "--no-redact", help="Send the question to the model unscrubbed."),
    as_json: bool = typer.Option(False, "--json", help="JSON: the answer, the ids it cites, the memories used."),
) -> None:
    """Answer a question from the top memories with the LLM, citing memory ids (streamed)."""
    from memcli.core.errors import LLMError
    from memcli.ops.ask import ask as answer_from_memory

    q = read_text(question, "question").strip()
    if not q:
        fail("empty question", ExitStatus.USAGE)
    store = synced(get_store())
    answer = answer_from_memory(store, q, k=top_k, llm_model=model, redact=not no_redact)
    hits = answer.hits
    records = [h.to_dict() for h in hits]
    if answer.error == "no LLM configured":
        if as_json:
            emit_json({"question": q, "answer": None, "error": "no LLM configured", "memories": records})
        else:
            note("no LLM model configured (set MEMCLI_LLM_MODEL or llm_model in config.toml, or pass --model); "
                 "the memories that match:")
            for h in hits:
                sys.stdout.write(f"[{h.id}] {short(h.memory.text, 300)}\n")
            if not hits:
                note("no matching memories")
        return
    if answer.error:  # nothing to answer from: no request, no invented answer
        if as_json:
            emit_json({"question": q, "answer": None, "error": "no matching memories", "cited": [], "memories": []})
        else:
            note("no matching memories: nothing to answer from")
        return
    spinner = render.Spinner("thinking")  # on stderr, only on a terminal, gone at the first token
    if as_json:
        text = "".join(spinner.wrap(answer.stream())).strip()
        cited = answer.cited(text)
        emit_json({"question": answer.question, "answer": text, "cited": cited,
                   "header_echo": answer.header_echo(text),
                   "matched": [] if cited else answer.matched(text),
                   "unknown_citations": answer.unknown_citations(text), "memories": records, "llm": answer.usage()})
        return
    printed = False
    try:
        for piece in spinner.wrap(answer.stream()):
            printed = True
            sys.stdout.write(piece)
            sys.stdout.flush()
    except LLMError:
        if printed:  # the error line must not be glued to half an answer
            sys.stdout.write("\n")
            sys.stdout.flush()
        raise
    sys.stdout.write("\n")
    if answer.header_echo():
        first = next((h for h in hits if h.id in answer.text), hits[0])
        note(f"the model only repeated a memory's header instead of answering; that memory says: "
             f"{short(first.memory.text, 300)}")
        return
    unknown = answer.unknown_citations()
    if unknown:
        note(f"the answer cites id(s) it was not given: {', '.join(unknown)}; do not trust those citations")
    if not answer.cited():
        matched = answer.matched()
        if matched:
            note(f"the answer cites no memory id; it repeats what {', '.join(matched)} say(s)"
                 f" (memcli show {matched[0]})")
        else:
            note("the answer cites no memory id and matches none of the memories it was given; "
                 "check it against them (memcli search)")


# ---------------------------------------------------------------- feedback
@app.command(epilog=examples("memcli feedback 01JDQ8ZK --useful", "memcli feedback 01JDQ8ZK --wrong --json"))
def feedback(
    memory_id: str = typer.Argument(..., metavar="ID", help="A memory id (a unique prefix is enough)."),
    useful: bool = typer.Option(False, "--useful", help="It helped: confidence +0.05, counts as a use."),
    wrong: bool = typer.Option(False, "--wrong", help="It is wrong or stale: confidence -0.05."),
    as_json: bool = JSON_FLAG,
) -> None:
    """Tell memcli a memory was useful or wrong; ranking learns from this, never from display."""
    from memcli.ops.add import feedback as give

    if useful == wrong:
        fail("give exactly one of --useful or --wrong", ExitStatus.USAGE)
    store = synced(get_store())
    (mid,) = resolve_ids(store, [memory_id])
    m = give(store, mid, useful=useful)
    if as_json:
        emit_json({"id": m.id, "confidence": m.confidence, "feedback": "useful" if useful else "wrong"})
    else:
        note(f"{m.id}: confidence {m.confidence:.2f}")


# ---------------------------------------------------------------- trust
@app.command(epilog=examples("memcli trust", "memcli trust ~/src/app/.memcli", "memcli trust --remove"))
def trust(
    directory: Path | None = typer.Argument(None, help="The store to trust (default: the current store)."),
    remove: bool = typer.Option(False, "--remove", help="Stop trusting it."),
) -> None:
    """Let a store's config.toml choose the LLM, its api_base and key (off by default: a store's
    config comes with the repository, and could send your key and memories anywhere)."""
    from memcli.core.trust import set_trust, trust_file

    path = (directory or get_store(must_exist=False).path).expanduser().resolve()
    if not remove and not Store(path).exists():
        fail(f"no store at {path}")
    changed = set_trust(path, not remove)
    verb = ("no longer trusted" if remove else "trusted") if changed else ("was not trusted" if remove else
                                                                             "already trusted")
    note(f"{path}: {verb} (list: {trust_file()})")


# ---------------------------------------------------------------- inbox
@inbox_app.callback(epilog=examples("memcli inbox", "memcli inbox retry --model ollama/llama3.1"))
def inbox(ctx: typer.Context, as_json: bool = JSON_FLAG) -> None:
    """List inputs saved when the LLM was unreachable (`memcli inbox retry` replays them)."""
    if ctx.invoked_subcommand is not None:
        return
    from memcli.ops.add import inbox_items

    items = inbox_items(get_store())
    if as_json:
        emit_json({"items": [{"file": p.name, "at": i.get("at"), "error": i.get("error"),
                              "attempts": i.get("attempts", 1), "text": i.get("text")} for p, i in items]})
        return
    for p, i in items:
        sys.stdout.write(f"{p.stem}  {i.get('at', '')}  {short(i.get('text', ''), 70)}  [{i.get('error', '')}]\n")
    note(f"{len(items)} pending input(s)")


@inbox_app.command("retry", epilog=examples("memcli inbox retry", "memcli inbox retry --json"))
def inbox_retry(
    model: str | None = typer.Option(None, "--model", metavar="MODEL",
                                     help="LLM model for the replay (litellm string)."),
    as_json: bool = JSON_FLAG,
) -> None:
    """Replay parked inputs through the LLM pipeline; each success leaves the inbox."""
    from memcli.ops.add import AddResult, retry_inbox

    results = retry_inbox(get_store(), model=model)
    held = {f for f, r in results if isinstance(r, str) and r.startswith("skipped:")}  # another worker's
    ok = all(isinstance(r, AddResult) or f in held for f, r in results)
    if as_json:
        emit_json({"results": [{"file": f, "ok": isinstance(r, AddResult),
                                **({"result": r.to_dict()} if isinstance(r, AddResult) else {"error": r})}
                               for f, r in results]})
    else:
        for f, r in results:
            if isinstance(r, AddResult):
                s = r.summary()
                note(f"{f}: done ({s['ADD']} added, {s['UPDATE']} updated, {s['already_known']} known)")
            else:
                note(f"{f}: {r}" if f in held else f"{f}: still failing: {r}")
        if not results:
            note("inbox is empty")
    if not ok:
        raise typer.Exit(int(ExitStatus.ERROR))


def _import_conversations(file: str, kind: str, create: bool, as_json: bool, *, redact: bool = True) -> None:
    """`import --from`: a ChatGPT export is streamed from its file one conversation at a time (a
    100 MB export is never held whole); a transcript or stdin is read whole (10 MB at most)."""
    from memcli.ops.add import read_input, read_limited
    from memcli.services.transcripts import IMPORT_KINDS, iter_chatgpt, parse_conversations

    if kind not in IMPORT_KINDS:
        fail(f"--from must be one of {', '.join(IMPORT_KINDS)}", ExitStatus.USAGE)
    name = "stdin" if file == "-" else Path(file).name
    try:
        if kind == "chatgpt" and file != "-":
            stream = open(file, encoding="utf-8-sig")  # noqa: SIM115 - closed below
            conversations: Any = iter_chatgpt(stream, name)
            first = next(conversations, None)
            if first is None:
                fail(f"{name}: no conversation text found (is it a {kind} export?)")
            conversations = itertools.chain([first], conversations)
        else:
            if file == "-":
                text = read_stdin()
            else:
                with open(file, "rb") as f:
                    text = read_input(read_limited(f, file), name)  # /dev/zero stops at the limit
            conversations = parse_conversations(text, kind, name)
            if not conversations:
                fail(f"{name}: no conversation text found (is it a {kind} export?)")
    except OSError as e:
        fail(f"cannot read {file}: {e.strerror}")
    except UnicodeDecodeError as e:
        fail(f"{name}: not valid UTF-8 (byte {e.start})")
    except ValueError as e:
        fail(str(e))
    store = get_store(must_exist=False, create=create)
    store.ensure()
    synced(store)
    try:
        results = store.import_conversations(conversations, name, redact=redact)
    except (ValueError, UnicodeDecodeError) as e:  # a bad conversation further down a streamed export
        fail(f"{name}: {e}")
    if as_json:
        emit_json({"conversations": results})
        return
    for r in results:
        s = r["summary"]
        note(f"{r['title'] or r['conversation']}: {r['turns']} turns, {s['ADD']} added, {s['UPDATE']} updated, "
             f"{s['already_known']} known")


# ---------------------------------------------------------------- agents: mcp, hooks, capture, context
hooks_app = typer.Typer(help="Install memcli into git and coding agents.", no_args_is_help=True,
                        epilog=examples("memcli hooks install git", "memcli hooks install claude-code"))
app.add_typer(hooks_app, name="hooks")


@app.command(epilog=examples("memcli mcp", "memcli --store ~/notes/.memcli mcp"))
def mcp() -> None:
    """Run the MCP server on stdio, for Claude Code, Cursor and other MCP clients.

    Set it up with `claude mcp add --scope project memcli -- memcli mcp`, or the JSON snippet
    in the README ("Agents and hooks").
    """
    from memcli.agents.mcp import serve

    serve(get_store())


@hooks_app.command("install", epilog=examples("memcli hooks install git", "memcli hooks install claude-code",
                                               "memcli hooks install claude-code --scope user",
                                               "memcli hooks install git --uninstall"))
def hooks_install(
    target: str = typer.Argument(..., metavar="TARGET", help="git | claude-code"),
    uninstall: bool = typer.Option(False, "--uninstall", help="Remove what memcli added (nothing else)."),
    scope: str = typer.Option("project", "--scope", metavar="SCOPE", help="claude-code: project "
                              "(.claude/settings.json), local (settings.local.json) or user (~/.claude)."),
    as_json: bool = JSON_FLAG,
) -> None:
    """Install (or remove) memcli's git hooks or Claude Code session hooks."""
    from memcli.agents import hooks

    if target not in ("git", "claude-code"):
        fail("TARGET must be git or claude-code", ExitStatus.USAGE)
    if scope not in ("project", "local", "user"):
        fail("--scope must be project, local or user", ExitStatus.USAGE)
    if not uninstall:  # the store the hooks will write to must exist: installing is the deliberate step
        from memcli.core.discovery import resolve

        where = resolve(state.store_path)
        if where.explicit and not where.path.exists():
            fail(f"no store at {where.path}; create it with `memcli init {where.path}`")
        if Store(where.path).init():
            note(f"created the store {where.path} ({where.why})")
    if target == "git":
        report = hooks.install_git(store=state.store_path, uninstall=uninstall)
    else:
        report = hooks.install_claude_code(scope=scope, store=state.store_path, uninstall=uninstall)
    if as_json:
        emit_json(report.to_dict())
        return
    for n in report.notes:
        note(n)
    verb = "removed from" if uninstall else "installed in"
    if report.changed:
        note(f"{', '.join(report.changed)} {verb} {report.target}")
    if report.unchanged:
        note(f"{', '.join(report.unchanged)} already {'absent' if uninstall else 'up to date'} in {report.target}")


@app.command(epilog=examples("echo 'We pin numpy below 3.' | memcli capture text",
                             "memcli capture git --sha HEAD", "cat hook-input.json | memcli capture claude-code"))
def capture(
    kind: str = typer.Argument(..., metavar="KIND", help="claude-code | git | git-rewrite | text"),
    text: list[str] | None = typer.Argument(None, metavar="[TEXT]...", help="text: the text (default: stdin)."),
    sha: str | None = typer.Option(None, "--sha", metavar="COMMIT", help="git: the commit (default HEAD)."),
    origin: list[str] | None = typer.Option(None, "--origin", metavar="REF", help="text: who vouches (repeatable)."),
    no_redact: bool = typer.Option(False, "--no-redact", help="Do not scrub secrets and personal data."),
    as_json: bool = JSON_FLAG,
) -> None:
    """Spool input from a hook and return at once; a detached worker adds it.

    claude-code reads the hook's JSON on stdin and takes only the transcript lines added since
    the last capture of that session.
    """
    from memcli.agents.capture import CaptureError, run

    data = b""
    if kind in ("claude-code", "git-rewrite") or (kind == "text" and not text):
        data = sys.stdin.buffer.read() if sys.stdin is not None and not sys.stdin.isatty() else b""
    try:
        result = run(kind, store=state.store_path, stdin=data, sha=sha, origins=origin,
                     rewrite=text[0] if kind == "git-rewrite" and text else None,
                     text=" ".join(text) if kind == "text" and text else None, redact=not no_redact)
    except CaptureError as e:
        fail(str(e))
    if as_json:
        emit_json(result.to_dict())
    else:
        note(f"spooled {result.item.name}: {result.reason}" if result.item else f"nothing to spool: {result.reason}")


@app.command(epilog=examples("memcli context", "memcli context 'database migrations' --budget 800",
                             "memcli context --project github.com/acme/ledger"))
def context(
    query: list[str] | None = typer.Argument(None, metavar="[QUERY]...", help="What the session is about."),
    budget: int = typer.Option(1500, "--budget", metavar="TOKENS", min=50,
                               help="At most this many tokens (about 4 characters each)."),
    project: str | None = typer.Option(None, "--project", metavar="NAME",
                                       help="Project (default: this repository's)."),
    hook: bool = typer.Option(False, "--hook", help="As a Claude Code SessionStart hook: read its JSON on "
                              "stdin, never fail the session."),
) -> None:
    """A compact Markdown block of the memories that matter here, for an agent's session start."""
    from memcli.core.config import git_project
    from memcli.ops.context import build

    cwd = None
    if hook:
        try:
            payload = json.loads(sys.stdin.read() or "{}") if sys.stdin is not None and not sys.stdin.isatty() else {}
            cwd = Path(payload["cwd"]) if isinstance(payload, dict) and payload.get("cwd") else None
        except (ValueError, OSError):
            cwd = None
        if cwd is not None and cwd.is_dir():
            os.chdir(cwd)
        from memcli.core.discovery import resolve

        where = resolve(state.store_path)
        if not (where.path / "facts").is_dir():
            return
    try:
        store = synced(get_store())
        text = build(store, " ".join(query or []).strip() or None, project=project or git_project(), budget=budget)
    except Exception:
        if hook:
            return  # a broken memory must not break the agent's session
        raise
    sys.stdout.write(text)


@inbox_app.command("process", epilog=examples("memcli inbox process", "memcli inbox process --json"))
def inbox_process(as_json: bool = JSON_FLAG) -> None:
    """Run spooled inputs (from hooks and capture) through the add pipeline; what fails waits."""
    from memcli.agents.spool import process

    report = process(get_store())
    if as_json:
        emit_json(report.to_dict())
    else:
        if report.busy:
            note("another worker is processing the inbox")
        for d in report.done:
            note(f"{d['file']}: done")
        for w in report.waiting:
            note(f"{w['file']}: waiting: {w['error']}")
        if not (report.done or report.waiting or report.busy):
            note("inbox is empty")
    if report.waiting:
        raise typer.Exit(int(ExitStatus.ERROR))


# ---------------------------------------------------------------- where / sync
@app.command(epilog=examples("memcli where", "memcli where --json | jq -r .store"))
def where(as_json: bool = JSON_FLAG) -> None:
    """The store, project and user a command run here would use, and why."""
    from memcli.core.discovery import where as locate

    info = locate(state.store_path)
    if as_json:
        emit_json(info)
        return
    exists = "" if info["store_exists"] else " (does not exist yet)"
    sys.stdout.write(f"store    {info['store']}{exists}\n         {info['store_why']}\n")
    sys.stdout.write(f"project  {info['project'] or '-'}\n         {info['project_why']}\n")
    sys.stdout.write(f"user     {info['user']}\n         {info['user_why']}\n")


@app.command("sync", epilog=examples("memcli sync", "memcli sync --no-push --json"))
def sync_(
    no_push: bool = typer.Option(False, "--no-push", help="Commit and pull, but do not push."),
    as_json: bool = JSON_FLAG,
) -> None:
    """Share a store committed to git: commit its changes, git pull, re-index, git push."""
    from memcli.agents.sharing import sync

    report = sync(get_store(), push=not no_push)
    if as_json:
        emit_json(report.to_dict())
    else:
        note(f"synced with {report.repository}: {'; '.join(report.steps)}")


# ---------------------------------------------------------------- entry point
def main() -> None:
    """Console entry point: turn library errors into one line on stderr and exit 1."""
    _skip_final_collection()
    debug = "--debug" in sys.argv
    try:
        app()
    except KeyboardInterrupt:
        sys.stderr.write("memcli: interrupted\n")
        sys.exit(ExitStatus.INTERRUPTED)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(ExitStatus.OK)
    except Exception as e:  # a bug: still one line, unless --debug
        if debug:
            raise
        sys.stderr.write(f"memcli: internal error: {type(e).__name__}: {e} (rerun with --debug)\n")
        sys.exit(ExitStatus.ERROR)


def _skip_final_collection() -> None:
    """The process ends with the command: Python's last garbage collection at exit walks every
    object the command made (a consolidate of 10k memories: ~0.35 s of its ~1.7 s) to free memory
    the system takes back anyway. Objects frozen (`gc.freeze`) are left out of that walk.
    Registered before the command runs, the freeze comes after the exit handlers the command's
    own work registers (those of modules imported earlier run after it), and teardown still frees
    what reference counts hold (files flushed and closed, SQLite connections closed); only
    garbage in reference cycles is left to the system. Once per process (tests call main often)."""
    global _final_collection_skipped
    if not _final_collection_skipped:
        atexit.register(gc.freeze)
        _final_collection_skipped = True


_final_collection_skipped = False

if __name__ == "__main__":  # pragma: no cover
    main()
