"""stats and doctor: what is in a store, and whether every part of it works."""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

from memcli.core import discovery
from memcli.core.config import ConfigError, load_config
from memcli.ops.conflicts import conflict_advice, conflicted_files
from memcli.ops.handle import Store
from memcli.services.detached import background_on


def _size(path: Path) -> int:
    total = 0
    if path.is_file():
        return path.stat().st_size
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


def _counts(pairs: list[tuple[str, int]]) -> list[dict[str, Any]]:
    return [{"name": name, "count": n} for name, n in pairs]


def stats(store: Store) -> dict[str, Any]:
    """Counts by type, top tags, users, projects, sizes of facts/ and .index/, trash and inbox."""
    index = store.index
    types: Counter[str] = Counter()
    tags: Counter[str] = Counter()
    projects: Counter[str] = Counter()
    users: Counter[str] = Counter()
    dates = []
    for m in index.select():
        types[m.type or "?"] += 1
        tags.update(m.tags)
        projects[m.project or "(none)"] += 1
        users[m.user or "(none)"] += 1
        if m.created:
            dates.append(m.created)
    return {
        "store": str(store.path),
        "memories": index.count(),
        # counts as [{name, count}]: JSON keys stay a fixed vocabulary (a tag is data, not a key)
        "types": _counts(types.most_common()),
        "top_tags": _counts(tags.most_common(10)),
        "projects": _counts(projects.most_common(10)),
        "users": _counts(users.most_common(10)),
        "oldest": min(dates, default=None),
        "newest": max(dates, default=None),
        "trash": len(list(store.trash_dir.glob("*.md"))) if store.trash_dir.is_dir() else 0,
        "inbox": len(list(store.inbox_dir.glob("*.json"))) if store.inbox_dir.is_dir() else 0,
        "malformed_files": len(index.bad_files()),
        "provisional_vectors": index.provisional_count(),  # a bulk merge's stand-ins, made exact in the background
        "facts_bytes": _size(store.facts_dir),
        "index_bytes": _size(store.index_dir),
        "embed_model": store.config.embed_model,
        "llm_model": store.config.llm_model or "none (heuristic extraction)",
    }


