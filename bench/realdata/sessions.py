#!/usr/bin/env python3
"""Real-data evaluation of memcli on agent transcripts and chat exports.

Each source (a real Claude Code session `.jsonl` or a real ChatGPT `conversations.json`, shipped by a
public repository; see sessions/sources.md) goes into a fresh store through one or more paths:

- `import`:  `memcli --store S import --from claude-code|chatgpt FILE --json`
- `capture`: the Claude Code Stop hook's JSON to `memcli capture claude-code`, then `memcli inbox process`
             (Claude Code sources only)
- `add`:     `memcli add -` of the plain "User: ... / Assistant: ..." text (this script's own reader), for
             comparison

and is scored on:

1. junk share: each memory is looked up by a normalised text hash in sessions/labels/<source>.memories.jsonl
   (`keep` / `junk`, judged by a person reading it); memories not judged yet go to the audit file;
2. dating: the share of memories whose `created` lies within the session's own time span (line timestamps,
   ChatGPT create_time), and, for memories whose text is found in one turn, the share dated to that turn;
3. recall: sessions/questions/<source>.jsonl (written from the source before looking at memcli's output):
   a question is answered when one of `memcli search -k 5` top texts holds all its answer keywords;
   also memories per session and whether a session summary memory exists;
4. origins: `session:<id>` (and `import:<file>` for import) on every memory;
5. resources: wall time and peak RSS of the import / capture / add processes.

`python bench/realdata/sessions.py --memcli .venv/bin/memcli --sources bench/realdata/sessions/sources.local.json`
(`materialize` writes that file from local git copies of the source repositories; see sessions/README.md).
Standard library only: it runs against any checkout's memcli (`--memcli PATH/.venv/bin/memcli`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unicodedata
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent / "sessions"
LABELS = HERE / "labels"
QUESTIONS = HERE / "questions"
CASES = HERE / "extraction_cases.jsonl"
MODES = ("import", "capture", "add")
DATE_TOLERANCE = 2.0  # seconds: stored dates are whole seconds
JUNK_TARGET = 0.05


# --------------------------------------------------------------------------------------- helpers
def norm_text(text: str) -> str:
    """The form labels are keyed by: NFKC, lower case, whitespace collapsed."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text)).strip().lower()


def text_hash(text: str) -> str:
    return hashlib.sha1(norm_text(text).encode("utf-8")).hexdigest()[:16]


