"""Per-kind figures of the labelled decision set (tests/data/decision_pairs.jsonl) through the real
`add` with the real default model: what a user would see after adding `old`, then `new`.

    python bench/decisions.py [PAIRS.jsonl] [-v]

(default: tests/data/decision_pairs.jsonl; another file scores a new, unseen batch blind; -v lists
every pair whose outcome is not the one its kind wants.)

merged = the new text became NONE/UPDATE of the old memory; superseded = the old memory is kept,
hidden, `superseded_by` the new one; separate = both live. Also prints the rates the issue's
thresholds are about, and the contradiction flags the rules would raise on pairs that are not
value changes (consolidate's false flags).
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memcli.api import Store  # noqa: E402
from memcli.index import Filters  # noqa: E402
from memcli.rules.relate import relate  # noqa: E402

KINDS = ("duplicate", "refinement", "value_change", "distinct", "unrelated")


GOOD = {"duplicate": "merged", "refinement": "merged", "value_change": "superseded", "distinct": "separate",
        "unrelated": "separate"}


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "-v"]
    verbose = "-v" in sys.argv[1:]
    path = Path(args[0]) if args else ROOT / "tests" / "data" / "decision_pairs.jsonl"
    pairs = [json.loads(line) for line in path.open() if line.strip()]
    table: Counter[tuple[str, str]] = Counter()
    flags = []
    vc_flagged = 0
    embedder = None
    with tempfile.TemporaryDirectory() as tmp:
        for i, pair in enumerate(pairs):
            store = Store(Path(tmp) / f"s{i}")
            store.init()
            if embedder is not None:
                store.index.embedder = embedder
            (old,) = store.add(pair["old"], raw=True, project="p").events
            embedder = store.index.embedder
            new_ids = {e.id for e in store.add(pair["new"], project="p").events}
            live = {r.id for r in store.index.select(Filters(current=True))}
            every = {r.id: r for r in store.index.select()}
            if old.id in new_ids and len(every) == 1:
                outcome = "merged"
            elif every[old.id].superseded_by in new_ids:
                outcome = "superseded"
            elif old.id in live and len(live) >= 2:
                outcome = "separate"
            else:
                outcome = "other"
            table[(pair["kind"], outcome)] += 1
            v = embedder.embed([pair["old"], pair["new"]])
            rel = relate(pair["old"], pair["new"], float(np.dot(v[0], v[1])))
            if verbose and outcome != GOOD[pair["kind"]] and not (pair["kind"] == "value_change" and rel.contradiction):
                print(f"MISS {pair['kind']}: {outcome} ({rel.kind}: {rel.reason}): {pair['old']!r} -> {pair['new']!r}")
            if pair["kind"] == "value_change" and outcome != "superseded" and rel.contradiction:
                vc_flagged += 1
            if pair["kind"] != "value_change" and rel.contradiction:
                flags.append(pair)
                if verbose:
                    print(f"FLAG {pair['kind']}: {rel.reason}: {pair['old']!r} / {pair['new']!r}")
            store.close()
    n = Counter(p["kind"] for p in pairs)
    print(f"{len(pairs)} pairs")
    for kind in KINDS:
        print(f"{kind:<13} n={n[kind]:<3} " + "  ".join(f"{o}={table[(kind, o)]}" for o in
                                                     ("merged", "superseded", "separate", "other")))
    sep = sum(table[(k, "separate")] for k in ("distinct", "unrelated")) / (n["distinct"] + n["unrelated"])
    merged = sum(table[(k, "merged")] for k in KINDS)
    good = sum(table[(k, "merged")] for k in ("duplicate", "refinement"))
    print(f"distinct+unrelated kept separate: {sep:.3f}")
    print(f"merge precision: {good / max(1, merged):.3f}  merge recall (dup+ref): "
          f"{good / (n['duplicate'] + n['refinement']):.3f}")
    print(f"value changes superseded: {table[('value_change', 'superseded')] / n['value_change']:.3f}"
          f"  superseded or flagged: {(table[('value_change', 'superseded')] + vc_flagged) / n['value_change']:.3f}")
    print(f"false contradiction flags: {len(flags)}")


if __name__ == "__main__":
    main()
