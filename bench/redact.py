"""Redaction speed: `redact()` on a megabyte of realistic log lines and on pathological inputs.

Baseline, same run: one pass of a simple regular expression (`\\S+`) over the same text, the
floor any scan of the text pays. Prints CPU seconds (this process, `time.process_time`) and the
ratio; the tests judge only linearity (tests/test_redact.py), this prints the absolute figures.

    .venv/bin/python bench/redact.py            # --repeat 5
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, table  # noqa: E402

sys.path.insert(0, str(ROOT))
from memcli.services.redact import redact  # noqa: E402

LINE = ("Deployed v1.2.3 to 10.0.0.5 on 2026-11-29 (commit 3f2a1c9d8e7b); mail ops@example.com, "
        "password=hunter2, see src/app/main.py:42, call +1 (415) 555-0132, port 8080.\n")
INPUTS = {
    "1 MB of log lines": (LINE * (1_000_000 // len(LINE) + 1))[:1_000_000],
    "digits": "1 " * 300_000,
    "identifier": "a_" * 300_000 + " token",
    "begin-blocks": "-----BEGIN PRIVATE KEY-----\n" * 20_000,
    "plus": "+1 " * 200_000,
    "keys": "password: " * 60_000,
    "at-dots": "a@a." * 150_000,
}
WORDS = re.compile(r"\S+")


def cpu(work, *args) -> float:  # noqa: ANN001 - any callable
    start = time.process_time()
    work(*args)
    return time.process_time() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3, help="runs per input (the fastest is kept)")
    args = ap.parse_args()
    rows = []
    for name, text in INPUTS.items():
        base = min(cpu(WORDS.findall, text) for _ in range(args.repeat))
        took = min(cpu(redact, text) for _ in range(args.repeat))
        rows.append([name, f"{len(text) / 1e6:.2f}", f"{took:.3f}", f"{base:.3f}", f"{took / base:.1f}"])
    print(table(["input", "MB", "redact CPU s", r"\S+ scan CPU s", "ratio"], rows))


if __name__ == "__main__":
    main()
