"""Warm `recall` through `memcli mcp` (the SDK's client over real stdio) vs a cold `memcli search`.

    .venv/bin/python bench/mcp_recall.py [--n 10000] [--calls 60] [--cold-runs 5]

One `memcli mcp` server on a store of --n generated memories (the real default model); each call
is a new query (never in the embedding cache), so every recall includes the query's embedding,
the search and the MCP round trip (JSON-RPC over the server's stdin/stdout, pydantic validation).
The first calls warm the server and are not counted. Beside it, the same kind of query as a cold
`memcli search` process (what an agent pays per question without the server).
Target: warm recall p50 <= 30 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PY, ROOT, build_store, env_with, median, memcli_cmd, pct, table, verdict  # noqa: E402

TARGET_MS = 30.0
TOPICS = [
    "why does the payments service time out", "how do we deploy to staging", "redis cache drops events",
    "what to do when the lockfile is out of date", "flaky CI pipeline", "postgres migration not idempotent",
    "who owns the billing cron", "token expiry breaks the OAuth flow", "kafka consumer crashes on startup",
    "nginx config after TLS rotation", "bump the connection pool size", "rate limiter rejects requests",
    "terraform plan lockfile", "websocket server leaks memory", "docker compose needs restart",
]


async def warm_calls(store: Path, env: dict[str, str], calls: int, warmup: int) -> list[float]:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=PY, args=["-m", "memcli", "--store", str(store), "mcp"], env=env,
                                   cwd=str(ROOT))
    times = []
    async with Client(params, read_timeout_seconds=300) as client:
        for i in range(warmup + calls):
            q = f"{TOPICS[i % len(TOPICS)]} {i}"
            t0 = time.perf_counter()
            result = await client.call_tool("recall", {"query": q, "k": 5})
            dt = time.perf_counter() - t0
            if result.is_error:
                raise SystemExit(f"recall failed: {result.content}")
            if i >= warmup:
                times.append(dt * 1000)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--calls", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--cold-runs", type=int, default=5)
    args = ap.parse_args()
    store, store_cache = build_store(args.n)
    work = Path(tempfile.mkdtemp(prefix="memcli-bench-mcp-"))
    print(f"# memcli mcp recall; {args.n} memories; load average at start {os.getloadavg()[0]:.2f}")
    try:
        env = env_with(store_cache)  # the store's embeddings are cached (an index rebuild costs no embedding);
        # each query is new, so every recall embeds its query
        warm = asyncio.run(warm_calls(store, env, args.calls, args.warmup))
        cold = []
        for i in range(args.cold_runs + 1):
            cache = work / f"cache-cold-{i}"
            t0 = time.perf_counter()
            p = subprocess.run(memcli_cmd("--store", str(store), "search", f"{TOPICS[i]} cold {i}"),
                               env=env_with(cache), capture_output=True, text=True, cwd=str(ROOT))
            dt = time.perf_counter() - t0
            if p.returncode != 0:
                raise SystemExit(p.stderr[-2000:])
            shutil.rmtree(cache, ignore_errors=True)
            if i:  # run 0 warms the page cache
                cold.append(dt * 1000)
        p50 = median(warm)
        print()
        print(table(["what", "p50 ms", "p95 ms", "min ms", "max ms", "runs"], [
            ["warm recall over MCP stdio (query embedded each call)", f"{p50:.1f}", f"{pct(warm, 0.95):.1f}",
             f"{min(warm):.1f}", f"{max(warm):.1f}", len(warm)],
            ["cold `memcli search` process", f"{median(cold):.0f}", f"{pct(cold, 0.95):.0f}", f"{min(cold):.0f}",
             f"{max(cold):.0f}", len(cold)],
        ]))
        print()
        print(table(["metric", "value", "target", "verdict"], [
            ["warm recall p50 (ms)", f"{p50:.1f}", f"<= {TARGET_MS:.0f}", verdict(p50 <= TARGET_MS)],
            ["cold search / warm recall (p50)", f"{median(cold) / p50:.0f}x", "", ""],
        ]))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
