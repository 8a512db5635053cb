"""The running bot: every channel's messages through plugins and the agent, in order per chat.

A message's life: duplicate check → ``on_receive`` (filters) → ``on_handle`` (commands may answer
and stop the agent) → the agent turn → ``on_decorate`` → ``on_send`` → the channel sends. This is
the one place a process orders and dedupes its chats (:mod:`channels.ordering`): messages of one
chat go through a lane of their own, so they are answered in order; different chats run in
parallel up to ``bridge.max_concurrent_chats``. A redelivery is answered once: the workspace's turn
ledger (:mod:`bridge.ledger`) says whether it was answered, is half done or is new, across crashes;
the last ``bridge.dedupe_window`` message keys are a fast path in memory that spares a running
process the ledger read for a platform's quick retry. SIGINT/SIGTERM stops intake, lets in-flight
turns finish within ``bridge.shutdown_grace_s`` and leaves pending flush jobs recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import TypeVar

from channels import Channel, IncomingMessage, OutgoingFile, Reply
from channels.ordering import ChatLanes, RecentKeys
from plugins import Action, Event, EventContext, PluginRegistry

from .. import offload
from ..console import start_in_background
from ..ledger import TurnAbandoned, TurnRecord, TurnState
from ..logs import STATUS_LOGGER
from ..ops import metrics
from ..ops.health import Check, channel_check, start_health, workspace_checks
from .app import Services
from .stopping import stop_on_signals

log = logging.getLogger(__name__)
status = logging.getLogger(STATUS_LOGGER)  # the start and stop lines of `membridge run`


T = TypeVar("T")
SORRY = Reply("Sorry, something went wrong with that message.", markdown=False)
WARM_SCOPES_DAYS = 7  # chats active this recently get their vectors loaded at start-up
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def clean_text(text: str) -> str:
    """Drop NUL and other control characters (never meaningful in chat, trouble in files and logs)."""
    return _CONTROL.sub("", text)


def _discard(file: OutgoingFile | None) -> None:
    """Delete ``file`` if it was made for one reply (``temporary``): sent, dropped or failed."""
    if file is not None and file.temporary:
        file.path.unlink(missing_ok=True)


async def _to_the_end(step: Awaitable[T]) -> T:
    """Run ``step`` to its end even when the caller is cancelled meanwhile; the cancellation is
    raised once the step is done (a second one stops the waiting, not the step)."""
    task = asyncio.ensure_future(step)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait([task])
        raise


class Bridge:
    def __init__(self, services: Services, channels: Sequence[Channel], plugins: PluginRegistry) -> None:
        self.services = services
        self.channels = {channel.name: channel for channel in channels}
        self.plugins = plugins
        settings = services.config.bridge
        self._lanes = ChatLanes("chat", slots=asyncio.Semaphore(settings.max_concurrent_chats))
        self._seen = RecentKeys(settings.dedupe_window)
        self._accepting = False
        self._stopped = asyncio.Event()
        self._background: list[asyncio.Task[None]] = []
        self._started_at: float | None = None  # set when `run` has said what it started
        self._connected: set[str] = set()  # channels started (for /readyz)
        self._stop_health: Callable[[], None] = lambda: None

    # ------------------------------------------------------------- intake
    async def receive(self, message: IncomingMessage) -> None:
        """The callback every channel gets: queue the message behind its chat's earlier ones and
        return at once (the turn runs later, in the chat's lane)."""
        if not self._accepting:
            log.info("not accepting messages (shutting down); dropped %s", message.dedupe_key)
            return
        channel = self.channels[message.channel]
        if not self._seen.add(message.dedupe_key):
            log.info("duplicate delivery %s ignored", message.dedupe_key)
            # accepted behind the first delivery's turn, which may not have stored it yet
            await self._lanes.submit(message.chat_key, lambda: self._accepted(channel, message))
            await self._count_duplicate(message)
            return
        received = time.monotonic()
        await self._lanes.submit(message.chat_key, lambda: self._answer(channel, message, received))

    async def _answer(self, channel: Channel, message: IncomingMessage, received: float) -> None:
        """One queued message, answered once; then it is done with (its channel may confirm it),
        unless the turn was cancelled at shutdown: then the platform delivers it again at the next start."""
        if await self.answer_once(channel, message) is not None:
            metrics.TURN_SECONDS.labels(channel.name).observe(time.monotonic() - received)
        channel.accepted(message)

    async def answer_once(self, channel: Channel, message: IncomingMessage) -> Reply | None:
        """Answer ``message`` unless the turn ledger says an earlier delivery did: a new message
        gets a turn, one whose user message is stored resumes from it, one whose answer is stored
        gets that answer sent, one already sent nothing. A failure is told to the user and the chat
        goes on; either way the message is recorded sent. Returns what a turn sent now (None: no turn
        ran). :class:`~bridge.ledger.TurnAbandoned` goes to the caller with nothing recorded.

        A turn may be cancelled (a stop's grace ran out, a cluster shard handed back) until its
        answer starts to go out; from then on it runs to its end, sent and recorded, and only then
        is the cancellation raised: cut between the two, the platform's redelivery would find the
        answer stored and not sent, and the person would get it twice."""
        ledger = self.services.ledger
        record = await offload.run(ledger.get, message.dedupe_key)
        turn: Reply | None = None
        try:
            if record is None:
                turn = answer = await self.process(channel, message)
            elif record.state is TurnState.STARTED:
                turn = answer = await self.process(channel, await offload.run(self._as_stored, message, record))
            elif record.state is TurnState.ANSWERED and record.reply is not None:
                log.info("resending the stored answer to %s", message.dedupe_key)
                answer = Reply(record.reply, thread_id=message.thread_id, reply_to=message.message_id,
                               markdown=record.markdown)
            else:
                log.info("redelivered %s was answered before; not answered again", message.dedupe_key)
                await self._count_duplicate(message)
                answer = None
        except TurnAbandoned:
            raise
        except Exception:
            log.exception("message %s failed", message.dedupe_key)
            turn, answer = None, SORRY
        delivered = await _to_the_end(self._deliver(channel, message, answer))
        return turn if delivered else None

    async def _deliver(self, channel: Channel, message: IncomingMessage, answer: Reply | None) -> bool:
        """Send ``answer`` (and its file), then record the message sent; a send that fails is told
        to the user as a failure. The one place a message's answer goes out. False: it failed."""
        delivered = True
        try:
            if answer is not None:
                await channel.send(answer, message)
                if answer.file is not None:
                    await channel.send_file(answer.file, message)
        except TurnAbandoned:
            raise
        except Exception:
            log.exception("message %s: its answer could not be sent", message.dedupe_key)
            await self._send_quietly(channel, SORRY, message)
            delivered = False
        finally:
            _discard(answer.file if answer is not None else None)
        await offload.run(self.services.ledger.mark_sent, message.dedupe_key)
        return delivered

    def _as_stored(self, message: IncomingMessage, record: TurnRecord) -> IncomingMessage:
        """A redelivered message whose user turn is stored, as it was stored: its attachments were
        read then (a document's note saved, a photo described), and are not read again; the model
        gets the stored text (a photo's description, not the photo)."""
        if not message.attachments:
            return message
        session = self.services.agent.identify(message).session_id
        stored = self.services.conversations.messages_between(session, record.user_seq, record.user_seq) \
            if record.user_seq is not None else []
        return replace(message, text=stored[0].text if stored else message.text, attachments=())

    @staticmethod
    async def _accepted(channel: Channel, message: IncomingMessage) -> None:
        channel.accepted(message)

    async def _count_duplicate(self, message: IncomingMessage) -> None:
        """A redelivery dropped, in the usage book and the metrics (``deduplicated``)."""
        agent = self.services.agent
        if agent.meter is not None:
            await agent.meter.record(agent.identify(message).scope, message.channel, "deduplicated")

    # ----------------------------------------------------------- pipeline
    def context_for(self, message: IncomingMessage) -> EventContext:
        """Plugins see the same scope and rights as the agent turn: one place decides them."""
        who = self.services.agent.identify(message)
        return EventContext(event=Event.RECEIVE, message=message, scope=who.scope, is_admin=who.is_admin,
                            host=self.services)

    async def process(self, channel: Channel, message: IncomingMessage) -> Reply | None:
        """One message through the plugins and the agent: the answer to send (None: nothing), not sent
        yet (:meth:`answer_once` sends it)."""
        message = replace(message, text=clean_text(message.text))
        limit = self.services.config.bridge.max_message_chars
        if len(message.text) > limit:
            return Reply(f"That message is too long for me ({len(message.text):,} characters; the limit is "
                         f"{limit:,}). Please send a shorter one or split it.", reply_to=message.message_id,
                         markdown=False)
        images: tuple[str, ...] = ()
        if message.attachments:
            async with channel.working(message):
                prepared = await self.services.media.prepare(message, self.services.agent.identify(message))
            if isinstance(prepared, Reply):
                return prepared
            message, images = prepared.message, prepared.images
        if not message.text.strip():
            return None
        ctx = self.context_for(message)
        if await self.plugins.dispatch(Event.RECEIVE, ctx) is Action.BREAK_PASS:
            return None
        if await self.plugins.dispatch(Event.HANDLE, ctx) is not Action.BREAK_PASS:
            async with channel.working(message):
                ctx.reply = await self.services.agent.handle(message, images, stored=partial(channel.accepted, message))
        if ctx.reply is None:
            return None
        made = ctx.reply.file
        try:
            await self.plugins.dispatch(Event.DECORATE, ctx)
            await self.plugins.dispatch(Event.SEND, ctx)
        except BaseException:
            _discard(made)
            raise
        if ctx.reply is None or ctx.reply.file is not made:
            _discard(made)  # a plugin dropped the reply or replaced the file the turn made
        return ctx.reply

    async def _send_quietly(self, channel: Channel, reply: Reply, message: IncomingMessage) -> None:
        try:
            await channel.send(reply, message)
        except Exception:
            log.exception("could not tell the user about a failure")

    # ---------------------------------------------------------- lifecycle
    async def start(self, *, timer: bool = True) -> None:
        """Start plugins, the flush worker, (for ``run``) the timer and console, then the channels.

        ``run`` (``timer``) says what each part is as it starts: one status line each. The terminal
        chat starts last, once everything else has spoken, because from then on it owns the screen.
        """
        # Build the shared parts once, before anything else uses them, off the loop (they open SQLite).
        await offload.run(lambda: (self.services.agent, self.services.dreamer))
        say = status.info if timer else log.info
        if timer:
            embedder = self.services.memory.embedder
            say("embeddings: %s", embedder.model_id if embedder else "none (keyword search only)")
            console = await start_in_background(self.services)
            if console is not None:
                self._background.append(console)
            self._stop_health = start_health(self.services.config.metrics, self.readiness, lambda: [self.services])
        await self.plugins.start()
        self.services.flush_worker.start()
        if timer:
            self._background.append(asyncio.create_task(self.services.timer.run_forever(), name="daily-timer"))
            dream = "Deep Dream" if self.services.config.memory.dream.enabled else "Deep Dream off"
            say("nightly run (summaries, %s): next at %s", dream, f"{await self.services.timer.next_run():%Y-%m-%d %H:%M}")
        self._accepting = True
        chat = self.channels.get("terminal")
        for channel in sorted(self.channels.values(), key=lambda channel: channel is chat):
            if channel is chat and timer:
                self._say_running()
            await channel.start(self.receive)
            self._connected.add(channel.name)
            if channel is not chat or not timer:  # the chat's own banner names it
                say("%s", channel.describe())
            await self._publish_commands(channel)
        if chat is None and timer:
            self._say_running()
        self._background.append(asyncio.create_task(self._warm_memory(), name="warm-memory"))

    def readiness(self) -> list[tuple[str, Check]]:
        """``/readyz`` of ``membridge run``: the index, the flush worker, each channel started."""
        return [*workspace_checks(self.services), *((name, channel_check(name, self._connected)) for name in self.channels)]

    def _say_running(self) -> None:
        self._started_at = time.monotonic()
        status.info("running: %s; Ctrl-C or SIGTERM stops it", ", ".join(self.channels))

    async def _publish_commands(self, channel: Channel) -> None:
        try:
            await channel.publish_commands(self.plugins.commands())
        except Exception as exc:
            log.warning("could not publish the command menu on %s: %s", channel.name, exc)

    async def _warm_memory(self) -> None:
        """Load the vectors of the chats active in the last week, so their first search is fast."""
        try:
            scopes = await offload.run(self.services.conversations.recent_scopes, time.time() - WARM_SCOPES_DAYS * 86400)
            loaded = await offload.run(self.services.memory.warm, scopes)
            log.info("memory: vectors of %d scope(s) loaded", loaded)
        except Exception as exc:
            log.warning("could not pre-load vectors: %s", exc)

    def request_stop(self) -> None:
        self._stopped.set()

    async def run(self, *, timer: bool = True) -> None:
        """Start everything, wait for SIGINT/SIGTERM (or :meth:`request_stop`), then stop cleanly."""
        stop_on_signals(self.request_stop)
        try:
            await self.start(timer=timer)
            await self._stopped.wait()
        finally:
            await self.shutdown()

    async def shutdown(self) -> None:
        for channel in self.channels.values():
            with contextlib.suppress(Exception):
                await channel.stop_receiving()
        self._accepting = False
        if self._lanes.busy_chats:
            grace = self.services.config.bridge.shutdown_grace_s
            log.info("waiting up to %.0fs for %d chat(s) to finish", grace, self._lanes.busy_chats)
        await self._lanes.close(self.services.config.bridge.shutdown_grace_s)
        for channel in self.channels.values():
            with contextlib.suppress(Exception):
                await channel.stop()
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self.plugins.stop()
        self._stop_health()
        await self.services.aclose()
        if self._started_at is not None:
            minutes = int(time.monotonic() - self._started_at) // 60
            status.info("stopped: %s (up %dh %02dm)", ", ".join(self.channels), minutes // 60, minutes % 60)
