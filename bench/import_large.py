"""`memcli import` of a large store's own export: time and peak memory, streamed at any file size.

    .venv/bin/python bench/import_large.py [--n 100000] [--reader-only]

Builds a store of --n memories (hash embedder: the figures are about streaming and writing, not
the model), exports it as jsonl, then imports that export into an empty store in a fresh process
and prints wall time, memories/s and the importing process's peak RSS. Baseline in the same run:
the same import of a tenth of the export (the first --n/10 lines). Memory is bounded when the peak
RSS at --n is about the same as at --n/10 (it would grow tenfold if the file were held whole).
The store being written does grow in memory (its hnswlib vectors: ~1.5 kB a 384-d memory), so the
reader is also measured on its own (`--reader-only`, seconds): Python heap peak (tracemalloc) while
validating every record of the export, against reading the file whole.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BENCH_TMP, make_texts, table  # noqa: E402


def child(code: str, env: dict[str, str]) -> tuple[float, float, subprocess.CompletedProcess]:
    """Run python code in a child; its wall time and peak RSS (MB)."""
    wrapper = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
               f"p = subprocess.run({code}, capture_output=True, text=True); "
               "sys.stdout.write(p.stdout); sys.stderr.write(p.stderr); "
               "print(f'@@ {time.perf_counter() - t:.3f} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}', "
               "file=sys.stderr); sys.exit(p.returncode)")
    p = subprocess.run([sys.executable, "-c", wrapper], capture_output=True, text=True, env=env)
    last = [ln for ln in p.stderr.splitlines() if ln.startswith("@@ ")][-1].split()
    return float(last[1]), int(last[2]) / 1024, p


def reader_only(n: int, work: Path) -> None:
    """Heap peak of memcli's streaming reader over an n-record export vs reading the file whole."""
    import tracemalloc

    from memcli.ops.records import read_records, to_memory

    texts = make_texts(n)
    dump = work / "export.jsonl"
    with dump.open("w") as f:
        for i, t in enumerate(texts):
            f.write(json.dumps({"id": f"M{i:07d}", "text": t, "tags": [f"t{i % 50}"], "type": "semantic",
                                "created": "2026-01-01T00:00:00Z", "updated": "2026-01-01T00:00:00Z",
                                "origins": ["session:x"], "source": "import", "user": "default",
                                "confidence": 0.8}) + "\n")
    del texts
    size = dump.stat().st_size / 1e6
    tracemalloc.start()
    t = time.perf_counter()
    count = sum(1 for rec in read_records(dump, "jsonl") if to_memory(rec, "import:x"))
    stream_s, (_, stream_peak) = time.perf_counter() - t, tracemalloc.get_traced_memory()
    tracemalloc.stop()
    tracemalloc.start()
    t = time.perf_counter()
    whole = [json.loads(line) for line in dump.read_text().splitlines()]
    whole_s, (_, whole_peak) = time.perf_counter() - t, tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert count == len(whole) == n
    print(f"reading and validating an export of {n:,} memories ({size:.1f} MB jsonl), Python heap peak:")
    print(table(["what", "s", "heap peak MB"], [
        ["memcli.ops.records: stream + validate every record", f"{stream_s:.1f}", f"{stream_peak / 1e6:.2f}"],
        ["baseline: read the file whole, parse every line", f"{whole_s:.1f}", f"{whole_peak / 1e6:.2f}"],
    ]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--reader-only", action="store_true", help="only the reader's memory (seconds, not minutes)")
    args = ap.parse_args()
    if args.reader_only:
        work = Path(tempfile.mkdtemp(prefix="import-reader-"))
        try:
            reader_only(args.n, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    work = Path(tempfile.mkdtemp(prefix="import-large-", dir=BENCH_TMP if BENCH_TMP.exists() else None))
    env = {**os.environ, "MEMCLI_EMBED_MODEL": "hash:384", "MEMCLI_CACHE_DIR": str(work / "cache")}
    env.pop("MEMCLI_STORE", None)
    try:
        texts = make_texts(args.n)
        src = work / "src.jsonl"
        with src.open("w") as f:
            for i, t in enumerate(texts):
                f.write(json.dumps({"text": t, "tags": [f"t{i % 50}"],
                                    "created": f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:00:00Z"}) + "\n")
        memcli = [sys.executable, "-m", "memcli"]
        t0 = time.perf_counter()
        subprocess.run([*memcli, "--store", str(work / "a"), "import", "--create", str(src)], check=True, env=env,
                       capture_output=True)
        build = time.perf_counter() - t0
        dump = work / "export.jsonl"
        t0 = time.perf_counter()
        subprocess.run([*memcli, "--store", str(work / "a"), "export", "--format", "jsonl", "-o", str(dump)],
                       check=True, env=env, capture_output=True)
        export_s = time.perf_counter() - t0
        size_mb = dump.stat().st_size / 1e6
        tenth = work / "tenth.jsonl"
        with dump.open() as f, tenth.open("w") as out:
            for i, line in enumerate(f):
                if i >= args.n // 10:
                    break
                out.write(line)
        rows = []
        for name, path, n in (("a tenth of it (baseline)", tenth, args.n // 10), ("the whole export", dump, args.n)):
            target = work / f"b-{n}"
            cmd = [*memcli, "--store", str(target), "import", "--create", "--json", str(path)]
            seconds, rss, p = child(repr(cmd), env)
            if p.returncode:
                sys.exit(f"import failed: {p.stderr[-2000:]}")
            report = json.loads(p.stdout)
            n_files = sum(1 for _ in (target / "facts").iterdir())
            assert report["added"] == n == n_files, (report, n, n_files)
            rows.append([f"import {name}: {n:,} memories, {path.stat().st_size / 1e6:.1f} MB", f"{seconds:.1f}",
                         f"{n / seconds:,.0f}", f"{rss:.0f}"])
            shutil.rmtree(target, ignore_errors=True)
        print(f"memcli import of its own export (jsonl, hash:384 embedder, batches of 2,000; building the source "
              f"store took {build:.0f} s, exporting it {export_s:.1f} s, {size_mb:.1f} MB)")
        print(table(["what", "wall s", "memories/s", "peak RSS MB"], rows))
        print(f"peak RSS, whole / tenth: {float(rows[1][3]) / float(rows[0][3]):.2f}x for 10x the records")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
