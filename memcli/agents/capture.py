"""Fast capture for hooks: read what happened, redact it, spool it to `<store>/inbox/`, return
(< 100 ms: no Typer, no model, no YAML). A detached worker (`memcli.agents.spool`) extracts and
decides; failures go to `<store>/inbox/errors.log`, never into the host's output. The kinds are
claude-code (the transcript lines added since the session's last capture), git (one commit),
git-rewrite (git's post-rewrite pairs: origins remapped, reworded messages replaced) and text.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import re
import sys
from pathlib import Path

from memcli.agents import spool as spooler
from memcli.agents.spool import MAX_COMMIT_CHARS, CaptureError, skip_reason
from memcli.agents.spool import git_output as _git
from memcli.storage.atomic import atomic_write

__all__ = ["MAX_COMMIT_CHARS", "CaptureError", "Captured", "capture_claude_code", "capture_git", "capture_git_rewrite",
           "capture_text", "main", "record_hook_failure", "run", "skip_reason"]

TYPE_CHECKING = False  # not `typing.TYPE_CHECKING`: importing typing costs a hook ~10 ms

if TYPE_CHECKING:
    from typing import Any

MAX_CAPTURE_BYTES = 2 * 1024 * 1024  # per capture: a huge first capture is read in several steps
STATE_DIR = ".capture"


class Captured:
    """What one capture did: the spooled item, or None. A plain class: `dataclasses` costs a hook ~25 ms."""

    def __init__(self, item: Path | None, reason: str, store: Path) -> None:
        self.item, self.reason, self.store = item, reason, store

    def to_dict(self) -> dict[str, Any]:
        return {"item": str(self.item) if self.item else None, "reason": self.reason, "store": str(self.store)}


def _store_for(explicit: str | None, cwd: Path | None) -> Path:
    from memcli.core.discovery import resolve

    res = resolve(explicit, cwd)
    if not (res.path / "facts").is_dir():
        raise CaptureError(f"no memcli store at {res.path} ({res.why}); run `memcli init` first")
    from memcli.storage.safety import UnsafeStore, ensure_contained

    try:  # a clone's `.capture -> ~/x`: refused before the capture state is touched
        ensure_contained(res.path)
    except UnsafeStore as e:
        raise CaptureError(str(e)) from None
    return res.path


def _redact(text: str, redact: bool) -> str:
    if not redact:
        return text
    from memcli.services.redact import redact as scrub

    return scrub(text)[0]


# ------------------------------------------------------------------------------------ Claude Code
def new_transcript_lines(store: Path, session: str, transcript: Path) -> tuple[list[bytes], Any, bool]:
    """Complete lines added to `transcript` since the session's last capture, a function recording
    them as taken (once spooled), and whether they are the whole file. A transcript that shrank
    is read again from the start (`add`'s dedup absorbs repeats)."""
    state_path = store / STATE_DIR / f"{hashlib.sha256(session.encode()).hexdigest()[:32]}.json"
    state_path.parent.mkdir(exist_ok=True)
    try:
        state = json.loads(state_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        state = {}
    offset = int(state.get("offset") or 0) if state.get("transcript") == str(transcript) else 0
    size = transcript.stat().st_size
    if size < offset:
        offset = 0
    with open(transcript, "rb") as f:
        f.seek(offset)
        data = f.read(MAX_CAPTURE_BYTES)
    end = data.rfind(b"\n")
    if end < 0:  # no complete new line yet (a line being written is taken next time)
        return [], lambda: None, offset == 0
    data = data[: end + 1]

    def commit() -> None:
        body = json.dumps({"session": session, "transcript": str(transcript), "offset": offset + len(data)})
        atomic_write(state_path, body.encode())

    return data.splitlines(), commit, offset == 0 and len(data) == size


def capture_claude_code(payload: dict[str, Any], *, store: str | None = None, redact: bool = True) -> Captured:
    """One Claude Code hook call (Stop, PreCompact, SessionEnd): spool the new turns, each with its
    time, for the session step (memcli/ops/sessions.py) the worker runs."""
    from memcli.services.filters import strip_injected
    from memcli.services.transcripts import read_claude_code

    session = str(payload.get("session_id") or "").strip()
    transcript = payload.get("transcript_path")
    if not session or not transcript:
        raise CaptureError("hook input has no session_id or transcript_path")
    cwd = Path(str(payload["cwd"])) if payload.get("cwd") and Path(str(payload["cwd"])).is_dir() else None
    store_path = _store_for(store, cwd)
    path = Path(str(transcript)).expanduser()
    if not path.is_file():
        raise CaptureError(f"transcript {path} does not exist")
    state_lock = store_path / STATE_DIR / ".lock"
    state_lock.parent.mkdir(exist_ok=True)
    with open(state_lock, "a") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)  # Stop and SessionEnd may fire together: one reads each line
        lines, taken, from_start = new_transcript_lines(store_path, session, path)
        convs = read_claude_code(lines, session)
        turns = [[role, _redact(strip_injected(text), redact), at]
                 for conv in convs if conv.id == session for (role, text, at) in conv.dated()]
        turns = [t for t in turns if t[1]]
        if not turns:
            taken()
            return Captured(None, "no new conversation text", store_path)
        text = "\n\n".join(f"{'User' if r == 'user' else 'Assistant'}: {t}" for r, t, _ in turns)
        conv = next((c for c in convs if c.id == session), None)
        options = {"session": session, "cwd": str(cwd) if cwd else None, "turns": turns,
                   "span": conv.span if conv else [], "session_cwd": conv.cwd if conv else None,
                   "from_start": from_start}
        item = spooler.spool(store_path, text, options, kind="session", source="claude-code")
        taken()
    return Captured(item, f"{len(turns)} turn(s) of session {session}", store_path)


# ------------------------------------------------------------------------------------------- git
def capture_git(sha: str = "HEAD", *, store: str | None = None, cwd: Path | None = None,
                redact: bool = True) -> Captured:
    """Spool one commit's message (subject + body as one input), origin `git:<short sha>`."""
    store_path = _store_for(store, cwd)
    item, reason = spooler.spool_commit(store_path, sha, cwd, redact=redact)
    return Captured(item, reason, store_path)


def capture_git_rewrite(lines: list[str], kind: str = "rebase", *, store: str | None = None,
                        cwd: Path | None = None, redact: bool = True) -> Captured:
    """git's post-rewrite input (`old new [extra]` per line): spool an origin remap, with the new
    message of every rewritten commit whose message changed (`commit --amend -m`, a reword)."""
    store_path = _store_for(store, cwd)
    mapping = {}
    for line in lines:
        parts = line.split()
        if len(parts) >= 2 and all(re.fullmatch(r"[0-9a-fA-F]{7,64}", p) for p in parts[:2]):
            mapping[parts[0]] = parts[1]
    if not mapping:
        return Captured(None, "nothing rewritten", store_path)
    options = {"mapping": mapping, "rewrite": kind, "cwd": str((cwd or Path.cwd()).absolute()),
               "reworded": reworded(mapping, store_path, cwd, redact)}
    item = spooler.spool(store_path, "", options, kind="remap", source="git")
    return Captured(item, f"{len(mapping)} commit(s) rewritten by {kind}", store_path)


def reworded(mapping: dict[str, str], store_path: Path, cwd: Path | None, redact: bool = True) -> dict[str, dict]:
    """Old commit -> {new, short, text, skip} for each rewritten commit whose message changed: the
    worker replaces the old message's memory with the new one. `text` is redacted (None when the
    new message is one the post-commit hook skips). One `git log` for every commit."""
    from memcli.core.config import Config, load_config

    try:
        cfg = load_config(store_path)
    except Exception:  # noqa: BLE001 - a bad config must not lose the rewrite: defaults apply
        cfg = Config()
    shas = list(dict.fromkeys([*mapping, *mapping.values()]))
    try:
        out = _git(["log", "--no-walk=unsorted", "--format=%H%x00%h%x00%P%x00%B%x1e", *shas], cwd)
    except (CaptureError, OSError):
        return {}
    info: dict[str, tuple[str, int, str]] = {}
    for rec in out.split("\x1e"):
        fields = rec.lstrip("\n").split("\x00", 3)
        if len(fields) == 4:
            info[fields[0].lower()] = (fields[1], len(fields[2].split()), fields[3].strip())
    changed: dict[str, dict] = {}
    for old, new in mapping.items():
        before, after = info.get(old.lower()), info.get(new.lower())
        if before is None or after is None or before[2] == after[2]:
            continue
        subject = after[2].splitlines()[0] if after[2] else ""
        skip = skip_reason(subject, after[1], cfg.git_skip) or (None if after[2] else "empty message")
        changed[old.lower()] = {"new": new.lower(), "short": after[0], "skip": skip,
                                "text": None if skip else _redact(after[2], redact)}
    return changed


def capture_text(text: str, *, origins: list[str] | None = None, store: str | None = None,
                 redact: bool = True, tags: list[str] | None = None) -> Captured:
    store_path = _store_for(store, None)
    if not text.strip():
        return Captured(None, "empty input", store_path)
    options = {"origins": origins or ["cli"], "tags": tags or [], "cwd": str(Path.cwd())}
    return Captured(spooler.spool(store_path, _redact(text, redact), options, source="text"), "text", store_path)


# ------------------------------------------------------------------------------------ entry point
def run(kind: str, *, store: str | None = None, stdin: Any = b"", sha: str | None = None,
        rewrite: str | None = None, origins: list[str] | None = None, text: str | None = None,
        redact: bool = True, worker: str = "detach") -> Captured:
    """Dispatch one capture, then start the worker: `detach` (a detached process, for hooks
    that must return: Claude Code), `inline` (run it here: the git hook's process is already
    in the background), or `none`. `stdin` (bytes, or a binary stream read here) is the hook's
    input: claude-code's JSON, git-rewrite's old/new pairs, text's text when none is given."""
    if kind in ("claude-code", "git-rewrite") or (kind == "text" and text is None):
        stdin = stdin if isinstance(stdin, bytes) else stdin.read()
    if kind == "claude-code":
        try:
            payload = json.loads(stdin.decode("utf-8") or "{}")
        except ValueError as e:
            raise CaptureError(f"hook input is not JSON: {e}") from None
        if not isinstance(payload, dict):
            raise CaptureError("hook input is not a JSON object")
        result = capture_claude_code(payload, store=store, redact=redact)
    elif kind == "git":
        result = capture_git(sha or "HEAD", store=store, redact=redact)
    elif kind == "git-rewrite":
        result = capture_git_rewrite(stdin.decode("utf-8", "replace").splitlines(), rewrite or "rebase", store=store,
                                     redact=redact)
    elif kind == "text":
        body = text if text is not None else stdin.decode("utf-8", "replace")
        result = capture_text(body, origins=origins, store=store, redact=redact)
    else:
        raise CaptureError(f"unknown capture kind {kind!r} (claude-code, git, git-rewrite, text)")
    if result.item is not None or spooler.pending(result.store):
        if worker == "detach":
            spooler.start_worker(result.store)
        elif worker == "inline":
            with contextlib.suppress(Exception):
                spooler.main(["--store", str(result.store)])
    return result


def record_hook_failure(store: str | None, message: str) -> bool:
    """A hook's failure, in `<store>/inbox/errors.log` (never in the host's output); False when
    there is no store to record it in (a project without memcli)."""
    try:
        spooler.record_failure(_store_for(store, Path.cwd()), message)
    except Exception:  # noqa: BLE001 - a hook never fails its host
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    """`python -m memcli.agents.capture KIND`, what installed hooks run: always exit 0; a failure goes
    to `<store>/inbox/errors.log`, or one line on stderr when there is no store."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m memcli.agents.capture")
    parser.add_argument("kind", choices=["claude-code", "git", "git-rewrite", "text"])
    parser.add_argument("rest", nargs="*", help="git-rewrite: amend|rebase; text: the text")
    parser.add_argument("--store")
    parser.add_argument("--sha")
    parser.add_argument("--origin", action="append")
    parser.add_argument("--no-redact", action="store_true")
    parser.add_argument("--worker", choices=["detach", "inline", "none"], default="detach")
    args = parser.parse_args(argv)
    data = sys.stdin.buffer if sys.stdin is not None and not sys.stdin.isatty() else b""
    try:
        run(args.kind, store=args.store, stdin=data, sha=args.sha,
            rewrite=args.rest[0] if args.kind == "git-rewrite" and args.rest else None,
            origins=args.origin, text=" ".join(args.rest) if args.kind == "text" and args.rest else None,
            redact=not args.no_redact, worker=args.worker)
    except Exception as e:  # noqa: BLE001 - never fail the host program
        msg = f"capture {args.kind}: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
        if not record_hook_failure(args.store, msg):
            sys.stderr.write(f"memcli: {msg}\n")
    return 0


if __name__ == "__main__":  # pragma: no cover - run by hooks
    sys.exit(main())
