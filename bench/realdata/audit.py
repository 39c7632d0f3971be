"""Replay a repository's last N non-merge commits through `memcli add --no-llm --batch` (origin
`git:<sha>`, created = author date, oldest first) into a fresh store and print every merge and
supersede the store ends with, both texts side by side, for a reader to judge: the held-out
check for a repository that has no labels here (bench/realdata/README.md).

    python bench/realdata/audit.py --repo /work/.mirror/simonw+sqlite-utils/repo --memcli .venv/bin/memcli \
        --commits 300 --work /tmp/audit-sqlite-utils

Prints the skip rules' counts, memories per commit, then the pairs; `--json` writes them to a file.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
from pathlib import Path


def commits(repo: str, n: int) -> list[dict]:
    out = subprocess.run(["git", "--git-dir", repo, "log", "--no-merges", f"-{n}", "--format=%H%x00%aI%x00%B%x1e"],
                         capture_output=True, text=True, check=True).stdout
    rows = []
    for rec in out.split("\x1e"):
        parts = rec.strip("\n").split("\x00", 2)
        if len(parts) == 3 and parts[2].strip():
            rows.append({"sha": parts[0], "date": parts[1], "message": parts[2].strip()})
    return rows[::-1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--memcli", required=True)
    ap.add_argument("--commits", type=int, default=300)
    ap.add_argument("--work", required=True)
    ap.add_argument("--json", help="write the pairs here")
    args = ap.parse_args()
    work = Path(args.work)
    store = work / "store"
    if store.exists():
        raise SystemExit(f"{store} exists: pick a fresh --work")
    work.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMCLI_")}
    rows = commits(args.repo, args.commits)
    lines = "\n".join(json.dumps({"text": r["message"], "origins": [f"git:{r['sha'][:10]}"], "created": r["date"]})
                      for r in rows)
    subprocess.run([args.memcli, "--store", str(store), "init"], env=env, check=True, capture_output=True)
    out = subprocess.run([args.memcli, "--store", str(store), "add", "--no-llm", "--json", "--batch", "-"],
                         input=lines, env=env, capture_output=True, text=True)
    skips: collections.Counter[str] = collections.Counter()
    for line in out.stdout.splitlines():
        try:
            res = json.loads(line)
        except ValueError:
            continue
        for piece in (res.get("extraction") or {}).get("skipped_pieces") or []:
            skips[piece["rule"]] += 1
    listed = json.loads(subprocess.run([args.memcli, "--store", str(store), "list", "--all", "--json", "-n", "100000"],
                                       env=env, capture_output=True, text=True).stdout)["memories"]
    by_id = {m["id"]: m for m in listed}
    from_commits = sum(1 for m in listed if any(o.startswith("git:") for o in m["origins"]))
    print(f"{len(rows)} commits; {from_commits} memories from them ({from_commits / max(1, len(rows)):.2f}/commit); "
          f"skipped: {dict(skips.most_common())}")
    pairs = []
    for m in listed:
        if len(m["origins"]) > 1:
            pairs.append({"kind": "merge", "text": m["text"], "origins": m["origins"]})
        old = by_id.get(m.get("superseded_by") or "")
        if old is not None:
            pairs.append({"kind": "supersede", "older": m["text"], "newer": old["text"],
                          "older_created": m["created"], "newer_created": old["created"]})
    for p in pairs:
        if p["kind"] == "merge":
            print(f"MERGE {len(p['origins'])} origins: {p['text'][:110]!r}")
        else:
            print(f"SUPERSEDE\n   old {p['older_created'][:10]} {p['older'][:110]!r}\n"
                  f"   new {p['newer_created'][:10]} {p['newer'][:110]!r}")
    if args.json:
        Path(args.json).write_text(json.dumps(pairs, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
