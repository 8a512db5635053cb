"""Fixtures for the memory core: real SQLite and real LanceDB in a temp directory."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path

import pytest

from memory import HashEmbedding, MemoryManager, MemorySettings, Workspace

TODAY = date(2026, 12, 2)


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    ws = Workspace(tmp_path / "ws")
    ws.ensure()
    return ws


@pytest.fixture
def make_manager(workspace: Workspace) -> Iterator[Callable[..., MemoryManager]]:
    made: list[MemoryManager] = []

    def make(embedder: object | None = "hash", **settings: object) -> MemoryManager:
        chosen = HashEmbedding() if embedder == "hash" else embedder
        manager = MemoryManager(workspace, MemorySettings(**settings), embedder=chosen, today=lambda: TODAY)  # type: ignore[arg-type]
        made.append(manager)
        return manager

    yield make
    for manager in made:
        manager.close()
