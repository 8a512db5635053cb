from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from fakes.openai_server import FakeOpenAI
from support.bot import make_services
from support.channel import RecordingChannel

from bridge.runtime import Bridge, build_plugins


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


@pytest.fixture
async def running(tmp_path, fake_llm):
    """Start a whole bot (real Services, built-in plugins) behind a recording channel."""
    bridges: list[Bridge] = []

    async def start(**overrides) -> tuple[Bridge, RecordingChannel]:
        services = make_services(tmp_path / "ws", fake_llm.base_url, **overrides)
        channel = RecordingChannel()
        bridge = Bridge(services, [channel], build_plugins(services))
        await bridge.start(timer=False)
        bridges.append(bridge)
        return bridge, channel

    yield start
    for bridge in bridges:
        await bridge.shutdown()
