from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import yaml
from fakes.openai_server import FakeOpenAI


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
