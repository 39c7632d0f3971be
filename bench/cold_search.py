"""Cold `memcli search` on a 10k-memory store vs the least a query can cost: a process that imports
fastembed, loads the same model and embeds one query.

    .venv/bin/python bench/cold_search.py [--n 10000] [--runs 7] [--importtime]

Both run as fresh subprocesses, interleaved, each with a fresh (empty) MEMCLI_CACHE_DIR and a new
query, so the query is never in the embedding cache; the store's sidecar is already built (a
`memcli search` right after an import or an earlier command is the common case). Wall time is the
median of --runs. Peak RSS comes from /usr/bin/time -v; without it, from a small wrapper process's
getrusage(RUSAGE_CHILDREN) (its ~20 ms start-up then counts in both wall times).
Targets: memcli / baseline <= 1.5, memcli peak RSS <= 600 MB.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PY, ROOT, build_store, env_with, median, memcli_cmd, table, verdict  # noqa: E402

RATIO_TARGET, RSS_TARGET_MB = 1.5, 600
TIME_V = Path("/usr/bin/time").exists()
# Without /usr/bin/time: a small parent whose only child is the measured process reports that
# child's peak RSS (getrusage(RUSAGE_CHILDREN) counts the children of the caller only).
RSS_WRAPPER = ("import resource, subprocess, sys; rc = subprocess.run(sys.argv[1:]).returncode; "
               "sys.stderr.write('peak_rss_kb=%d\\n' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
               "sys.exit(rc)")
QUERIES = [
    "why does the payments service time out", "how do we deploy to staging", "which formatter do we prefer",
    "redis cache drops events", "what to do when the lockfile is out of date", "flaky CI pipeline on Fridays",
    "postgres migration not idempotent", "who owns the billing cron", "token expiry breaks the OAuth flow",
    "kafka consumer crashes on startup", "how to reproduce with pytest", "nginx config after TLS rotation",
    "bump the connection pool size", "rate limiter rejects requests", "terraform plan lockfile",
    "websocket server leaks memory", "docker compose needs restart", "grafana panel spikes",
]


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, peak RSS MB) of one child process."""
    cmd = ["/usr/bin/time", "-v", *cmd] if TIME_V else [PY, "-c", RSS_WRAPPER, *cmd]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=str(ROOT))
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{p.stderr[-2000:]}")
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)|peak_rss_kb=(\d+)", p.stderr)
    rss = int(m.group(1) or m.group(2)) / 1024 if m else float("nan")
    return wall, rss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10000, help="memories in the store")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--importtime", action="store_true", help="also show the slowest imports of memcli search")
    args = ap.parse_args()
    store, _ = build_store(args.n)
    work = Path(tempfile.mkdtemp(prefix="memcli-bench-cold-"))
    print(f"# cold search; {args.n} memories; {args.runs} runs each, interleaved; "
          f"load average at start {os.getloadavg()[0]:.2f}")
    try:
        from memcli.services.embed import default_model_dir

        model_dir = default_model_dir(work / "model-cache")  # links to the packaged model files
        base_t, base_rss, mem_t, mem_rss = [], [], [], []
        for i in range(args.runs + 1):  # run 0 warms the page cache and is not counted
            q = f"{QUERIES[i % len(QUERIES)]} ({i})"
            cache = work / f"cache-{i}"
            t, r = timed([PY, str(ROOT / "bench" / "_min_query.py"), str(model_dir), q], env_with(cache))
            shutil.rmtree(cache, ignore_errors=True)
            t2, r2 = timed(memcli_cmd("--store", str(store), "search", q), env_with(cache))
            shutil.rmtree(cache, ignore_errors=True)
            if i:
                base_t.append(t), base_rss.append(r), mem_t.append(t2), mem_rss.append(r2)
        b, m = median(base_t), median(mem_t)
        ratio = m / b
        print()
        print(table(
            ["process", "median wall s", "min s", "max s", "peak RSS MB (max)"],
            [["baseline: import fastembed + load + embed 1", f"{b:.3f}", f"{min(base_t):.3f}", f"{max(base_t):.3f}",
              f"{max(base_rss):.0f}"],
             [f"memcli search ({args.n} memories)", f"{m:.3f}", f"{min(mem_t):.3f}", f"{max(mem_t):.3f}",
              f"{max(mem_rss):.0f}"]]))
        print()
        print(table(["metric", "value", "target", "verdict"], [
            ["memcli / baseline (median wall)", f"{ratio:.2f}", f"<= {RATIO_TARGET}", verdict(ratio <= RATIO_TARGET)],
            ["memcli extra over baseline (s)", f"{m - b:.3f}", "", ""],
            ["memcli peak RSS (MB)", f"{max(mem_rss):.0f}", f"<= {RSS_TARGET_MB}",
             verdict(max(mem_rss) <= RSS_TARGET_MB)],
        ]))
        if args.importtime:
            cache = work / "cache-importtime"
            p = subprocess.run([*memcli_cmd("--store", str(store), "search", "importtime probe"), ],
                               env={**env_with(cache), "PYTHONPROFILEIMPORTTIME": "1"},
                               capture_output=True, text=True, cwd=str(ROOT))
            rows = []
            for line in p.stderr.splitlines():
                mm = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
                if mm and len(mm.group(3)) <= 3:  # top-level and second-level packages
                    rows.append((int(mm.group(2)), mm.group(4), len(mm.group(3)) // 2))
            rows.sort(reverse=True)
            print("\n# slowest imports of `memcli search` (cumulative ms; depth 0-1)")
            for us, name, depth in rows[:20]:
                print(f"  {us / 1000:8.1f}  {'  ' * depth}{name}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
