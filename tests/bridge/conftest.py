from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import yaml
from fakes.openai_server import FakeOpenAI
from fakes.telegram_server import TOKEN, FakeTelegram
from support.bot import make_services
from support.ports import free_port

from bridge.wiring.assembly import build_plugins
from bridge.wiring.runtime import Bridge
from channels.telegram import TelegramChannel


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


@pytest.fixture
def config_file(tmp_path: Path) -> Callable[..., Path]:
    """A config.yaml in ``tmp_path`` (workspace ``tmp_path/ws``, terminal user alice); keys override."""

    def make(llm_url: str = "http://127.0.0.1:9/v1", **extra: object) -> Path:
        data = {"workspace": str(tmp_path / "ws"), "embedding": {"provider": "none"},
                "llm": {"base_url": llm_url, "api_key": "test-key", "max_retries": 0, "timeout_s": 5},
                "channels": {"terminal": {"user": "alice"}}, **extra}
        path = tmp_path / "config.yaml"
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        return path

    return make


@pytest.fixture
def bot_settings() -> dict:
    """Config overrides of `metered_bot` (a test overrides this fixture, or parametrizes it)."""
    return {}


@pytest.fixture
async def metered_bot(tmp_path, bot_settings):
    """`membridge run` in this process with Telegram (fake) and its metrics port: (telegram, llm,
    services, the metrics base URL)."""
    port = free_port()
    async with FakeTelegram() as telegram, FakeOpenAI() as llm:
        services = make_services(tmp_path / "ws", llm.base_url, metrics={"port": port}, **bot_settings)
        channel = TelegramChannel(token=TOKEN, base_url=telegram.base_url, poll_timeout=1)
        bridge = Bridge(services, [channel], build_plugins(services))
        await bridge.start(timer=True)
        yield telegram, llm, services, f"http://127.0.0.1:{port}"
        await bridge.shutdown()
