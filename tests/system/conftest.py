from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from fakes.openai_server import FakeOpenAI
from support.running import running

__all__ = ["fake_llm", "running"]


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server
