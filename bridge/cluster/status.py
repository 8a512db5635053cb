"""``membridge cluster status``: the shards, who holds them, their backlog and their last night."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from ..config import AppConfig
from .connection import connect
from .keys import GROUP, Keys


@dataclass(frozen=True)
class ShardStatus:
    shard: int
    owner: str | None  # the worker holding the lease, None while nobody does
    lag: int  # entries appended but not yet read by any worker
    pending: int  # entries read but not yet acknowledged (turns in flight, or a dead worker's)
    last_nightly: str | None  # the day of the shard's last nightly pass


@dataclass(frozen=True)
class WorkerStatus:
    id: str
    pid: int | None
    shards: list[int]


async def collect(config: AppConfig, redis: Redis | None = None) -> tuple[list[ShardStatus], list[WorkerStatus]]:
    """Read the cluster's state from Redis (nothing is changed)."""
    own = redis is None
    client = redis or connect(config.cluster)
    keys = Keys(config.cluster.key_prefix)
    try:
        count = config.cluster.shards
        owners: list[Any] = await client.mget([keys.lease(n) for n in range(count)])
        nightly: dict[Any, Any] = await client.hgetall(keys.nightly())
        shards = [ShardStatus(n, owners[n], *await backlog(client, keys.stream(n)), nightly.get(str(n)))
                  for n in range(count)]
        workers = []
        prefix = keys.worker("")
        async for key in client.scan_iter(match=keys.workers_pattern()):
            info = json.loads(await client.get(key) or "{}")
            workers.append(WorkerStatus(key[len(prefix):], info.get("pid"), info.get("shards", [])))
        return shards, sorted(workers, key=lambda worker: worker.id)
    finally:
        if own:
            await client.aclose()


async def backlog(client: Redis, stream: str) -> tuple[int, int]:
    """(lag, pending) of the workers' group on ``stream``; a shard never written to has neither."""
    try:
        groups = await client.xinfo_groups(stream)
    except ResponseError:  # no such stream yet
        return 0, 0
    group = next((g for g in groups if g["name"] == GROUP), None)
    if group is None:
        return await client.xlen(stream), 0
    lag = group.get("lag")
    return (int(lag) if lag is not None else await client.xlen(stream)), int(group["pending"])


def render(shards: list[ShardStatus], workers: list[WorkerStatus]) -> str:
    """The table ``membridge cluster status`` prints."""
    lines = [f"{len(workers)} live worker(s)"]
    lines += [f"  {worker.id}  pid {worker.pid}  {len(worker.shards)} shard(s)" for worker in workers]
    held = sum(1 for shard in shards if shard.owner)
    lines.append(f"{len(shards)} shard(s), {held} held; lag {sum(s.lag for s in shards)}, "
                 f"pending {sum(s.pending for s in shards)}")
    lines.append(f"{'shard':>5}  {'owner':<32} {'lag':>6} {'pending':>7}  last nightly")
    lines += [f"{s.shard:>5}  {s.owner or '(none)':<32} {s.lag:>6} {s.pending:>7}  {s.last_nightly or 'never'}"
              for s in shards]
    return "\n".join(lines)


def as_json(shards: list[ShardStatus], workers: list[WorkerStatus]) -> dict[str, Any]:
    return {"workers": [asdict(worker) for worker in workers], "shards": [asdict(shard) for shard in shards]}
