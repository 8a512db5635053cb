"""A shard: the knowledge base every shard shares, and a shard handed back mid-reply."""

from __future__ import annotations

import asyncio
import time

from fakes import HANG_GUARD_S
from support.bot import dm, make_config, make_services
from support.channel import RecordingChannel, SlowPlatform
from support.logs import watching
from support.scrape import eventually

from bridge.cluster.fencing import ShardFence
from bridge.cluster.keys import FIELD, GROUP, Keys, encode_message
from bridge.cluster.shard import ShardRunner, share_knowledge


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


async def test_a_shard_handed_back_while_a_reply_goes_out_records_it_and_its_next_holder_sends_nothing(
        tmp_path, fake_llm, redis_server, redis) -> None:
    """A worker hands a shard back (its grace over) while a turn's reply is on its way: the reply
    goes out once and is recorded sent; the entry stays pending (it was never acknowledged) and
    the shard's next holder takes it over, sends nothing and acknowledges it."""
    config = make_config(tmp_path / "unused", fake_llm.base_url, cluster={
        "redis_url": redis_server.url, "shards": 1, "root": str(tmp_path / "cluster"), "lease_ttl_s": 30.0})
    stream = Keys(config.cluster.key_prefix).stream(0)
    message = dm("my locker is 12", user="1")
    await redis.xadd(stream, {FIELD: encode_message(message)})
    fake_llm.reply("Noted: locker 12.")

    async def advance(past: int) -> int:
        return past + 1

    def holder(consumer: str, token: int, channel: RecordingChannel) -> ShardRunner:
        return ShardRunner(0, config, redis, consumer=consumer, channels={"telegram": channel},
                           slots=asyncio.Semaphore(4), fence=ShardFence(0, token, 30.0, time.monotonic()),
                           advance=advance)

    first = SlowPlatform()
    leaving = holder("worker-a", 1, first)
    await leaving.start()
    await asyncio.wait_for(first.sending.wait(), HANG_GUARD_S)
    with watching("channels.ordering", "still busy at stop") as cut:
        stopping = asyncio.create_task(leaving.stop(grace_s=0))
        assert await asyncio.to_thread(cut.seen.wait, HANG_GUARD_S)
    first.respond.set()
    await asyncio.wait_for(stopping, HANG_GUARD_S)
    assert first.texts() == ["Noted: locker 12."]
    assert (await redis.xpending(stream, GROUP))["pending"] == 1

    second = RecordingChannel()
    taking_over = holder("worker-b", 2, second)
    await taking_over.start()
    try:
        async def acknowledged() -> bool:
            return not (await redis.xpending(stream, GROUP))["pending"]

        await eventually(acknowledged, "the next holder to acknowledge the entry")
    finally:
        await taking_over.stop(grace_s=0)
    assert second.sent == [] and len(fake_llm.requests) == 1
