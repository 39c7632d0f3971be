"""`Index.sync()` on a 10k-memory store: nothing changed, and one file changed.

    .venv/bin/python bench/sync_nochange.py [--n 10000] [--runs 15] [--profile]

Every memcli command calls sync() first, so its no-change cost is paid on every search. Measured
in-process on a copy of the shared bench store (the copy keeps mtimes, so nothing looks changed).
Baseline: the least any change detection can cost, one `os.scandir` of facts/ with a stat of every
entry. Figures are medians of --runs.
- warm: the same Index object syncs again (a long-lived process: the library, `--batch`);
- fresh: a new Store + Index each time (what a new CLI process pays: opening SQLite included);
- one file changed: a front-matter-only edit (tags; re-indexed, not re-embedded) and a text edit
  (re-embedded: the model is loaded by a first, uncounted edit, so the figure is the warm cost;
  the first edit, model load included, is shown too).
Target: no-change sync <= 50 ms.
"""

from __future__ import annotations

import argparse
import cProfile
import itertools
import os
import pstats
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import build_store, median, pct, table, verdict  # noqa: E402

TARGET_MS = 50.0


def scan_baseline(facts: Path) -> int:
    n = 0
    with os.scandir(facts) as it:
        for e in it:
            if e.name.endswith(".md") and not e.name.startswith("."):
                e.stat()
                n += 1
    return n


def ms(f, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        f()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--profile", action="store_true", help="cProfile the warm no-change sync")
    args = ap.parse_args()
    src, _ = build_store(args.n)
    os.environ.pop("MEMCLI_EMBED_MODEL", None)
    from memcli.core.memory import Memory
    from memcli.ops.handle import Store

    work = Path(tempfile.mkdtemp(prefix="memcli-bench-sync-"))
    # An empty embedding cache: the sidecar holds every vector, so only edited text is embedded.
    os.environ["MEMCLI_CACHE_DIR"] = str(work / "cache")
    print(f"# sync; {args.n} memories; medians of {args.runs}; load average at start {os.getloadavg()[0]:.2f}")
    try:
        path = work / "store"
        shutil.copytree(src, path, symlinks=True)  # copy2 keeps mtime_ns: the catalog still matches
        store = Store(path)
        index = store.index
        t0 = time.perf_counter()
        first = index.sync()
        first_ms = (time.perf_counter() - t0) * 1000
        assert not first.touched, f"the copied store looked changed: {first}"
        assert index.count() == args.n, index.count()

        base = ms(lambda: scan_baseline(store.facts_dir), args.runs)
        warm = ms(index.sync, args.runs)

        def fresh_sync() -> None:
            s = Store(path)
            s.index.sync()
            s.close()

        fresh = ms(fresh_sync, args.runs)

        files = sorted(store.facts_dir.glob("*.md"))
        picks = itertools.cycle(files[:: max(1, len(files) // 97)])

        def edit(kind: str, i: int) -> float:
            f = next(picks)
            m = Memory.parse(f.read_bytes(), file_id=f.stem)
            if kind == "tags":
                m.tags = [*m.tags, f"edited{i}"]
            else:
                m.text = f"{m.text} (edited {i}, {time.time_ns()})"  # never in the cache
            with store.lock():
                store.write(m)
            t0 = time.perf_counter()
            r = index.sync()
            dt = (time.perf_counter() - t0) * 1000
            assert r.changed == 1, r
            return dt

        tag_edits = [edit("tags", i) for i in range(args.runs)]
        first_text = edit("text", -1)  # loads the model
        text_edits = [edit("text", i) for i in range(args.runs)]

        b = median(base)
        rows = [
            ["baseline: scandir + stat of facts/", f"{b:.1f}", f"{pct(base, .95):.1f}", "1.00", ""],
            ["sync, nothing changed (warm Index)", f"{median(warm):.1f}", f"{pct(warm, .95):.1f}",
             f"{median(warm) / b:.2f}", verdict(median(warm) <= TARGET_MS)],
            ["sync, nothing changed (fresh Store+Index)", f"{median(fresh):.1f}", f"{pct(fresh, .95):.1f}",
             f"{median(fresh) / b:.2f}", verdict(median(fresh) <= TARGET_MS)],
            ["sync, 1 file changed (tags only)", f"{median(tag_edits):.1f}", f"{pct(tag_edits, .95):.1f}",
             f"{median(tag_edits) / b:.2f}", ""],
            ["sync, 1 file changed (text, model warm)", f"{median(text_edits):.1f}", f"{pct(text_edits, .95):.1f}",
             f"{median(text_edits) / b:.2f}", ""],
            ["sync, 1 file changed (text, first: model load)", f"{first_text:.1f}", "", "", ""],
            ["first sync of the copy (opens SQLite)", f"{first_ms:.1f}", "", "", ""],
        ]
        print()
        print(table(["case", "median ms", "p95 ms", "ratio vs baseline", f"target <= {TARGET_MS:.0f} ms"], rows))
        if args.profile:
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(10):
                index.sync()
            pr.disable()
            print("\n# cProfile of 10 warm no-change syncs (tottime)")
            pstats.Stats(pr, stream=sys.stdout).sort_stats("tottime").print_stats(12)
            pr = cProfile.Profile()
            pr.enable()
            for i in range(5):
                edit("tags", 100 + i)
            pr.disable()
            print("\n# cProfile of 5 one-file (tags) edits + syncs (cumulative)")
            pstats.Stats(pr, stream=sys.stdout).sort_stats("cumulative").print_stats(25)
        store.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
