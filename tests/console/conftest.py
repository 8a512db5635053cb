"""Workspaces and a browser for the console's browser tests (tests/support/browser.py drives it)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.remote.webdriver import WebDriver
from support.bot import make_services
from support.browser import DESKTOP, chromium, serve_console
from support.console_data import DEMO_DAYS, DEMO_DREAM, DEMO_MEMORY, DEMO_PAGES, TOKENS, V1, V2, days_ago, write

from bridge.wiring.app import Services


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    """A small keyword-only workspace: alice (MEMORY.md in two versions, a day, a dream) and bob."""
    services = make_services(tmp_path / "ws", "http://127.0.0.1:9/v1", console=TOKENS)
    services.dreamer.memory_file.write("alice", V1, "hand edit")
    services.dreamer.memory_file.write("alice", V2, "deep dream")
    workspace = services.workspace
    write(workspace.daily_dir("alice") / "2026-01-31.md", "- the cat is called Miso\n- Miso hates the vacuum\n")
    write(workspace.dreams_dir("alice") / "2026-01-31.md", "## 03:00\nThe cat again.\n")
    write(workspace.daily_dir("bob") / "2026-01-30.md", "- plays chess on Tuesdays\n")
    knowledge = workspace.knowledge_dir
    write(knowledge / "tech" / "deploy.md", "# Deploying\nSee [[tech/servers]] and [[pets/cats]].\n")
    write(knowledge / "tech" / "servers.md", "# Servers\nThe Porto box. Back to [deploy](deploy.md).\n")
    write(knowledge / "pets" / "cats.md", "# Cats\nMiso is a cat.\n")
    write(knowledge / "pets" / "dogs.md", "# Dogs\nSee [[cats]].\n")
    yield services
    services.close()


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Services]:
    services = make_services(tmp_path / "demo", "http://127.0.0.1:9/v1", console=TOKENS, embedding={"provider": "local"})
    workspace = services.workspace
    write(workspace.daily_dir("telegram-chat-77") / f"{days_ago(5)}.md", "- the team meets on Mondays\n")
    for ago, text in DEMO_DAYS.items():
        write(workspace.daily_dir("telegram-4242") / f"{days_ago(ago)}.md", text)
    services.dreamer.memory_file.write("telegram-4242", DEMO_MEMORY, "deep dream")

    async def model(_instructions: str, _material: str) -> str:
        return DEMO_DREAM

    result = asyncio.run(services.dreamer.dream("telegram-4242", model, lookback_days=7))
    assert result.status == "written", result
    for page, text in DEMO_PAGES.items():
        write(workspace.knowledge_dir / f"{page}.md", text)
    services.memory.indexer.sync(None)
    yield services
    services.close()


@pytest.fixture
def console_url(services: Services) -> Iterator[str]:
    with serve_console(services) as url:
        yield url


@pytest.fixture
def demo_url(demo: Services) -> Iterator[str]:
    with serve_console(demo) as url:
        yield url


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    with chromium(tmp_path / "chromium", DESKTOP) as driver:
        yield driver
