"""How the command line runs any command: the store it works on, errors as one line on stderr and an
exit status (2 for usage), a damaged index healed and the command run again, progress bars, stdin
read once. Data goes to stdout, messages and progress to stderr.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import re
import sqlite3
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NoReturn

import typer

from memcli.api import Store, read_stream
from memcli.cli import render
from memcli.core.discovery import resolve
from memcli.core.errors import ExitStatus, LLMNotConfigured, MemcliError
from memcli.core.memory import encodable
from memcli.core.notices import drain, notice
from memcli.core.text import snake

# The flag a command adds to LLMNotConfigured's message (the library's messages name no flags)
_NO_LLM_ADVICE = {"add": "or use --no-llm", "merge": "or merge with --no-llm", "ask": "or pass --model"}

try:  # typer >= 0.20 vendors its own click
    from typer import _click as click
except ImportError:  # pragma: no cover - older typer
    import click  # type: ignore[no-redef]


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
    """A template: its options are given to the root and every subcommand (_add_global_params)."""


def _global_params() -> list[Any]:
    """--store and --debug as click parameters, accepted before the subcommand and after it."""
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
    """Give every subcommand the global options (unless it has its own) and plain help (_Command)."""
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
    to after it (before any `--`)."""
    value_opts = {o for p in root.params if not getattr(p, "is_flag", False) for o in getattr(p, "opts", [])}
    i, found = 0, None
    while i < len(args) and args[i] != "--" and args[i].startswith("-"):  # up to the subcommand
        if args[i] == "--json":
            found = i
        i += 2 if args[i] in value_opts else 1
    if found is None or i >= len(args) or args[i] == "--":
        return args
    rest = args[i:]
    cut = rest.index("--") if "--" in rest else len(rest)
    return [*args[:found], *args[found + 1:i], *rest[:cut], "--json", *rest[cut:]]


