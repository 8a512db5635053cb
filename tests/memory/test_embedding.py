"""The OpenAI-compatible embedding provider against a fake server speaking the real protocol."""

from __future__ import annotations

import math

import numpy as np
import pytest
from fakes.openai_server import FakeOpenAI
from support.files import write

from memory import EmbeddingError, EmbeddingSettings, MemoryManager, MemorySettings, OpenAIEmbedding, make_embedder
from memory.vectors.embedding import LocalEmbedding


@pytest.fixture
async def fake() -> FakeOpenAI:
    async with FakeOpenAI(embed_dim=32, max_embed_batch=64) as server:
        yield server


def provider(fake: FakeOpenAI, **overrides: object) -> OpenAIEmbedding:
    options: dict[str, object] = {"batch_size": 10, "max_retries": 2, "timeout_s": 5, **overrides}
    settings = EmbeddingSettings(provider="openai", base_url=fake.base_url, api_key="test-key", model="emb-1", **options)
    embedder = make_embedder(settings)
    assert isinstance(embedder, OpenAIEmbedding)
    return embedder


async def test_batches_follow_the_batch_size(fake: FakeOpenAI, workspace) -> None:
    embedder = provider(fake)
    for i in range(100):
        write(workspace, "alice", f"memory/n{i:03d}.md", f"- note {i}\n")
    manager = MemoryManager(workspace, MemorySettings(), embedder=embedder)
    report = await _in_thread(manager.indexer.sync)
    assert report.ok and report.embed_calls == math.ceil(100 / 10) == len(fake.embed_requests)
    assert all(len(r["input"]) <= 10 for r in fake.embed_requests)
    again = await _in_thread(manager.indexer.sync)
    assert again.embed_calls == 0 and len(fake.embed_requests) == 10
    manager.close()


async def test_a_500_from_the_endpoint_still_gives_keyword_results(fake: FakeOpenAI, workspace) -> None:
    write(workspace, "alice", "MEMORY.md", "- prefers green tea\n")
    manager = MemoryManager(workspace, MemorySettings(), embedder=provider(fake, max_retries=0))
    assert (await _in_thread(manager.indexer.sync)).ok
    fake.fail_embeddings(500, times=5)
    hits = await _in_thread(lambda: manager.search("green tea", "alice"))
    assert [h.path for h in hits] == ["MEMORY.md"] and hits[0].vector_score is None
    manager.close()


async def test_429_is_retried_and_errors_are_clear(fake: FakeOpenAI) -> None:
    embedder = provider(fake)
    fake.fail_embeddings(429, times=1, retry_after=0.01)
    vectors = await _in_thread(lambda: embedder.embed(["hello"]))
    assert vectors.shape == (1, 32) and len(fake.embed_requests) == 2
    fake.fail_embeddings(500, times=10)
    with pytest.raises(EmbeddingError, match="HTTP 500"):
        await _in_thread(lambda: provider(fake, max_retries=0).embed(["hello"]))


async def _in_thread(fn):  # the sync client must not block the fake server's event loop
    import asyncio

    return await asyncio.to_thread(fn)


class _LocalModel(LocalEmbedding):
    """A local model whose load fails when ``broken``, as with a damaged model file."""

    def __init__(self, *, broken: bool) -> None:
        super().__init__()
        self.broken = broken

    def _create(self) -> object:
        if self.broken:
            raise OSError("model file is truncated")
        return object()

    def _vectors(self, model: object, texts: list[str], *, query: bool, threads: int | None) -> np.ndarray:
        return np.ones((len(texts), 8), dtype=np.float32)


def test_a_local_model_that_fails_to_load_degrades_search_to_keywords(make_manager, workspace, caplog) -> None:
    write(workspace, "alice", "MEMORY.md", "- prefers green tea\n")
    indexed = make_manager(embedder=_LocalModel(broken=False))
    assert indexed.indexer.sync().ok
    indexed.close()
    manager = make_manager(embedder=_LocalModel(broken=True))  # e.g. the next start, the model file damaged
    caplog.set_level("WARNING")
    hits = manager.search("green tea", "alice")
    assert [h.path for h in hits] == ["MEMORY.md"] and hits[0].vector_score is None
    assert "could not load its model: OSError('model file is truncated')" in caplog.text
    with pytest.raises(EmbeddingError, match="could not load"):
        _LocalModel(broken=True).embed(["x"])
