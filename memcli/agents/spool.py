"""Never block a caller on a slow model: spool the input, return, let a detached worker do the work.

`spool()` writes one JSON item to `<store>/inbox/` atomically and returns; `start_worker()` launches
a detached `python -m memcli.agents.spool` that runs `process()`: each item goes through the add
pipeline and leaves the inbox only once it landed. When the LLM is unreachable the item stays, with
its error and attempt count, for the next worker. One worker runs at a time (`inbox/.worker.lock`)
and each item is `flock`ed while processed, so no item is added twice. Items carry `kind`: "add"
(default), "remap" (a git rewrite) or "session". Only the standard library is imported at the top:
hooks call `spool()` and `start_worker()` on a tight time budget.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sys
import time
from pathlib import Path

from memcli.services.detached import ERROR_LOG, REFRESH_FAILED, background_on, refresh_failed_recently
from memcli.storage.atomic import atomic_write
from memcli.storage.inbox import inbox_dir, inputs, park, pending, write_item
from memcli.storage.inbox import now as _now
from memcli.storage.locks import item_lock
from memcli.storage.locks import try_lock as _try_lock

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: a hook must not pay for importing typing

if TYPE_CHECKING:
    from typing import Any

    from memcli.ops.handle import Store

WORKER_LOCK = ".worker.lock"


class CaptureError(Exception):
    """No store to capture into, or unusable hook input; one line, recorded, never fatal to the host."""


def spool(store_path: str | os.PathLike[str], text: str, options: dict[str, Any] | None = None, *,
          kind: str = "add", source: str | None = None) -> Path:
    """Park one input in `<store>/inbox/` for the worker; returns the item's path.

    `text` should already be redacted (the caller knows whether the user opted out); `options`
    are `memcli.ops.add.add` keyword arguments (tags, type, origins, session, raw, project, user...).
    The store must exist: a hook never creates one.
    """
    from memcli.storage.safety import ensure_contained

    store_path = Path(store_path)
    ensure_contained(store_path)  # a clone's planted `inbox -> ~/x` is refused, never written through
    if not (store_path / "facts").is_dir():
        raise FileNotFoundError(errno.ENOENT, "no memcli store", str(store_path))
    # a remap is not an input to add: `.remap`, so `memcli inbox` / `inbox retry` never replay it
    return park(store_path, text, options or {}, kind=kind, source=source)


def record_failure(store_path: str | os.PathLike[str], message: str) -> None:
    """Append one line to `<store>/inbox/errors.log`: a hook must never print into its host's
    output, and must never fail silently either."""
    from memcli.storage.safety import open_no_follow, unsafe_entries

    def append(path: Path, line: str) -> None:
        with os.fdopen(open_no_follow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "a") as f:
            f.write(line)

    line = f"{_now()} {' '.join(message.split())}"
    try:  # the store's own log, never through a planted link; else the user's cache (issue 24)
        if unsafe_entries(Path(store_path)):
            raise OSError(errno.ELOOP, "store holds a link")
        d = inbox_dir(Path(store_path))
        d.mkdir(exist_ok=True)
        append(d / ERROR_LOG, f"{line}\n")
        return
    except OSError:
        pass
    with contextlib.suppress(OSError):
        base = os.environ.get("MEMCLI_CACHE_DIR") or os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "memcli")
        os.makedirs(base, mode=0o700, exist_ok=True)
        append(Path(base) / "hook-errors.log", f"{line} (store {store_path})\n")


def start_worker(store_path: str | os.PathLike[str]) -> None:
    """Launch a detached worker (`python -m memcli.agents.spool --store STORE`) and return at once:
    the caller does not wait for it, and nothing it prints reaches the caller's output."""
    from memcli.services.detached import start_worker as launch

    launch(store_path)


def queue_add(store_path: str | os.PathLike[str], text: str, options: dict[str, Any] | None = None, *,
              redact: bool = True, source: str | None = None) -> Path:
    """Redact `text` (unless the user opted out), spool it and start a worker: what a caller that
    must not wait for a model does (MCP `remember`, `memcli add` from a hook). Returns the item."""
    if redact:
        from memcli.services.redact import redact as scrub

        text = scrub(text)[0]
    options = {"cwd": os.getcwd(), **(options or {})}
    path = spool(store_path, text, options, source=source)
    start_worker(store_path)
    return path


# ------------------------------------------------------------------------------------- the worker
class ProcessReport:
    """What one `process()` run did, item by item."""

    def __init__(self) -> None:
        self.done: list[dict[str, Any]] = []  # {file, summary}
        self.waiting: list[dict[str, Any]] = []  # {file, error}: kept for the next run
        self.skipped = 0  # items another worker holds
        self.busy = False  # another worker is running; this one did nothing

    def to_dict(self) -> dict[str, Any]:
        return {"done": self.done, "waiting": self.waiting, "skipped": self.skipped, "busy": self.busy}


