"""The ``running`` fixture: whole bots (real Services, the configured plugins) behind recording
channels, started on demand with config overrides and shut down after the test. A conftest that
wants it imports it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from fakes.openai_server import FakeOpenAI

from bridge.wiring.assembly import build_plugins
from bridge.wiring.runtime import Bridge
from support.bot import make_services
from support.channel import RecordingChannel

Start = Callable[..., Awaitable[tuple[Bridge, RecordingChannel]]]


@pytest.fixture
async def running(tmp_path, fake_llm: FakeOpenAI) -> AsyncIterator[Start]:
    """Start a whole bot (real Services, built-in plugins) behind a recording channel."""
    bridges: list[Bridge] = []

    async def start(**overrides: Any) -> tuple[Bridge, RecordingChannel]:
        services = make_services(tmp_path / "ws", fake_llm.base_url, **overrides)
        channel = RecordingChannel()
        bridge = Bridge(services, [channel], build_plugins(services))
        await bridge.start(timer=False)
        bridges.append(bridge)
        return bridge, channel

    yield start
    for bridge in bridges:
        await bridge.shutdown()
