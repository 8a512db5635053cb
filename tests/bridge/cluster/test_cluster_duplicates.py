"""Redeliveries a cluster receiver drops reach the console's status page, through their record in
Redis (real redis-server), per shard; with Redis away the page still answers and says what it left out."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import REGISTRY
from support.bot import dm
from support.cluster import cluster_config

from bridge.cluster.keys import shard_config, shard_of
from bridge.cluster.receiver import Receiver
from bridge.config import load_config
from bridge.console.status import status_view
from bridge.wiring.app import Services

SHARDS = 4


def _deduplicated() -> float:
    return REGISTRY.get_sample_value("membridge_turns_total", {"channel": "telegram", "outcome": "deduplicated"}) or 0.0


def _page_count(config, shard: int | None = None) -> tuple[int, list[str]]:
    """(``turns_24h.deduplicated``, ``warnings``) of a console serving ``config``'s workspace, or shard ``shard``'s."""
    services = Services(shard_config(config, shard) if shard is not None else config)
    try:
        status = status_view(services)
    finally:
        services.close()
    return status["turns_24h"]["deduplicated"], status["warnings"]


async def test_the_redeliveries_a_receiver_drops_are_counted_on_the_status_page(tmp_path: Path, redis_server,
                                                                                redis) -> None:
    config = load_config(str(cluster_config(tmp_path, redis_url=redis_server.url, llm_url="http://127.0.0.1:9/v1",
                                            telegram_url="http://127.0.0.1:9/bot", shards=SHARDS)))
    receiver = Receiver(config, redis, {})
    messages = [dm(f"hello {n}", user=str(n)) for n in range(1, 4)]
    before = _deduplicated()
    for message in [*messages, messages[0], messages[1], messages[0]]:  # three redeliveries
        await receiver.receive(message)
    await receiver.close(30)
    assert _deduplicated() - before == 3
    assert _page_count(config) == (3, [])  # a console on the deployment's own workspace: every shard
    shard = shard_of("telegram-1", SHARDS)
    expected = sum(1 for message in [messages[0], messages[1], messages[0]]
                   if shard_of(f"telegram-{message.user_id}", SHARDS) == shard)
    assert _page_count(config, shard) == (expected, [])  # a console on one shard's workspace: that shard's
    await redis_server.stop()
    count, [warning] = _page_count(config)
    assert count == 0
    assert warning == (f"Redis at {redis_server.url} did not answer: redeliveries the receivers dropped are not "
                       "counted in 'deduplicated'")