RETRY_AFTER = 60.0  # seconds: while the LLM was found down this recently, hooks' workers do not retry it


def _llm_down_recently(paths: list[Path]) -> bool:
    """An item failed on the LLM less than RETRY_AFTER ago: commits made during an outage then do
    not each pay for an LLM client's import and a refused connection; `memcli inbox process` does."""
    now = time.time()
    for p in paths:
        if p.suffix != ".json":
            continue
        try:
            item = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(item, dict) or not item.get("llm_down"):
            continue
        if now - float(item.get("last_attempt_ts") or 0) < RETRY_AFTER:
            return True
    return False


def process(store: Store, *, stop_on_llm_error: bool = True, held: int | None = None,
            force: bool = True, wait: float = 0) -> ProcessReport:
    """Run every inbox item through the add pipeline (or the origin remap), oldest first.

    Only one worker runs at a time (`busy` when another does). An item leaves the inbox when it
    landed; one that fails stays with its error and attempt count. When the LLM is unreachable
    the run stops there (the following items would fail the same way): they wait for the next run.
    `held`: the worker lock's fd when the caller took it already (it is released here). `wait`:
    seconds to wait for a running worker first (`memcli inbox process` is asked to empty the
    inbox, so it waits for a hook's worker rather than report it busy).
    """
    report = ProcessReport()
    d = inbox_dir(store.path)
    if not d.is_dir():
        if held is not None:
            os.close(held)
        return report
    tried: set[str] = set()
    while True:
        fd = held if held is not None else _try_lock(d / WORKER_LOCK, wait)
        held, wait = None, 0
        if fd is None:
            report.busy = not (report.done or report.waiting)
            return report
        try:
            take_commits(store.path)
            fresh = _by_size([p for p in pending(store.path) if p.name not in tried])
            defer = not force and _llm_down_recently(fresh)
            stop = partial = False
            for group in _groups(fresh):
                tried.update(p.name for p in group)
                if defer and group[0].suffix == ".json":
                    report.skipped += len(group)  # waits for the LLM to be back (or `memcli inbox process`)
                    continue
                outcomes = _process_batch(store, group) if len(group) > 1 else [_process_one(store, group[0])]
                for outcome in outcomes:
                    if outcome is None:
                        report.skipped += 1
                    elif outcome.get("error"):
                        report.waiting.append(outcome)
                        stop = stop or bool(outcome.get("llm") and stop_on_llm_error)
                    else:
                        report.done.append({"file": outcome["file"], "summary": outcome["summary"]})
                        if outcome.get("partial"):
                            tried.discard(outcome["file"])  # the rest of it, after whatever was spooled meanwhile
                            partial = True
                if stop or partial:
                    break
        finally:
            os.close(fd)  # releases the lock
        if stop or not (fresh or partial):
            return report
        # released: anything spooled while we worked (whose worker saw us busy) is picked up now


BATCH = 32  # inbox items planned into one commit: a burst of commits costs one model load and few commits

# A larger input is added a chunk at a time, its item rewritten to what is left after each chunk
# lands: it does not hold up the small captures queued after it, and a kill loses no landed chunk.
CHUNK_CHARS = 32 * 1024


def _large(p: Path) -> bool:
    try:
        return p.stat().st_size > CHUNK_CHARS
    except OSError:
        return False


def _by_size(paths: list[Path]) -> list[Path]:
    """Small items first (oldest first among them), then the large ones, each remap kept between
    the items spooled around it: one large input never makes the captures after it wait."""
    if not any(p.suffix == ".remap" for p in paths):
        return sorted(paths, key=lambda p: (_large(p), p.name))
    return paths  # a rewrite applies between the inputs before and after it: keep the order


