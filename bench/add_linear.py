"""`add` CPU time against input size (issue 24: 100 KB must cost <= 4x the CPU of 25 KB).

Usage: python bench/add_linear.py [--model hash:256|default] [--profile] [--shapes lines,paras,alike]
                                  [--sizes 25,100] [--repeat 3]
(TMPDIR=/dev/shm keeps the file system's cost out of the figures.)
Each size is added to a fresh store in a fresh process (nothing one run parsed or compiled is left
for the next), after a warm-up add that loads the model, the index and the extraction and decision
rules; prints the CPU seconds of the fastest of `--repeat` runs per size (the runs of the sizes
interleaved, so a burst of load on a shared machine slows one run, not one size), the ratio 100 KB
/ 25 KB, and that ratio per fact (a linear add: ~1; 4x the text holds 3.96x the facts when
they are alike, 3.45x as paragraphs, 2.56x as commit-message lines).
The input is real prose: commit messages of the click mirror when it is there, else generated
sentences (distinct facts, one per line).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import pstats
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memcli.api import Store  # noqa: E402
from memcli.core.config import Config  # noqa: E402

MIRROR = Path("/work/.mirror/pallets+click/repo")


def corpus() -> str:
    """Commit messages (real text someone wrote), joined; generated sentences without a mirror."""
    if MIRROR.exists():
        out = subprocess.run(["git", "--git-dir", str(MIRROR), "log", "--format=%B", "-n", "6000"],
                             capture_output=True, text=True, check=True).stdout
        lines = [x.strip() for x in out.splitlines() if len(x.strip()) > 30]
        return "\n".join(dict.fromkeys(lines))
    rnd = random.Random(7)
    words = "deploy cache queue index config retry worker schema parser token client server".split()
    return "\n".join(f"The {rnd.choice(words)} {rnd.choice(words)} uses {rnd.choice(words)} {i}." for i in range(20000))


SHAPES = {
    "lines": lambda text: text,  # one commit-message line per line
    "paras": lambda text: "\n\n".join(text.splitlines()),  # one paragraph each
    # the shape that was quadratic: many facts alike (each compared with every earlier one)
    "alike": lambda text: "\n".join(f"The deploy script uses port {i} for the staging server." for i in range(100_000)),
}


def run(size: int, model: str, profile: bool, shape: str = "lines") -> tuple[float, int, dict[str, int]]:
    """(CPU seconds, facts, summary) of one add of `size` bytes of `shape`, in this process."""
    text = SHAPES[shape](corpus())[:size]
    with tempfile.TemporaryDirectory() as d:
        # the extraction and decision rules loaded (imports, compiled patterns) by an add to a store
        # of its own: text of its own, so no parse of the measured input is cached
        warm = Store(Path(d) / "warm", Config(embed_model=model))
        warm.init()
        warm.add("The warm-up cache uses port 1 for the warm-up queue.\nThe warm-up cache uses port 2 for the "
                 "warm-up queue.\nThe warm-up cache uses port 2 for the warm-up queue now.", llm=False)
        warm.close()
        store = Store(Path(d) / "s", Config(embed_model=model))
        store.init()
        store.add("warm up the model and the index", raw=True, llm=False)
        # no embedding cache: each size embeds all of its text (else the larger input, a
        # superset of the smaller one, would find most of its vectors cached)
        store.index.embedder._cache = lambda: None  # type: ignore[method-assign]
        prof = cProfile.Profile() if profile else None
        gc.collect()  # each run starts with no garbage of the warm-up to collect
        cpu = time.process_time()
        if prof:
            prof.enable()
        result = store.add(text, llm=False)
        if prof:
            prof.disable()
        cpu = time.process_time() - cpu
        store.close()
        if prof:
            pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
        return cpu, len(result.events), result.summary()


def child(size: int, model: str, profile: bool, shape: str) -> tuple[float, int, dict[str, int]]:
    """`run` in a fresh process (the profile, when asked for, printed by it)."""
    out = subprocess.run([sys.executable, __file__, "--child", f"{shape}:{size}", "--model", model,
                          *(["--profile"] if profile else [])], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    if profile:
        print("\n".join(lines[:-1]))
    cpu, facts, summary = json.loads(lines[-1])
    return cpu, facts, summary


def main() -> None:
    import os

    os.environ["MEMCLI_CACHE_DIR"] = os.environ.get("MEMCLI_BENCH_ADD_CACHE") or tempfile.mkdtemp(
        prefix="memcli-bench-cache-")  # never the user's cache
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="hash:256")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--sizes", default="25,50,100")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--repeat", type=int, default=3, help="runs per size; the fastest is reported")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    model = Config().embed_model if args.model == "default" else args.model
    if args.child:
        shape, size = args.child.split(":")
        print(json.dumps(run(int(size), model, args.profile, shape)))
        return
    os.environ["MEMCLI_BENCH_ADD_CACHE"] = os.environ["MEMCLI_CACHE_DIR"]  # the children's too
    print(f"load average {os.getloadavg()[0]:.1f}, fastest of {args.repeat} runs, each in a fresh process")
    sizes = [int(s) for s in args.sizes.split(",")]
    for shape in args.shapes.split(","):
        best: dict[int, tuple[float, int, dict[str, int]]] = {}
        for _ in range(max(1, args.repeat)):
            for size in sizes:
                got = child(size * 1024, model, args.profile, shape)
                if size not in best or got[0] < best[size][0]:
                    best[size] = got
        for size in sizes:
            cpu, facts, summary = best[size]
            print(f"{shape:>5} {size:>4} KB: {cpu:6.2f} s CPU, {facts:5} facts, ADD {summary['ADD']}, "
                  f"NONE {summary['NONE']}")
        if 25 in best and 100 in best:
            ratio = best[100][0] / best[25][0]
            per_fact = ratio / (best[100][1] / best[25][1])
            print(f"{shape:>5} ratio 100 KB / 25 KB: {ratio:.2f} (linear: ~4, limit 4); per fact {per_fact:.2f} "
                  f"(linear: ~1; {best[100][1] / best[25][1]:.2f}x the facts)")


if __name__ == "__main__":
    main()
