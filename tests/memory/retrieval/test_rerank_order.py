"""The remote reranker orders a search's best candidates; failing, it leaves the order as it was."""

from __future__ import annotations

import asyncio
import logging

from fakes.rerank_server import FakeReranker, Verbatim
from support.files import write

from memory.config import RerankSettings


def _notes(workspace) -> None:  # type: ignore[no-untyped-def]
    write(workspace, "alice", "memory/2026-11-20.md", "- the user planted tomatoes on the balcony\n")
    write(workspace, "alice", "memory/2026-11-21.md", "- the user bought tomatoes and basil at the market\n")
    write(workspace, "alice", "memory/2026-11-22.md", "- the user cooked pasta with basil from the market\n")


async def test_the_reranker_sets_the_order_of_the_top_candidates(workspace, make_manager) -> None:
    _notes(workspace)
    plain = [r.path for r in make_manager(embedder=None).search("basil market", "alice")]
    assert plain == ["memory/2026-11-22.md", "memory/2026-11-21.md"]  # the newer first
    async with FakeReranker() as fake:
        manager = make_manager(embedder=None, rerank=RerankSettings(base_url=fake.root, top_n=10))
        fake.fail_next(Verbatim({"results": [{"index": 1, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.2}]}))
        results = await asyncio.to_thread(manager.search, "basil market", "alice")
        assert [(r.path, r.rerank_score) for r in results] == [("memory/2026-11-21.md", 0.9), ("memory/2026-11-22.md", 0.2)]
        [request] = fake.requests
        assert request.body["query"] == "basil market" and request.body["documents"] == [
            "- the user cooked pasta with basil from the market", "- the user bought tomatoes and basil at the market"]


async def test_a_failing_reranker_leaves_the_order_and_says_so_once(workspace, make_manager, caplog) -> None:
    _notes(workspace)
    async with FakeReranker() as fake:
        plain = make_manager(embedder=None)
        expected = [r.path for r in await asyncio.to_thread(plain.search, "basil market pasta", "alice")]
        manager = make_manager(embedder=None, rerank=RerankSettings(base_url=fake.root, top_n=10))
        fake.fail_next(500)
        with caplog.at_level(logging.WARNING):
            results = await asyncio.to_thread(manager.search, "basil market pasta", "alice")
    assert [r.path for r in results] == expected and all(r.rerank_score is None for r in results)
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING and "rerank" in r.getMessage()]) == 1
