"""What a curation command pays before its work, beyond what `export` pays: imports and regex
compilation, in CPU (the machine may be shared: no wall clock here).

    python bench/import_cost.py [--store DIR] [--repeat 5]

1. CPU of `import memcli.cli.app` (every command) and then of the modules consolidate / merge --auto
   import and export does not (curate, decide, extract, llm_checks, threads), each in a fresh
   process, median of --repeat.
2. With --store (e.g. /tmp/memcli-bench/curate-10000-default/store; the embedding cache is the
   `cache` directory next to it when there is one, else a temporary one): `export`,
   `consolidate --dry-run` and `merge --auto --dry-run` run once each in a fresh process
   with re's compiler wrapped: how many patterns each compiles after the CLI
   is imported and their CPU (thread time), and whether numpy.ma was imported.

Python compiles memcli's sources on every run when PYTHONDONTWRITEBYTECODE is set (the modules are
not in a .pyc); the first figure says which case it measured.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CURATION_MODULES = ("memcli.ops.curate", "memcli.rules.relate", "memcli.services.extract", "memcli.services.llm.checks",
                    "memcli.services.threads")

_IMPORTS = """
import importlib, json, sys, time
t0 = time.process_time()
import memcli.cli.app
t1 = time.process_time()
for name in sys.argv[1:]:
    importlib.import_module(name)
t2 = time.process_time()
print(json.dumps([t1 - t0, t2 - t1]))
"""

_RUN = """
import json, re, sys, time
_compiler = getattr(re, "_compiler", None) or __import__("sre_compile")  # re._compiler: Python 3.11+
compiler, spent = _compiler.compile, []
def counted(pattern, flags=0):
    t = time.thread_time()
    try:
        return compiler(pattern, flags)
    finally:
        spent.append(time.thread_time() - t)
import memcli.cli.app
_compiler.compile = counted  # from here on: what the command itself compiles
sys.argv = ["memcli", *sys.argv[1:]]
try:
    memcli.cli.app.main()
except SystemExit as e:
    assert not e.code, e.code
print(json.dumps([len(spent), sum(spent), "numpy.ma" in sys.modules]), file=sys.stderr)
"""


def _python(code: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, env=env)
    if proc.returncode:
        raise SystemExit(proc.stderr[-2000:])
    return proc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", type=Path, help="a store to run the commands on (read-only runs only)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    source = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
    print(f"# memcli sources compiled on every run: {'yes (PYTHONDONTWRITEBYTECODE)' if source else 'no (.pyc)'}")
    runs = [json.loads(_python(_IMPORTS, *CURATION_MODULES).stdout) for _ in range(args.repeat)]
    cli, extra = (statistics.median(r[i] for r in runs) * 1000 for i in (0, 1))
    print(f"import memcli.cli.app: {cli:.1f} ms CPU; then the curation modules: {extra:.1f} ms CPU "
          f"(median of {args.repeat})")
    if args.store is None:
        return
    with tempfile.TemporaryDirectory() as tmp:
        cache = args.store.parent / "cache"  # bench/curate.py's layout; never the user's own cache
        env = dict(os.environ, MEMCLI_CACHE_DIR=str(cache if cache.is_dir() else Path(tmp)))
        for command in (["export", "--format", "jsonl", "-o", str(Path(tmp) / "x.jsonl")],
                        ["consolidate", "--dry-run", "--json"], ["merge", "--auto", "--dry-run", "--no-llm", "--json"]):
            proc = _python(_RUN, "--store", str(args.store), *command, env=env)
            n, cpu, ma = json.loads(proc.stderr.splitlines()[-1])
            label = " ".join(a for a in command if a in ("export", "consolidate", "merge", "--auto", "--dry-run"))
            print(f"{label:24s} patterns compiled after the CLI import: {n:3d}, "
                  f"{cpu * 1000:5.1f} ms CPU; numpy.ma imported: {ma}")


if __name__ == "__main__":
    main()