def hook_errors(store: Store) -> dict[str, Any] | None:
    """What the git hooks of the store's repository logged: a hook never fails the commit, so this is
    where a user learns that a commit's memory was not made. None outside a git repository."""
    repo = discovery.repo(store.path)
    if repo is None:
        return None
    log = repo.common_dir / discovery.HOOK_LOG
    try:
        lines = [line for line in log.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    except OSError:
        lines = []
    if not lines:
        return {"check": "git hooks", "ok": True, "detail": "no errors logged"}
    return {"check": "git hooks", "ok": True, "warn": True,
            "detail": f"{len(lines)} line(s) in {log} (last: {_tail(lines[-1])}): commits may lack their memory; "
                      f"`memcli inbox retry` re-runs what waits, delete the log once read"}


def _tail(line: str, n: int = 120) -> str:
    """The end of a long log line, where the reason is ("...: Read-only file system")."""
    return line if len(line) <= n else "…" + line[-n:]


def unknown_commits(store: Store) -> dict[str, Any] | None:
    """A warning for memories whose `git:<sha>` origins name commits the repository lacks (rebased,
    force-pushed, another clone's), from one `git cat-file --batch-check`; None without git."""
    repo = discovery.repo(store.path)
    if repo is None:
        return None
    refs: dict[str, list[str]] = {}
    for m in store.index.select():
        for o in m.origins:
            sha = str(o)[4:].strip().lower() if str(o).startswith("git:") else ""
            if len(sha) >= 4 and all(c in "0123456789abcdef" for c in sha):
                refs.setdefault(sha, []).append(m.id)
    if not refs:
        return {"check": "git origins", "ok": True, "detail": "none"}
    shas = sorted(refs)
    try:
        out = subprocess.run(["git", "cat-file", "--batch-check"], cwd=repo.toplevel, capture_output=True,
                             text=True, timeout=30, input="".join(f"{s}^{{commit}}\n" for s in shas))
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.stdout.splitlines()
    if out.returncode != 0 or len(lines) != len(shas):
        return None
    missing = [s for s, line in zip(shas, lines) if line.endswith(" missing") or " ambiguous" in line]
    if not missing:
        return {"check": "git origins", "ok": True, "detail": f"{len(shas)} commit(s), all in {repo.toplevel}"}
    ids = sorted({mid for s in missing for mid in refs[s]})
    examples = ", ".join(f"{refs[s][0]} (git:{s})" for s in missing[:3])
    return {"check": "git origins", "ok": True, "warn": True,
            "detail": f"{len(ids)} {'memory names' if len(ids) == 1 else 'memories name'} {len(missing)} commit(s) "
                      f"this repository does not have (rebased, force-pushed or from another clone), e.g. "
                      f"{examples}: `memcli rollback git:<sha>` removes a commit's memories, or leave them"}


def doctor(store: Store, *, fix: bool = False) -> list[dict[str, Any]]:
    """Every check, each {check, ok, detail}; none raises. `fix` repairs what is damaged first."""
    checks: list[dict[str, Any]] = []

    def check(name: str, ok: bool, detail: str) -> None:
        checks.append({"check": name, "ok": ok, "detail": detail})

    from memcli.ops.repair import containment

    contained = containment(store, fix=fix)  # first: nothing below may follow a link out of the store
    if contained is not None:
        checks.append(contained)
        if not contained["ok"]:
            return checks
    store.allow_unsafe = False
    check("store", store.exists(), str(store.path) if store.exists() else f"no store at {store.path}")
    if not store.exists():
        return checks
    conflicts = conflicted_files(store)
    check("merge conflicts", not conflicts,
          "none" if not conflicts else f"conflict markers in {', '.join(conflicts)}: {conflict_advice(conflicts)}")
    try:
        cfg = load_config(store.path)
        check("config", True, "config.toml ok" if (store.path / "config.toml").exists() else "defaults")
    except ConfigError as e:
        check("config", False, str(e))
        return checks
    from memcli.ops.repair import check as damage

    checks += damage(store, fix=fix)
    try:
        vec = store.index.embedder.embed_one("memcli doctor probe")
        check("embedding model", True, f"{cfg.embed_model} ({len(vec)}-d)")
    except Exception as e:  # noqa: BLE001 - doctor reports, never raises
        check("embedding model", False, str(e).splitlines()[0] if str(e) else type(e).__name__)
        return checks
    try:
        report = store.index.sync()
        index = store.index
        files = len([p for p in store.facts_dir.glob("*.md") if not p.name.startswith(".")])
        bad = index.bad_files()
        rows = index.count()
        vec_count = index.vector_count()
        consistent = rows + len(bad) == files and vec_count == rows
        detail = f"{rows} memories indexed, {files} files"
        if report.rebuilt:
            detail += f" (rebuilt: {report.rebuilt})"
        check("index", consistent, detail)
        check("malformed files", not bad, "none" if not bad else "; ".join(f"facts/{f}: {e}" for f, e in bad))
        provisional = index.provisional_count()
        # not a failure: search works with them; they are exact once the background refresh ran
        check("provisional vectors", True, "none" if not provisional else
              f"{provisional} merged {'memory has' if provisional == 1 else 'memories have'} a source's vector "
              "until their own is computed ("
              + ("in the background, or " if background_on(cfg.background) else "background work is off: ")
              + "`memcli reindex --provisional`)")
    except Exception as e:  # noqa: BLE001
        check("index", False, str(e).splitlines()[0] if str(e) else type(e).__name__)
    if cfg.llm_model:
        try:
            from memcli.services.llm.client import LLM, LLMSettings

            client = LLM(LLMSettings(model=cfg.llm_model, api_base=cfg.api_base, api_key=cfg.api_key,
                                     timeout=min(cfg.llm_timeout or 20, 20), retries=0))
            seconds = client.ping()  # one minimal request (a 1-token reply), no retry
            check("llm", True, f"{cfg.llm_model} reachable" + (f" at {cfg.api_base}" if cfg.api_base else "")
                  + f" ({seconds * 1000:.0f} ms)")
        except Exception as e:  # noqa: BLE001
            check("llm", False, f"{cfg.llm_model}: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    else:
        check("llm", True, "none configured: heuristic extraction, no network")
    origins = unknown_commits(store)
    if origins is not None:
        checks.append(origins)
    hook_log = hook_errors(store)
    if hook_log is not None:
        checks.append(hook_log)
    inbox = len(list(store.inbox_dir.glob("*.json"))) if store.inbox_dir.is_dir() else 0
    check("inbox", inbox == 0, "empty" if not inbox else f"{inbox} input(s) waiting: run `memcli inbox retry`")
    return checks
