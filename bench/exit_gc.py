"""What skipping Python's last garbage collection at exit saves a memcli command.

`memcli.cli.runtime.main` registers `gc.freeze` with `atexit`, so the collection at interpreter exit
does not walk every object the command made. This runs `add --raw` and `search` on copies of the
10k curation bench store (`bench/curate.py` builds it) as `python -c` processes calling `main()`,
with that freeze and with it turned off (`_skip_final_collection` replaced by a no-op), interleaved,
and prints the median CPU time (user + sys, wait4) of each.

    .venv/bin/python bench/exit_gc.py            # --runs 4 --rounds 2
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BENCH_TMP, PY, ROOT, table  # noqa: E402

KEPT = "import sys; from memcli.cli.app import main; sys.argv[0] = 'memcli'; main()"
OFF = ("import sys; import memcli.cli.runtime as r; r._skip_final_collection = lambda: None; "
       "from memcli.cli.app import main; sys.argv[0] = 'memcli'; main()")


def cpu(code: str, store: Path, env: dict[str, str], *args: str) -> float:
    p = subprocess.Popen([PY, "-c", code, "--store", str(store), *args], env=env, cwd=ROOT,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"memcli {' '.join(args)} failed")
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=4, help="commands of each kind per round")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    from curate import build

    src, cache, _ = build(10_000, None)
    env = dict(os.environ, MEMCLI_CACHE_DIR=str(cache), MEMCLI_NO_BACKGROUND="1", MEMCLI_EMBED_THREADS="1")
    env.pop("MEMCLI_STORE", None)
    got: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.rounds):
        for name, code in (("freeze at exit (kept)", KEPT), ("without it", OFF)):
            store = BENCH_TMP / "exit-gc" / "store"
            shutil.rmtree(store.parent, ignore_errors=True)
            shutil.copytree(src, store, copy_function=shutil.copy2)
            cpu(code, store, env, "add", "--raw", "warm up the embedding cache and the index")
            for i in range(args.runs):
                got.setdefault((name, "add --raw"), []).append(
                    cpu(code, store, env, "add", "--raw", f"The build box {name[:4]}{i} runs job {i} at 0{i}:00 UTC."))
                got.setdefault((name, "search"), []).append(cpu(code, store, env, "search", f"build box job {i}"))
    shutil.rmtree(BENCH_TMP / "exit-gc", ignore_errors=True)
    rows = [[cmd, name, f"{statistics.median(v):.3f}", len(v)]
            for (name, cmd), v in sorted(got.items(), key=lambda kv: kv[0][1])]
    print(table(["command", "process", "median CPU s", "runs"], rows))


if __name__ == "__main__":
    main()
