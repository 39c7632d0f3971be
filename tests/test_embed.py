"""The embedder: the offline default model, normalised vectors, the cache that spares the model."""

from __future__ import annotations

import numpy as np
import pytest

from memcli.services.embed import DEFAULT_DIM, Embedder, EmbedError


def test_default_model_loads_offline_and_gives_unit_vectors(tmp_path):
    e = Embedder(cache=tmp_path)
    v = e.embed(["Run the unit tests with pytest -q.", "Deploy with make release."])
    assert v.shape == (2, DEFAULT_DIM) == (2, e.dim)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)


def test_meaning_not_spelling_decides_similarity(tmp_path):
    e = Embedder(cache=tmp_path)
    a, para, other = e.embed([
        "The staging database is wiped every Sunday night.",
        "Every weekend the staging DB gets reset.",
        "Frontend bundles are served from a CDN.",
    ])
    assert a @ para > a @ other + 0.2


def test_the_cache_spares_the_model_and_keeps_vectors_identical(tmp_path):
    texts = [f"Service {i} writes its logs to Loki." for i in range(70)]  # more than one batch
    first = Embedder(cache=tmp_path)
    v1 = first.embed(texts)
    assert first.model_loads == 1 and first.computed == 70
    first.close()
    second = Embedder(cache=tmp_path)
    v2 = second.embed(list(reversed(texts)))
    assert second.model_loads == 0 and second.computed == 0
    assert np.array_equal(v1, v2[::-1])


def test_a_loaded_model_is_shared_by_every_embedder_of_the_process(tmp_path):
    """One store per Embedder: an MCP server or the library API opening several stores (and the
    LLM bench, a fresh store per case) must not pay the ~0.2-0.7 s CPU of a model load per store."""
    import time

    first = Embedder(cache=tmp_path)
    first.embed(["The first store embeds a text."])
    second = Embedder(cache=tmp_path)
    started = time.process_time()
    second.embed(["A second store embeds a text the cache has never seen."])
    assert second.computed == 1 and second._model is first._model
    assert time.process_time() - started < 0.15  # a load alone costs more (0.2 s CPU measured warm)


def test_the_cache_is_per_model(tmp_path):
    Embedder(cache=tmp_path).embed(["one shared text"])
    other = Embedder("hash:64", cache=tmp_path)
    assert other.embed(["one shared text"]).shape == (1, 64)
    assert other.computed == 1


def test_an_unknown_model_name_is_one_clear_error(tmp_path):
    with pytest.raises(EmbedError, match="cannot load embedding model 'no-such/model'"):
        Embedder("no-such/model", cache=tmp_path).embed(["x"])
