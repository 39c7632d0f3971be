"""Print commits of a mirror for a person to label or to write questions from (nothing is written).

    python bench/realdata/show.py --repo MIRROR [--sample 150 --seed 1] [--body 300] [--grep WORD]
"""

from __future__ import annotations

import argparse
import random
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import gitdata  # noqa: E402


def sample(commits: list[gitdata.Commit], n: int, seed: int) -> list[gitdata.Commit]:
    """The seeded labelling sample: n commits, in their replay order."""
    if n >= len(commits):
        return list(commits)
    picked = set(random.Random(seed).sample(range(len(commits)), n))
    return [c for i, c in enumerate(commits) if i in picked]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--commits", type=int, default=450)
    ap.add_argument("--sample", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--body", type=int, default=300)
    ap.add_argument("--grep")
    ap.add_argument("--changelog", action="store_true")
    a = ap.parse_args()
    cs = gitdata.commits(a.repo, a.commits)
    if a.changelog:
        path, rel = gitdata.releases(a.repo, cs[-1].author_date)
        for r in rel:
            print(f"### {r.version} {r.date[:10]}\n{r.text[:a.body]}\n")
        return
    if a.sample:
        cs = sample(cs, a.sample, a.seed)
    for c in cs:
        if a.grep and not re.search(a.grep, c.message, re.I):
            continue
        body = " ".join(c.message.split("\n", 1)[1].split()) if "\n" in c.message else ""
        print(f"{c.sha[:10]} {c.author_date[:10]} {c.subject}" + (f" || {body[:a.body]}" if body and a.body else ""))


if __name__ == "__main__":
    main()
