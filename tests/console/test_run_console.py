"""`membridge run` serves the console beside the bot when console.enabled is set."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from support.bot import make_services
from support.channel import RecordingChannel
from support.ports import free_port

from bridge.console import ConsoleError
from bridge.wiring.assembly import build_plugins
from bridge.wiring.runtime import Bridge


async def test_run_serves_the_console_and_stops_it(tmp_path) -> None:
    port = free_port()
    services = make_services(tmp_path / "ws", "http://127.0.0.1:9/v1",
                             console={"enabled": True, "port": port, "token": "read-token-1"})
    bridge = Bridge(services, [RecordingChannel()], build_plugins(services))
    await bridge.start(timer=True)
    url = f"http://127.0.0.1:{port}/api/whoami"
    async with aiohttp.ClientSession() as session:
        for _ in range(100):
            try:
                async with session.get(url, headers={"Authorization": "Bearer read-token-1"}) as response:
                    assert response.status == 200 and await response.json() == {"admin": False}
                    break
            except aiohttp.ClientConnectionError:
                await asyncio.sleep(0.05)
        else:
            pytest.fail("the console never answered")
        await bridge.shutdown()
        with pytest.raises(aiohttp.ClientConnectionError):
            async with session.get(url) as response:
                pass


async def test_run_refuses_an_enabled_console_without_a_token(tmp_path) -> None:
    services = make_services(tmp_path / "ws", "http://127.0.0.1:9/v1", console={"enabled": True})
    bridge = Bridge(services, [RecordingChannel()], build_plugins(services))
    with pytest.raises(ConsoleError, match=r"console\.token"):
        await bridge.start(timer=True)
    await bridge.shutdown()
