"""One shard held by a worker: its workspace, its stream, its chats answered in order.

The shard's workspace (``<cluster.root>/shards/<n>/``) is an ordinary membridge workspace with its
own flush worker and nightly pass (the day of the last pass is recorded in the shard, so a shard
that changes hands is not dreamt twice that day). Entries are read in a consumer group. When the
shard is taken over, every pending entry (the previous holder's unfinished work) is first claimed
with ``XAUTOCLAIM`` and answered before new ones, so a chat's order survives the move; the same
after a read that failed (Redis may have handed it entries whose reply was lost); entries left
pending for a whole lease TTL later on are claimed again the same way.

An entry is acknowledged only after its reply is sent; the workspace's turn ledger
(:mod:`bridge.ledger`, read by :meth:`~bridge.wiring.runtime.Bridge.answer_once`) makes a
redelivery harmless.
Every write to the shard and every send checks the shard's fence (:mod:`.fencing`): a turn that
fails it is abandoned, unacknowledged, to the shard's next holder.
Acknowledged entries are trimmed from the stream (``XTRIM MINID``), so it holds only the backlog.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from channels import Channel, IncomingMessage
from channels.ordering import ChatLanes
from memory import KNOWLEDGE_DIR
from plugins import PluginRegistry

from .. import offload
from ..config import AppConfig
from ..ops import metrics
from ..wiring.app import Services
from ..wiring.assembly import build_plugins
from ..wiring.runtime import Bridge
from .connection import BLOCK_MS, UNAVAILABLE, wait_or_stop
from .fencing import WATCH_S, FenceBehind, Fenced, FencedChannel, ShardFence
from .keys import FIELD, GROUP, Keys, appended_at, decode_message, shard_config

log = logging.getLogger(__name__)

READ_BATCH = 32  # entries per XREADGROUP
TRIM_EVERY = 64  # acknowledgements between two trims of the stream
RETRY_S = 1.0  # pause after Redis failed a consumer's read
NIGHTLY_META = "nightly.last_run"


def share_knowledge(workspace: Path, root: Path) -> Path:
    """Make the shard's ``knowledge/`` a link to ``<cluster.root>/knowledge``: one knowledge base that
    every shard reads and an admin's writes in any chat change for all (each shard's index notices
    the change at its next search, as it notices a ``membridge knowledge add`` from another shell)."""
    shared = root / KNOWLEDGE_DIR
    shared.mkdir(parents=True, exist_ok=True)
    link = workspace / KNOWLEDGE_DIR
    if link.is_symlink():
        return shared
    if link.is_dir() and not any(link.iterdir()):
        link.rmdir()  # an empty one, e.g. made by a `membridge memory sync` before the shard first ran
    if link.exists():
        raise ValueError(f"{link} is a knowledge folder of the shard's own; move its pages into {shared} and "
                         "remove it, so that every shard shares one knowledge base")
    workspace.mkdir(parents=True, exist_ok=True)
    link.symlink_to(shared.resolve(), target_is_directory=True)
    return shared


class ShardRunner:
    """Consume shard ``number``'s stream against its workspace while ``fence`` says it is ours.
    ``advance(past)`` asks Redis for a token above ``past`` (see :class:`.fencing.FenceBehind`)."""

    def __init__(self, number: int, config: AppConfig, redis: Redis, *, consumer: str,
                 channels: dict[str, Channel], slots: asyncio.Semaphore, fence: ShardFence,
                 advance: Callable[[int], Awaitable[int]]) -> None:
        self.number = number
        self.keys = Keys(config.cluster.key_prefix)
        self.stream = self.keys.stream(number)
        self.redis = redis
        self.consumer = consumer
        self.channels = channels  # the worker's: they rebuild a message's attachments
        self.fence = fence
        self._advance = advance
        self._senders: dict[str, Channel] = {name: FencedChannel(channel, fence) for name, channel in channels.items()}
        # the worker's bridge.max_concurrent_chats is shared by its shards; max_pending bounds what is read ahead
        self._lanes = ChatLanes(f"shard {number}", slots=slots, max_pending=config.bridge.max_concurrent_chats * 4)
        self._config = shard_config(config, number)
        self._stop = asyncio.Event()
        self._active: set[str] = set()  # entry ids read and not yet finished
        self._lease_ttl_s = config.cluster.lease_ttl_s
        self._tasks: list[asyncio.Task[None]] = []
        self._acks = 0
        self.services: Services | None = None
        self._bridge: Bridge | None = None

    # ---------------------------------------------------------- lifecycle
    async def start(self) -> None:
        """Open the workspace (in a thread: SQLite and LanceDB), then consume and keep the nights."""
        services, plugins = await offload.run(self._open)
        self.services = services
        await self._fence_in(services)
        await plugins.start()
        services.flush_worker.start()
        self._bridge = Bridge(services, list(self._senders.values()), plugins)
        await self._ensure_group()
        log.info("shard %d: nightly pass next at %s", self.number, f"{await services.timer.next_run():%Y-%m-%d %H:%M}")
        self._tasks = [asyncio.create_task(self._consume(), name=f"shard:{self.number}"),
                       asyncio.create_task(services.timer.run_forever(), name=f"shard:{self.number}:nightly")]

    def _open(self) -> tuple[Services, PluginRegistry]:
        """The blocking part of a start (files, SQLite, LanceDB, imports), kept off the event loop so
        the worker's lease renewals never wait for it."""
        share_knowledge(Path(self._config.workspace), Path(self._config.cluster.root))
        services = Services(self._config)
        _ = services.agent  # built here, off the event loop: it opens the turn ledger's table
        return services, build_plugins(services)

    async def _fence_in(self, services: Services) -> None:
        """Write this grant's token into the shard before anything of this holder's; a larger token
        there means Redis lost its counter: a token above it is asked for, once."""
        memory = services.memory
        try:
            await offload.run(self.fence.install, memory.db, memory.lock, self.consumer)
        except FenceBehind as behind:
            log.error("shard %d: %s; Redis lost its data? Taking a token above it", self.number, behind)
            token = await self._advance(behind.stored)
            if not token:
                raise Fenced(f"shard {self.number}: lease lost while opening it") from None
            self.fence.regrant(token)
            await offload.run(self.fence.install, memory.db, memory.lock, self.consumer)

    async def stop(self, grace_s: float) -> None:
        """Read no more; let turns in flight finish within ``grace_s`` (0 when the lease is already
        lost: another worker may be answering them), then close the workspace. Unfinished entries
        stay pending for the next holder."""
        self._stop.set()
        await self._lanes.close(grace_s)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        try:
            if self._bridge is not None:
                await self._bridge.plugins.stop()
        finally:
            if self.services is not None:
                await self.services.aclose()

    async def follow_nightly(self) -> str | None:
        """The day of this shard's last nightly pass, as the shard recorded it."""
        if self.services is None:
            return None
        return await offload.run(self.services.memory.get_meta, NIGHTLY_META)

    # ---------------------------------------------------------- consuming
    async def _ensure_group(self) -> None:
        try:
            await self.redis.xgroup_create(self.stream, GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def _consume(self) -> None:
        """Take over what the previous holder left pending, then read new entries, until stopped.

        Every lease TTL, entries pending that long are claimed again: a previous holder that read
        after losing its lease (it learns of the loss at its next renewal) leaves them behind. After
        a failed read, every pending entry is taken again before anything new: Redis may have handed
        that read entries whose reply never arrived (a connection dropped, Redis restarted), and they
        come before whatever the chat sent next."""
        loop = asyncio.get_running_loop()
        reclaim_at, idle_ms = 0.0, 0  # the first pass takes every pending entry, however fresh
        while not self._stop.is_set():
            try:
                if loop.time() >= reclaim_at:
                    await self._reclaim(idle_ms)
                    reclaim_at, idle_ms = loop.time() + self._lease_ttl_s, int(self._lease_ttl_s * 1000)
                await self._read()
            except UNAVAILABLE as exc:
                log.warning("shard %d: Redis unavailable (%s); reading again in %.0fs", self.number, exc, RETRY_S)
                reclaim_at, idle_ms = 0.0, 0
                await wait_or_stop(self._stop, RETRY_S)
            except ResponseError as exc:
                if "NOGROUP" not in str(exc):
                    raise
                log.warning("shard %d: the stream's consumer group is gone (Redis lost its data?); recreating it",
                            self.number)
                await self._ensure_group()
            except Exception:
                log.exception("shard %d: reading the stream failed; reading again in %.0fs", self.number, RETRY_S)
                await wait_or_stop(self._stop, RETRY_S)

    async def _reclaim(self, min_idle_ms: int) -> None:
        """``XAUTOCLAIM`` the entries pending at least ``min_idle_ms`` (any consumer's) and answer
        those not already in hand, in stream order."""
        start, claimed = "0-0", 0
        while not self._stop.is_set():
            start, entries, *_ = await self.redis.xautoclaim(self.stream, GROUP, self.consumer, min_idle_ms, start,
                                                             count=READ_BATCH)
            for entry_id, fields in entries:
                if entry_id not in self._active and fields is not None:
                    claimed += 1
                    await self._dispatch(entry_id, fields)
            if start == "0-0":
                break
        if claimed:
            log.info("shard %d: took over %d pending message(s)", self.number, claimed)

    async def _read(self) -> None:
        """One XREADGROUP of new entries; each is handed to its chat. It waits up to BLOCK_MS, and never
        past this worker's own deadline on the lease: a read still waiting in Redis when the lease moves
        would be handed the chat's next message, which the next holder would find only once it had been
        pending a whole TTL, after the messages that came later."""
        block_ms = int(min(BLOCK_MS, self.fence.remaining_s() * 1000))
        if block_ms < 1:  # the lease may be gone: the worker drops the shard, or a renewal comes first
            await wait_or_stop(self._stop, WATCH_S)
            return
        reply: Any = await self.redis.xreadgroup(GROUP, self.consumer, {self.stream: ">"}, count=READ_BATCH,
                                            block=block_ms)
        for entry_id, fields in reply[0][1] if reply else []:
            await self._dispatch(entry_id, fields)

    async def _dispatch(self, entry_id: str, fields: dict[str, Any]) -> None:
        """Queue the entry behind its chat's earlier ones (waiting while too much is read ahead);
        other chats go on in parallel. An entry not taken (stopping) stays pending for the next holder."""
        try:
            message = decode_message(fields[FIELD], self.channels)
        except (KeyError, TypeError, ValueError) as exc:
            log.error("shard %d: entry %s is not a message (%s); acknowledged and skipped", self.number, entry_id, exc)
            self._tasks.append(asyncio.create_task(self._ack(entry_id)))
            return
        self._active.add(entry_id)
        if not await self._lanes.submit(message.chat_key, lambda: self._in_hand(entry_id, message)):
            self._active.discard(entry_id)

    async def _in_hand(self, entry_id: str, message: IncomingMessage) -> None:
        try:
            await self._answer(entry_id, message)
        finally:
            self._active.discard(entry_id)

    # ---------------------------------------------------------- one message
    async def _answer(self, entry_id: str, message: IncomingMessage) -> None:
        """Answer once (see :mod:`bridge.ledger`), send, record it sent, then acknowledge."""
        if self.fence.expired():
            return  # the lease moved (or may have): the entry stays pending for the next holder
        try:
            await self._answer_once(message, appended_at(entry_id))
        except Fenced as exc:
            metrics.FENCING_REJECTIONS.inc()
            log.warning("shard %d: %s; message %s is left to the shard's next holder", self.number, exc,
                        message.dedupe_key)
            return
        await self._ack(entry_id)

    async def _answer_once(self, message: IncomingMessage, received: float) -> None:
        """``received``: when the receiver took the message in (epoch seconds), for the turn's latency."""
        assert self._bridge is not None
        channel = self._senders.get(message.channel)
        if channel is None:
            log.error("shard %d: no channel %r is enabled for message %s; acknowledged unanswered",
                      self.number, message.channel, message.dedupe_key)
            return
        if await self._bridge.answer_once(channel, message) is not None:
            metrics.TURN_SECONDS.labels(channel.name).observe(max(0.0, time.time() - received))

    async def _ack(self, entry_id: str) -> None:
        """XACK, retried while Redis is away (an entry left pending comes back to the next holder, whose
        ledger says it was sent); every TRIM_EVERY acks, trim what is acknowledged."""
        while True:
            try:
                await self.redis.xack(self.stream, GROUP, entry_id)
                break
            except UNAVAILABLE as exc:
                log.warning("shard %d: Redis unavailable (%s); acknowledging %s again in %.0fs",
                            self.number, exc, entry_id, RETRY_S)
                await asyncio.sleep(RETRY_S)  # a back-off between tries, not a test's wait
        self._acks += 1
        if self._acks % TRIM_EVERY == 0:
            await self._trim()

    async def _trim(self) -> None:
        """Drop entries older than both the oldest pending one and the last delivered one."""
        with contextlib.suppress(*UNAVAILABLE):
            pending = await self.redis.xpending(self.stream, GROUP)
            groups = await self.redis.xinfo_groups(self.stream)
            delivered = next((g["last-delivered-id"] for g in groups if g["name"] == GROUP), None)
            floor = pending["min"] if pending and pending.get("pending") else delivered
            if floor:
                await self.redis.xtrim(self.stream, minid=floor, approximate=True)
