"""Wiring: build every long-lived part of membridge from an :class:`AppConfig`.

The CLI, the bot and the console all get their parts here, so a command in another shell sees the
same workspace, index and settings as the running bot. Each part imports its modules when it is
first built: a command that only reads a file does not pay for the agent, the LLM client or asyncio.
"""

from __future__ import annotations

import getpass
import logging
import os
import time
from collections.abc import Awaitable, Callable
from datetime import date, datetime, timedelta
from functools import cached_property
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from .. import offload
from ..config import AppConfig
from ..scopes import terminal_scope, thread_scope_channels

if TYPE_CHECKING:
    from memory import (
        ConversationStore,
        Database,
        DeepDream,
        DreamResult,
        ForgetElsewhere,
        Forgetter,
        KnowledgeService,
        MemoryManager,
        Portability,
        Workspace,
    )

    from ..agent import Agent
    from ..conversation import Sessions
    from ..ledger import TurnLedger
    from ..llm import LLMClient, Message
    from ..media import MediaIntake
    from ..ops.metering import TurnMeter
    from ..ops.usage import UsageBook
    from .timer import DailyTimer
    from .worker import FlushWorker

log = logging.getLogger(__name__)
NIGHTLY_RUN_KEY = "nightly.last_run"  # meta: the day the nightly pass last ran for
NIGHTLY_SUCCESS_KEY = "nightly.last_success"  # meta: when the nightly pass last finished with every step ok
P = ParamSpec("P")
T = TypeVar("T")


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
        offload.configure(config.bridge.worker_threads)

    @cached_property
    def workspace(self) -> Workspace:
        from memory import Workspace

        return Workspace(self.config.workspace_path(), mode=self.config.memory.scope)

    @cached_property
    def memory(self) -> MemoryManager:
        """The memory index; a forget or erase that a crash left half-done is finished first, so
        nothing reads what was being forgotten."""
        from memory import ConversationStore, Forgetter, MemoryFile, MemoryManager, make_embedder, pending_forget_jobs

        from ..ops.metered_embedding import MeteredEmbedder

        configured = make_embedder(self.config.embedding, cache_dir=self.workspace.cache_dir)
        embedder = MeteredEmbedder(configured) if configured is not None else None
        manager = MemoryManager(self.workspace, self.config.memory, embedder=embedder)
        if pending_forget_jobs(manager):
            Forgetter(manager, ConversationStore(manager.db), MemoryFile(manager), self._elsewhere(manager.db)).resume()
        return manager

    def _elsewhere(self, db: Database) -> list[ForgetElsewhere]:
        """What a forget or erase in this workspace must reach beyond the memory package: the usage
        book in ``db`` (an erase takes the scope's rows), and the Redis stream of the cluster shard
        whose workspace this is (``bridge.cluster.scrub``)."""
        from ..ops.usage import UsageBook

        reach: list[ForgetElsewhere] = [UsageBook(db).forget]
        if self.config.cluster.redis_url:
            from ..cluster.scrub import StreamForgetter, shard_of_workspace

            shard = shard_of_workspace(self.config)
            if shard is not None:
                reach.append(StreamForgetter(self.config, shard))
        return reach

    @cached_property
    def forgetter(self) -> Forgetter:
        from memory import Forgetter

        return Forgetter(self.memory, self.conversations, self.dreamer.memory_file, self._elsewhere(self.memory.db))

    @cached_property
    def knowledge(self) -> KnowledgeService:
        from memory import KnowledgeService

        return KnowledgeService(self.memory)

    @cached_property
    def conversations(self) -> ConversationStore:
        from memory import ConversationStore

        return ConversationStore(self.memory.db)

    @cached_property
    def ledger(self) -> TurnLedger:
        """How far each incoming message got, so a redelivered one is answered once (:mod:`bridge.ledger`)."""
        from ..ledger import TurnLedger

        return TurnLedger(self.memory.db)

    @cached_property
    def usage(self) -> UsageBook:
        """What each turn cost (``membridge usage``, ``/usage``, limits, the console's status page)."""
        from ..ops.usage import UsageBook

        return UsageBook(self.memory.db)

    async def usage_text(self, scope: str, is_admin: bool) -> str:
        """``/usage``: the scope's own spending (and for an admin, the day's top spenders)."""
        from ..ops.usage import chat_summary

        limits = self.config.limits
        return await offload.run(lambda: chat_summary(self.usage, scope, is_admin=is_admin, today=date.today(),
                                                      limits=(limits.daily_tokens, limits.daily_turns)))

    @property
    def is_open(self) -> bool:
        """The workspace's index is open (a metrics scrape reads only what is already open)."""
        return "memory" in self.__dict__

    def nightly_last_success(self) -> datetime | None:
        value = self.memory.get_meta(NIGHTLY_SUCCESS_KEY)
        return datetime.fromisoformat(value) if value else None

    @cached_property
    def llm(self) -> LLMClient:
        from ..llm import OpenAIChat

        return self._llm or OpenAIChat(self.config.llm)

    @cached_property
    def flush_worker(self) -> FlushWorker:
        from memory import Flusher

        from .worker import FlushWorker, llm_summarizer

        return FlushWorker(Flusher(self.conversations, self.memory, offload=offload.run),
                           llm_summarizer(self.llm, self.meter.charge))

    @cached_property
    def sessions(self) -> Sessions:
        from ..conversation import Sessions

        return Sessions(self.conversations, self.config.context, on_job=self.flush_worker.notify)

    @cached_property
    def meter(self) -> TurnMeter:
        """Limits before a turn; every model request's tokens, a turn's or memory upkeep's, after it."""
        from ..ops.metering import TurnMeter

        return TurnMeter(self.usage, self.config.limits)

    @cached_property
    def agent(self) -> Agent:
        from ..agent import Agent
        from ..prompt import PromptBuilder
        from ..tools import ToolBox, default_tools

        agent = Agent(
            memory=self.memory,
            conversations=self.conversations,
            llm=self.llm,
            toolbox=ToolBox(default_tools(self.memory, self.knowledge)),
            prompt=PromptBuilder(self.workspace, self.config.agent.persona_file),
            context=self.config.context,
            settings=self.config.agent,
            sessions=self.sessions,
            scope_mode=self.config.memory.scope,
            admins=frozenset(self.config.admins),
            thread_scope_channels=thread_scope_channels(self.config),
        )
        agent.meter = self.meter
        agent.journal = self.ledger
        return agent

    @cached_property
    def media(self) -> MediaIntake:
        """What the bridge does with voice notes, photos and files that come with a message."""
        from ..media import MediaIntake

        return MediaIntake(self.config, llm=self.llm, memory=self.memory, knowledge=self.knowledge)

    @cached_property
    def dreamer(self) -> DeepDream:
        from memory import DeepDream

        return DeepDream(self.memory, self.config.memory.dream, offload=offload.run)

    @cached_property
    def portability(self) -> Portability:
        """Export and import of whole scopes (``membridge memory export|import``, ``/memory export``)."""
        from memory import Portability

        from .. import installed_version

        return Portability(self.memory, self.conversations, self.dreamer.memory_file, app_version=installed_version())

    def _dream_model(self, scope: str) -> Callable[[str, str], Awaitable[str]]:
        """Deep Dream's model call (:data:`memory.consolidation.dream.Complete`) in the LLM's chat
        format, charged to ``scope``."""
        from ..ops.usage import DREAM

        async def complete(instructions: str, material: str) -> str:
            request: list[Message] = [{"role": "system", "content": instructions}, {"role": "user", "content": material}]
            response = await self.llm.complete(request)
            await self.meter.charge(scope, DREAM, response)
            return response.content

        return complete

    async def dream(self, scope: str, *, days: int | None = None, force: bool = False, day: date | None = None) -> DreamResult:
        """Deep Dream for one scope now, with the configured LLM; counted by outcome for /metrics."""
        from ..ops import metrics

        try:
            result = await self.dreamer.dream(scope, self._dream_model(scope), lookback_days=days, force=force, day=day)
        except Exception:
            metrics.DREAMS.labels("failed").inc()
            raise
        metrics.DREAMS.labels("changed" if result.changed else result.status).inc()
        return result

    async def run_blocking(self, func: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """For plugins, which do not import the bridge: a blocking call on :mod:`.offload`'s pool."""
        return await offload.run(func, *args, **kwargs)

    async def clear_context(self, scope: str, chat_key: str) -> None:
        """``/clear``: a fresh context for the chat in ``scope`` (its turns still reach daily memory)."""
        await self.sessions.clear(scope, chat_key)

    async def nightly(self, day: date, lookback_days: int) -> None:
        """The nightly pass: queue the day's turns still in context, finish every queued flush, dream
        each scope that has daily memory, drop conversation rows and jobs past retention, then collect
        garbage (scheduled pairs past ``keep_scheduled``, old MEMORY.md versions, cached vectors no
        chunk uses). Each step logs its own failure and the night goes on, so a slow or failing step
        never skips the others."""
        ok = [await _step("the nightly summary", lambda: self.sessions.summarize_day(day)),
              await _step("the pending flushes", self.flush_worker.drain)]
        if self.config.memory.dream.enabled:
            ok.append(await _step("Deep Dream", lambda: self._dream_all(day, lookback_days)))
        ok.append(await _step("the conversation cleanup", lambda: self.sessions.cleanup(self.config.conversation.max_age_days)))
        ok.append(await _step("the scheduled-message pruning", lambda: offload.run(
            self.conversations.prune_scheduled, self.config.conversation.keep_scheduled)))
        ok.append(await _step("the MEMORY.md version pruning", self._prune_versions))
        ok.append(await _step("the embedding cache collection", self._collect_embed_cache))
        ok.append(await _step("the usage pruning", lambda: offload.run(
            self.usage.prune, time.time() - self.config.usage.keep_days * 86400)))
        ok.append(await _step("the turn ledger pruning", self._prune_ledger))
        if self.config.memory.retention.daily_days:
            ok.append(await _step("the daily memory retention", lambda: self._expire_daily(day)))
        if all(ok):
            stamp = datetime.now().astimezone().isoformat(timespec="seconds")
            await offload.run(self.memory.set_meta, NIGHTLY_SUCCESS_KEY, stamp)

    async def _expire_daily(self, day: date) -> None:
        """``memory.retention.daily_days``: each scope's daily files older than that go, with their
        dream diaries and everything indexed from them, through the forget path (durable, wiped)."""
        days = self.config.memory.retention.daily_days
        assert days is not None
        before = day - timedelta(days=days - 1)  # `day` itself is the newest of the days kept
        for scope in await offload.run(self.workspace.list_scopes):
            await offload.run(self.forgetter.expire, scope, before)
        log.info("daily memory retention: files dated before %s removed", before)

    async def _prune_ledger(self) -> None:
        pruned = await offload.run(self.ledger.prune)
        log.info("turn ledger: %d answered message id(s) past retention forgotten", pruned)

    async def _prune_versions(self) -> None:
        versions = self.config.memory.versions
        deleted = await offload.run(self.dreamer.memory_file.prune_versions, versions.keep, versions.max_days)
        log.info("MEMORY.md versions: %d past memory.versions deleted", deleted)

    async def _collect_embed_cache(self) -> None:
        grace = self.config.memory.embed_cache_grace_days
        deleted, left = await offload.run(self.memory.collect_embed_cache, grace)
        log.info("embedding cache: %d unused vectors deleted, %d kept", deleted, left)

    async def _dream_all(self, day: date, lookback_days: int) -> None:
        """Deep Dream for each scope with daily memory in the window; one scope's failure stops no other."""
        for scope in await offload.run(self.workspace.list_scopes):
            if not await offload.run(self.dreamer.has_daily_content, scope, day, lookback_days):
                continue
            try:
                result = await self.dream(scope, days=lookback_days, day=day)
                log.info("deep dream %s: %s", scope, result.reason)
            except Exception:
                log.exception("deep dream of scope %s failed", scope)

    @cached_property
    def timer(self) -> DailyTimer:
        from .timer import DailyTimer

        def set_last_run(day: date) -> None:
            self.memory.set_meta(NIGHTLY_RUN_KEY, day.isoformat())

        return DailyTimer(self.nightly, self.config.memory.dream, get_last_run=self.nightly_last_run,
                          set_last_run=set_last_run)

    def nightly_last_run(self) -> date | None:
        """The day the nightly pass last ran for (whatever its steps' outcome)."""
        value = self.memory.get_meta(NIGHTLY_RUN_KEY)
        return date.fromisoformat(value) if value else None

    def terminal_user(self) -> str:
        """The person at this terminal: ``channels.terminal.user``, else the login name."""
        return self.config.channels.terminal.user or local_user()

    def terminal_scope(self) -> str:
        """The scope of the person at this terminal (``terminal-<user>``, or ``global``): the very
        scope their terminal messages get, from the one function that derives scopes."""
        return terminal_scope(self.terminal_user(), self.config.memory.scope)

    async def aclose(self) -> None:
        """Stop background work and release connections (the async parts first)."""
        if "flush_worker" in self.__dict__:
            await self.flush_worker.stop()
        if "media" in self.__dict__:
            await self.media.close()
        if "llm" in self.__dict__:
            await self.llm.close()
        self.close()

    def close(self) -> None:
        if "memory" in self.__dict__:
            self.memory.close()


async def _step(what: str, run: Callable[[], Awaitable[object]]) -> bool:
    """One step of a background pass: its failure is logged (False), and the pass goes on."""
    try:
        await run()
    except Exception:
        log.exception("%s failed; the nightly pass goes on", what)
        return False
    return True
