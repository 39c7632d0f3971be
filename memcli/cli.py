"""The command line: parse, call the library, print. No logic of its own lives here.

Data goes to stdout (rich text for people, one JSON document with `--json`); messages and
progress go to stderr. Errors are one line on stderr and exit 1 (`--debug` shows the traceback);
usage errors exit 2.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

import typer

from memcli import __version__
from memcli.config import ConfigError, resolve_store
from memcli.index import Filters
from memcli.store import Store, StoreError


class _Group(typer.core.TyperGroup):
    """Turns the library's expected errors into one line on stderr and exit 1, for every entry
    point (console script, `python -m memcli`, Typer's test runner)."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except _expected_errors() as e:
            if state.debug:
                raise
            msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            sys.stderr.write(f"memcli: error: {msg}\n")
            raise typer.Exit(1) from None


def _expected_errors() -> tuple[type[BaseException], ...]:
    from memcli.embed import EmbedError

    errors: tuple[type[BaseException], ...] = (StoreError, ConfigError, EmbedError)
    if "memcli.llm" in sys.modules:  # only loaded on LLM paths; never import it just for this
        errors = (*errors, sys.modules["memcli.llm"].LLMError)
    return errors


app = typer.Typer(
    cls=_Group,
    name="memcli",
    help="Local-first long-term memory for developers and AI coding agents.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
inbox_app = typer.Typer(help="Inputs parked when the LLM was unreachable.", invoke_without_command=True)
app.add_typer(inbox_app, name="inbox")


class _State:
    store_path: str | None = None
    debug: bool = False
    store: Store | None = None


state = _State()


# ---------------------------------------------------------------- helpers
def fail(message: str, code: int = 1) -> NoReturn:
    sys.stderr.write(f"memcli: error: {message}\n")
    raise typer.Exit(code)


def note(message: str) -> None:
    sys.stderr.write(f"memcli: {message}\n")


def get_store(*, must_exist: bool = True) -> Store:
    if state.store is None:
        path = resolve_store(state.store_path)
        store = Store(path)
        if must_exist and not store.exists():
            fail(f"no store at {path} (create one with `memcli init` or `memcli add`)")
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
    from memcli.ingest import read_input

    if args and args != ["-"]:
        return " ".join(args)
    if sys.stdin is None or (not args and sys.stdin.isatty()):
        fail(f"no {what} given (pass it as arguments or pipe it on stdin)", 2)
    data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
    return read_input(data, "stdin")


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=1) + "\n")


def console() -> Any:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


def short(text: str, width: int = 160) -> str:
    one = " ".join(text.split())
    return one if len(one) <= width else one[: width - 1] + "…"


def make_filters(tag: list[str] | None, type_: str | None, user: str | None, project: str | None,
                 since: str | None, until: str | None) -> Filters:
    from memcli.config import git_project
    from memcli.memory import parse_when

    if project == ".":
        project = git_project()
        if project is None:
            fail("--project . needs a git repository")
    try:
        return Filters(
            tags=tuple(tag or ()), type=type_, user=user, project=project,
            since=parse_when(since) if since else None, until=parse_when(until, end=True) if until else None,
        )
    except ValueError as e:
        fail(str(e), 2)


def resolve_ids(store: Store, ids: list[str], *, trash: bool = False) -> list[str]:
    out = []
    for i in ids:
        if trash:
            out.append(i)
            continue
        full = store.index.resolve_id(i)
        if full is None:
            fail(f"no memory with id {i}")
        out.append(full)
    return out


