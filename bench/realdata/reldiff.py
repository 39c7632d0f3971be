"""The decision rules on real commit-subject pairs, to diff two builds: for each commit of each
mirror's last 450, its 8 nearest earlier subjects (cosine >= 0.3) through `relate(strict=True)`.

    OLD/.venv/bin/python bench/realdata/reldiff.py --mirrors /work/.mirror --out old.json
    NEW/.venv/bin/python bench/realdata/reldiff.py --mirrors /work/.mirror --out new.json --diff old.json

Every decision that changed is printed with both texts, to be read one by one (about 24k pairs over
eight repositories; the embeddings are cached beside --out, so both builds judge the same pairs).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gitdata  # noqa: E402

from memcli.rules.relate import relate  # noqa: E402

REPOS = tuple(gitdata.MIRRORS.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirrors", default="/work/.mirror")
    ap.add_argument("--out", required=True)
    ap.add_argument("--diff", help="an earlier --out to compare with")
    args = ap.parse_args()
    texts, repo_of = [], []
    for repo in REPOS:
        for c in gitdata.commits(str(Path(args.mirrors) / repo / "repo"), 450):
            texts.append(c.message.splitlines()[0])
            repo_of.append(repo)
    cache = Path(args.out).with_suffix(".vectors.npy")
    if cache.exists() and len(np.load(cache)) == len(texts):
        vecs = np.load(cache)
    else:
        from memcli.services.embed import Embedder
        vecs = Embedder().embed(texts)
        np.save(cache, vecs)
    decisions: dict[str, list[str]] = {}
    for repo in REPOS:
        idx = [i for i, r in enumerate(repo_of) if r == repo]
        for n, j in enumerate(idx[1:], start=1):
            earlier = idx[:n]
            sims = vecs[earlier] @ vecs[j]
            for o in np.argsort(-sims)[:8]:
                if sims[o] < 0.3:
                    break
                i = earlier[o]
                rel = relate(texts[i], texts[j], float(sims[o]), strict=True)
                reason = rel.reason() if callable(rel.reason) else rel.reason
                decisions[f"{i}:{j}"] = [rel.kind, str(reason), texts[i], texts[j]]
    Path(args.out).write_text(json.dumps(decisions))
    print(f"{len(decisions)} pairs -> {args.out}")
    if args.diff:
        before = json.loads(Path(args.diff).read_text())
        changed = [k for k in decisions if k in before and before[k][0] != decisions[k][0]]
        print(f"{len(changed)} decisions changed")
        for k in changed:
            kind, reason, old, new = decisions[k]
            print(f"{before[k][0]} -> {kind} ({reason})\n   old: {old}\n   new: {new}")


if __name__ == "__main__":
    main()
