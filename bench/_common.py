"""Shared helpers for the memcli benchmarks: deterministic texts, stores, timing.

Every benchmark sets MEMCLI_CACHE_DIR to a temporary directory of its own, so the user's real
embedding cache is never read or written.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
BENCH_TMP = Path(os.environ.get("MEMCLI_BENCH_TMP", Path(tempfile.gettempdir()) / "memcli-bench"))

_SUBJECTS = [
    "the CI pipeline", "our staging deploy", "the payments service", "the auth middleware", "the nightly backup job",
    "the search indexer", "the Postgres migration", "the Redis cache", "the React frontend", "the mobile build",
    "the Kafka consumer", "the billing cron", "the feature-flag client", "the GraphQL gateway", "the Terraform plan",
    "the docker-compose setup", "the S3 uploader", "the rate limiter", "the websocket server", "the ETL pipeline",
    "the Helm chart", "the gRPC client", "the CSV exporter", "the logging config", "the pre-commit hooks",
    "the test fixtures", "the Celery workers", "the nginx config", "the OAuth flow", "the metrics dashboard",
]
_VERBS = [
    "fails when", "times out if", "needs a restart after", "breaks because of", "must be pinned before",
    "is flaky whenever", "gets slow once", "should be retried when", "leaks memory if", "rejects requests when",
    "silently drops events after", "only works if", "has to be rebuilt after", "logs a warning when",
    "crashes on startup when",
]
_CONDITIONS = [
    "the lockfile is out of date", "two jobs run in parallel", "the token expires", "the disk is almost full",
    "we bump the Python version", "the schema has a nullable column", "TLS certificates rotate",
    "a tenant has more than 10k rows", "the clock drifts", "the VPN is down", "someone force-pushes to main",
    "the env var is missing", "the queue backs up", "the container runs as root", "the region is eu-west-1",
    "numpy is upgraded", "the connection pool is exhausted", "a migration is not idempotent",
    "the cache key changes", "the feature flag is off",
]
_FIXES = [
    "Run `make clean` first.", "Set TIMEOUT=120 in the job.", "Use the --no-cache flag.",
    "Ask Priya before changing it.", "Pin the version in requirements.txt.", "Restart the worker with systemctl.",
    "Add a retry with exponential backoff.", "Check the Grafana panel for spikes.",
    "Bump the pool size to 20.", "Regenerate the client with `npm run codegen`.",
    "Use `pytest -x -k smoke` to reproduce it.", "Clear the cache with `redis-cli FLUSHDB`.",
    "Document it in the runbook.", "Open a ticket for the platform team.", "Prefer the blue-green deploy.",
    "Never run it on Fridays.", "The fix landed in release {n}.", "See incident {n} for details.",
    "It took {n} minutes to notice last time.", "Alice owns this since sprint {n}.",
]
_PREFS = [
    "I prefer {a} over {b} for new code.", "We decided to use {a} instead of {b}.",
    "The team agreed that {a} is the default and {b} is deprecated.", "Always use {a}; {b} caused outages.",
]
_TOOLS = ["ruff", "black", "poetry", "uv", "pip-tools", "pnpm", "yarn", "vite", "webpack", "pytest", "unittest",
          "FastAPI", "Flask", "SQLAlchemy", "psycopg3", "httpx", "requests", "structlog", "loguru", "mypy",
          "pyright", "Postgres", "MySQL", "SQLite", "Redis", "Memcached", "Go", "Rust", "TypeScript", "tmux"]


def make_texts(n: int, seed: int = 1234) -> list[str]:
    """`n` distinct short developer-note-like texts, the same for the same (n, seed)."""
    rng = random.Random(seed)
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        if rng.random() < 0.2:
            a, b = rng.sample(_TOOLS, 2)
            t = rng.choice(_PREFS).format(a=a, b=b)
            if rng.random() < 0.7:
                t += " " + rng.choice(_FIXES).format(n=rng.randint(2, 999))
        else:
            s = rng.choice(_SUBJECTS)
            t = f"{s[0].upper()}{s[1:]} {rng.choice(_VERBS)} {rng.choice(_CONDITIONS)}."
            for _ in range(rng.randint(1, 2)):
                t += " " + rng.choice(_FIXES).format(n=rng.randint(2, 999))
        if t in seen:
            continue
        seen.add(t)
        out.append(t)
    return out


IMPORT_CHUNK = 25_000  # notes per imported file


def write_jsonl(path: Path, texts: list[str], seed: int = 99, start: int = 0) -> None:
    rng = random.Random(seed + start)
    tags = ["ci", "deploy", "db", "frontend", "infra", "python", "security", "perf"]
    with open(path, "w", encoding="utf-8") as f:
        for i, t in enumerate(texts, start):
            rec = {
                "id": f"BENCH{i:07d}", "text": t, "type": rng.choice(["semantic", "procedural", "episodic"]),
                "tags": rng.sample(tags, rng.randint(0, 2)), "created": f"2026-0{1 + i % 9}-1{i % 10}T12:00:00Z",
            }
            f.write(json.dumps(rec) + "\n")


def env_with(cache: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["MEMCLI_CACHE_DIR"] = str(cache)
    env.pop("MEMCLI_STORE", None)
    env.pop("MEMCLI_EMBED_MODEL", None)
    env.update(extra)
    return env


def memcli_cmd(*args: str) -> list[str]:
    return [PY, "-m", "memcli", *args]


def run(cmd: list[str], env: dict[str, str], **kw) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise SystemExit(f"command failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}")
    return p


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = (len(s) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def median(values: list[float]) -> float:
    return statistics.median(values)


def table(headers: list[str], rows: list[list[object]]) -> str:
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(cells[0]), sep, *(line(r) for r in cells[1:])])


def verdict(ok: bool) -> str:
    return "MET" if ok else "NOT MET"


def build_store(n: int, *, model: str | None = None, reuse: bool = True, quiet: bool = False) -> tuple[Path, Path]:
    """A store of `n` generated memories (imported with `memcli import`) and its embedding cache.

    Cached under BENCH_TMP keyed by (n, model) so several scripts can share it; rebuilt when
    missing or incomplete. Returns (store path, cache dir).
    """
    tag = f"{n}-{(model or 'default').replace('/', '_').replace(':', '_')}"
    base = BENCH_TMP / f"store-{tag}"
    store, cache, done = base / "store", base / "cache", base / "DONE"
    if reuse and done.exists() and (store / "facts").is_dir():
        return store, cache
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    texts = make_texts(n)
    extra = {"MEMCLI_EMBED_MODEL": model} if model else {}
    if not quiet:
        print(f"# building a {n}-memory store at {store} ...", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    run(memcli_cmd("--store", str(store), "init"), env_with(cache, **extra), cwd=str(ROOT))  # import creates none
    for part in range(0, n, IMPORT_CHUNK):  # `import` takes files up to 10 MB: 100k notes are ~25 MB
        jsonl = base / f"in-{part // IMPORT_CHUNK}.jsonl"
        write_jsonl(jsonl, texts[part : part + IMPORT_CHUNK], start=part)
        run(memcli_cmd("--store", str(store), "import", "--create", str(jsonl)), env_with(cache, **extra),
            cwd=str(ROOT))
    if model:
        (store / "config.toml").write_text(f'embed_model = "{model}"\n')
    if not quiet:
        print(f"# built in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    done.write_text("ok\n")
    return store, cache
