"""The redeliveries receivers drop, kept where the console's status page reads them.

A receiver drops a message it has seen already (its dedupe key is set in Redis: Telegram or Slack
delivered it again, or a load balancer sent it to two receivers). Prometheus counts the drop in the
receiver's own process, which forgets it at a restart and which the console, a process of its own,
cannot read. So each drop is also added up in Redis, per clock hour and shard (``<prefix>:duplicates:
<hour>``, a hash shard -> count, kept :data:`KEEP_S`): the status page adds it to the outcomes it
reads from the usage book, so its ``deduplicated`` is whole in a cluster too. Durable as Redis is
(``appendonly yes``, README "Past one machine"); it holds counts only, never a message or an id.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from ..ops import metrics
from .connection import UNAVAILABLE
from .keys import Keys

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from ..config import AppConfig

log = logging.getLogger(__name__)

KEEP_S = 2 * 86400  # a day's figures are read for 24 hours; a second day covers clocks that differ


def hour_of(stamp: float) -> int:
    """The clock hour of an epoch time, as the keys number them."""
    return int(stamp // 3600)


class DuplicateTally:
    """A receiver's record of the redeliveries it drops: Prometheus, and the hour's count in Redis."""

    def __init__(self, redis: Redis, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys

    async def record(self, shard: int, channel: str) -> None:
        """Count one dropped redelivery of ``shard``'s stream; with Redis away it stays in /metrics only
        (logged: the drop itself needed Redis a moment ago, so this is rare)."""
        metrics.TURNS.labels(channel, "deduplicated").inc()
        key = self.keys.duplicates(hour_of(time.time()))
        try:
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.hincrby(key, str(shard), 1)
                pipe.expire(key, KEEP_S)
                await pipe.execute()
        except UNAVAILABLE as exc:
            log.warning("Redis unavailable (%s): a dropped redelivery is counted in /metrics only", exc)


def dropped(config: AppConfig, first_hour: int, last_hour: int, shard: int | None = None) -> int:
    """Redeliveries the receivers dropped in clock hours ``first_hour`` to ``last_hour``, of ``shard``'s
    stream or (None) of every shard. Blocking, with a client of its own (the console's request
    thread); raises one of :data:`.connection.UNAVAILABLE` when Redis does not answer within 2 s."""
    from redis import Redis

    keys = Keys(config.cluster.key_prefix)
    client = Redis.from_url(config.cluster.redis_url or "", decode_responses=True, socket_connect_timeout=2.0,
                            socket_timeout=2.0)
    try:
        with client.pipeline(transaction=False) as pipe:
            for hour in range(first_hour, last_hour + 1):
                pipe.hgetall(keys.duplicates(hour))
            hours: list[dict[str, str]] = pipe.execute()
    finally:
        client.close()
    return sum(int(count) for counts in hours for key, count in counts.items() if shard is None or key == str(shard))
