"""``membridge run --role receiver``: take messages in, dedupe them, append each to its shard's stream.

Receivers are stateless, so several may run behind a load balancer for the HTTP channels (Telegram's
webhook, Slack's Events API). A channel that fetches its messages itself (Telegram polling, Slack
Socket Mode) runs in exactly one receiver: the one holding the poller lease.

Each message is checked and appended in one step inside Redis (a Lua script: ``SET NX EX`` on its
dedupe key, then ``XADD`` only if that key was new), so a redelivered message is appended once and a
failure in between cannot mark a message seen that was never appended. Appends run in a lane per
chat (:class:`channels.ordering.ChatLanes`), so a chat's messages enter the stream in arrival order
and a channel never waits on Redis. While Redis is away the append is retried with a clear log line
and the chat's later messages wait behind it, so order is kept and nothing is dropped; past
``MAX_QUEUED`` waiting messages the channels' intake itself waits. Only once a message is appended
(or found already there) is its channel told (:meth:`~channels.base.Channel.accepted`), so Telegram
polling confirms nothing that is only in this process's memory: if the process dies, the next
poller fetches it again, and the dedupe key makes that second append a no-op.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping

from redis.asyncio import Redis

from channels import Channel, IncomingMessage
from channels.ordering import ChatLanes

from ..config import AppConfig
from ..logs import STATUS_LOGGER
from ..ops import metrics
from ..ops.health import Check, channel_check, redis_problem, start_health
from ..redaction import redact_url
from ..scopes import scope_for, thread_scope_channels
from ..wiring.app import Services
from ..wiring.assembly import build_channels
from ..wiring.stopping import stop_on_signals
from .connection import UNAVAILABLE, connect, wait_or_stop
from .duplicates import DuplicateTally
from .fencing import WATCH_S, LeaseClock
from .keys import FIELD, Keys, encode_message, shard_of
from .leases import Leases, new_holder_id

log = logging.getLogger(__name__)
status = logging.getLogger(STATUS_LOGGER)

_APPEND = """
if redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then
  return redis.call('XADD', KEYS[2], '*', ARGV[2], ARGV[3])
end
return false
"""
RETRY_FIRST_S = 0.2
RETRY_MAX_S = 5.0
MAX_QUEUED = 1024  # messages held in memory waiting for their append (a Redis outage)


class Receiver:
    """The callback every channel of a receiver gets: scope → shard → deduped append; then the
    message's channel (among ``channels``, by name) is told it was accepted."""

    def __init__(self, config: AppConfig, redis: Redis, channels: Mapping[str, Channel]) -> None:
        self.config = config
        self.channels = channels
        self.keys = Keys(config.cluster.key_prefix)
        self._append = redis.register_script(_APPEND)
        self._thread_channels = thread_scope_channels(config)
        self._lanes = ChatLanes("receiver", max_pending=MAX_QUEUED)
        self._duplicates = DuplicateTally(redis, self.keys)

    def shard(self, message: IncomingMessage) -> int:
        """The shard of the message's scope, derived by the one function that names scopes."""
        scope = scope_for(message, self.config.memory.scope, thread_channels=self._thread_channels)
        return shard_of(scope, self.config.cluster.shards)

    async def receive(self, message: IncomingMessage) -> None:
        """The channels' callback: queue the append behind the chat's earlier ones and return."""
        if not await self._lanes.submit(message.chat_key, lambda: self._append_one(message)):
            log.warning("receiver stopping: message %s dropped", message.dedupe_key)

    async def close(self, timeout: float) -> None:
        """Let queued appends finish for up to ``timeout`` seconds (channels stopped first)."""
        await self._lanes.close(timeout)

    async def _append_one(self, message: IncomingMessage) -> None:
        """Append ``message`` to its shard's stream, waiting out a Redis outage (never dropping it)."""
        shard = self.shard(message)
        keys = [self.keys.seen(message.dedupe_key), self.keys.stream(shard)]
        args: list[str | int] = [self.config.cluster.dedupe_ttl_s, FIELD, encode_message(message)]
        delay, since = RETRY_FIRST_S, None
        while True:
            try:
                entry = await self._append(keys=keys, args=args)
                break
            except UNAVAILABLE as exc:
                if since is None:
                    since = time.monotonic()
                    metrics.RECEIVER_HELD.inc()
                log.warning("Redis unavailable (%s): message %s waits for it; retrying in %.1fs",
                            exc, message.dedupe_key, delay)
                await asyncio.sleep(delay)  # a back-off between tries, not a test's wait
                delay = min(delay * 2, RETRY_MAX_S)
        if since is not None:
            metrics.RECEIVER_HELD.dec()
            log.warning("Redis is back: message %s appended after %.1fs", message.dedupe_key, time.monotonic() - since)
        if entry is None:
            await self._duplicates.record(shard, message.channel)
            log.info("duplicate delivery %s ignored", message.dedupe_key)
        else:
            log.debug("message %s -> shard %d (%s)", message.dedupe_key, shard, entry)
        channel = self.channels.get(message.channel)
        if channel is not None:
            channel.accepted(message)


