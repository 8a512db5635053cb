from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from fakes.telegram_server import FakeTelegram
from redis.asyncio import Redis
from support.redis_server import RedisServer


@pytest.fixture
async def redis_server(tmp_path) -> AsyncIterator[RedisServer]:
    server = RedisServer(tmp_path / "redis")
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def redis(redis_server) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_server.url, decode_responses=True)
    yield client
    await client.aclose()


@pytest.fixture
async def fake_telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server