# ---------------------------------------------------------------- global options
def _version(value: bool) -> None:
    if value:
        print(f"memcli {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    store: str | None = typer.Option(None, "--store", "-s", help="Store directory (default: $MEMCLI_STORE, "
                                        "the nearest .memcli/, or ~/.local/share/memcli).", envvar=None),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks on errors."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    state.store_path = store
    state.debug = debug
    state.store = None


# ---------------------------------------------------------------- init
@app.command()
def init(directory: Path | None = typer.Argument(None, help="Where (default: ./.memcli).")) -> None:
    """Create a store (a project store in ./.memcli by default)."""
    path = directory or (Path(state.store_path) if state.store_path else Path.cwd() / ".memcli")
    store = Store(path)
    created = store.init()
    note(f"{'created' if created else 'store already exists at'} {store.path}")


# ---------------------------------------------------------------- add
@app.command()
def add(
    text: list[str] | None = typer.Argument(None, help="Text to remember; `-` or nothing reads stdin."),
    raw: bool = typer.Option(False, "--raw", help="Store the text as one memory, no extraction."),
    no_llm: bool = typer.Option(False, "--no-llm", help="Use the heuristic extractor even if an LLM is set."),
    use_llm: bool = typer.Option(False, "--llm", help="Require the LLM (error if none is configured)."),
    model: str | None = typer.Option(None, "--model", help="LLM model for this call (litellm string)."),
    tag: list[str] | None = typer.Option(None, "--tag", "-t", help="Tag (repeatable)."),
    type_: str | None = typer.Option(None, "--type", help="semantic | episodic | procedural."),
    origin: list[str] | None = typer.Option(None, "--origin", help="Who vouches: git:SHA, session:ID ..."),
    user: str | None = typer.Option(None, "--user"),
    project: str | None = typer.Option(None, "--project"),
    session: str | None = typer.Option(None, "--session", help="Session id (adds origin session:ID)."),
    threshold: float | None = typer.Option(None, "--threshold", min=0.0, max=1.0,
                                              help="Similarity at which a fact counts as known (0.85)."),
    allow_delete: bool = typer.Option(False, "--allow-delete", help="Let the LLM's DELETE decisions apply."),
    no_redact: bool = typer.Option(False, "--no-redact", help="Do not scrub secrets and personal data."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Decide, report, write nothing."),
    as_json: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """Turn text (a conversation, a note, a commit message) into memories."""
    if no_llm and (use_llm or model):
        fail("--no-llm conflicts with --llm/--model", 2)
    body = read_text(text)
    store = get_store(must_exist=False)
    if model:
        store.config = store.config.with_overrides(llm_model=model)
    if not dry_run:
        store.ensure()
    result = store.add(
        body, raw=raw, llm=False if no_llm else (True if use_llm or model else None), tags=tag or (),
        type=type_, origins=origin or (), user=user, project=project, session=session, threshold=threshold,
        allow_delete=allow_delete, dry_run=dry_run, redact=not no_redact,
    )
    if result.extraction.note:
        note(result.extraction.note)
    if as_json:
        emit_json(result.to_dict())
    else:
        out = console()
        colours = {"ADD": "green", "UPDATE": "yellow", "DELETE": "red", "NONE": "dim"}
        for e in result.events:
            mark = " (refused)" if e.event == "DELETE" and e.verdict == "invalid" else ""
            out.print(f"[{colours.get(e.event, '')}]{e.event:<6}[/] {(e.id or '-'):<26} {short(e.text, 100)}{mark}",
                      markup=True)
        s = result.summary()
        ex = result.extraction
        note(f"{len(ex.facts)} fact(s) extracted, {ex.skipped} skipped: {s['ADD']} added, {s['UPDATE']} updated, "
             f"{s['NONE']} known, {s['DELETE']} deleted{' (dry run, nothing written)' if dry_run else ''}")
    if result.failed:
        raise typer.Exit(1)


# ---------------------------------------------------------------- search
@app.command()
def search(
    query: list[str] | None = typer.Argument(None, help="What to look for."),
    top_k: int = typer.Option(5, "--top-k", "-k", min=1, max=50, help="How many results (1-50)."),
    threshold: float | None = typer.Option(None, "--threshold", min=0.0, max=1.0,
                                              help="Minimum similarity (default 0.3)."),
    tag: list[str] | None = typer.Option(None, "--tag", "-t", help="Only memories with this tag (repeatable)."),
    type_: str | None = typer.Option(None, "--type"),
    user: str | None = typer.Option(None, "--user"),
    project: str | None = typer.Option(None, "--project", help="Project name, or `.` for this repository."),
    since: str | None = typer.Option(None, "--since", help="ISO date or age: 2026-01-01, 7d, 2w, 3m, 1y."),
    until: str | None = typer.Option(None, "--until"),
    explain: bool = typer.Option(False, "--explain", help="Show each part of the score."),
    batch: bool = typer.Option(False, "--batch", help="Queries on stdin, one per line; JSON lines out."),
    as_json: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """Ranked memories for a query (meaning + keywords + recency + reliability, diversified)."""
    from memcli.search import search_many

    store = get_store()
    filters = make_filters(tag, type_, user, project, since, until)
    if batch:
        if query:
            fail("--batch reads queries from stdin; do not pass a query too", 2)
        queries = [q.strip() for q in sys.stdin.read().splitlines() if q.strip()]
    else:
        q = " ".join(query or []).strip()
        if not q or q == "-":
            q = read_text(None if not query else ["-"], "query").strip()
        if not q:
            fail("empty query", 2)
        queries = [q]
    synced(store)
    responses = search_many(store, queries, k=top_k, threshold=threshold, filters=filters)
    if batch:
        for r in responses:
            sys.stdout.write(json.dumps({"query": r.query, "results": [h.to_dict(explain) for h in r.hits],
                                         "metadata": r.metadata}, ensure_ascii=False) + "\n")
        return
    r = responses[0]
    if as_json:
        emit_json({"query": r.query, "results": [h.to_dict(explain) for h in r.hits], "metadata": r.metadata})
        return
    out = console()
    if not r.hits:
        note("no matching memories")
        return
    for h in r.hits:
        rec = h.record
        tags = f" [cyan]{' '.join('#' + t for t in rec.get('tags') or [])}[/]" if rec.get("tags") else ""
        out.print(f"[bold]{h.score:.3f}[/] [dim]{rec['id']}[/] {rec.get('type', '')}{tags}", markup=True)
        out.print("  " + short(rec["text"], 300), markup=False)
        if explain:
            p = h.parts
            out.print(f"  [dim]similarity {p['similarity']:.3f}  keyword {p['keyword']:.3f}  recency "
                      f"{p['recency']:.3f}  reliability {p['reliability']:.3f}[/]", markup=True)


# ---------------------------------------------------------------- show / list
@app.command()
def show(
    memory_id: str = typer.Argument(..., metavar="ID", help="A memory id (a unique prefix is enough)."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """One memory, as stored."""
    store = synced(get_store())
    (mid,) = resolve_ids(store, [memory_id])
    memory = store.read(mid)
    if as_json:
        emit_json(memory.to_dict())
    else:
        sys.stdout.write(memory.to_markdown())


@app.command("list")
def list_(
    tag: list[str] | None = typer.Option(None, "--tag", "-t"),
    type_: str | None = typer.Option(None, "--type"),
    user: str | None = typer.Option(None, "--user"),
    project: str | None = typer.Option(None, "--project"),
    since: str | None = typer.Option(None, "--since"),
    until: str | None = typer.Option(None, "--until"),
    sort: str = typer.Option("created", "--sort", help="created | updated | confidence | id | type; "
                             "prefix with - for descending."),
    limit: int | None = typer.Option(None, "--limit", "-n", min=1),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """A filtered listing of memories."""
    store = synced(get_store())
    filters = make_filters(tag, type_, user, project, since, until)
    desc = sort.startswith("-")
    records = store.index.select(filters, order=sort.lstrip("-"), limit=limit, desc=desc)
    if as_json:
        emit_json(records)
        return
    out = console()
    for rec in records:
        tags = " ".join("#" + t for t in rec.get("tags") or [])
        out.print(f"[dim]{rec['id']}[/] {rec.get('created', '')[:10]} {rec.get('type', ''):<10} "
                  f"{short(rec['text'], 90)} [cyan]{tags}[/]", markup=True)
    note(f"{len(records)} memor{'y' if len(records) == 1 else 'ies'}")


# ---------------------------------------------------------------- rm / restore
@app.command()
def rm(
    ids: list[str] = typer.Argument(..., metavar="ID...", help="Memories to move to the trash."),
    reason: str = typer.Option("removed by user", "--reason"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Move memories to the trash (`memcli restore` brings them back)."""
    store = synced(get_store())
    full = resolve_ids(store, ids)
    with store.lock():
        done = [store.trash(mid, reason, event="RM").id for mid in full]
        store.index.sync()
    if as_json:
        emit_json({"trashed": done})
    else:
        for mid in done:
            note(f"trashed {mid}")


@app.command()
def restore(
    ids: list[str] = typer.Argument(..., metavar="ID..."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Bring memories back from the trash."""
    store = get_store()
    with store.lock():
        done = [store.restore(mid).id for mid in ids]
        synced(store)
    if as_json:
        emit_json({"restored": done})
    else:
        for mid in done:
            note(f"restored {mid}")


# ---------------------------------------------------------------- export / import
@app.command("export")
def export_(
    fmt: str = typer.Option("json", "--format", "-f", help="json | jsonl | md | csv"),
    output: Path | None = typer.Option(None, "--output", "-o", help="File (default: stdout)."),
    tag: list[str] | None = typer.Option(None, "--tag", "-t"),
    type_: str | None = typer.Option(None, "--type"),
    user: str | None = typer.Option(None, "--user"),
    project: str | None = typer.Option(None, "--project"),
    since: str | None = typer.Option(None, "--since"),
    until: str | None = typer.Option(None, "--until"),
) -> None:
    """Write memories as json, jsonl, md or csv."""
    from memcli.io import FORMATS, export

    if fmt not in FORMATS:
        fail(f"--format must be one of {', '.join(FORMATS)}", 2)
    store = synced(get_store())
    records = store.index.select(make_filters(tag, type_, user, project, since, until), order="id")
    data = export(records, fmt)
    if output is None or str(output) == "-":
        sys.stdout.write(data)
    else:
        from memcli.store import atomic_write

        try:
            atomic_write(output.absolute(), data.encode("utf-8"))
        except OSError as e:
            fail(f"cannot write {output}: {e.strerror}")
        note(f"exported {len(records)} memories to {output}")


@app.command("import")
def import_(
    file: str = typer.Argument(..., metavar="FILE", help="json or jsonl file (export's format); `-` for stdin."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Load records (text required; id, type, tags, created, origins... optional). No extraction."""
    from memcli.ingest import read_input
    from memcli.io import import_memories, parse_records, to_memories

    if file == "-":
        name, data = "stdin", sys.stdin.buffer.read()
    else:
        name = file
        try:
            data = Path(file).read_bytes()
        except OSError as e:
            fail(f"cannot read {file}: {e.strerror}")
    text = read_input(data, name)
    memories = to_memories(parse_records(text, name), name, f"import:{Path(name).name}")
    store = get_store(must_exist=False)
    store.ensure()
    synced(store)
    bar = _progress("importing")
    try:
        report = import_memories(store, memories, on_progress=bar.update if bar else None)
    finally:
        if bar:
            bar.close()
    if as_json:
        emit_json(report.to_dict())
    else:
        note(f"imported {report.added} new, {report.updated} updated, {report.unchanged} unchanged")


# ---------------------------------------------------------------- reindex / stats / doctor
@app.command()
def reindex(as_json: bool = typer.Option(False, "--json")) -> None:
    """Rebuild the sidecar (.index/) from facts/; embeddings come from the cache where possible."""
    store = get_store()
    bar = _progress("reindexing") or None
    report = store.index.sync(on_progress=bar.update if bar else None, force=True)
    if bar:
        bar.close()
    for fname, error in report.new_bad:
        note(f"skipping facts/{fname}: {error}")
    info = {"memories": store.index.count(), "embedded": report.embedded, "skipped_files": len(report.new_bad)}
    if as_json:
        emit_json(info)
    else:
        note(f"reindexed {info['memories']} memories ({info['embedded']} embedded, the rest from cache)")


@app.command()
def stats(as_json: bool = typer.Option(False, "--json")) -> None:
    """Counts and sizes."""
    from memcli.admin import stats as compute

    info = compute(synced(get_store()))
    if as_json:
        emit_json(info)
        return
    out = console()
    for key, value in info.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items()) or "-"
        out.print(f"[bold]{key:<16}[/] {value}", markup=True)


@app.command()
def doctor(as_json: bool = typer.Option(False, "--json")) -> None:
    """Check config, model, LLM reachability and index consistency; list malformed files."""
    from memcli.admin import doctor as check

    store = get_store()
    checks = check(store)
    ok = all(c["ok"] for c in checks)
    if as_json:
        emit_json({"ok": ok, "checks": checks})
    else:
        out = console()
        for c in checks:
            mark = "[green]ok[/]  " if c["ok"] else "[red]FAIL[/]"
            out.print(f"{mark} {c['check']}: {c['detail']}", markup=True)
    if not ok:
        raise typer.Exit(1)


# ---------------------------------------------------------------- curation
@app.command()
def merge(
    ids: list[str] | None = typer.Argument(None, metavar="ID...", help="Memories to merge into one."),
    auto: bool = typer.Option(False, "--auto", help="Merge every group of memories above --threshold."),
    threshold: float = typer.Option(0.9, "--threshold", min=0.0, max=1.0, help="Similarity for --auto groups."),
    no_llm: bool = typer.Option(False, "--no-llm", help="Heuristic merge even if an LLM is configured."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would be merged."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Merge memories into one (LLM merge prompt, or a heuristic merge); originals go to the trash."""
    from memcli.curate import merge as do_merge
    from memcli.curate import similar_groups

    store = synced(get_store())
    if auto == bool(ids):
        fail("give two or more IDs, or --auto", 2)
    groups = similar_groups(store, threshold) if auto else [resolve_ids(store, ids or [])]
    results = []
    for group in groups:
        if len(set(group)) < 2:
            fail("merge needs at least two different memories", 2)
        results.append(do_merge(store, group, use_llm=False if no_llm else None, dry_run=dry_run))
    if as_json:
        emit_json({"merged": [r.to_dict() for r in results], "dry_run": dry_run})
        return
    for r in results:
        note(f"{'would merge' if dry_run else 'merged'} {', '.join(r.sources)} -> {r.merged.id} ({r.method})")
        if dry_run or len(results) == 1:
            sys.stdout.write(r.merged.text.rstrip() + "\n")
    if not results:
        note("nothing to merge")


@app.command()
def prune(
    older_than: str | None = typer.Option(None, "--older-than", help="Age or date: 90d, 6m, 2026-01-01."),
    unused: bool = typer.Option(False, "--unused", help="Never returned by a search."),
    min_confidence: float | None = typer.Option(None, "--min-confidence", min=0.0, max=1.0,
                                                   help="Trash memories below this confidence."),
    type_: str | None = typer.Option(None, "--type"),
    dry_run: bool = typer.Option(False, "--dry-run"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Move stale memories to the trash (criteria combine with AND)."""
    from memcli.curate import prune as do_prune
    from memcli.memory import parse_when

    store = synced(get_store())
    try:
        cutoff = parse_when(older_than) if older_than else None
    except ValueError as e:
        fail(str(e), 2)
    result = do_prune(store, older_than=cutoff, unused=unused, min_confidence=min_confidence, type=type_,
                      dry_run=dry_run)
    if as_json:
        emit_json({**result.to_dict(), "dry_run": dry_run})
        return
    for r in result.trashed:
        sys.stdout.write(f"{r['id']}  {short(r['text'], 80)}  ({r['_reason']})\n")
    note(f"{'would trash' if dry_run else 'trashed'} {len(result.trashed)} memories")


@app.command()
def rollback(
    origin: str = typer.Argument(..., help="An origin: git:SHA, session:ID, import:FILE, cli ..."),
    dry_run: bool = typer.Option(False, "--dry-run"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Undo what one origin contributed: memories only it vouched for go to the trash."""
    from memcli.curate import rollback as do_rollback

    store = synced(get_store())
    result = do_rollback(store, origin, dry_run=dry_run)
    if as_json:
        emit_json({**result.to_dict(), "dry_run": dry_run})
        return
    note(f"{'would trash' if dry_run else 'trashed'} {len(result.trashed)}, "
         f"{'would detach' if dry_run else 'detached'} {origin} from {len(result.detached)}")


# ---------------------------------------------------------------- ask
@app.command()
def ask(
    question: list[str] | None = typer.Argument(None, help="A question to answer from memory."),
    top_k: int = typer.Option(8, "--top-k", "-k", min=1, max=50, help="Memories to give the model."),
    model: str | None = typer.Option(None, "--model", help="LLM model for this call (litellm string)."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Answer a question from the top memories with the LLM, citing memory ids (streamed)."""
    from memcli.search import search_many

    q = read_text(question, "question").strip()
    store = synced(get_store())
    if model:
        store.config = store.config.with_overrides(llm_model=model)
    hits = search_many(store, [q], k=top_k)[0].hits
    records = [h.to_dict() for h in hits]
    if not store.config.llm_model:
        if as_json:
            emit_json({"question": q, "answer": None, "error": "no LLM configured", "memories": records})
        else:
            note("no LLM configured (set MEMCLI_LLM_MODEL); the memories that match:")
            for h in hits:
                sys.stdout.write(f"[{h.id}] {short(h.record['text'], 300)}\n")
        return
    from memcli.ingest import llm_client

    client = llm_client(store)
    stream = client.answer(q, [h.record for h in hits])
    if as_json:
        emit_json({"question": q, "answer": "".join(stream).strip(), "memories": records})
        return
    for piece in stream:
        sys.stdout.write(piece)
        sys.stdout.flush()
    sys.stdout.write("\n")


# ---------------------------------------------------------------- inbox
@inbox_app.callback()
def inbox(ctx: typer.Context, as_json: bool = typer.Option(False, "--json")) -> None:
    """List inputs saved when the LLM was unreachable (`memcli inbox retry` replays them)."""
    if ctx.invoked_subcommand is not None:
        return
    from memcli.ingest import inbox_items

    items = inbox_items(get_store())
    if as_json:
        emit_json([{"file": p.name, "at": i.get("at"), "error": i.get("error"), "text": i.get("text")}
                   for p, i in items])
        return
    for p, i in items:
        sys.stdout.write(f"{p.stem}  {i.get('at', '')}  {short(i.get('text', ''), 70)}  [{i.get('error', '')}]\n")
    note(f"{len(items)} pending input(s)")


@inbox_app.command("retry")
def inbox_retry(as_json: bool = typer.Option(False, "--json")) -> None:
    """Replay parked inputs through the LLM pipeline; each success leaves the inbox."""
    from memcli.ingest import AddResult, retry_inbox

    results = retry_inbox(get_store())
    ok = all(isinstance(r, AddResult) for _, r in results)
    if as_json:
        emit_json([{"file": f, "ok": isinstance(r, AddResult), **({"result": r.to_dict()} if isinstance(r, AddResult)
                    else {"error": r})} for f, r in results])
    else:
        for f, r in results:
            if isinstance(r, AddResult):
                s = r.summary()
                note(f"{f}: done ({s['ADD']} added, {s['UPDATE']} updated, {s['NONE']} known)")
            else:
                note(f"{f}: still failing: {r}")
        if not results:
            note("inbox is empty")
    if not ok:
        raise typer.Exit(1)


# ---------------------------------------------------------------- entry point
def main() -> None:
    """Console entry point: turn library errors into one line on stderr and exit 1."""
    debug = "--debug" in sys.argv
    try:
        app()
    except KeyboardInterrupt:
        sys.stderr.write("memcli: interrupted\n")
        sys.exit(130)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    except Exception as e:  # a bug: still one line, unless --debug
        if debug:
            raise
        sys.stderr.write(f"memcli: internal error: {type(e).__name__}: {e} (rerun with --debug)\n")
        sys.exit(1)


if __name__ == "__main__":  # pragma: no cover
    main()
