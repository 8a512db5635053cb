"""Wiring: build every long-lived part of membridge from an :class:`AppConfig`.

The CLI, the bot and the console all get their parts here, so a command in another shell sees the
same workspace, index and settings as the running bot.
"""

from __future__ import annotations

import getpass
import logging
import os
from functools import cached_property

from memory import MemoryManager, Workspace, make_embedder
from memory.scopes import GLOBAL_SCOPE

from .config import AppConfig

log = logging.getLogger(__name__)


def local_user() -> str:
    """The person at this terminal, for the terminal channel's scope."""
    try:
        name = getpass.getuser()
    except (KeyError, OSError):
        name = os.environ.get("USER", "") or "local"
    return "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in name).strip("-.") or "local"


class Services:
    """The parts of one workspace, created on first use and closed together."""

    def __init__(self, config: AppConfig) -> None:
        self.config = config

    @cached_property
    def workspace(self) -> Workspace:
        return Workspace(self.config.workspace_path(), mode=self.config.memory.scope)

    @cached_property
    def memory(self) -> MemoryManager:
        embedder = make_embedder(self.config.embedding)
        return MemoryManager(self.workspace, self.config.memory, embedder=embedder)

    def terminal_scope(self) -> str:
        """The scope of the person at this terminal (``terminal-<user>``, or ``global``)."""
        if self.config.memory.scope == "global":
            return GLOBAL_SCOPE
        return f"terminal-{self.config.channels.terminal.user or local_user()}"

    def close(self) -> None:
        if "memory" in self.__dict__:
            self.memory.close()
