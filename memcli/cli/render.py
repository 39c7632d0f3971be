"""How the command line shows things, the same for every command: errors (`memcli: error: ...`, a
`hint:`), JSON documents with a `schema` version, rows that fit the terminal, and memory text printed
literally (never as markup, never cut mid-word).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from memcli.core.errors import ExitStatus
from memcli.core.text import cell_width, clip, head
from memcli.core.vocab import JSON_SCHEMA

if TYPE_CHECKING:
    from memcli.core.memory import Memory


# Exit statuses (README "Exit codes"), as plain ints for sys.exit and JSON.
OK, ERROR, USAGE, INTERRUPTED = (int(s) for s in (ExitStatus.OK, ExitStatus.ERROR, ExitStatus.USAGE,
                                                  ExitStatus.INTERRUPTED))


# ---------------------------------------------------------------- errors
def error(message: str, *, hint: str | None = None, code: int = ERROR, as_json: bool = False,
          kind: str | None = None) -> None:
    """One error on stderr: `memcli: error: ...`, an optional `hint: ...`, and with `as_json` a JSON
    object `{"error", "code", "kind", "hint", "schema"}` as the last line."""
    first = " ".join(message.strip().split("\n")[0].split()) or "unknown error"
    lines = [f"memcli: error: {first}"]
    if hint:
        lines.append(f"hint: {' '.join(hint.split())}")
    if as_json:
        kind = kind or {USAGE: "usage", INTERRUPTED: "interrupted"}.get(code, "error")
        doc: dict[str, Any] = {"schema": JSON_SCHEMA, "error": first, "code": code, "kind": kind}
        if hint:
            doc["hint"] = " ".join(hint.split())
        lines.append(json.dumps(doc, ensure_ascii=False))
    sys.stderr.write("\n".join(lines) + "\n")
    sys.stderr.flush()


def usage_error(message: str, command_path: str | None = None) -> tuple[str, str | None]:
    """A click usage message as one lower-case line and a hint (click's suggestions, or where help is)."""
    msg = " ".join(message.strip().split())
    hint = None
    m = re.search(r"\s*\((?:Possible options|possible options): ([^)]*)\)\.?$", msg)
    if m:
        hint = f"did you mean {m.group(1)}?"
        msg = msg[: m.start()]
    m = re.search(r"\.?\s*Did you mean (.*)\?$", msg)
    if m:
        hint = f"did you mean {m.group(1)}?"
        msg = msg[: m.start()]
    msg = msg.rstrip(".")
    if msg[:1].isupper() and not msg[1:2].isupper():
        msg = msg[0].lower() + msg[1:]
    if hint is None and command_path:
        hint = f"see '{command_path} --help'"
    return msg, hint


# ---------------------------------------------------------------- JSON
def emit_json(data: dict[str, Any]) -> None:
    """One JSON document on stdout, `schema` first."""
    sys.stdout.write(json.dumps({"schema": JSON_SCHEMA, **data}, ensure_ascii=False, indent=1) + "\n")


def json_line(data: dict[str, Any]) -> str:
    """One JSON document on one line (for JSON-lines output)."""
    return json.dumps({"schema": JSON_SCHEMA, **data}, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------- terminal
def terminal_width(default: int = 80) -> int:
    """Columns to fit: $COLUMNS when set (tests, `COLUMNS=120 memcli list`), else the terminal's."""
    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return shutil.get_terminal_size((default, 24)).columns


def screenful() -> int:
    """How many rows a listing shows a person before `… N more` (at least 10)."""
    return max(10, shutil.get_terminal_size((80, 24)).lines - 3)


def write(lines: Iterable[str]) -> None:
    """Lines on stdout, each ending with a new line."""
    sys.stdout.write("".join(f"{line}\n" for line in lines))


def fit(lines: Iterable[str]) -> list[str]:
    """Lines clipped to the terminal's width; piped, whole (for scripts)."""
    width = output_width()
    return [clip(line, width) for line in lines]


def short(text: str, width: int = 160) -> str:
    """Text on one line, cut at `width` characters (not at a word: for notes on stderr)."""
    one = " ".join(text.split())
    return one if len(one) <= width else one[: width - 1] + "…"


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def is_terminal(stream: Any) -> bool:
    """Whether `stream` is a person's terminal rather than a pipe or a file (`MEMCLI_FORCE_TTY=1`
    makes tests see one)."""
    return os.environ.get("MEMCLI_FORCE_TTY") == "1" or _isatty(stream)


def stdout_is_terminal() -> bool:
    return is_terminal(sys.stdout)


def output_width(piped: int = 10_000) -> int:
    """The width to fit on stdout: the terminal's, or `piped` (scripts get whole lines)."""
    return terminal_width() if stdout_is_terminal() else piped


def wrap(text: str, width: int, indent: str = "") -> list[str]:
    """Word-wrap one paragraph into `width` columns, splitting only a word wider than a line."""
    words, lines, line = text.split(), [], ""
    room = max(10, width - cell_width(indent))
    for w in words:
        while cell_width(w) > room:  # a URL or a hash longer than a line: cut it, there is no better place
            if line:
                lines.append(line)
                line = ""
            lines.append(w[:room])
            w = w[room:]
        if not line:
            line = w
        elif cell_width(line) + 1 + cell_width(w) <= room:
            line += " " + w
        else:
            lines.append(line)
            line = w
    if line:
        lines.append(line)
    return [indent + x for x in lines]


_FENCE = re.compile(r"^\s*(```|~~~)")


def blocks(text: str) -> list[tuple[str, str]]:
    """Split Markdown text into ("text", paragraph) and ("code", block) pieces, fences kept in code."""
    out: list[tuple[str, str]] = []
    para: list[str] = []
    code: list[str] | None = None

    def end_paragraph() -> None:
        if para:
            out.append(("text", " ".join(para)))
            para.clear()

    for line in text.splitlines():
        if code is not None:
            code.append(line)
            if _FENCE.match(line):
                out.append(("code", "\n".join(code)))
                code = None
        elif _FENCE.match(line):
            end_paragraph()
            code = [line]
        elif not line.strip():
            end_paragraph()
        else:
            para.append(line.strip())
    if code is not None:
        out.append(("code", "\n".join(code)))
    end_paragraph()
    return out


def body_lines(text: str, width: int, indent: str = "  ", max_lines: int | None = None) -> list[str]:
    """A memory's text for a listing: paragraphs word-wrapped, code blocks kept line by line, clipped."""
    lines: list[str] = []
    for kind, piece in blocks(text):
        if kind == "code":
            lines.extend(indent + "  " + clip_code(x, width - cell_width(indent) - 2) for x in piece.splitlines())
        else:
            lines.extend(wrap(piece, width, indent))
    if max_lines is not None and len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] = clip(lines[-1], width - 1) if not lines[-1].endswith("…") else lines[-1]
        if not lines[-1].endswith("…"):
            lines[-1] += " …"
    return lines


def clip_code(line: str, width: int) -> str:
    """One code line in `width` columns (whitespace kept, cut with `…`)."""
    line = line.rstrip().expandtabs(4)
    return line if cell_width(line) <= width else head(line, width - 1) + "…"


# ---------------------------------------------------------------- numbers
def size(n: int) -> str:
    """Bytes for people: 6.0 kB, 2.31 MB (JSON keeps the number)."""
    return f"{n / 1e6:.2f} MB" if n >= 100_000 else f"{n / 1e3:.1f} kB"


def plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


# ---------------------------------------------------------------- colour
def colour_enabled() -> bool:
    """Colours on a real terminal only, unless NO_COLOR or TERM=dumb."""
    return not (os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb") and _isatty(sys.stdout)


_STYLES = {"dim": "2", "bold": "1", "cyan": "36", "green": "32", "yellow": "33", "red": "31", "magenta": "35"}


def style(text: str, name: str, enabled: bool) -> str:
    """ANSI style around already-clipped text (widths are computed before styling)."""
    return f"\x1b[{_STYLES[name]}m{text}\x1b[0m" if enabled and text else text


# ---------------------------------------------------------------- list
def list_rows(records: Sequence[Memory], width: int, short: dict[str, str], colour: bool = False) -> list[str]:
    """One row per memory in `width` columns: short id, date, type, text clipped at a word, tags;
    its code blocks follow as code, never flattened."""
    if not records:
        return []
    id_w = max(cell_width(short.get(r.id, r.id)) for r in records)
    type_w = max(len(r.type) for r in records)
    fixed = id_w + 2 + 10 + 2 + type_w + 2  # id, date, type and the gaps between them
    room = max(12, width - fixed)
    lines = []
    for r in records:
        pieces = blocks(r.text)
        prose = " ".join(p for k, p in pieces if k == "text")
        code = [p for k, p in pieces if k == "code"]
        if not prose and code:  # a memory that is only code: its first code line stands for it
            prose = next((x.strip() for x in code[0].splitlines() if x.strip() and not _FENCE.match(x)), "(code)")
        tags = " ".join("#" + t for t in r.tags)
        text_room = room
        if tags:
            tag_room = min(cell_width(tags), room // 3)
            tags = clip(tags, tag_room) if tag_room >= 4 else ""
            text_room = room - (cell_width(tags) + 2 if tags else 0)
        text = clip(prose, text_room)
        gap = " " * (text_room - cell_width(text) + 2) if tags else ""
        sid = style(short.get(r.id, r.id).ljust(id_w), "dim", colour)
        row = (f"{sid}  {r.created[:10]:<10}  {r.type:<{type_w}}  "
               f"{text}{gap}{style(tags, 'cyan', colour)}")
        lines.append(row.rstrip())
        indent = " " * fixed
        for block in code[:2]:
            code_lines = block.splitlines()
            shown = code_lines[:6]
            lines.extend((indent + clip_code(x, width - len(indent))).rstrip() for x in shown)
            if len(code_lines) > len(shown):
                lines.append(indent + f"… {len(code_lines) - len(shown)} more lines")
    return lines


def trash_rows(items: Sequence[Any], width: int) -> list[str]:
    """The trash for a person (`Store.trash_listing`): short id, when, why, text, fitted to `width`."""
    id_w = max((len(i.short) for i in items), default=8)
    rows = []
    for i in items:
        head = f"{i.short:<{id_w}}  {i.trashed_at[:16].replace('T', ' ')}  "
        why = clip(i.reason, min(cell_width(i.reason), max(12, (width - len(head)) // 2)))
        rows.append(f"{head}{why}  {clip(i.text, max(8, width - len(head) - cell_width(why) - 2))}")
    return rows


def merge_block(n: int, result: Any, verb: str) -> str:
    """One merged group (`MergeResult`), labelled: its sources, clipped, then the merged text whole."""
    width = output_width(piped=100)
    lines = [f"group {n}: {verb} {len(result.sources)} memories into {result.merged.id} ({result.method})"]
    lines += [f"  from {sid}  {clip(text, max(20, width - 34))}" for sid, text in zip(result.sources, result.texts)]
    return "\n".join([*lines, "  into:", *body_lines(result.merged.text, width, "    ")])


def stats_lines(info: dict[str, Any]) -> list[str]:
    """`Store.stats` one key a line: counts by name, sizes in kB/MB."""
    def shown(key: str, value: Any) -> Any:
        if isinstance(value, list):
            return ", ".join(f"{c['name']} {c['count']}" for c in value) or "-"
        return size(value) if key in ("facts_bytes", "index_bytes") and isinstance(value, int) else value

    return [f"{key:<16} {shown(key, value)}" for key, value in info.items()]


def list_tsv(records: Sequence[Memory]) -> list[str]:
    """The listing for a pipe: full ids, tab-separated, one memory per line (text on one line)."""
    return ["\t".join([r.id, r.created, r.type, " ".join(r.text.split()), ",".join(r.tags)]) for r in records]


# ---------------------------------------------------------------- search
def search_hit(score: float, rec: Memory, short_id: str, width: int, colour: bool = False,
               explain: dict[str, float] | None = None) -> list[str]:
    """One search result: a header line (score, id, type, tags), then the text (`body_lines`)."""
    tags = " ".join("#" + t for t in rec.tags)
    mark = "  superseded" if rec.superseded_by else ""  # an older value, never read as current
    head_plain = f"{score:.3f}  {short_id}  {rec.type}{mark}"
    tags = clip(tags, max(0, width - cell_width(head_plain) - 2)) if tags else ""
    head = (f"{style(f'{score:.3f}', 'bold', colour)}  {style(short_id, 'dim', colour)}  {rec.type}"
            + style(mark, "yellow", colour) + (f"  {style(tags, 'cyan', colour)}" if tags else ""))
    lines = [head, *body_lines(rec.text, width, "  ", max_lines=12)]
    if explain:
        parts = "  ".join(f"{k} {v:.3f}" for k, v in explain.items())
        lines.extend(style(x, "dim", colour) for x in wrap(parts, width, "  "))
    return lines


# ---------------------------------------------------------------- spinner
class Spinner:
    """A spinner on a terminal's stderr while waiting; `wrap(iterator)` clears it at the first item."""

    FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"

    def __init__(self, label: str, interval: float = 0.1) -> None:
        self.label = label
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if is_terminal(sys.stderr):
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()

    def _run(self) -> None:
        n = 0
        while True:
            sys.stderr.write(f"\r{self.FRAMES[n % len(self.FRAMES)]} {self.label}…")
            sys.stderr.flush()
            n += 1
            if self._stop.wait(self.interval):
                break
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None

    def wrap(self, items: Iterable[Any]) -> Iterator[Any]:
        try:
            for item in items:
                self.stop()
                yield item
        finally:
            self.stop()


# ---------------------------------------------------------------- the change log
def describe(entry: dict[str, Any]) -> str:
    """What an entry says, in words: the reason, the text, the old text, the origin..."""
    event = str(entry.get("event", ""))
    parts = []
    if entry.get("reason"):
        parts.append(str(entry["reason"]))
    if event == "UPDATE" and entry.get("old"):
        parts.append(f"was: {entry['old']}")
    if entry.get("text"):
        parts.append(str(entry["text"]))
    elif entry.get("old") and event != "UPDATE":
        parts.append(str(entry["old"]))
    parts += [f"{key}: {', '.join(map(str, entry[key]))}" for key in ("sources", "ids") if entry.get(key)]
    parts += [str(entry[key]) for key in ("detail", "file") if entry.get(key)]
    origin = entry.get("origin")
    if origin:
        parts.append("from " + (", ".join(origin) if isinstance(origin, list) else str(origin)))
    return " · ".join(" ".join(p.split()) for p in parts)


def chain_lines(steps: Sequence[dict[str, Any]], current: str) -> list[str]:
    """A memory's versions (`Store.history`), one line each, the memory itself marked `*`."""
    return [f"{'*' if s['id'] == current and s.get('current', True) else ' '} {s['at'] or '-':<20} "
            f"{s['event']:<10} {s['id']}  {clip(s['text'], 90)}" for s in steps]


def log_line(entry: dict[str, Any], width: int | None, short_id: str | None = None) -> str:
    """One entry on one line: when, event, id, what (clipped to `width` columns if given)."""
    at = str(entry.get("at") or "")[:16].replace("T", " ")
    mid = short_id or str(entry.get("id") or "-")
    head = f"{at:<16}  {str(entry.get('event', '')):<12}  {mid}  "
    what = describe(entry)
    if width is None:
        return head + what
    return head + clip(what, max(10, width - cell_width(head)))


# ---------------------------------------------------------------- add
_EVENT_COLOURS = {"ADD": "green", "UPDATE": "yellow", "DELETE": "red", "NONE": "dim"}


def add_lines(result: Any, shorts: dict[str, str], *, verbose: bool = False) -> list[str]:
    """An `AddResult`, one line per fact: event, id (short if in `shorts`), text; then what it was
    decided against and why."""
    colour = colour_enabled()
    room = max(20, output_width() - 34)
    id_w = max((len(v) for v in shorts.values()), default=26) if shorts else 26
    pad = f"{'':<6} {'':<{id_w}} "
    out: list[str] = []

    def dim(text: str) -> str:
        return style(clip(text, room), "dim", colour)

    for e in result.events:
        shown = shorts.get(e.id or "") or e.id or "-"
        if e.verdict == "invalid" and not e.refused:
            out.append(f"{style('INVALID', 'magenta', colour)} {shown:<{id_w}} "
                       f"{clip(e.text or '', room // 2)} ({clip(e.reasoning or '', room // 2)})")
            continue
        mark = " (refused: use --allow-delete)" if e.refused else ""
        out.append(f"{style(f'{e.event:<6}', _EVENT_COLOURS.get(e.event, 'dim'), colour)} {shown:<{id_w}} "
                   f"{clip(e.text, room - len(mark))}{mark}")
        if e.old_memory is not None and e.event == "UPDATE":
            out.append(pad + dim(f"was: {e.old_memory}"))
        if e.supersedes:
            out.append(pad + dim(f"supersedes {shorts.get(e.supersedes, e.supersedes)}: "
                                 f"{clip(e.old_memory or '', 70)} ({e.reasoning or ''})"))
        elif e.matched and e.event in ("NONE", "UPDATE"):
            out.append(pad + dim(f"matched {e.matched['id']}: {e.reasoning or ''}"))
        elif e.related:
            out.append(pad + dim(f"related to {e.related}: {e.reasoning or ''}"))
    if verbose:
        for piece in result.extraction.skipped_pieces:
            out.append(f"{style('SKIP  ', 'dim', colour)} {piece['rule']:<26} {clip(piece['text'], room)}")
    return out


def add_summary(result: Any, dry_run: bool) -> str:
    """What an add did, in one line: facts extracted and skipped, then each decision's count."""
    s = result.summary()
    ex = result.extraction
    refused = sum(1 for e in result.events if e.refused)
    invalid = s["invalid"] - refused
    superseded = sum(1 for e in result.events if e.supersedes)
    return (f"{len(ex.facts)} fact(s) extracted, {ex.skipped} skipped: {s['ADD']} added"
            + (f" ({superseded} superseding an older one)" if superseded else "") + f", {s['UPDATE']} updated, "
            f"{s['already_known']} known, {s['DELETE'] - refused} deleted"
            + (f", {refused} delete(s) refused" if refused else "")
            + (f", {invalid} invalid" if invalid else "")
            + (" (dry run, nothing written)" if dry_run else ""))
