"""The embedding model's memory stays bounded whatever the script: a batch of long Korean chat
lines (each ~256 tokens) once took one model call from 605 MB to 1.3 GB (issue 22: a 300 KB
ChatGPT export peaked at 1.33 GB).

32 texts are enough to catch it: one unbounded call of 32 such texts grows it by ~590 MB (the
bounded batches by ~95 MB, as for 128 texts), at a quarter of the CPU. `MEMCLI_STRESS=long`
embeds 128."""

from __future__ import annotations

import subprocess
import sys

from conftest import STRESS_LONG

TEXTS = 128 if STRESS_LONG else 32

CODE = """
import resource
from memcli.services.embed import Embedder
e = Embedder(cache=None)
e.embed(["warm up"])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
texts = [f"{i}번 파이썬 가상환경 오류 해결 방법과 판다스 기초 데이터프레임 정리 " * 6 for i in range(__N__)]
vecs = e.embed(texts)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(vecs.shape[0], (after - before) // 1024)
"""


def test_long_non_english_texts_are_embedded_in_bounded_memory(tmp_path):
    env = {"MEMCLI_CACHE_DIR": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", CODE.replace("__N__", str(TEXTS))], capture_output=True, text=True,
                         timeout=600, env=env)
    assert out.returncode == 0, out.stderr
    n, grew_mb = map(int, out.stdout.split())
    assert n == TEXTS and grew_mb < 250, grew_mb  # 64 such texts a call grew it by ~700 MB
