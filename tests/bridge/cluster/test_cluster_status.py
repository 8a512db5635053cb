"""``membridge cluster status`` against a real redis-server."""

from __future__ import annotations

import asyncio
import json
import sys

import yaml
from support.cluster import ROOT

from bridge.cluster.keys import GROUP, Keys
from bridge.cluster.status import collect, render
from bridge.config import parse_config


async def _scene(redis, keys: Keys) -> None:
    """Shard 1: three messages, one read (pending), two not (lag); held by a worker that ran a night."""
    for text in ("a", "b", "c"):
        await redis.xadd(keys.stream(1), {"message": text})
    await redis.xgroup_create(keys.stream(1), GROUP, id="0")
    await redis.xreadgroup(GROUP, "w1", {keys.stream(1): ">"}, count=1)
    await redis.set(keys.lease(1), "vm:11:aa")
    await redis.set(keys.worker("vm:11:aa"), json.dumps({"pid": 11, "shards": [1]}))
    await redis.hset(keys.nightly(), mapping={"1": "2026-12-02"})


async def test_status_shows_owners_lag_pending_and_nights(redis, redis_server) -> None:
    config = parse_config({"cluster": {"redis_url": redis_server.url, "shards": 3, "key_prefix": "t"}})
    await _scene(redis, Keys("t"))
    shards, workers = await collect(config)
    assert [(s.shard, s.owner, s.lag, s.pending, s.last_nightly) for s in shards] == [
        (0, None, 0, 0, None), (1, "vm:11:aa", 2, 1, "2026-12-02"), (2, None, 0, 0, None)]
    assert render(shards, workers).splitlines() == [
        "1 live worker(s)",
        "  vm:11:aa  pid 11  1 shard(s)",
        "3 shard(s), 1 held; lag 2, pending 1",
        "shard  owner                               lag pending  last nightly",
        "    0  (none)                                0       0  never",
        "    1  vm:11:aa                              2       1  2026-12-02",
        "    2  (none)                                0       0  never",
    ]


async def test_the_command_prints_json_and_says_when_no_cluster_is_set(tmp_path, redis, redis_server) -> None:
    await _scene(redis, Keys("membridge"))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"cluster": {"redis_url": redis_server.url, "shards": 2}}))
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge", "--config", str(config), "cluster", "status", "--json", cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    assert json.loads(out)["shards"][1] == {"shard": 1, "owner": "vm:11:aa", "lag": 2, "pending": 1,
                                            "last_nightly": "2026-12-02"}
    config.write_text(yaml.safe_dump({"workspace": str(tmp_path / "ws")}))
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge", "--config", str(config), "cluster", "status", cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await process.communicate()
    assert process.returncode == 1
    assert "cluster.redis_url is unset" in err.decode()
