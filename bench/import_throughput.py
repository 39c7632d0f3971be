"""Bulk import throughput: `memcli import` (a real process, cold embedding cache) vs raw fastembed.

    .venv/bin/python bench/import_throughput.py [--sizes 2000,10000] [--repeat 1] [--profile]

Baseline: a child process that loads fastembed's TextEmbedding with the same offline default model
as memcli/services/embed.py and embeds the same texts with batch_size=64 (bench/_raw_embed.py). Its
throughput counts the embedding loop only (model load excluded), which is the strictest baseline;
memcli's figure is end to end (interpreter start, imports, model load, YAML files, fsyncs, SQLite,
hnswlib). Runs are interleaved (raw, memcli, raw, memcli...) so machine load hits both alike.
Target: memcli texts/s >= 0.8 x raw texts/s.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PY, ROOT, env_with, make_texts, median, memcli_cmd, run, table, verdict, write_jsonl  # noqa: E402

TARGET = 0.8


def raw_run(jsonl: Path, work: Path) -> dict[str, float]:
    cache = work / "raw-cache"
    shutil.rmtree(cache, ignore_errors=True)
    t0 = time.perf_counter()
    p = run([PY, str(ROOT / "bench" / "_raw_embed.py"), str(jsonl), "64"], env_with(cache), cwd=str(work))
    wall = time.perf_counter() - t0
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out["proc_s"] = wall
    return out


def memcli_run(jsonl: Path, work: Path, profile: Path | None = None) -> float:
    cache, store = work / "memcli-cache", work / "store"
    shutil.rmtree(cache, ignore_errors=True)  # cold embedding cache: every text is embedded
    shutil.rmtree(store, ignore_errors=True)
    cmd = memcli_cmd("--store", str(store), "import", "--create", str(jsonl))
    if profile is not None:
        cmd = [PY, "-m", "cProfile", "-o", str(profile), *cmd[1:]]
    t0 = time.perf_counter()
    p = run(cmd, env_with(cache), cwd=str(work))
    wall = time.perf_counter() - t0
    if "imported" not in p.stderr:
        raise SystemExit(f"unexpected import output: {p.stderr}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="2000,10000")
    ap.add_argument("--repeat", type=int, default=1, help="interleaved raw/memcli pairs per size (median)")
    ap.add_argument("--profile", action="store_true", help="also cProfile one memcli import of the first size")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    work = Path(tempfile.mkdtemp(prefix="memcli-bench-import-"))
    print(f"# import throughput; python {sys.version.split()[0]}, {os.cpu_count()} cpus, "
          f"load average at start {os.getloadavg()[0]:.2f}")
    rows = []
    try:
        for n in sizes:
            jsonl = work / f"in-{n}.jsonl"
            write_jsonl(jsonl, make_texts(n))
            raws, mems = [], []
            for _ in range(args.repeat):
                raws.append(raw_run(jsonl, work))
                mems.append(memcli_run(jsonl, work))
            raw_embed = median([r["embed_s"] for r in raws])
            raw_proc = median([r["proc_s"] for r in raws])
            mem = median(mems)
            raw_tps, raw_proc_tps, mem_tps = n / raw_embed, n / raw_proc, n / mem
            ratio = mem_tps / raw_tps
            rows.append([n, f"{raw_tps:.0f}", f"{raw_proc_tps:.0f}", f"{mem_tps:.0f}", f"{mem:.1f}",
                         f"{ratio:.2f}", f"{mem_tps / raw_proc_tps:.2f}", verdict(ratio >= TARGET)])
            print(f"# n={n}: raw embed {raw_embed:.1f} s (process {raw_proc:.1f} s), memcli import {mem:.1f} s",
                  flush=True)
        print()
        print(table(["texts", "raw texts/s (embed loop)", "raw texts/s (whole process)", "memcli import texts/s",
                     "memcli s", "ratio vs embed loop", "ratio vs whole process", f"target >= {TARGET}"], rows))
        if args.profile:
            prof = work / "import.prof"
            jsonl = work / f"in-{sizes[0]}.jsonl"
            wall = memcli_run(jsonl, work, profile=prof)
            print(f"\n# cProfile of `memcli import` of {sizes[0]} texts ({wall:.1f} s under the profiler)")
            st = pstats.Stats(str(prof))
            total = st.total_tt  # type: ignore[attr-defined]
            groups = {"onnxruntime inference": "onnxruntime_pybind11_state.run", "tokenizer": "encode_batch"}
            found = dict.fromkeys(groups, 0.0)
            cum: dict[str, float] = {}
            for (fname, line, func), stat in st.stats.items():  # type: ignore[attr-defined]
                tt, ct = stat[2], stat[3]
                for k, pat in groups.items():
                    if pat in f"{fname}:{line}({func})":
                        found[k] += tt
                if "memcli" in fname:
                    key = f"{Path(fname).name}:{func}"
                    cum[key] = max(cum.get(key, 0.0), ct)
            for k, v in found.items():
                print(f"  {k:<28} {v:6.2f} s  ({100 * v / total:4.1f} %)")
            # The file writes run in threads, which cProfile does not follow: _write_all is their total.
            for name in ("io.py:import_memories", "embed.py:embed", "embed.py:_load", "io.py:_write_all",
                         "index.py:sync", "index.py:_apply", "index.py:_add_vectors", "index.py:_save_hnsw"):
                if name in cum:
                    print(f"  {name:<28} {cum[name]:6.2f} s cumulative")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
