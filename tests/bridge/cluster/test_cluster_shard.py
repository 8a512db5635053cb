"""A shard's workspace: the knowledge base every shard shares."""

from __future__ import annotations

import asyncio

from support.bot import make_services

from bridge.cluster.shard import share_knowledge


async def test_every_shard_reads_and_writes_one_knowledge_base(tmp_path, fake_llm) -> None:
    root = tmp_path / "cluster"
    shards = [make_services(root / "shards" / str(n), fake_llm.base_url) for n in (0, 1)]
    for n in (0, 1):
        share_knowledge(root / "shards" / str(n), root)
    await asyncio.to_thread(shards[0].knowledge.write, "ops/deploy", "# Deploy\nWe deploy on Tuesdays with blue-green.",
                            actor="telegram:1")
    assert (root / "knowledge" / "ops" / "deploy.md").is_file()
    hits = await asyncio.to_thread(shards[1].memory.search, "when do we deploy", "telegram-2")
    assert hits and "Tuesdays" in hits[0].text
    (root / "shards" / "2" / "knowledge").mkdir(parents=True)  # empty: replaced by the link
    share_knowledge(root / "shards" / "2", root)
    assert (root / "shards" / "2" / "knowledge").resolve() == (root / "knowledge").resolve()
    (root / "shards" / "3" / "knowledge" / "ops").mkdir(parents=True)  # pages of its own: refused
    try:
        share_knowledge(root / "shards" / "3", root)
    except ValueError as exc:
        assert "knowledge folder of the shard's own" in str(exc)
    else:
        raise AssertionError("a shard's own knowledge folder must not be hidden by the shared one")
    for services in shards:
        await services.aclose()