def parse_time(value: Any) -> float | None:
    """Epoch seconds from an ISO 8601 string or a number (ChatGPT's create_time)."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)):
        return float(value)
    s = str(value).strip()
    if s.endswith("Z"):
        s = s[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(s)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def iso(ts: float | None) -> str:
    return "-" if ts is None else datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    out = []
    for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip() and not line.lstrip().startswith("//"):
            try:
                out.append(json.loads(line))
            except ValueError as e:
                raise SystemExit(f"{path}:{no}: not JSON ({e})") from None
    return out


# ---------------------------------------------------------------------------------------- sources
class Turn:
    """One thing a person or the model said: where (line number or message id), when, who, what."""

    def __init__(self, ref: str, ts: float | None, role: str, text: str, session: str) -> None:
        self.ref, self.ts, self.role, self.text, self.session = ref, ts, role, text, session
        self.norm = norm_text(text)


class Source:
    """A transcript or export read by this script (independently of memcli): its sessions, turns and
    time spans."""

    def __init__(self, name: str, kind: str, path: Path, meta: dict[str, Any] | None = None) -> None:
        self.name, self.kind, self.path, self.meta = name, kind, path, meta or {}
        self.turns: list[Turn] = []
        self.spans: dict[str, list[float]] = {}  # session -> [first, last]
        self.titles: dict[str, str] = {}
        if kind == "claude-code":
            self._read_claude_code()
        elif kind == "chatgpt":
            self._read_chatgpt()
        else:
            raise SystemExit(f"{name}: unknown kind {kind!r} (claude-code | chatgpt)")

    def _span(self, session: str, ts: float | None) -> None:
        if ts is None:
            return
        span = self.spans.setdefault(session, [ts, ts])
        span[0], span[1] = min(span[0], ts), max(span[1], ts)

    def _read_claude_code(self) -> None:
        lines = self.path.read_bytes().decode("utf-8", "replace").splitlines()
        self.lines = len(lines)
        for no, line in enumerate(lines, 1):
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if not isinstance(event, dict):
                continue
            sid = str(event.get("sessionId") or "")
            ts = parse_time(event.get("timestamp"))
            if sid:
                self._span(sid, ts)
            if event.get("type") not in ("user", "assistant") or not sid:
                continue
            if event.get("isMeta") or event.get("isCompactSummary") or event.get("isSidechain"):
                continue
            message = event.get("message") or {}
            content = message.get("content")
            if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result"
                                                 for b in content):
                continue
            if isinstance(content, str):
                text = content
            elif isinstance(content, list):
                text = "\n".join(b["text"] for b in content
                                 if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str))
            else:
                text = ""
            if text.strip():
                self.turns.append(Turn(f"line {no}", ts, message.get("role") or event["type"], text.strip(), sid))

    def _read_chatgpt(self) -> None:
        data = json.loads(self.path.read_text(encoding="utf-8"))
        if isinstance(data, dict):
            data = data.get("conversations", [data])
        self.lines = 0
        for conv in data:
            cid = str(conv.get("conversation_id") or conv.get("id") or "")
            mapping = conv.get("mapping") or {}
            self.titles[cid] = conv.get("title") or ""
            for key in ("create_time", "update_time"):
                self._span(cid, parse_time(conv.get(key)))
            for node in mapping.values():
                message = (node or {}).get("message") or {}
                self._span(cid, parse_time(message.get("create_time")))
            node_id = conv.get("current_node")
            chain, seen = [], set()
            while node_id and node_id in mapping and node_id not in seen:
                seen.add(node_id)
                chain.append(mapping[node_id] or {})
                node_id = (mapping[node_id] or {}).get("parent")
            for node in reversed(chain):
                message = node.get("message") or {}
                role = (message.get("author") or {}).get("role")
                content = message.get("content") or {}
                if role not in ("user", "assistant") or content.get("content_type") not in (None, "text",
                                                                                             "multimodal_text"):
                    continue
                if (message.get("metadata") or {}).get("is_visually_hidden_from_conversation"):
                    continue
                if message.get("recipient") not in (None, "all"):
                    continue
                text = "\n".join(p for p in content.get("parts") or [] if isinstance(p, str)).strip()
                if text:
                    self.lines += 1
                    self.turns.append(Turn(f"message {message.get('id')}", parse_time(message.get("create_time")),
                                           role, text, cid))

    @property
    def sessions(self) -> list[str]:
        return sorted(self.spans)

    def plain_text(self) -> str:
        return "\n\n".join(f"{'User' if t.role == 'user' else 'Assistant'}: {t.text}" for t in self.turns)

    def locate(self, text: str) -> list[Turn]:
        """The turns that hold a memory's text (its first 80 normalised characters, markdown emphasis
        and backticks ignored on both sides)."""
        probe = _loose(norm_text(text))[:80]
        if len(probe) < 12:
            return []
        return [t for t in self.turns if probe in _loose(t.norm)]


def _loose(s: str) -> str:
    return re.sub(r"[*`_#>]+", "", s).replace("  ", " ")


# ------------------------------------------------------------------------------------ running memcli
class Run:
    def __init__(self, memcli: str, env: dict[str, str], workdir: Path, verbose: bool = False) -> None:
        self.memcli, self.env, self.workdir, self.verbose = memcli, env, workdir, verbose

    def call(self, args: list[str], stdin: bytes | None = None, check: bool = True) -> tuple[int, bytes, bytes, float,
                                                                                               int]:
        """Run memcli; (exit code, stdout, stderr, wall seconds, peak RSS in KiB of the child)."""
        cmd = [self.memcli, *args]
        if self.verbose:
            print("  $", " ".join(cmd), file=sys.stderr)
        t0 = time.perf_counter()
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(cmd, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                    stdout=out, stderr=err, env=self.env, cwd=self.workdir)
            if stdin is not None:
                assert proc.stdin is not None
                try:
                    proc.stdin.write(stdin)
                    proc.stdin.close()
                except BrokenPipeError:
                    pass
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            wall = time.perf_counter() - t0
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read(), err.read()
        if check and proc.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:4])}... exited {proc.returncode}: "
                               f"{stderr.decode('utf-8', 'replace').strip().splitlines()[-1:]}")
        return proc.returncode, stdout, stderr, wall, int(usage.ru_maxrss)


def ingest(run: Run, source: Source, mode: str, store: Path) -> dict[str, Any]:
    """Load one source into a fresh store through one path; what it cost."""
    if store.exists():
        shutil.rmtree(store)
    run.call(["--store", str(store), "init"])
    res: dict[str, Any] = {"wall_s": 0.0, "peak_rss_mb": 0.0, "calls": 0, "error": None}

    def account(wall: float, rss_kib: int) -> None:
        res["wall_s"] += wall
        res["peak_rss_mb"] = max(res["peak_rss_mb"], rss_kib / 1024)
        res["calls"] += 1

    try:
        if mode == "import":
            _, out, _, wall, rss = run.call(["--store", str(store), "import", "--from", source.kind,
                                             str(source.path), "--json"])
            account(wall, rss)
            res["report"] = _summary_of_import(out)
        elif mode == "add":
            _, out, _, wall, rss = run.call(["--store", str(store), "add", "-", "--json"],
                                            stdin=source.plain_text().encode("utf-8"))
            account(wall, rss)
        elif mode == "capture":
            _capture(run, source, store, account)
        else:
            raise SystemExit(f"unknown mode {mode}")
    except RuntimeError as e:
        res["error"] = str(e)
    return res


def _summary_of_import(out: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(out)
    except ValueError:
        return {}
    convs = doc.get("conversations") or []
    return {"conversations": len(convs), "turns": sum(c.get("turns") or 0 for c in convs)}


def _capture(run: Run, source: Source, store: Path, account: Any) -> None:
    """What Claude Code's Stop hook does, until the transcript is read to its end, then the inbox drained.
    The capture starts a detached worker of its own: its RSS is not seen here, but the wall clock runs from
    the first capture to an empty inbox."""
    if source.kind != "claude-code":
        raise RuntimeError("capture: Claude Code sources only")
    t0 = time.perf_counter()
    for session in source.sessions or ["session"]:
        payload = {"session_id": session, "transcript_path": str(source.path.resolve()), "cwd": str(run.workdir),
                   "hook_event_name": "Stop"}
        # A Stop hook fires after every turn; here it fires until the whole file has been offered. A call
        # reads a bounded chunk (2 MiB today) and one whose chunk holds no conversation spools nothing, so
        # an empty answer does not mean the end: call as often as 256 KiB chunks would need, and more
        # while calls still spool something.
        calls, idle = max(3, source.path.stat().st_size // 262144 + 2), 0
        while calls > 0 or idle < 2:
            _, out, _, _, rss = run.call(["--store", str(store), "capture", "claude-code", "--json"],
                                         stdin=json.dumps(payload).encode())
            account(0.0, rss)
            try:
                item = json.loads(out).get("item")
            except ValueError:
                item = None
            calls -= 1
            idle = 0 if item else idle + 1
            if calls < -200:
                break
    for _ in range(3600):
        _, _, _, _, rss = run.call(["--store", str(store), "inbox", "process", "--json"], check=False)
        account(0.0, rss)
        _, out, _, _, _ = run.call(["--store", str(store), "inbox", "--json"], check=False)
        try:
            items = json.loads(out).get("items") or []
        except ValueError:
            items = []
        if not items and not _worker_running(store):
            break
        time.sleep(1.0)
    account(time.perf_counter() - t0, 0)


def _worker_running(store: Path) -> bool:
    import fcntl

    lock = store / "inbox" / ".worker.lock"
    if not lock.exists():
        return False
    with open(lock, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
    return False


def export(run: Run, store: Path) -> list[dict[str, Any]]:
    _, out, _, _, _ = run.call(["--store", str(store), "export", "--format", "jsonl"])
    return [json.loads(line) for line in out.decode("utf-8").splitlines() if line.strip()]


def search(run: Run, store: Path, queries: list[str], k: int) -> list[list[dict[str, Any]]]:
    if not queries:
        return []
    body = "\n".join(q.replace("\n", " ") for q in queries) + "\n"
    _, out, _, _, _ = run.call(["--store", str(store), "search", "--batch", "--json", "-k", str(k)],
                               stdin=body.encode("utf-8"))
    docs = [json.loads(line) for line in out.decode("utf-8").splitlines() if line.strip()]
    return [d.get("results") or [] for d in docs]


# ------------------------------------------------------------------------------------------- scoring
def is_summary(rec: dict[str, Any]) -> bool:
    """A session summary memory: tagged `summary` / `session-summary`, or of type / kind `summary`."""
    tags = {str(t).lower() for t in rec.get("tags") or []}
    return bool(tags & {"summary", "session-summary"}) or rec.get("type") == "summary" or rec.get("kind") == "summary"


def keyword_hit(text: str, keywords: list[str]) -> bool:
    """All keywords present (case-insensitive, NFKC); `a|b` accepts either."""
    t = norm_text(text)
    return all(any(norm_text(alt) in t for alt in kw.split("|")) for kw in keywords)


def load_labels(name: str) -> dict[str, dict[str, Any]]:
    return {r["hash"]: r for r in read_jsonl(LABELS / f"{name}.memories.jsonl")}


def score(source: Source, mode: str, memories: list[dict[str, Any]], labels: dict[str, dict[str, Any]],
          answers: list[list[dict[str, Any]]], questions: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(memories)
    keep = junk = 0
    classes: dict[str, int] = {}
    unjudged = []
    in_span = exact = located = 0
    origin_session = origin_import = 0
    per_session: dict[str, int] = {}
    summaries = 0
    sessions = set(source.sessions)
    file_name = source.path.name
    for rec in memories:
        text = rec.get("text") or ""
        h = text_hash(text)
        label = labels.get(h)
        if label is None or label.get("label") not in ("keep", "junk"):
            unjudged.append({"source": source.name, "mode": mode, "hash": h, "text": text,
                             "suggest": suggest(text)})
        elif label["label"] == "keep":
            keep += 1
        else:
            junk += 1
            cls = label.get("class") or "other"
            classes[cls] = classes.get(cls, 0) + 1
        origins = [str(o) for o in rec.get("origins") or []]
        sids = [o.split(":", 1)[1] for o in origins if o.startswith("session:")]
        if any(s in sessions for s in sids):
            origin_session += 1
        if any(o == f"import:{file_name}" or o.startswith("import:") and o.endswith(file_name) for o in origins):
            origin_import += 1
        for s in sids:
            per_session[s] = per_session.get(s, 0) + 1
        summaries += is_summary(rec)
        created = parse_time(rec.get("created"))
        spans = [source.spans[s] for s in sids if s in source.spans] or list(source.spans.values())
        if created is not None and any(a - DATE_TOLERANCE <= created <= b + DATE_TOLERANCE for a, b in spans):
            in_span += 1
        turns = [t for t in source.locate(text) if t.ts is not None]
        if turns:
            located += 1
            if created is not None and any(abs(created - t.ts) <= DATE_TOLERANCE for t in turns):
                exact += 1
    judged = keep + junk
    answered = []
    for q, results in zip(questions, answers):
        hit = next((r for r in results if keyword_hit(r.get("text") or "", q["answer_keywords"])), None)
        answered.append({"question": q["question"], "ok": hit is not None,
                         "top": [(r.get("text") or "")[:120] for r in results[:5]]})
    return {
        "source": source.name, "mode": mode, "memories": n, "judged": judged, "keep": keep, "junk": junk,
        "junk_share": junk / judged if judged else None, "junk_classes": classes, "unjudged": len(unjudged),
        "in_span": in_span / n if n else None, "exact_dated": exact / located if located else None,
        "located": located, "origin_session": origin_session / n if n else None,
        "origin_import": origin_import / n if n else None, "sessions": len(sessions),
        "memories_per_session": n / max(1, len(sessions)), "sessions_with_memories": len(per_session),
        "summary_memories": summaries,
        "recall": sum(a["ok"] for a in answered) / len(answered) if answered else None,
        "questions": len(answered), "answers": answered, "_unjudged": unjudged,
    }


# A first guess shown in the audit file to speed up judging; never used as a label.
_SUGGEST = [
    ("injected", r"<task-notification>|<system-reminder>|<summary>monitor event|<event>|<command-(name|message)>|"
                 r"<local-command|caveat: the messages below"),
    ("narration", r"^(let me|now i|now let me|i'll|i will|i'm going to|i am going to|next,? i|first,? i|"
                  r"perfect[.!]|great[.!]|excellent[.!]|good[.!]|done[.!]|all \d+ tests pass|now i have|"
                  r"looking at|checking|running|writing|starting|continuing|waiting)\b"),
    ("tool_output", r"^(\$ |>>> |traceback|\s*at [\w.$]+\(|npm (warn|err)|collecting |successfully installed)"),
    ("git_output", r"^(to github\.com|remote:|enumerating objects|counting objects|writing objects|"
                   r"\[main [0-9a-f]{7}\])"),
    ("greeting", r"^(hi|hello|hey|thanks|thank you|cheers)\b"),
]


def suggest(text: str) -> str | None:
    t = norm_text(text)
    for cls, pattern in _SUGGEST:
        if re.search(pattern, t):
            return cls
    if len(t) < 25:
        return "fragment"
    symbols = sum(not c.isalnum() and not c.isspace() for c in t)
    if symbols > 0.3 * len(t):
        return "pasted_code"
    return None


# ------------------------------------------------------------------------------------ extraction cases
def run_cases(run: Run, work: Path) -> list[dict[str, Any]]:
    """The hand-written cases in sessions/extraction_cases.jsonl, each into a fresh store by `memcli add`."""
    out = []
    for case in read_jsonl(CASES):
        store = work / f"case-{case['id']}"
        if store.exists():
            shutil.rmtree(store)
        run.call(["--store", str(store), "init"])
        code, _, err, _, _ = run.call(["--store", str(store), "add", "-", "--json"],
                                      stdin=case["text"].encode("utf-8"), check=False)
        texts = [m.get("text") or "" for m in export(run, store)] if code == 0 else []
        failures = []
        for exp in case["expect"]:
            kind, values = exp["kind"], exp["values"]
            if kind == "together":  # all values in one memory
                ok = any(all(norm_text(v) in norm_text(t) for v in values) for t in texts)
            elif kind == "present":  # each value in some memory
                ok = all(any(norm_text(v) in norm_text(t) for t in texts) for v in values)
            elif kind == "absent":  # no memory holds any of them
                ok = not any(norm_text(v) in norm_text(t) for v in values for t in texts)
            elif kind == "one_memory":  # the whole input is one memory
                ok = len(texts) == 1
            elif kind == "none":  # nothing worth keeping
                ok = not texts
            else:
                raise SystemExit(f"{CASES}: case {case['id']}: unknown expectation {kind}")
            if not ok:
                failures.append(f"{kind} {values}")
        out.append({"id": case["id"], "ok": not failures and code == 0, "failures": failures,
                    "memories": texts, "error": err.decode("utf-8", "replace").strip()[-200:] if code else None})
    return out


# ----------------------------------------------------------------------------------------- reporting
def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def table(rows: list[dict[str, Any]]) -> str:
    head = ["source", "mode", "mem", "judged", "junk", "in-span", "exact", "recall", "mem/sess", "summ",
            "origin", "wall s", "RSS MB"]
    lines = [head]
    for r in rows:
        lines.append([r["source"], r["mode"], str(r["memories"]), f"{r['judged']}/{r['memories']}",
                      pct(r["junk_share"]), pct(r["in_span"]), pct(r["exact_dated"]),
                      "-" if r["recall"] is None else f"{r['recall'] * r['questions']:.0f}/{r['questions']}",
                      f"{r['memories_per_session']:.0f}", str(r["summary_memories"]), pct(r["origin_session"]),
                      f"{r['wall_s']:.1f}", f"{r['peak_rss_mb']:.0f}"])
    widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
                     for row in lines)


def overall(rows: list[dict[str, Any]], mode: str) -> dict[str, Any] | None:
    rs = [r for r in rows if r["mode"] == mode and not r.get("error")]
    if not rs:
        return None
    n = sum(r["memories"] for r in rs)
    judged = sum(r["judged"] for r in rs)
    junk = sum(r["junk"] for r in rs)
    q = sum(r["questions"] for r in rs)
    located = sum(r["located"] for r in rs)
    sessions = sum(r["sessions"] for r in rs)

    def w(key: str, weight: str = "memories") -> float | None:
        tot = sum(r[weight] for r in rs if r[key] is not None)
        return sum(r[key] * r[weight] for r in rs if r[key] is not None) / tot if tot else None

    classes: dict[str, int] = {}
    for r in rs:
        for c, k in r["junk_classes"].items():
            classes[c] = classes.get(c, 0) + k
    return {"source": "ALL", "mode": mode, "memories": n, "judged": judged, "keep": judged - junk, "junk": junk,
            "junk_share": junk / judged if judged else None, "junk_classes": classes,
            "unjudged": sum(r["unjudged"] for r in rs), "in_span": w("in_span"),
            "exact_dated": w("exact_dated", "located"), "located": located, "origin_session": w("origin_session"),
            "origin_import": w("origin_import"), "sessions": sessions,
            "memories_per_session": n / max(1, sessions), "summary_memories": sum(r["summary_memories"] for r in rs),
            "recall": (sum((r["recall"] or 0) * r["questions"] for r in rs) / q) if q else None, "questions": q,
            "wall_s": sum(r["wall_s"] for r in rs), "peak_rss_mb": max(r["peak_rss_mb"] for r in rs)}


# ----------------------------------------------------------------------------------------- commands
def load_sources(args: argparse.Namespace) -> list[Source]:
    specs: list[dict[str, Any]] = []
    if args.sources:
        doc = json.loads(Path(args.sources).read_text(encoding="utf-8"))
        base = Path(args.sources).resolve().parent
        for s in doc["sources"] if isinstance(doc, dict) else doc:
            p = Path(s["file"])
            specs.append({**s, "file": str(p if p.is_absolute() else base / p)})
    for f in args.files:
        p = Path(f)
        kind = "chatgpt" if p.suffix == ".json" else "claude-code"
        specs.append({"name": p.stem, "kind": kind, "file": str(p)})
    if args.only:
        specs = [s for s in specs if s["name"] in set(args.only.split(","))]
    if not specs:
        raise SystemExit("no sources: give --sources FILE.json or transcript files")
    return [Source(s["name"], s["kind"], Path(s["file"]), s) for s in specs]


def cmd_run(args: argparse.Namespace) -> int:
    sources = load_sources(args)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="memcli-sessions-"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, MEMCLI_NO_BACKGROUND="1", NO_COLOR="1")
    env.pop("MEMCLI_STORE", None)
    memcli = str(Path(args.memcli).resolve()) if os.sep in args.memcli else (shutil.which(args.memcli) or args.memcli)
    modes = args.modes.split(",")
    rows, unjudged, failures = [], [], []
    for source in sources:
        questions = read_jsonl(QUESTIONS / f"{source.name}.jsonl")
        labels = load_labels(source.name)
        for mode in modes:
            if mode == "capture" and source.kind != "claude-code":
                continue
            store = work / f"{source.name}-{mode}"
            # a cold start: an embedding cache of its own (memcli caches vectors by text, across stores)
            srun = Run(memcli, dict(env, MEMCLI_CACHE_DIR=f"{store}.cache"), work, args.verbose)
            print(f"{source.name} [{mode}] {source.path.stat().st_size / 1024:.0f} KB, {len(source.sessions)} "
                  f"session(s), {len(source.turns)} turns ...", file=sys.stderr, flush=True)
            saved = work / f"{source.name}-{mode}.ingest.json"
            if args.reuse and saved.is_file() and store.is_dir():  # re-score a kept store (new labels, questions)
                res = json.loads(saved.read_text(encoding="utf-8"))
            else:
                shutil.rmtree(f"{store}.cache", ignore_errors=True)
                res = ingest(srun, source, mode, store)
                saved.write_text(json.dumps(res), encoding="utf-8")
            if res["error"]:
                print(f"  failed: {res['error']}", file=sys.stderr)
                failures.append((source.name, mode, res["error"]))
            memories = export(srun, store)
            answers = search(srun, store, [q["question"] for q in questions], args.k) if memories else [
                [] for _ in questions]
            row = {**score(source, mode, memories, labels, answers, questions), **res}
            unjudged.extend(row.pop("_unjudged"))
            rows.append(row)
            if not args.keep_stores:
                shutil.rmtree(store, ignore_errors=True)
                shutil.rmtree(f"{store}.cache", ignore_errors=True)
    for mode in modes:
        total = overall(rows, mode)
        if total:
            rows.append(total)
    print(table(rows))
    print(f"\njunk target <= {JUNK_TARGET:.0%} of judged memories; in-span target 100%; "
          "exact = dated to the turn that holds the memory's text (of the memories found in one).")
    for r in rows:
        if r["junk_classes"]:
            print(f"  {r['source']} [{r['mode']}] junk by class: "
                  + ", ".join(f"{c} {k}" for c, k in sorted(r["junk_classes"].items(), key=lambda x: -x[1])))
    if args.show_misses:
        for r in rows:
            for a in r.get("answers") or []:
                if not a["ok"]:
                    print(f"  miss {r['source']} [{r['mode']}]: {a['question']}")
    cases = run_cases(Run(memcli, dict(env, MEMCLI_CACHE_DIR=str(work / "cases.cache")), work, args.verbose), work) \
        if CASES.is_file() and not args.no_cases else []
    if cases:
        print(f"\nextraction cases (hand-written): {sum(c['ok'] for c in cases)}/{len(cases)} hold")
        for c in cases:
            if not c["ok"]:
                print(f"  FAIL {c['id']}: {'; '.join(c['failures'])}" + (f" ({c['error']})" if c["error"] else ""))
                for t in c["memories"][:6]:
                    print(f"      memory: {t[:140]!r}")
    seen: set[tuple[str, str]] = set()
    audit = []
    for u in unjudged:
        if (u["source"], u["hash"]) not in seen:
            seen.add((u["source"], u["hash"]))
            audit.append(u)
    audit_path = Path(args.audit)
    audit_path.parent.mkdir(parents=True, exist_ok=True)
    audit_path.write_text("".join(json.dumps(u, ensure_ascii=False) + "\n" for u in audit), encoding="utf-8")
    print(f"\n{len(audit)} memories not judged yet -> {audit_path} (judge them: `{Path(sys.argv[0]).name} judge`)")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "cases": cases, "failures": failures}, indent=1,
                                              ensure_ascii=False), encoding="utf-8")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


def cmd_judge(args: argparse.Namespace) -> int:
    """Move judged audit lines (a `label` added by a person: keep | junk, optional `class`, `note`) into the
    label files; lines without a label stay in the audit file."""
    audit_path = Path(args.audit)
    rest, added = [], 0
    for u in read_jsonl(audit_path):
        if u.get("label") not in ("keep", "junk"):
            rest.append(u)
            continue
        path = LABELS / f"{u['source']}.memories.jsonl"
        have = load_labels(u["source"])
        if u["hash"] not in have:
            LABELS.mkdir(parents=True, exist_ok=True)
            # the text itself stays out of the committed labels (it is the source's data, not ours)
            rec = {"hash": u["hash"], "label": u["label"], "class": u.get("class") if u["label"] == "junk" else None}
            if u.get("note"):
                rec["note"] = u["note"]
            with open(path, "a", encoding="utf-8") as f:
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            added += 1
    audit_path.write_text("".join(json.dumps(u, ensure_ascii=False) + "\n" for u in rest), encoding="utf-8")
    print(f"{added} labels added; {len(rest)} lines left in {audit_path}")
    return 0


def cmd_dump(args: argparse.Namespace) -> int:
    """The turns of a source as this script reads them (for writing questions and judging)."""
    for source in load_sources(args):
        print(f"# {source.name} ({source.kind}) {source.path}")
        for sid in source.sessions:
            a, b = source.spans[sid]
            print(f"# session {sid} {source.titles.get(sid, '')!r}: {iso(a)} .. {iso(b)}")
        for t in source.turns:
            text = t.text if args.full else t.text[: args.width]
            print(f"[{t.ref} {iso(t.ts)} {t.role}] {text}")
    return 0


def _git_dir(root: Path, repo: str) -> Path:
    owner, name = repo.split("/", 1)
    for cand in (root / f"{owner}+{name}" / "repo", root / f"{owner}+{name}", root / owner / name,
                 root / f"{owner}+{name}.git", root / name):
        if cand.exists():
            return cand
    raise SystemExit(f"{repo}: no local copy under {root} (clone it there, e.g. {root / owner / name})")


def _git_show(git_dir: Path, commit: str, path: str) -> bytes:
    proc = subprocess.run(["git", "--git-dir" if (git_dir / "HEAD").exists() and not (git_dir / ".git").exists()
                           else "-C", str(git_dir), "show", f"{commit}:{path}"], capture_output=True)
    if proc.returncode != 0:
        raise SystemExit(f"{git_dir}: git show {commit}:{path}: {proc.stderr.decode().strip()}")
    return proc.stdout


def cmd_materialize(args: argparse.Namespace) -> int:
    """Write the source files from local git copies of their repositories (repo, commit and path from
    sessions/sources.json) into --out, and a sources.local.json listing them."""
    spec = json.loads((HERE / "sources.json").read_text(encoding="utf-8"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    listed = []
    for s in spec["sources"]:
        git_dir = _git_dir(Path(args.repos), s["repo"])
        target = out / s["local"]
        if "assemble" in s:  # ChatGPT conversations kept verbatim inside Markdown files, one per file
            convs = []
            for p in s["paths"]:
                md = _git_show(git_dir, s["commit"], p).decode("utf-8")
                start = re.search(r"```json[ \t]*\r?\n", md)
                if start is None:
                    raise SystemExit(f"{s['repo']}:{p}: no ```json block")
                convs.append(json.loads(md[start.end(): md.rindex("```")]))
            target.write_text(json.dumps(convs, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
        else:
            target.write_bytes(_git_show(git_dir, s["commit"], s["path"]))
        listed.append({"name": s["name"], "kind": s["kind"], "file": s["local"], "repo": s["repo"],
                       "commit": s["commit"]})
        print(f"{s['name']}: {target} ({target.stat().st_size / 1024:.0f} KB)")
    (out / "sources.local.json").write_text(json.dumps({"sources": listed}, indent=1) + "\n", encoding="utf-8")
    print(f"-> {out / 'sources.local.json'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd")
    for name in ("run", "dump"):
        sp = sub.add_parser(name)
        sp.add_argument("files", nargs="*", help="transcripts (.jsonl: claude-code) or exports (.json: chatgpt)")
        sp.add_argument("--sources", help="a sources.local.json (materialize writes one)")
        sp.add_argument("--only", help="comma-separated source names")
        if name == "run":
            sp.add_argument("--memcli", default="memcli", help="the memcli executable (default: memcli on PATH)")
            sp.add_argument("--modes", default="import,capture", help=f"comma-separated: {', '.join(MODES)}")
            sp.add_argument("-k", type=int, default=5, help="search depth for recall (default 5)")
            sp.add_argument("--audit", default=str(HERE / "audit.unjudged.jsonl"), help="where unjudged memories go")
            sp.add_argument("--json", help="write every figure (and each question's top results) here")
            sp.add_argument("--work", help="keep stores here (default: a temporary directory, removed)")
            sp.add_argument("--keep-stores", action="store_true")
            sp.add_argument("--reuse", action="store_true",
                            help="with --work: score the stores a --keep-stores run left there, without loading again")
            sp.add_argument("--no-cases", action="store_true", help="skip sessions/extraction_cases.jsonl")
            sp.add_argument("--show-misses", action="store_true", help="list the questions not answered")
            sp.add_argument("-v", "--verbose", action="store_true")
        else:
            sp.add_argument("--width", type=int, default=400)
            sp.add_argument("--full", action="store_true")
    sp = sub.add_parser("judge")
    sp.add_argument("--audit", default=str(HERE / "audit.unjudged.jsonl"))
    sp = sub.add_parser("materialize")
    sp.add_argument("--repos", required=True, help="folder of local git copies: OWNER+NAME[/repo] or OWNER/NAME")
    sp.add_argument("--out", required=True, help="where the source files and sources.local.json go")
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in ("run", "dump", "judge", "materialize", "-h", "--help"):
        argv = ["run", *argv]
    args = p.parse_args(argv)
    return {"run": cmd_run, "dump": cmd_dump, "judge": cmd_judge, "materialize": cmd_materialize}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