class Group(typer.core.TyperGroup):
    """The root command: every error rendered the same way whatever the entry point (console script,
    `python -m memcli`, Typer's test runner); exit 1 for errors, 2 for usage, 130 on Ctrl-C."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params[:0] = _global_params()
        _add_global_params(self)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """Each command's first sentence, whole (click cuts it at the column width with "...")."""
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.short_help and cmd.help:
                first = " ".join(cmd.help.strip().split("\n\n")[0].split())
                m = re.match(r"(.+?[.!?])(?:\s|$)", first)
                cmd.short_help = m.group(1) if m else first
        super().format_commands(ctx, formatter)

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        args = list(sys.argv[1:] if args is None else args)
        state.store_path, state.store, state.stdin_text = None, None, None  # per command (tests run many)
        drain()  # notices are per command: none left over from library calls before this one
        # Python hands undecodable argv bytes over as lone surrogates, which no file or JSON can hold
        bad = next((i for i, a in enumerate(args, 1) if isinstance(a, str) and not encodable(a)), None)
        if bad is not None:
            render.error(f"argument {bad} is not valid UTF-8", code=render.USAGE)
            if not standalone_mode:
                return render.USAGE
            sys.exit(render.USAGE)
        args = _hoist_json(args, self)
        state.json_errors = "--json" in (args[: args.index("--")] if "--" in args else args)
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
        """Run the command; if it meets a damaged catalog page that `sync` did not (a search), drop
        the index and run it once more on one rebuilt from facts/ (stdin is kept for that run)."""
        saved = (list(getattr(ctx, "_protected_args", [])), list(ctx.args))  # invoke() consumes them
        try:
            return super().invoke(ctx)
        except sqlite3.DatabaseError as e:
            if state.store is None or state.debug or not state.store.heal(e):
                raise
            ctx._protected_args, ctx.args = saved
            notice("the index catalog was damaged: rebuilt from facts/")
            return super().invoke(ctx)

    def invoke(self, ctx: Any) -> Any:
        try:
            return self._invoke_healing(ctx)
        except BrokenPipeError:  # `memcli export | head -1`: the reader has what it wanted; not an error
            with contextlib.suppress(OSError, ValueError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(render.OK) from None
        except (MemcliError, OSError, sqlite3.Error) as e:
            if state.debug:
                raise
            message, hint, code, kind = _explained(e, ctx.invoked_subcommand)
            render.error(message, hint=hint, code=code, as_json=state.json_errors, kind=kind)
            raise typer.Exit(code) from None
        finally:
            for message in drain():  # repairs made on the way (a damaged index rebuilt, ...)
                note(message)


def _explained(e: BaseException, command: str | None) -> tuple[str, str | None, int, str]:
    """An expected failure as one line, a hint, the exit status and its kind (for --json)."""
    if isinstance(e, MemcliError):
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if isinstance(e, LLMNotConfigured) and command in _NO_LLM_ADVICE:
            msg += f", {_NO_LLM_ADVICE[command]}"
        return msg, e.hint, int(e.exit_status), snake(type(e).__name__)
    if isinstance(e, OSError):  # a full disk, a read-only store, a permission: the system's words
        return f"{e.strerror or e}{f': {e.filename}' if e.filename else ''}", None, render.ERROR, "os_error"
    # sqlite3.Error: the index could not be read or written (disk full, I/O error)
    return f"index: {str(e).splitlines()[0] if str(e) else type(e).__name__}", None, render.ERROR, "index_error"


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


def bad_usage(message: str, hint: str | None = None) -> NoReturn:
    """A command line that asks for something impossible (conflicting flags, an unknown value): exit 2."""
    fail(message, render.USAGE, hint)


def note(message: str) -> None:
    sys.stderr.write(f"memcli: {message}\n")


def respond(as_json: bool, doc: dict[str, Any], lines: Iterable[str] = (), notes: Iterable[str] = (), *,
            failed: bool = False) -> None:
    """How most commands end: the JSON document, or `lines` on stdout and `notes` on stderr; then
    exit 1 if `failed` (after the output, so that a script has both)."""
    if as_json:
        render.emit_json(doc)
    else:
        render.write(lines)
        for message in notes:
            note(message)
    exit_if_failed(failed)


def exit_if_failed(failed: bool) -> None:
    """Exit 1, saying nothing more, when part of the command's work failed (it said what)."""
    if failed:
        raise typer.Exit(render.ERROR)


def piped_stdin() -> Any:
    """Standard input as a binary stream, or no bytes when it is a terminal."""
    return sys.stdin.buffer if sys.stdin is not None and not sys.stdin.isatty() else b""


def llm_progress() -> Any:
    """For a person at a terminal: which request waits on the model (a local one can take a minute),
    then how long it took."""
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


def get_store(*, must_exist: bool = True, create: bool = False, bulk: bool = False, unsafe_ok: bool = False) -> Store:
    """The store this command works on. One named by --store that does not exist is an error (a typo
    must not create a store) unless `create` or a `bulk` load (a restore into a new directory)."""
    if state.store is None:
        where = resolve(state.store_path)
        path = where.path
        store = Store(path)
        store.allow_unsafe = unsafe_ok  # doctor: names and repairs a store holding links out of it
        if must_exist and not store.exists() and not (unsafe_ok and path.is_dir()):
            fail(f"no store at {path} (create one with `memcli init` or `memcli add`)")
        if where.explicit and bulk and not create and not path.exists():
            note(f"creating a new store at {path}")
        elif where.explicit and not create and not path.exists():
            fail(f"no store at {path} (named by {where.why}); create it with `memcli init {path}` "
                 "or `memcli add --create`")
        if not unsafe_ok:
            store.config  # noqa: B018 - a bad config.toml is reported now, by every command alike
        state.store = store
    return state.store


def synced(store: Store) -> Store:
    """Bring the sidecar in step, with a progress bar when it takes long; report bad files once."""
    with progress_bar("indexing") as progress:
        report = store.sync(on_progress=progress)
    if report.rebuilt and report.rebuilt != "reindex requested" and store.count():
        note(f"index rebuilt: {report.rebuilt}")
    for fname, error in report.new_bad:
        note(f"skipping facts/{fname}: {error}")
    return store


@contextlib.contextmanager
def progress_bar(label: str) -> Iterator[Callable[[int, int], None] | None]:
    """A progress callback (done, total) drawing a bar on a terminal's stderr once a job has 200
    steps or more; None when stderr is not a terminal."""
    if not sys.stderr.isatty():
        yield None
        return
    bar: list[Any] = []  # [progress, task], once the job is long enough to show

    def update(done: int, total: int) -> None:
        if not bar:
            if total < 200:
                return
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            progress = Progress(TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(),
                                TimeRemainingColumn(), console=Console(stderr=True), transient=True)
            progress.start()
            bar[:] = [progress, progress.add_task(label, total=total)]
        bar[0].update(bar[1], completed=done, total=total)

    try:
        yield update
    finally:
        if bar:
            bar[0].stop()


def read_text(args: list[str] | None, what: str = "text") -> str:
    """Text from arguments, or stdin when the argument is `-` or absent and stdin is not a terminal."""
    if args and args != ["-"]:
        return " ".join(args)
    if sys.stdin is None or (not args and sys.stdin.isatty()):
        fail(f"no {what} given (pass it as arguments or pipe it on stdin)", ExitStatus.USAGE)
    return read_stdin()


def read_stdin() -> str:
    """All of stdin as text (`read_stream`), read once per command."""
    if state.stdin_text is None:
        state.stdin_text = read_stream(sys.stdin)
    return state.stdin_text


def main(app: Any) -> None:
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
    """Freeze the objects at exit so that Python's last collection does not walk them (the model's
    included) to free memory the system takes back anyway. Registered first, it runs after the
    command's own exit handlers; once per process."""
    global _final_collection_skipped
    if not _final_collection_skipped:
        atexit.register(gc.freeze)
        _final_collection_skipped = True


_final_collection_skipped = False
