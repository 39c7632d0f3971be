"""Git conflict markers left in a shared store's files: found by `doctor`, refused by `sync`."""

from __future__ import annotations

from memcli.ops.handle import Store
from memcli.storage.safety import read_regular


def conflicted_files(store: Store) -> list[str]:
    """Store files (facts, trash, log, config, git files) that hold git conflict markers."""
    candidates = [store.log_path, store.path / "config.toml", store.path / ".gitignore",
                  store.path / ".gitattributes"]
    for d in (store.facts_dir, store.trash_dir):
        if d.is_dir():
            candidates.extend(p for p in d.iterdir() if p.suffix == ".md")
    found = []
    for p in candidates:
        try:
            data = read_regular(p)  # a FIFO named x.md must not hang doctor; a symlink is not followed
        except OSError:
            continue
        if b"<<<<<<< " not in data and b">>>>>>> " not in data:
            continue
        lines = data.decode("utf-8", "replace").splitlines()
        if any(line.startswith("<<<<<<< ") for line in lines) and any(line.startswith(">>>>>>> ") for line in lines):
            found.append(str(p.relative_to(store.path)))
    return sorted(found)


def conflict_advice(files: list[str]) -> str:
    """How to fix conflict markers, for doctor and sync."""
    hints = []
    if "log.jsonl" in files:
        hints.append("log.jsonl: keep the lines of both sides (delete only the <<<<<<< ======= >>>>>>> lines); "
                     "`memcli sync` or `memcli init --shared` adds `log.jsonl merge=union` to .gitattributes "
                     "so this does not happen again")
    others = [f for f in files if f != "log.jsonl"]
    if others:
        hints.append(f"{', '.join(others)}: keep the right text between the markers and delete the marker lines "
                     "(each fact is one memory: keeping both as two files is fine too)")
    return "; ".join(hints) + "; then `git add` the files and commit"
