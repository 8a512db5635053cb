"""A big block's first pass on its leading principal axes: who gets heads, and what a search finds."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from memory.vectors import heads
from memory.vectors.embedding import normalise
from memory.vectors.scan import top
from memory.vectors.scope_block import ScopeBlock
from memory.vectors.vector_cache import VectorCache

DIM = 512


def sentence_like(count: int, seed: int) -> np.ndarray:
    """Unit rows whose energy sits mostly on a few axes, as sentence vectors' does (a random
    rotation of a decaying spectrum: 80% on the leading 64 of 512)."""
    rng = np.random.default_rng(seed)
    spread = np.where(np.arange(DIM) < heads.HEAD_DIMS, 1.0, 0.14)
    rotation, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(DIM, DIM)))
    return normalise((rng.normal(size=(count, DIM)) * spread) @ rotation.T)


@pytest.fixture
def small_heads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Heads for blocks of 600 rows and more, 64 rows of a stripe read in full."""
    monkeypatch.setattr(heads, "HEAD_ROWS", 600)
    monkeypatch.setattr("memory.vectors.scope_block.HEAD_ROWS", 600)
    monkeypatch.setattr(heads, "PICK", 64)


def loaded(vectors: np.ndarray, budget: int = 2**30) -> tuple[VectorCache, ScopeBlock]:
    ids = [f"e{i}" for i in range(len(vectors))]
    cache = VectorCache(budget, lambda scope, sink: sink(1, len(ids), [(cid,) for cid in ids], vectors))
    assert cache.preload("a", 1)
    return cache, cache._blocks["a"]


def one_pass(block: ScopeBlock, query: np.ndarray, limit: int) -> list[tuple[str, float]]:
    """What the block's scan gives without heads."""
    return top([dataclasses.replace(block.snapshot(), heads=None)], query, limit)


def test_a_big_block_of_sentence_like_vectors_gets_heads_and_finds_what_one_pass_finds(small_heads) -> None:
    vectors = sentence_like(2000, seed=1)
    cache, block = loaded(vectors)
    snapshot = block.snapshot()
    assert snapshot.heads is not None and snapshot.heads.codes.shape == (2000, heads.HEAD_DIMS)
    assert snapshot.heads.axes.energy > 0.7
    assert block.nbytes == 2000 * (DIM + 5) + 2000 * (heads.HEAD_DIMS + 4)  # the budget counts the heads
    for query in sentence_like(20, seed=2):
        assert cache.search(query, ["a"], 10, {"a": 1}) == one_pass(block, query, 10)  # the same rows and scores


def test_rows_written_removed_and_compacted_keep_their_heads(small_heads) -> None:
    vectors = sentence_like(1400, seed=3)
    cache, block = loaded(vectors[:1000])
    cache.apply("a", 2, ids=[f"n{i}" for i in range(400)], vectors=vectors[1000:])  # grows the block
    query = vectors[1200]
    assert cache.search(query, ["a"], 1, {"a": 2})[0][0] == "n200"
    before = block.snapshot().heads
    assert before is not None
    kept = [row for row in range(1000, 1400) if row != 1200]  # the rows of n0..n399 but n200
    cache.apply("a", 3, removed=[f"e{i}" for i in range(1000)] + ["n200"])  # compacted
    snapshot = block.snapshot()
    assert snapshot.codes.shape[0] == 399 and snapshot.heads is not None and snapshot.heads.codes.shape[0] == 399
    assert np.array_equal(snapshot.heads.codes, before.codes[kept])  # the kept rows keep their very heads
    assert np.array_equal(snapshot.heads.scales, before.scales[kept])
    hits = cache.search(query, ["a"], 5, {"a": 3})
    assert "n200" not in dict(hits) and hits == one_pass(block, query, 5)


def test_vectors_with_spread_energy_get_no_heads(small_heads) -> None:
    """Random (or hashed) vectors hold ~1/8 of their energy on any 64 axes: heads would not rank them."""
    _cache, block = loaded(normalise(np.random.default_rng(4).normal(size=(2000, DIM))))
    assert block.snapshot().heads is None and block.nbytes == 2000 * (DIM + 5)


def test_a_small_block_gets_no_heads(small_heads) -> None:
    _cache, block = loaded(sentence_like(500, seed=5))
    assert block.snapshot().heads is None


def test_heads_that_would_overrun_the_budget_are_not_made(small_heads) -> None:
    _cache, block = loaded(sentence_like(2000, seed=6), budget=2000 * (DIM + 5) + 1000)
    assert block.snapshot().heads is None