def polls(channel: Channel, config: AppConfig) -> bool:
    """Whether ``channel`` fetches its own messages (only one receiver may) rather than being posted to."""
    if channel.name == "telegram":
        return config.channels.telegram.mode == "polling"
    if channel.name == "slack":
        return bool(config.channels.slack.app_token)
    return False


class PollerLease:
    """Runs the polling channels only while this receiver holds the poller lease.

    A receiver that cannot renew the lease (cut off from Redis, paused) stops polling by its own
    clock (:class:`.fencing.LeaseClock`) before the lease can expire, so two receivers never poll
    at once: the next one can only claim the lease after that."""

    def __init__(self, leases: Leases, key: str, channels: list[Channel], on_message: Receiver) -> None:
        self.leases = leases
        self.key = key
        self.channels = channels
        self.on_message = on_message
        self._running = False
        self._clock = LeaseClock(leases.ttl_ms / 1000, float("-inf"))
        self._switch = asyncio.Lock()  # one start or stop at a time (the renewals' and the watch's)

    async def hold(self, stop: asyncio.Event) -> None:
        """Claim the lease (waiting while another receiver polls), poll, renew; stop polling if lost."""
        watch = asyncio.create_task(self._watch(stop), name="poller-lease-watch")
        try:
            await self._renew_until(stop)
        finally:
            watch.cancel()
            await asyncio.gather(watch, return_exceptions=True)
            await self._stop()
            with contextlib.suppress(*UNAVAILABLE):
                await self.leases.release(self.key)

    async def _renew_until(self, stop: asyncio.Event) -> None:
        interval = self.leases.ttl_ms / 3000
        while not stop.is_set():
            sent_at = time.monotonic()
            try:  # still ours (a renewal), or free (a claim)
                held = await self.leases.renew(self.key) or bool(await self.leases.claim(self.key))
            except UNAVAILABLE as exc:
                log.warning("Redis unavailable (%s): the poller lease is not renewed; retrying", exc)
            else:
                if held:
                    self._clock.renewed(sent_at)
                    if not self._running:
                        await self._start()
                elif self._running:
                    log.warning("the poller lease moved to another receiver: this one stops polling")
                    await self._stop()
            if await wait_or_stop(stop, interval):
                break

    async def _watch(self, stop: asyncio.Event) -> None:
        """Stop polling once the lease may have lapsed, by this receiver's own clock."""
        while not await wait_or_stop(stop, WATCH_S):
            if self._running and self._clock.expired():
                log.warning("the poller lease was not renewed for %.1fs (Redis unreachable?): this receiver "
                            "stops polling before another can take the lease", self._clock.valid_s)
                await self._stop()

    async def _start(self) -> None:
        async with self._switch:
            if self._running:
                return
            for channel in self.channels:
                await channel.start(self.on_message.receive)
                status.info("%s (this receiver holds the poller lease)", channel.describe())
            self._running = True

    async def _stop(self) -> None:
        async with self._switch:
            if self._running:
                for channel in self.channels:
                    with contextlib.suppress(Exception):
                        await channel.stop()
                self._running = False


async def run_receiver(services: Services) -> None:
    """Serve the enabled chat channels into Redis until SIGINT/SIGTERM."""
    config = services.config.model_copy(deep=True)
    config.channels.terminal.enabled = False  # a terminal has one user at one machine: not a receiver's
    stop = asyncio.Event()
    stop_on_signals(stop.set)
    redis = connect(config.cluster)
    channels = build_channels(Services(config), stop.set)
    receiver = Receiver(config, redis, {channel.name: channel for channel in channels})
    posted = [channel for channel in channels if not polls(channel, config)]
    poller = PollerLease(Leases(redis, new_holder_id(), config.cluster.lease_ttl_s), receiver.keys.poller(),
                         [channel for channel in channels if polls(channel, config)], receiver)
    started: set[str] = set()

    def readiness() -> list[tuple[str, Check]]:
        checks: list[tuple[str, Check]] = [("redis", lambda: redis_problem(str(config.cluster.redis_url)))]
        return checks + [(channel.name, channel_check(channel.name, started)) for channel in posted]

    stop_health = start_health(config.metrics, readiness, list)
    try:
        for channel in posted:
            await channel.start(receiver.receive)
            started.add(channel.name)
            status.info("%s", channel.describe())
        status.info("receiver running: %d shard(s) in %s; Ctrl-C or SIGTERM stops it",
                    config.cluster.shards, redact_url(config.cluster.redis_url))
        await poller.hold(stop) if poller.channels else await stop.wait()
    finally:
        for channel in posted:
            with contextlib.suppress(Exception):
                await channel.stop()
        await receiver.close(config.bridge.shutdown_grace_s)
        await redis.aclose()
        stop_health()
        status.info("receiver stopped")

