"""A polling receiver confirms a Telegram update (the next getUpdates ``offset``) only once the
update is in Redis: real receiver processes, real redis-server behind a TCP proxy the test cuts,
the fake Bot API checking every offset it is asked for against Redis at that moment."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fakes.telegram_server import FakeTelegram
from redis.asyncio import Redis
from support.cluster import Role, cluster_config
from support.redis_server import RedisServer
from support.tcp_proxy import TcpProxy

from bridge.cluster.keys import Keys

pytestmark = pytest.mark.slow
TTL = 3.0
CHAT = 5
KEYS = Keys("membridge")


def echo(body: dict[str, Any]) -> str:
    return "re: " + [m for m in body["messages"] if m["role"] == "user"][-1]["content"]


class OffsetWatch:
    """Every getUpdates offset the fake sees is checked against Redis as it comes: each update it
    confirms (an id below it) must already be appended (its dedupe key set in the same Lua step)."""

    def __init__(self, fake: FakeTelegram, redis: Redis) -> None:
        self.fake, self.redis = fake, redis
        self.pushed: list[tuple[int, str]] = []  # (update_id, dedupe key)
        self.unappended_confirmed: list[tuple[int, str]] = []
        fake.on_poll = self._check

    def push(self, text: str) -> int:
        update = self.fake.push_text(CHAT, CHAT, text)
        self.pushed.append((update["update_id"], f"telegram::{CHAT}:{update['message']['message_id']}"))
        return int(update["update_id"])

    async def _check(self, offset: int | None) -> None:
        for update_id, key in self.pushed:
            if offset is not None and update_id < offset and not await self.redis.exists(KEYS.seen(key)):
                self.unappended_confirmed.append((update_id, key))


def sent(fake: FakeTelegram) -> list[str]:
    return [message["visible"] for message in fake.sent]


@dataclass
class Scene:
    watch: OffsetWatch
    proxy: TcpProxy
    direct: Path  # the deployment's config, reaching Redis directly
    roles: list[Role]
    receiver: Role  # the polling receiver, reaching Redis through ``proxy``


@contextlib.asynccontextmanager
async def cut_after_m0(tmp_path: Path, redis_server: RedisServer, redis: Redis, fake_llm: Any,
                       fake: FakeTelegram) -> AsyncIterator[Scene]:
    """A worker, and a polling receiver reaching Redis through a proxy; m0 answered, then the
    proxy cut. Every role is stopped at the end."""
    fake_llm.responder = echo
    watch = OffsetWatch(fake, redis)
    common = {"llm_url": fake_llm.base_url, "telegram_url": fake.base_url, "shards": 2, "lease_ttl_s": TTL}
    async with TcpProxy(redis_server.port) as proxy:
        direct = cluster_config(tmp_path, redis_url=redis_server.url, **common)
        through_proxy = cluster_config(tmp_path, redis_url=proxy.url(), name="through-proxy.yaml", **common)
        roles = [await Role.start(direct, "worker", "worker")]
        try:
            receiver = await Role.start(through_proxy, "receiver", "receiver-a")
            roles.append(receiver)
            await receiver.wait_line("holds the poller lease", timeout=120)
            watch.push("m0")
            await fake.wait_sent(1)
            proxy.cut()
            yield Scene(watch, proxy, direct, roles, receiver)
        finally:
            for role in roles:
                await role.stop()


@pytest.mark.timeout(300)
async def test_an_update_held_by_a_receiver_killed_while_redis_is_cut_comes_again_to_the_next_receiver(
        tmp_path, redis_server, redis, fake_llm, fake_telegram) -> None:
    async with cut_after_m0(tmp_path, redis_server, redis, fake_llm, fake_telegram) as scene:
        scene.watch.push("m1")
        await scene.receiver.wait_line("waits for it")  # fetched, and held for Redis in the process's memory
        scene.receiver.kill()
        await scene.receiver.stop()
        scene.proxy.heal()
        second = await Role.start(scene.direct, "receiver", "receiver-b")
        scene.roles.append(second)
        await second.wait_line("holds the poller lease", timeout=120)
        scene.watch.push("m2")
        await fake_telegram.wait_until(lambda: "re: m2" in sent(fake_telegram), what="m2 answered")
    assert sent(fake_telegram) == ["re: m0", "re: m1", "re: m2"]
    assert scene.watch.unappended_confirmed == []


@pytest.mark.timeout(300)
async def test_the_offset_never_passes_an_update_that_redis_has_not_taken(
        tmp_path, redis_server, redis, fake_llm, fake_telegram) -> None:
    async with cut_after_m0(tmp_path, redis_server, redis, fake_llm, fake_telegram) as scene:
        held = scene.watch.push("m1")
        await scene.receiver.wait_line("waits for it")
        await scene.receiver.wait_line("stops polling before another can take the lease")
        assert max(o or 0 for o in fake_telegram.offsets) <= held  # m1 is still Telegram's
        scene.proxy.heal()
        await scene.receiver.wait_line("appended after")
        await fake_telegram.wait_until(lambda: "re: m1" in sent(fake_telegram), what="m1 answered")
        scene.watch.push("m2")
        await fake_telegram.wait_until(lambda: "re: m2" in sent(fake_telegram), what="m2 answered")
        await fake_telegram.wait_confirmed()
    assert sent(fake_telegram) == ["re: m0", "re: m1", "re: m2"]
    assert scene.watch.unappended_confirmed == []
    assert max(o or 0 for o in fake_telegram.offsets) > held
