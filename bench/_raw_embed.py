"""Baseline child process: plain fastembed on the same texts as memcli (no memcli code timed).

Usage: python bench/_raw_embed.py TEXTS.jsonl [batch_size]
Prints one JSON line: {"n", "load_s", "embed_s", "wall_s"} (wall_s from interpreter start).
"""

import json
import os
import sys
import tempfile
import time

T_START = time.perf_counter()  # near enough to interpreter start: imports below are timed


def main() -> None:
    path, batch = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 64
    with open(path, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from pathlib import Path

    from memcli.core.config import DEFAULT_EMBED_MODEL
    from memcli.services.embed import default_model_dir  # only builds the links to the packaged model files

    cache = Path(os.environ.get("MEMCLI_CACHE_DIR") or tempfile.mkdtemp())
    model_dir = default_model_dir(cache)
    t0 = time.perf_counter()
    from fastembed import TextEmbedding

    model = TextEmbedding(DEFAULT_EMBED_MODEL, specific_model_path=str(model_dir), cache_dir=str(cache / "fastembed"))
    t1 = time.perf_counter()
    vecs = list(model.embed(texts, batch_size=batch))
    t2 = time.perf_counter()
    assert len(vecs) == len(texts)
    print(json.dumps({"n": len(texts), "load_s": t1 - t0, "embed_s": t2 - t1, "wall_s": t2 - T_START}))


if __name__ == "__main__":
    main()