def split_chunk(text: str, limit: int = CHUNK_CHARS) -> tuple[str, str]:
    """(the first chunk of `text`, the rest): cut at the last paragraph break before `limit`,
    else the last line break, else the last sentence end, else at `limit`."""
    if len(text) <= limit:
        return text, ""
    for sep in ("\n\n", "\n", ". "):
        cut = text.rfind(sep, limit // 4, limit)
        if cut > 0:
            return text[:cut + len(sep)], text[cut + len(sep):]
    return text[:limit], text[limit:]


def _groups(paths: list[Path]) -> list[list[Path]]:
    """`paths` in order, consecutive small add items (`.json`) in groups of up to BATCH, each remap
    (`.remap`) and each large item alone: a rewrite applies between the inputs before and after
    it, and a large input is added a chunk at a time (`_process_one`)."""
    out: list[list[Path]] = []
    for p in paths:
        if (p.suffix == ".json" and out and out[-1][0].suffix == ".json" and len(out[-1]) < BATCH
                and not _large(p) and not _large(out[-1][0])):
            out[-1].append(p)
        else:
            out.append([p])
    return out


def _storable(text: Any) -> str:
    """A spooled text as it can be stored: a NUL byte (a stray one in a conversation) would make
    `add` refuse the whole input on every retry, parking it forever; it carries nothing."""
    return text.replace("\x00", "") if isinstance(text, str) else ""


def _failed(path: Path, item: dict[str, Any], e: BaseException) -> dict[str, Any]:
    """Keep a failed item with its error and attempt count; its outcome for the report."""
    from memcli.services.redact import redact

    msg = str(e).splitlines()[0] if str(e) else type(e).__name__
    msg = redact(msg)[0]
    item["error"], item["attempts"] = msg, int(item.get("attempts") or 0) + 1
    item["last_attempt"], item["last_attempt_ts"] = _now(), time.time()
    client = sys.modules.get("memcli.services.llm.client")
    llm = client is not None and isinstance(e, client.LLMError)
    item["llm_down"] = llm
    with contextlib.suppress(OSError):
        write_item(path, item)
    return {"file": path.name, "error": msg, "llm": llm}


def _landed(store: Store, path: Path, summary: Any, **extra: Any) -> dict[str, Any]:
    """An item whose work landed leaves the inbox; its outcome for the report."""
    path.unlink(missing_ok=True)
    store.log("INBOX_DONE", file=path.name)
    return {"file": path.name, "summary": summary, **extra}


def _read_item(path: Path) -> dict[str, Any]:
    item = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(item, dict):
        raise ValueError("not a JSON object")
    if (item.get("options") or {}).get("redact_first"):
        # spooled unredacted by an older memcli: scrubbed and written back before anything reads it
        from memcli.services.redact import redact

        item["text"] = redact(item.get("text") or "")[0]
        item["options"] = {k: v for k, v in item["options"].items() if k != "redact_first"}
        write_item(path, item)
    return item


def _process_batch(store: Store, paths: list[Path]) -> list[dict[str, Any] | None]:
    """Several add items planned into ONE change set (`ops.batch`: each decided as its own add
    would be, after the ones before it), committed at once; each leaves the inbox when written.
    One item's bad input fails that item only; a failure of the whole chunk (an unreachable
    LLM, a full disk) keeps every item of it, with the error."""
    from memcli.ops.batch import add_chunks

    outcomes: dict[Path, dict[str, Any] | None] = {}
    work: list[tuple[int, Path, dict[str, Any], dict[str, Any]]] = []
    singles: list[tuple[Path, dict[str, Any]]] = []
    with contextlib.ExitStack() as stack:
        for path in paths:
            fd = stack.enter_context(item_lock(path))
            if fd is None:
                outcomes[path] = None
                continue
            try:
                item = _read_item(path)
            except (OSError, ValueError) as e:
                outcomes[path] = {"file": path.name, "error": f"unreadable inbox item: {e}"}
                continue
            if item.get("kind") not in (None, "add"):  # a session capture...: its own step, not an add
                singles.append((path, item))
                continue
            text = _storable(item.get("text"))
            if not text.strip():
                outcomes[path] = _landed(store, path, {"ADD": 0, "note": "empty input"})
                continue
            kwargs, llm = _add_kwargs(store, dict(item.get("options") or {}))
            work.append((len(work) + 1, path, item, {"text": text, **kwargs, "llm": llm, "inbox": False,
                                                     "redact": False}))
        if work:
            by_n = {n: (path, item) for n, path, item, _ in work}
            try:
                for n, out in add_chunks(store, [(n, kw) for n, _, _, kw in work], chunk=BATCH):
                    path, item = by_n[n]
                    if isinstance(out, str):
                        outcomes[path] = _failed(path, item, ValueError(out.split(": ", 1)[-1]))
                    elif out.failed:
                        outcomes[path] = _failed(path, item, OSError("some memories could not be written"))
                    else:
                        outcomes[path] = _landed(store, path, out.summary())
            except Exception as e:  # noqa: BLE001 - any failure keeps the items, with its error
                for _, path, item, _ in work:
                    if path not in outcomes:
                        outcomes[path] = _failed(path, item, e)
        for path, item in singles:  # still under their locks
            try:
                summary, _ = _run(store, item)
            except Exception as e:  # noqa: BLE001 - any failure keeps the item, with its error
                outcomes[path] = _failed(path, item, e)
                continue
            outcomes[path] = _landed(store, path, summary)
    return [outcomes.get(p) for p in paths]


# ------------------------------------------------------------------------- commits (git hooks)
_ALWAYS_SKIP = ("fixup! ", "squash! ", "amend! ")
# A longer commit message (a pasted build log) is remembered truncated: whole, it could be neither
# stored nor kept in the inbox.
MAX_COMMIT_CHARS = 256 * 1024


def git_output(args: list[str], cwd: Path | None) -> str:
    import subprocess

    out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise CaptureError(f"git {args[0]} failed: {(out.stderr.strip().splitlines() or ['?'])[-1]}")
    return out.stdout


def skip_reason(subject: str, parents: int, pattern: str | None) -> str | None:
    """Why a commit is not remembered, or None to remember it."""
    import re

    if parents > 1:
        return "merge commit"
    if subject.startswith(_ALWAYS_SKIP):
        return f"{subject.split('!')[0]}! commit"
    if pattern:
        try:
            if re.search(pattern, subject):
                return f"subject matches git_skip {pattern!r}"
        except re.error as e:
            raise CaptureError(f"git_skip is not a valid regular expression: {e}") from None
    return None


def spool_commit(store_path: Path, sha: str, cwd: Path | None, *, redact: bool = True) -> tuple[Path | None, str]:
    """Spool one commit's message (subject + body as one input, redacted), origin `git:<short
    sha>`: (the item, or None when the commit is skipped; why)."""
    from memcli.core.config import Config, load_config

    try:
        cfg = load_config(store_path)
    except Exception:  # noqa: BLE001 - a bad config must not lose the commit: defaults apply
        cfg = Config()
    out = git_output(["log", "-1", "--format=%h%x00%P%x00%aI%x00%B", sha], cwd)
    short, parents, date, body = (out.split("\x00", 3) + ["", "", ""])[:4]
    message = body.strip()
    subject = message.splitlines()[0] if message else ""
    why = skip_reason(subject, len(parents.split()), cfg.git_skip)
    if why or not message:
        return None, why or "empty message"
    if len(message) > MAX_COMMIT_CHARS:  # a pasted log, not notes: the start is kept, git has the rest
        message = split_chunk(message, MAX_COMMIT_CHARS)[0].rstrip() + (
            f"\n\n(commit message truncated: {len(message)} characters in git, {short.strip()})")
    if redact:
        from memcli.services.redact import redact as scrub

        message = scrub(message)[0]
    options = {"origins": [f"git:{short.strip()}"], "raw_without_llm": True,
               "cwd": str((cwd or Path.cwd()).absolute())}
    if date.strip():  # dated by the commit's author date: values of one subject are ordered by when stated
        options["created"] = date.strip()
    return spool(store_path, message, options, source="git"), f"commit {short.strip()}"


def commits_waiting(store_path: str | os.PathLike[str]) -> list[Path]:
    """`inbox/git-<sha>.sha`: commits a post-commit hook handed over with shell built-ins while
    a worker ran (memcli/agents/hooks.py `_fast_spool`), oldest first."""
    d = inbox_dir(Path(store_path))
    if not d.is_dir():
        return []
    found = []
    for p in d.glob("git-*.sha"):
        with contextlib.suppress(OSError):
            found.append((p.stat().st_mtime_ns, p.name, p))
    return [p for *_, p in sorted(found)]


def _same_repository(store_path: Path, cwd: Path) -> bool:
    """A handed-over commit is read only from the repository the store lives in (any worktree of
    it), or from any repository for a store outside every repository (the global store): a file
    planted in a cloned store's inbox must not make the worker read another repository's history."""
    from memcli.core.discovery import repo

    home = repo(store_path.absolute().parent)
    if home is None:
        return True
    there = repo(cwd)
    return there is not None and there.common_dir.resolve() == home.common_dir.resolve()


def take_commits(store_path: str | os.PathLike[str]) -> int:
    """Turn each handed-over commit into an inbox item, as the hook's own capture would (message,
    skip rules, redaction, origin), in commit order. Called under the worker lock. A commit that
    cannot be read is recorded in errors.log; returns how many were spooled."""
    n = 0
    for p in commits_waiting(store_path):
        sha = p.stem.removeprefix("git-")
        try:
            cwd = p.read_text(encoding="utf-8", errors="replace").strip() or None
        except OSError:
            continue
        if not cwd and time.time() - p.stat().st_mtime < 5:  # still being written by its hook: next round
            continue
        try:
            if len(sha) < 7 or any(c not in "0123456789abcdef" for c in sha):
                raise ValueError(f"not a commit id: {sha[:50]!r}")
            where = Path(cwd) if cwd and Path(cwd).is_dir() else None
            if where is None or not _same_repository(Path(store_path), where):
                raise ValueError(f"{str(cwd)[:80]!r} is not a repository this store takes commits from")
            n += spool_commit(Path(store_path), sha, where)[0] is not None
        except Exception as e:  # noqa: BLE001 - recorded; the other commits go on
            record_failure(store_path, f"commit {sha[:12]}: {type(e).__name__}: {e}")
        with contextlib.suppress(OSError):
            p.unlink()
    return n


def _process_one(store: Store, path: Path, run: Any = None) -> dict[str, Any] | None:
    """One item, under its lock (None: another process holds it): `run(store, item)` (the worker's
    `_run` by default) gives (summary, result); the item leaves the inbox once it landed, or stays
    with its error and attempt count."""
    with item_lock(path) as fd:
        if fd is None:
            return None
        try:
            item = _read_item(path)
        except (OSError, ValueError) as e:
            return {"file": path.name, "error": f"unreadable inbox item: {e}"}
        rest, text = "", item.get("text")
        opts = item.get("options") if isinstance(item.get("options"), dict) else {}
        whole = opts.get("raw") or opts.get("raw_without_llm")  # one memory: no facts to split
        if item.get("kind", "add") == "add" and isinstance(text, str) and len(text) > CHUNK_CHARS and not whole:
            head, rest = split_chunk(text)
            run_item = {**item, "text": head}
        else:
            run_item = item
        try:
            summary, result = (run or _run)(store, run_item)
        except Exception as e:  # noqa: BLE001 - any failure keeps the item whole, with its error
            return _failed(path, item, e)
        if rest:  # this chunk landed: the item keeps what is left
            write_item(path, {**item, "text": rest})
            return {"file": path.name, "summary": summary, "result": result, "partial": True}
        return _landed(store, path, summary, result=result)


def retry(store: Store, *, model: str | None = None) -> list[tuple[str, Any]]:
    """`memcli inbox retry`: replay the parked inputs through the LLM pipeline (required) with
    `model`, else the store's configured one, else the one each was parked with; each success
    leaves the inbox. Returns (file, AddResult) or (file, why it is still there) per input."""
    out: list[tuple[str, Any]] = []
    for path, _ in inputs(store.path):
        outcome = _process_one(store, path, _replay(model))
        if outcome is None:  # the lock `memcli inbox process` (the hooks' worker) takes: one process per item
            out.append((path.name, "skipped: another worker is processing it"))
        elif outcome.get("error"):
            out.append((path.name, outcome["error"]))
        else:
            out.append((path.name, outcome["result"]))
    return out


_RETRY_OPTIONS = ("tags", "type", "origins", "user", "project", "session", "threshold", "allow_delete", "source")
# never `llm_model`: the store's (trusted) configuration chooses
_ADD_OPTIONS = (*_RETRY_OPTIONS, "raw", "no_dedup", "created")


def _replay(model: str | None) -> Any:
    def run(store: Store, item: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        from memcli.ops.add import add

        opts = item.get("options") or {}
        kwargs = {k: v for k, v in opts.items() if k in _RETRY_OPTIONS}
        use = model or store.config.llm_model  # never a model the item names (issue 24)
        # redact=False: what was parked was redacted already (unless the user opted out)
        result = add(store, item["text"], llm=True, inbox=False, redact=False, llm_model=use, **kwargs)
        if result.failed:  # a write did not land: keep the input for another go
            raise OSError("some memories could not be written")
        return result.summary(), result

    return run




def _run(store: Store, item: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """The worker's run of one item: a remap, or the input through the add pipeline."""
    opts = dict(item.get("options") or {})
    if item.get("kind") == "remap":
        done = apply_rewrite(store, opts.get("mapping") or {}, opts.get("reworded") or {}, opts.get("cwd"))
        return done, done
    if item.get("kind") == "session" and isinstance(opts.get("turns"), list):
        done = _session(store, opts)
        return done, done
    text = _storable(item.get("text"))
    if not text.strip():
        return {"ADD": 0, "note": "empty input"}, None
    result = _add(store, text, opts)
    if result.failed:
        raise OSError("some memories could not be written")
    return result.summary(), result


def _session(store: Store, opts: dict[str, Any]) -> dict[str, Any]:
    """A captured part of an agent session: its dated turns through the session step (the same
    one `import --from claude-code` runs). The turns were redacted when they were spooled."""
    from memcli.ops.sessions import add_conversation
    from memcli.services.transcripts import Conversation

    conv = Conversation(str(opts.get("session") or "session"), cwd=opts.get("session_cwd") or opts.get("cwd"))
    for turn in opts["turns"]:
        if isinstance(turn, list) and len(turn) == 3 and isinstance(turn[1], str):
            conv.add(str(turn[0]), turn[1], turn[2] if isinstance(turn[2], str) else None)
    for at in opts.get("span") or []:
        conv.saw(at if isinstance(at, str) else None)
    # a capture reads what was added since the last one: the whole file only on its first capture
    result = add_conversation(store, conv, redact=False, whole=bool(opts.get("from_start")))
    if any(e.get("verdict") == "failed" for e in result["memories"]):
        raise OSError("some memories could not be written")
    return result["summary"]


def _add(store: Store, text: str, opts: dict[str, Any], *, llm: bool | None = None) -> Any:
    """One spooled input through the add pipeline; the AddResult."""
    kwargs, llm = _add_kwargs(store, opts, llm=llm)
    # redact=False: the text was redacted when it was spooled (unless the user opted out then)
    from memcli.ops.add import add  # not at the top: a hook that only spools never loads the add pipeline

    return add(store, text, inbox=False, redact=False, llm=llm, **kwargs)


def _add_kwargs(store: Store, opts: dict[str, Any], *, llm: bool | None = None) -> tuple[dict[str, Any], bool | None]:
    """The add keyword arguments of a spooled item's options, and its `llm` setting. An item never
    chooses a model: a committed inbox file is not the user's configuration (issue 24)."""
    opts = dict(opts)
    if opts.pop("raw_without_llm", False):  # one memory per input unless a model extracts facts
        if any(str(o).startswith("git:") for o in opts.get("origins") or []):
            if not store.config.llm_model:  # a commit: its own rules extract and decide it, no model needed
                llm = False
        else:
            opts["raw"] = not store.config.llm_model or llm is False
    if opts.get("origins"):  # a rewrite processed before this input (hooks race): follow it
        opts["origins"] = translate_origins(list(opts["origins"]), load_rewrites(store.path))
    cwd = opts.pop("cwd", None)
    if "project" not in opts and cwd and Path(cwd).is_dir():  # derived here: git calls cost a hook
        from memcli.core.discovery import project_identity

        opts["project"] = project_identity(Path(cwd))
    kwargs = {k: v for k, v in opts.items() if k in _ADD_OPTIONS}
    if llm is None and isinstance(opts.get("llm"), bool):  # `add --llm` (require one), spooled
        llm = opts["llm"]
    return kwargs, llm


def apply_rewrite(store: Store, mapping: dict[str, str], reworded: dict[str, dict[str, Any]],
                  cwd: str | None = None) -> dict[str, Any]:
    """A git rewrite (amend, rebase): the new message of each reworded commit goes through the add
    pipeline (an exact repeat of what the post-commit hook already added is that same memory),
    then the old message's memories are marked superseded by it and every `git:<old>` origin
    becomes `git:<new>` (one ChangeSet). An unreachable LLM falls back to the message verbatim:
    a rewrite never waits for a model."""
    replaced: dict[str, list[str]] = {}
    if reworded:  # only commits that left a memory (not a fixup! squashed away): no pointless add
        store.index.sync()
        refs = {o[4:].lower() for m in store.index.select() for o in m.origins
                if o.startswith("git:") and len(o) >= 11}
        reworded = {old: info for old, info in reworded.items() if any(old.lower().startswith(r) for r in refs)}
    for old, info in reworded.items():
        text = info.get("text") if isinstance(info, dict) else None
        if not isinstance(text, str) or not text.strip():
            continue
        opts = {"origins": [f"git:{info.get('short') or str(info.get('new', ''))[:7]}"], "raw_without_llm": True,
                "cwd": cwd}
        from memcli.services.llm.client import LLMError

        try:
            result = _add(store, text, opts)
        except LLMError:
            result = _add(store, text, opts, llm=False)
        ids = [e.id for e in result.events
               if e.id and e.event in ("ADD", "UPDATE", "NONE") and e.verdict in ("accepted", "already_known")]
        if ids:
            replaced[old.lower()] = ids
    return {"remapped": remap_origins(store, mapping, replaced), "reworded": len(replaced)}


REWRITES = "rewrites.json"  # under <store>/.capture/: old commit -> new commit, the last MAX_REWRITES
MAX_REWRITES = 20000


def load_rewrites(store_path: Path) -> dict[str, str]:
    try:
        data = json.loads((Path(store_path) / ".capture" / REWRITES).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _save_rewrites(store_path: Path, mapping: dict[str, str]) -> dict[str, str]:
    known = load_rewrites(store_path)
    known.update({o.lower(): n.lower() for o, n in mapping.items()})
    if len(known) > MAX_REWRITES:
        known = dict(list(known.items())[-MAX_REWRITES:])
    d = Path(store_path) / ".capture"
    d.mkdir(exist_ok=True)
    atomic_write(d / REWRITES, json.dumps(known).encode())
    return known


def _by_prefix(rewrites: dict[str, str]) -> dict[str, list[tuple[str, str]]]:
    """The rewrites grouped by their first 7 characters, in recorded order: refs that abbreviate one
    another (both at least 7 long) share a bucket, so a lookup reads one bucket, not every rewrite."""
    buckets: dict[str, list[tuple[str, str]]] = {}
    for old, new in rewrites.items():
        buckets.setdefault(old[:7], []).append((old, new))
    return buckets


def _rewrite_ref(ref: str, buckets: dict[str, list[tuple[str, str]]]) -> str:
    """`ref` (a full or abbreviated sha) after every known rewrite, abbreviated like `ref`."""
    ref = ref.lower()
    if len(ref) < 7:
        return ref
    seen = set()
    current = ref
    while True:
        nxt = next((new for old, new in buckets.get(current[:7], ())
                    if old.startswith(current) or current.startswith(old)), None)
        if nxt is None or nxt in seen:
            break
        seen.add(nxt)
        current = nxt[: max(len(ref), 7)]
    return current[: len(ref)]


def translate_origins(origins: list[str], rewrites: dict[str, str],
                      buckets: dict[str, list[tuple[str, str]]] | None = None) -> list[str]:
    """`origins` with every `git:<sha>` moved through the recorded rewrites (`buckets`, from
    `_by_prefix(rewrites)`, when the caller translates many)."""
    if not rewrites:
        return origins
    buckets = buckets if buckets is not None else _by_prefix(rewrites)
    out = [f"git:{_rewrite_ref(o[4:], buckets)}" if o.startswith("git:") else o for o in origins]
    return list(dict.fromkeys(out))


def remap_origins(store: Store, mapping: dict[str, str], replaced: dict[str, list[str]] | None = None) -> int:
    """After `git commit --amend` or a rebase: every `git:<old>` origin becomes `git:<new>`
    (abbreviated to the same length), so origins name commits that exist; a memory of an old
    commit in `replaced` (old sha -> the new message's memories) is marked superseded by the
    first of them. One ChangeSet; returns how many memories changed."""
    from memcli.ops.changes import ChangeSet, Link, Retarget, Supersede, commit_planned

    pairs = {o.lower(): n.lower() for o, n in mapping.items() if len(o) >= 7 and len(n) >= 7}
    if not pairs:
        return 0
    replaced = {k.lower(): v for k, v in (replaced or {}).items() if v}
    rewrites = _save_rewrites(store.path, pairs)  # also for inputs of these commits not processed yet
    buckets = _by_prefix(rewrites)

    def plan() -> tuple[ChangeSet, int]:
        index = store.index
        index.sync()
        cs = ChangeSet(store)
        changed = 0
        for m in index.select():
            origins = list(m.origins)
            moves = {o: t for o in origins if (t := translate_origins([o], rewrites, buckets)[0]) != o}
            by = None
            if not m.superseded_by:
                refs = [o[4:].lower() for o in origins if o.startswith("git:") and len(o) >= 11]
                by = next((ids[0] for old, ids in replaced.items() for ref in refs
                           if old.startswith(ref) and m.id not in ids), None)
            if moves:
                cs.edit(m.id, Retarget(moves), origin=list(moves.values()), detail="git history rewritten")
            if by:
                cs.edit(m.id, Supersede(by=by), detail="the commit message was reworded")
                cs.edit(by, Link("supersedes", m.id), quiet=True)  # the new memory names what it replaced
            changed += bool(moves or by)
        return cs, changed

    return commit_planned(plan)


def main(argv: list[str] | None = None) -> int:
    """`python -m memcli.agents.spool --store STORE`: the detached worker; exits at once when another
    holds the lock. While it runs, `inbox/.worker.pid` names it, so a post-commit hook only hands
    its commit over (`git-<sha>.sha`); the file goes before the last look for hand-overs, so a
    commit whose hook read it is always taken."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m memcli.agents.spool")
    parser.add_argument("--store", required=True)
    args = parser.parse_args(argv)
    store_path = Path(args.store)
    d = inbox_dir(store_path)
    with contextlib.suppress(OSError):  # started by hand on a store that never spooled anything
        d.mkdir(exist_ok=True)
    held = _try_lock(d / WORKER_LOCK)  # kept from here: a hook that sees it held knows work is under way
    for _ in range(5):  # bounded: a hook that keeps committing is served by the next worker
        if held is None:
            return 0
        tag = _mark_alive(d)
        try:
            rc = _work(store_path, held)
        finally:
            _unmark_alive(d, tag)
        # a hook that read the pid file before it went started nothing: its commit is taken now
        if rc or not commits_waiting(store_path):
            return rc
        held = _try_lock(d / WORKER_LOCK)  # (held: another worker runs, and looks again as this one did)
    return 0


def _work(store_path: Path, held: int) -> int:
    """The worker's run, under the worker lock (`held`, released by `process`): the inbox, the
    provisional vectors, and whatever was spooled meanwhile."""
    d = inbox_dir(store_path)
    if _burst_under_way(d):  # before anything is imported or loaded: the burst's CPU is the commits'
        _settle(d)
    from memcli.ops.handle import Store

    store = Store(store_path)
    try:
        report = process(store, held=held, force=False)
        _refresh_logged(store)
        for _ in range(100):  # bounded: a hook that keeps committing is served by the next worker
            if not (commits_waiting(store_path)
                    or any(p.name not in report_files(report) for p in pending(store_path))):
                break
            # spooled or handed over while this worker held the lock (a burst: a rebase, a script)
            _settle(d)
            again = process(store, force=False)
            report.done += again.done
            report.waiting += again.waiting
            if again.busy or not (again.done or again.waiting):
                break
        for w in report.waiting:
            record_failure(store_path, f"{w['file']}: waiting: {w['error']}")
    except Exception as e:  # noqa: BLE001 - recorded, never shown in the host's output
        record_failure(store_path, f"worker: {type(e).__name__}: {e}")
        return 1
    finally:
        store.close()
    return 0


WORKER_PID = ".worker.pid"  # inbox/: "<pid> <fd>" of the worker that runs (see `main`, `_mark_alive`)

#: a burst of commits is over when no input was handed over for QUIET seconds; the worker waits for
#: that (at most SETTLE_MAX) rather than compete with the commits for the CPU, then takes it in one round
QUIET = 0.4
SETTLE_MAX = 30.0


def _mark_alive(d: Path) -> int | None:
    """Name this worker in `inbox/.worker.pid` as "<pid> <fd>", the fd (returned) held open on the
    worker lock's file: `/proc/<pid>/fd/<fd>` is that file only while this process lives. The file
    is replaced, never written through, and not synced (lost in a crash, it costs a hook one look)."""
    try:
        tag = os.open(d / WORKER_LOCK, os.O_RDONLY | os.O_CREAT, 0o644)
    except OSError:
        return None
    tmp = d / f".worker.pid.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
        try:
            os.write(fd, f"{os.getpid()} {tag}\n".encode())
        finally:
            os.close(fd)
        os.replace(tmp, d / WORKER_PID)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
    return tag


def _unmark_alive(d: Path, tag: int | None) -> None:
    """Remove `inbox/.worker.pid` when it names this worker (another's is its own to remove), then
    close the fd it names."""
    if tag is None:
        return
    path = d / WORKER_PID
    with contextlib.suppress(OSError):
        if not path.is_symlink() and path.read_text(encoding="ascii").split() == [str(os.getpid()), str(tag)]:
            path.unlink()
    os.close(tag)


def _handed_over(d: Path) -> list[int]:
    """The modification times (ns) of the inputs waiting in the inbox: commits handed over and items spooled."""
    times = []
    for pattern in ("git-*.sha", "*.json"):
        for p in d.glob(pattern):
            with contextlib.suppress(OSError):
                times.append(p.stat().st_mtime_ns)
    return times


def _burst_under_way(d: Path, quiet: float = QUIET) -> bool:
    """More than the one input that started this worker arrived within the last `quiet` seconds:
    commits are coming back to back (a single commit is taken at once)."""
    since = time.time_ns() - int(quiet * 1e9)
    return sum(t >= since for t in _handed_over(d)) > 1


def _settle(d: Path, quiet: float = QUIET, most: float = SETTLE_MAX) -> None:
    """Wait until no input was handed over for `quiet` seconds (at most `most` in all), sleeping:
    the commits of a burst are taken in one round once it is over."""
    deadline = time.monotonic() + most
    while time.monotonic() < deadline:
        age = (time.time_ns() - max(_handed_over(d), default=0)) / 1e9
        if age >= quiet:
            return
        time.sleep(min(quiet - age, 0.1) + 0.005)


def report_files(report: ProcessReport) -> set[str]:
    """The inbox files a run tried (done or left waiting)."""
    return {r["file"] for r in (*report.done, *report.waiting)}


REFRESH_ROUNDS = 5  # a worker's refreshes, while commits keep leaving provisional vectors


def _refresh_logged(store: Store) -> int:
    """`refresh_provisional`, its failure recorded in errors.log and remembered, so the next hooks'
    workers do not each try to load a model that just failed (`detached.REFRESH_RETRY_AFTER`)."""
    marker = inbox_dir(store.path) / REFRESH_FAILED
    try:
        done = refresh_provisional(store)
    except Exception as e:  # noqa: BLE001 - recorded, never shown in the host's output
        record_failure(store.path, f"refresh of provisional vectors: {type(e).__name__}: {e}")
        with contextlib.suppress(OSError):
            marker.touch()
        return 0
    if done:
        with contextlib.suppress(OSError):
            marker.unlink()
    return done


def refresh_provisional(store: Store) -> int:
    """After the inbox: make exact the provisional vectors a bulk curation commit left, under the
    worker lock and at a lower priority than the user's own commands. Returns how many were refreshed."""
    if not background_on(store.config.background):
        return 0  # background work is off: `memcli reindex --provisional` does it
    if refresh_failed_recently(store.path):
        return 0  # it failed a moment ago (errors.log says why)
    if not store.index.provisional_count():
        return 0
    lock = inbox_dir(store.path) / WORKER_LOCK
    done = 0
    with contextlib.suppress(OSError):
        os.nice(10)
    # one model thread in the background: idle pool threads spin on a busy machine (the user's setting wins)
    os.environ.setdefault("MEMCLI_EMBED_THREADS", "1")
    for _ in range(REFRESH_ROUNDS):
        fd = _try_lock(lock)
        if fd is None:
            break  # another worker runs: it looks after its own work
        try:
            done += store.index.refresh_provisional()
        finally:
            os.close(fd)
        if not store.index.provisional_count():
            break
    return done


if __name__ == "__main__":  # pragma: no cover - the detached worker
    sys.exit(main())
