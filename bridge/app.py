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
from memory.conversations import ConversationStore
from memory.flush import Flusher
from memory.scopes import GLOBAL_SCOPE

from .agent import Agent
from .config import AppConfig
from .llm import LLMClient, OpenAIChat
from .prompt import PromptBuilder
from .tools import ToolBox, memory_tools
from .worker import FlushWorker, llm_summarizer

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

    def __init__(self, config: AppConfig, *, llm: LLMClient | None = None) -> None:
        self.config = config
        self._llm = llm

    @cached_property
    def workspace(self) -> Workspace:
        return Workspace(self.config.workspace_path(), mode=self.config.memory.scope)

    @cached_property
    def memory(self) -> MemoryManager:
        embedder = make_embedder(self.config.embedding)
        return MemoryManager(self.workspace, self.config.memory, embedder=embedder)

    @cached_property
    def conversations(self) -> ConversationStore:
        return ConversationStore(self.memory.db)

    @cached_property
    def llm(self) -> LLMClient:
        return self._llm or OpenAIChat(self.config.llm)

    @cached_property
    def flush_worker(self) -> FlushWorker:
        return FlushWorker(Flusher(self.conversations, self.memory), llm_summarizer(self.llm))

    @cached_property
    def agent(self) -> Agent:
        return Agent(
            memory=self.memory,
            conversations=self.conversations,
            llm=self.llm,
            toolbox=ToolBox(memory_tools(self.memory)),
            prompt=PromptBuilder(self.workspace, self.config.agent.persona_file),
            context=self.config.context,
            settings=self.config.agent,
            scope_mode=self.config.memory.scope,
            admins=frozenset(self.config.admins),
            thread_scope=self.config.channels.slack.thread_scope,
            on_flush_job=self.flush_worker.notify,
        )

    def terminal_scope(self) -> str:
        """The scope of the person at this terminal (``terminal-<user>``, or ``global``)."""
        if self.config.memory.scope == "global":
            return GLOBAL_SCOPE
        return f"terminal-{self.config.channels.terminal.user or local_user()}"

    async def aclose(self) -> None:
        """Stop background work and release connections (the async parts first)."""
        if "flush_worker" in self.__dict__:
            await self.flush_worker.stop()
        if "llm" in self.__dict__:
            await self.llm.close()
        self.close()

    def close(self) -> None:
        if "memory" in self.__dict__:
            self.memory.close()
