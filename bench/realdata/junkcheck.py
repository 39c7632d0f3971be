"""The commit rules alone against the labelled commits: which knowledge commits give no fact, which
junk commits give one. Seconds, not the minutes of a replay; run it after touching
memcli/services/commits.py, with the build whose rules are to be judged on the path:

    .venv/bin/python bench/realdata/junkcheck.py --mirrors /work/.mirror [-v]

`--mirrors` holds one bare git directory per repository as OWNER+NAME/repo (what `fetch` brings).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from gitdata import MIRRORS  # noqa: E402

from memcli.services.commits import commit_facts  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirrors", default="/work/.mirror")
    ap.add_argument("-v", action="store_true", help="also list the junk commits kept")
    args = ap.parse_args()
    for path in sorted((HERE / "labels").glob("*.commits.jsonl")):
        name = path.name.split(".")[0]
        gitdir = Path(args.mirrors) / MIRRORS[name] / "repo"
        dropped, kept, n_know, n_junk = [], [], 0, 0
        for line in path.read_text().splitlines():
            label = json.loads(line)
            msg = subprocess.run(["git", f"--git-dir={gitdir}", "log", "-1", "--format=%B", label["sha"]],
                                 capture_output=True, text=True, check=True).stdout
            facts, why = commit_facts(msg)
            if label["label"] == "knowledge":
                n_know += 1
                if not facts:
                    dropped.append(f"{msg.splitlines()[0]}  ({why})")
            else:
                n_junk += 1
                if facts:
                    kept.append(msg.splitlines()[0])
        print(f"{name}: knowledge dropped {len(dropped)}/{n_know}, junk kept {len(kept)}/{n_junk}")
        for s in dropped:
            print("   dropped:", s)
        for s in kept if args.v else []:
            print("   kept:", s)


if __name__ == "__main__":
    main()
