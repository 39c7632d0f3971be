"""`memcli hooks install git|claude-code [--uninstall]`: idempotent, and never clobbering.

git: a marked block goes into `post-commit` and `post-rewrite` in the directory git really reads
hooks from (`git rev-parse --git-path hooks`: honours `core.hooksPath`, and the common dir for
worktrees). An existing shell hook keeps its content (the block is inserted after its `#!` line);
a hook in another language is moved aside to `<name>.memcli-chained` and called from ours. The
block reads the commit id synchronously (shell built-ins reading the ref git just wrote) and hands
everything else to ONE background process (a single fork, no subshell), so a commit waits for
memcli no longer than for an empty hook plus one fork: that process spools the message and runs
the worker. While the store's worker runs (a burst: a rebase, a script), the block only writes the
commit's id into the inbox, with built-ins, and starts no process at all (`_fast_spool`). What it
prints goes to `<common dir>/memcli-hook.log`, never to git's output.
Uninstall removes exactly the block (and restores a moved hook).

Claude Code: entries are merged into `.claude/settings.json` (project), `.claude/settings.local.json`
(local) or `~/.claude/settings.json` (user): SessionStart runs `memcli context` (its stdout is added
to the session), Stop / PreCompact / SessionEnd run the capture. Other settings and hooks are left
as they are; uninstall removes only the entries memcli added.

`.claude/settings.json` is committed and shared, so it gets portable commands only: `memcli` as
found on PATH, a store named relative to `$CLAUDE_PROJECT_DIR`, and a guard that makes the hook
exit 0 without a word when memcli is not installed (a teammate without it, or after an uninstall:
Claude Code would report a failed hook every turn). Machine-specific commands (this interpreter
by absolute path, the start-up-saving `-S` form, a store outside the project) go only to
`.claude/settings.local.json` or the user's own settings, and fail open the same way.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memcli.agents.spool import WORKER_LOCK, WORKER_PID
from memcli.core.discovery import HOOK_LOG
from memcli.core.errors import MemcliError
from memcli.storage.atomic import atomic_write

BEGIN = "# >>> memcli >>>"
END = "# <<< memcli <<<"
CHAINED = ".memcli-chained"
GIT_HOOKS = ("post-commit", "post-rewrite")
CLAUDE_EVENTS = ("SessionStart", "Stop", "PreCompact", "SessionEnd")
_OURS = re.compile(r"memcli(?:\.agents)?\.capture\b.*claude-code|-m memcli\b.* context --hook"
                   r"|\bmemcli\b.* (?:capture claude-code|context --hook)")
GUARD = "command -v memcli >/dev/null 2>&1 || exit 0; "  # not installed here: nothing to do, quietly


class HookError(MemcliError):
    """Not a git repository, an unreadable settings file...: one line for the user."""


@dataclass
class HookReport:
    target: str
    changed: list[str] = field(default_factory=list)  # what was written or removed
    unchanged: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "changed": self.changed, "unchanged": self.unchanged, "notes": self.notes}


def python_command() -> str:
    """This interpreter by absolute path: hooks run with whatever PATH the IDE or agent has."""
    return shlex.quote(str(Path(sys.executable).absolute()))


# ------------------------------------------------------------------------------------------- git
def _git(args: list[str], cwd: Path | None) -> str:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=30)
    except OSError as e:
        raise HookError(f"cannot run git: {e.strerror}") from None
    if out.returncode != 0:
        raise HookError((out.stderr.strip().splitlines() or ["not a git repository"])[-1])
    return out.stdout.strip()


def git_hooks_dir(cwd: Path | None = None) -> tuple[Path, Path]:
    """(hooks directory git reads, the common git dir)."""
    hooks = Path(_git(["rev-parse", "--path-format=absolute", "--git-path", "hooks"], cwd))
    common = Path(_git(["rev-parse", "--path-format=absolute", "--git-common-dir"], cwd))
    return hooks, common


def git_block(name: str, common: Path, store: str | None, created: bool = False, chained: bool = False,
              known_store: Path | None = None) -> str:
    """The marked block of hook `name`. `chained`: a hook of the user's runs after it (and reads
    the same input). `known_store`: the store the hook will write to, as found at install time:
    with it, a commit made while that store's worker runs (a burst: a rebase, a script) costs no
    Python process at all (see `_FAST_SPOOL`)."""
    py = python_command()
    log = shlex.quote(str(common / HOOK_LOG))
    opt = f" --store {shlex.quote(str(Path(store).absolute()))}" if store else ""
    mark = " [created]" if created else ""
    head = f"{BEGIN}{mark} (memcli hooks install git; remove with: memcli hooks install git --uninstall)\n"
    if name == "post-commit":
        # The new commit's id, read with shell built-ins from the files git just wrote (HEAD, then
        # the branch's ref, in the common dir for a worktree): a `git rev-parse` would add a process
        # to every commit. Anything unusual (packed or reftable refs) falls back to rev-parse.
        # Then ONE fork: a plain `cmd &` (a non-interactive shell neither waits for it nor signals
        # it at exit, and gives it /dev/null as stdin); `nice` and the interpreter are exec'd in
        # that child, so the commit waits for the shell's start-up, a few reads and one fork only
        # (no `( ... & )` subshell: that is a second fork and a wait).
        body = (
            '_memcli_sha= _memcli_g=${GIT_DIR:-${GIT_INDEX_FILE%/*}}\n'
            'if [ -n "$_memcli_g" ] && [ -f "$_memcli_g/HEAD" ] && read -r _memcli_h < "$_memcli_g/HEAD"; then\n'
            '  case $_memcli_h in\n'
            '    "ref: refs/"*) _memcli_c=$_memcli_g\n'
            '      if [ -f "$_memcli_g/commondir" ] && read -r _memcli_c < "$_memcli_g/commondir"; then\n'
            '        case $_memcli_c in /*) ;; *) _memcli_c=$_memcli_g/$_memcli_c ;; esac\n'
            '      fi\n'
            '      [ -f "$_memcli_c/${_memcli_h#ref: }" ] && read -r _memcli_sha < "$_memcli_c/${_memcli_h#ref: }" ;;\n'
            '    *) _memcli_sha=$_memcli_h ;;\n'
            '  esac\n'
            'fi\n'
            'case $_memcli_sha in ""|*[!0-9a-f]*) _memcli_sha=$(git rev-parse HEAD 2>/dev/null) ;; esac\n'
            f'if [ -n "$_memcli_sha" ] && [ -x {py} ]; then\n'  # the interpreter gone: nothing, quietly
            + (_fast_spool(py, known_store, log) if known_store is not None else "")
            + f'  nice -n 10 {py} -m memcli.agents.capture git --worker inline '
            f'--sha "$_memcli_sha"{opt} </dev/null >/dev/null 2>>{log} &\n'
            + ("  fi\n" if known_store is not None else "")
            + 'fi\n'
        )
    elif chained:  # post-rewrite whose input a chained hook reads too: keep a copy, hand it on
        body = (
            "_memcli_in=$(cat)\n"
            f"printf '%s\\n' \"$_memcli_in\" | nice -n 10 {py} -m memcli.agents.capture git-rewrite \"$1\" "
            f"--worker inline{opt} >/dev/null 2>>{log} &\n"
            "exec 0<<_MEMCLI_EOF_\n$_memcli_in\n_MEMCLI_EOF_\n"
        )
    else:  # post-rewrite: git's "old new" lines go straight to the background process (fd 3:
        # an asynchronous command's own stdin is /dev/null), which reads them after the hook exits
        body = (
            f"exec 3<&0\nnice -n 10 {py} -m memcli.agents.capture git-rewrite \"$1\" --worker inline{opt} "
            f"<&3 3<&- >/dev/null 2>>{log} &\nexec 3<&-\n"
        )
    return head + body


def _fast_spool(py: str, store: Path, log: str) -> str:
    """The post-commit fast path (the first half of an if/else whose else is the Python capture).

    When flock(1) exists and the store is the one found at install time, the hook writes
    `inbox/git-<sha>.sha` (the commit and the directory, with shell built-ins); the commit's
    message, skip rules and redaction are read by the worker. Then, when `inbox/.worker.pid`
    names a live worker of this store ("<pid> <fd>": `/proc/<pid>/fd/<fd>` is the worker lock's
    file, one `test -ef`), nothing more: that worker looks for hand-overs again after removing
    the file (memcli/agents/spool.py `main`), and this hook read it before, so a burst of commits
    (a rebase, a script) costs no process at all past the first. Otherwise (no /proc, no worker,
    a stale pid) one background fork checks the worker lock: held, the running worker takes the
    commit (it looks for `.sha` items again after releasing the lock, and the file was written
    before the check); free, the worker starts and takes it. The commit waits for a few reads,
    one small write and a stat, never for a process."""
    inbox = shlex.quote(str(store / "inbox"))
    here = shlex.quote(str(store))
    # flock(1) as found at install, by absolute path: one stat per commit instead of a walk of $PATH
    # (not found at install: looked up on $PATH at each commit; gone since: the Python capture)
    found = shutil.which("flock")
    flock = shlex.quote(found) if found and os.path.isabs(found) else "flock"
    has_flock = f"[ -x {flock} ]" if flock != "flock" else "command -v flock >/dev/null 2>&1"
    return (
        f'  if [ -z "${{MEMCLI_STORE-}}" ] && [ -d {inbox} ] && {has_flock} && '
        f'{{ [ ! -d "$PWD/.memcli" ] || [ "$PWD/.memcli" = {here} ]; }}; then\n'
        f'    if {{ printf \'%s\\n\' "$PWD" > {inbox}/git-"$_memcli_sha".sha; }} 2>/dev/null || '
        # (failed: the shell's reason, asked again in a subshell only then, goes on the log's one line)
        f'{{ _memcli_e=$({{ : >> {inbox}/git-"$_memcli_sha".sha; }} 2>&1); '
        f'{{ echo "memcli: commit $_memcli_sha not handed over: ${{_memcli_e##*: }}" >> {log}; }} 2>/dev/null; '
        f'false; }}; then\n'
        f'      _memcli_w= _memcli_f=\n'
        f'      {{ read -r _memcli_w _memcli_f < {inbox}/{WORKER_PID}; }} 2>/dev/null\n'
        '      case $_memcli_w.$_memcli_f in *[!0-9.]*|.*|*.) _memcli_w= ;; esac\n'
        f'      if [ -z "$_memcli_w" ] || ! [ "/proc/$_memcli_w/fd/$_memcli_f" -ef {inbox}/{WORKER_LOCK} ]; then\n'
        f'        {{ {flock} -n {inbox}/{WORKER_LOCK} true && '
        f'exec nice -n 10 {py} -m memcli.agents.spool --store {here}; }} </dev/null >/dev/null 2>>{log} &\n'
        '      fi\n'
        '    fi\n'
        '  else\n'
    )


def _strip_block(text: str) -> str:
    return re.sub(rf"(?ms)^{re.escape(BEGIN)}.*?^{re.escape(END)}\n?", "", text)


def _is_shell(text: str) -> bool:
    first = text.splitlines()[0] if text else ""
    return bool(re.match(r"#!\s*\S*/(?:env\s+)?(?:ba|da|z|k)?sh\b", first))


def _known_store(cwd: Path | None, store: str | None) -> Path | None:
    """The store a commit here writes to, when it does not depend on the environment."""
    from memcli.core.discovery import resolve

    if store:
        return Path(store).absolute()
    if os.environ.get("MEMCLI_STORE"):
        return None
    return resolve(None, (cwd or Path.cwd()).absolute()).path.absolute()


def install_git(cwd: Path | None = None, *, store: str | None = None, uninstall: bool = False) -> HookReport:
    hooks_dir, common = git_hooks_dir(cwd)
    known_store = None if uninstall else _known_store(cwd, store)
    if known_store is not None and (known_store / "facts").is_dir():
        (known_store / "inbox").mkdir(exist_ok=True)  # the fast hand-over works from the first commit
    report = HookReport(str(hooks_dir))
    if not uninstall:
        hooks_dir.mkdir(parents=True, exist_ok=True)
    for name in GIT_HOOKS:
        path = hooks_dir / name
        chained = hooks_dir / f"{name}{CHAINED}"
        current = path.read_text(encoding="utf-8", errors="surrogateescape") if path.is_file() else None
        if uninstall:
            if current is None or BEGIN not in current:
                report.unchanged.append(name)
                continue
            rest = _strip_block(current)
            created = f"{BEGIN} [created]" in current
            if created and rest.strip() in ("", "#!/bin/sh"):
                path.unlink()
                if chained.exists():
                    os.replace(chained, path)
                    report.notes.append(f"{name}: restored the hook that was there before")
            else:
                atomic_write(path, rest.encode("utf-8", "surrogateescape"))
            report.changed.append(name)
            continue
        created = current is None or f"{BEGIN} [created]" in current
        if current is not None and not _is_shell(current) and BEGIN not in current:
            # another language: move it aside and call it after ours
            os.replace(path, chained)
            current, created = None, True
            report.notes.append(f"{name}: the existing hook moved to {chained.name} and is called after memcli's")
        if current is None:
            first, rest = "#!/bin/sh", ""
        else:
            first, _, rest = (_strip_block(current) if BEGIN in current else current).partition("\n")
            if BEGIN not in current:
                report.notes.append(f"{name}: kept the existing hook; memcli's part runs first, in the background")
        has_chained = chained.exists()
        # the user's commands after the block read the same input (post-rewrite's stdin)
        follows = has_chained or bool(rest.strip())
        block = git_block(name, common, store, created, follows, known_store) + (
            f'exec "${{0%/*}}/{name}{CHAINED}" "$@"\n' if has_chained else "") + END + "\n"
        new = first + "\n" + block + rest
        if new == current:
            report.unchanged.append(name)
            continue
        atomic_write(path, new.encode("utf-8", "surrogateescape"))
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        report.changed.append(name)
    return report


# ------------------------------------------------------------------------------------ Claude Code
def claude_settings_path(scope: str, cwd: Path | None = None) -> Path:
    if scope == "user":
        return Path.home() / ".claude" / "settings.json"
    base = cwd or Path.cwd()
    try:
        base = Path(_git(["rev-parse", "--show-toplevel"], base))
    except HookError:
        pass
    return base / ".claude" / ("settings.local.json" if scope == "local" else "settings.json")


def _project_root(cwd: Path | None) -> Path:
    base = (cwd or Path.cwd()).absolute()
    try:
        return Path(_git(["rev-parse", "--show-toplevel"], base))
    except HookError:
        return base


def portable_store(store: str | None, root: Path) -> str | None:
    """`--store` as a teammate's checkout can use it: relative to `$CLAUDE_PROJECT_DIR` (what
    Claude Code sets for hooks); None when the store lies outside the project (machine-specific)."""
    if not store:
        return ""
    try:
        rel = Path(store).absolute().resolve().relative_to(root.resolve())
    except ValueError:
        return None
    return f' --store "${{CLAUDE_PROJECT_DIR:-.}}"/{shlex.quote(str(rel))}'


def claude_commands(store: str | None, *, portable: bool = False, root: Path | None = None) -> dict[str, str]:
    """The hook commands. `portable`: for the shared settings file (see the module docstring)."""
    if portable:
        opt = portable_store(store, root or Path.cwd()) or ""
        capture = f"{GUARD}exec memcli{opt} capture claude-code"
        return {"SessionStart": f"{GUARD}exec memcli{opt} context --hook", "Stop": capture, "PreCompact": capture,
                "SessionEnd": capture}
    py = python_command()
    guard = f"[ -x {py} ] || exit 0; "  # this interpreter gone (venv removed, memcli uninstalled): quietly
    opt = f" --store {shlex.quote(str(Path(store).absolute()))}" if store else ""
    # -S: no site-packages scan at start-up (~30 ms of a < 100 ms budget); the capture needs only the
    # standard library and memcli itself, whose directory is put on the path by hand.
    root_dir = str(Path(__file__).resolve().parents[2])
    code = (f"import sys; sys.path[:0] = [{root_dir!r}]\ntry: from memcli.agents.capture import main\n"
            "except ImportError: sys.exit(0)\nsys.exit(main())")
    capture = f"{guard}exec {py} -S -c {shlex.quote(code)} claude-code{opt}"
    return {"SessionStart": f"{guard}{py} -c 'import memcli' 2>/dev/null || exit 0; exec {py} -m memcli{opt} "
                            "context --hook",
            "Stop": capture, "PreCompact": capture, "SessionEnd": capture}


def install_claude_code(cwd: Path | None = None, *, scope: str = "project", store: str | None = None,
                        uninstall: bool = False) -> HookReport:
    notes = []
    root = _project_root(cwd)
    if scope == "project" and store and portable_store(store, root) is None:
        scope = "local"  # a store outside the project is this machine's business, not the team's
        notes.append(f"the store {store} is outside the project: the hooks go to .claude/settings.local.json "
                     "(this machine only), not to the shared settings.json")
    portable = scope == "project"
    if portable and not uninstall and shutil.which("memcli") is None:
        notes.append("`memcli` is not on PATH here: these hooks do nothing until it is (pipx install memcli), "
                     "or use --scope local for this machine's interpreter")
    path = claude_settings_path(scope, cwd)
    report = HookReport(str(path), notes=notes)
    if not uninstall and scope in ("project", "local"):
        other = claude_settings_path("local" if scope == "project" else "project", cwd)
        try:
            if _OURS.search(other.read_text(encoding="utf-8")):
                notes.append(f"{other.name} has memcli hooks too: each turn would be captured twice; remove one "
                             f"(memcli hooks install claude-code --scope {'local' if scope == 'project' else 'project'}"
                             " --uninstall)")
        except OSError:
            pass
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raw = ""
    try:
        settings = json.loads(raw) if raw.strip() else {}
    except ValueError as e:
        raise HookError(f"{path} is not valid JSON ({e}); fix it first, memcli does not overwrite it") from None
    if not isinstance(settings, dict) or not isinstance(settings.get("hooks", {}), dict):
        raise HookError(f"{path}: unexpected shape (hooks must be an object); not changing it")
    hooks: dict[str, Any] = settings.setdefault("hooks", {})
    commands = claude_commands(store, portable=portable, root=root)
    for event in CLAUDE_EVENTS:
        groups = hooks.get(event) or []
        if not isinstance(groups, list):
            raise HookError(f"{path}: hooks.{event} is not a list; not changing it")
        kept = []
        removed = False
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                entries = [h for h in group["hooks"]
                           if not (isinstance(h, dict) and _OURS.search(str(h.get("command", ""))))]
                removed |= len(entries) != len(group["hooks"])
                if entries:
                    kept.append({**group, "hooks": entries})
            else:
                kept.append(group)
        if not uninstall:
            timeout = 30 if event == "SessionStart" else 10
            kept.append({"hooks": [{"type": "command", "command": commands[event], "timeout": timeout}]})
        if kept:
            hooks[event] = kept
        else:
            hooks.pop(event, None)
        if uninstall:
            (report.changed if removed else report.unchanged).append(event)
    if not hooks:
        settings.pop("hooks", None)
    new = json.dumps(settings, indent=2, ensure_ascii=False) + "\n"
    if new == raw or (uninstall and not report.changed):
        if not uninstall:
            report.unchanged.extend(CLAUDE_EVENTS)
        return report
    if not uninstall:
        report.changed.extend(CLAUDE_EVENTS)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, new.encode("utf-8"))
    return report
