"""Baseline child process for bench/cold_search.py: import fastembed, load the default model from a
prepared directory, embed one query. Usage: python bench/_min_query.py MODEL_DIR "query"."""

import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
from fastembed import TextEmbedding  # noqa: E402

model = TextEmbedding("sentence-transformers/all-MiniLM-L6-v2", specific_model_path=sys.argv[1],
                      cache_dir=os.path.join(os.environ.get("MEMCLI_CACHE_DIR", "."), "fastembed"))
vec = next(iter(model.embed([sys.argv[2]], batch_size=64)))
print(len(vec))
