"""`add` CPU time against input size (issue 24: 100 KB must cost <= 4x the CPU of 25 KB).

Usage: python bench/add_linear.py [--model hash:256|default] [--profile] [--shapes lines,paras,alike]
(TMPDIR=/dev/shm keeps the file system's cost out of the figures.)
Each size is added to a fresh store in a fresh process-level Store; prints CPU seconds per size
and the ratio 100 KB / 25 KB. The input is real prose: commit messages of the click mirror when
it is there, else generated sentences (distinct facts, one per line).
"""

from __future__ import annotations

import argparse
import cProfile
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


def run(size: int, model: str, profile: bool, shape: str = "lines") -> float:
    text = SHAPES[shape](corpus())[:size]
    with tempfile.TemporaryDirectory() as d:
        store = Store(Path(d) / "s", Config(embed_model=model))
        store.init()
        store.add("warm up the model and the index", raw=True, llm=False)
        # no embedding cache: each size embeds all of its text (else the larger input, a
        # superset of the smaller one, would find most of its vectors cached)
        store.index.embedder._cache = lambda: None  # type: ignore[method-assign]
        prof = cProfile.Profile() if profile else None
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
        summary = result.summary()
        print(f"{shape:>5} {size // 1024:>4} KB: {cpu:6.2f} s CPU, ADD {summary['ADD']}, NONE {summary['NONE']}")
        return cpu


def main() -> None:
    import os

    os.environ["MEMCLI_CACHE_DIR"] = tempfile.mkdtemp(prefix="memcli-bench-cache-")  # never the user's cache
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="hash:256")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--sizes", default="25,50,100")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    args = ap.parse_args()
    model = Config().embed_model if args.model == "default" else args.model
    for shape in args.shapes.split(","):
        cpus = {int(s): run(int(s) * 1024, model, args.profile, shape) for s in args.sizes.split(",")}
        if 25 in cpus and 100 in cpus:
            print(f"{shape:>5} ratio 100 KB / 25 KB: {cpus[100] / cpus[25]:.2f} (linear: ~4, limit 4)")


if __name__ == "__main__":
    main()
