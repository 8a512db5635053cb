"""``membridge run --role worker``: hold a fair share of the shards and run them.

Three loops. The lease loop renews this worker's shard leases and its heartbeat every third of
``cluster.lease_ttl_s``; a lease found taken or lapsed is lost, and its shard is dropped at once
(another worker may already answer it). The watch loop drops a shard whose renewals have not
succeeded for ``LOCAL_SHARE`` of the TTL, by this worker's own clock (cut off from Redis, paused,
starved of CPU): it stops before the lease can expire and another worker can claim it
(:mod:`.fencing`; every write and send of the shard checks the same deadline and the shard's
fencing token). The balance loop looks at the live workers (their heartbeat
keys) and takes its share: ``shards // workers`` each, one more for the first ``shards % workers``
by id. A worker over its share hands the extra shards back (finishing their turns in flight first);
one under it claims free shards. A dead worker's leases expire, and the others claim its shards and
``XAUTOCLAIM`` its pending messages. Each status change is one log line: the shards now held.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from typing import Any

from redis.asyncio import Redis

from channels import Channel
from memory import ForgetDeferred

from ..config import AppConfig
from ..logs import STATUS_LOGGER
from ..ops import metrics
from ..ops.health import Check, redis_problem, start_health, workspace_checks
from ..redaction import redact_url
from ..wiring.app import Services
from ..wiring.assembly import build_channels
from ..wiring.stopping import stop_on_signals
from .connection import UNAVAILABLE, connect, wait_or_stop
from .fencing import WATCH_S, Fenced, ShardFence
from .keys import Keys
from .leases import Leases, new_holder_id
from .shard import ShardRunner
from .status import backlog

log = logging.getLogger(__name__)
status = logging.getLogger(STATUS_LOGGER)


def fair_share(shards: int, workers: list[str], me: str) -> int:
    """How many shards ``me`` should hold among the live ``workers`` (sorted ids)."""
    if me not in workers:
        workers = sorted([*workers, me])
    base, extra = divmod(shards, len(workers))
    return base + (1 if workers.index(me) < extra else 0)


def compact(numbers: list[int]) -> str:
    """``0-3,7``: a list of shard numbers for a log line."""
    runs: list[str] = []
    for n in sorted(numbers):
        if runs and runs[-1].split("-")[-1] == str(n - 1):
            runs[-1] = f"{runs[-1].split('-')[0]}-{n}"
        else:
            runs.append(str(n))
    return ",".join(runs) or "none"


class ClusterWorker:
    def __init__(self, config: AppConfig, redis: Redis, channels: dict[str, Channel]) -> None:
        self.config = config
        self.redis = redis
        self.channels = channels
        self.id = new_holder_id()
        self.keys = Keys(config.cluster.key_prefix)
        self.leases = Leases(redis, self.id, config.cluster.lease_ttl_s)
        self.interval_s = config.cluster.lease_ttl_s / 3
        self.runners: dict[int, ShardRunner] = {}
        self._held: dict[int, ShardFence] = {}  # leases we renew: running shards, and those starting or stopping
        self._slots = asyncio.Semaphore(config.bridge.max_concurrent_chats)
        self._said = ""

    async def run(self, stop: asyncio.Event) -> None:
        """Renew and balance until ``stop``; then hand every shard back."""
        leases = asyncio.gather(self._lease_loop(stop), self._watch_loop(stop))
        try:
            while not stop.is_set():
                try:
                    await self._heartbeat()
                    await self._balance()
                    await self._publish_nightly()
                    await self._publish_backlog()
                except UNAVAILABLE as exc:
                    log.warning("Redis unavailable (%s); keeping the shards held and looking again in %.1fs",
                                exc, self.interval_s)
                self._say()
                await wait_or_stop(stop, self.interval_s)
        finally:
            for number in sorted(self.runners):
                await self._release(number)
            leases.cancel()
            await asyncio.gather(leases, return_exceptions=True)
            with contextlib.suppress(*UNAVAILABLE):
                await self.redis.delete(self.keys.worker(self.id))

    # ------------------------------------------------------------- leases
    async def _heartbeat(self) -> None:
        info = json.dumps({"pid": os.getpid(), "since": time.time(), "shards": sorted(self.runners)})
        await self.redis.set(self.keys.worker(self.id), info, px=self.leases.ttl_ms)

    async def _lease_loop(self, stop: asyncio.Event) -> None:
        while not await wait_or_stop(stop, self.interval_s):
            try:
                for number, fence in sorted(self._held.items()):
                    sent_at = time.monotonic()
                    if not await self.leases.renew(self.keys.lease(number)):
                        await self._lost(number, "lease lost to another worker (or lapsed)")
                    elif self._held.get(number) is fence:
                        fence.renewed(sent_at)
                await self._heartbeat()
            except UNAVAILABLE as exc:
                log.warning("Redis unavailable (%s): leases not renewed; retrying in %.1fs", exc, self.interval_s)
            except Exception:
                log.exception("the lease loop failed; it goes on")

    async def _watch_loop(self, stop: asyncio.Event) -> None:
        """Drop each shard whose lease this worker could not renew in time, by its own clock."""
        while not await wait_or_stop(stop, WATCH_S):
            for number, fence in sorted(self._held.items()):
                if fence.expired() and number in self.runners:
                    try:
                        await self._lost(number, f"lease not renewed for {fence.valid_s:.1f}s (Redis unreachable, "
                                                 "or this process was paused or starved of CPU)")
                    except Exception:
                        log.exception("shard %d: closing it failed; the watch goes on", number)

    async def _lost(self, number: int, why: str) -> None:
        log.warning("shard %d: %s; stopping work on it at once, its turns unfinished", number, why)
        metrics.LEASE_MOVES.labels("lost").inc()
        _forget_backlog(number)
        fence = self._held.pop(number, None)
        if fence is not None:
            fence.revoke()
        runner = self.runners.pop(number, None)
        if runner is not None:
            await runner.stop(grace_s=0)
        self._say()

    # ------------------------------------------------------------ balance
    async def _live_workers(self) -> list[str]:
        prefix = self.keys.worker("")
        return sorted({key[len(prefix):] async for key in self.redis.scan_iter(match=self.keys.workers_pattern())})

    async def _balance(self) -> None:
        shards = self.config.cluster.shards
        share = fair_share(shards, await self._live_workers(), self.id)
        while len(self.runners) > share:
            await self._release(max(self.runners))
        if len(self.runners) >= share:
            return
        owners = await self.redis.mget([self.keys.lease(n) for n in range(shards)])
        offset = int.from_bytes(self.id.encode(), "little") % shards  # workers start their search apart
        for n in [(offset + i) % shards for i in range(shards)]:
            if len(self.runners) >= share:
                break
            if owners[n] is not None:
                continue
            asked_at = time.monotonic()
            if token := await self.leases.claim(self.keys.lease(n)):
                await self._start(n, ShardFence(n, token, self.config.cluster.lease_ttl_s, asked_at))

    async def _start(self, number: int, fence: ShardFence) -> None:
        self._held[number] = fence
        key = self.keys.lease(number)
        runner = ShardRunner(number, self.config, self.redis, consumer=self.id, channels=self.channels,
                             slots=self._slots, fence=fence, advance=lambda past: self.leases.advance(key, past))
        try:
            await runner.start()
        except Exception as exc:
            if isinstance(exc, (ForgetDeferred, Fenced, *UNAVAILABLE)):  # foreseen: Redis away, the lease moved
                log.warning("shard %d: could not start (%s: %s); releasing it", number, type(exc).__name__, exc)
            else:
                log.exception("shard %d: could not start; releasing it", number)
            await runner.stop(grace_s=0)
            if self._held.pop(number, None) is fence:
                await self.leases.release(key)
            return
        if self._held.get(number) is not fence:  # the lease was lost while the shard opened
            await runner.stop(grace_s=0)
            return
        self.runners[number] = runner
        metrics.LEASE_MOVES.labels("claimed").inc()

    async def _release(self, number: int) -> None:
        metrics.LEASE_MOVES.labels("released").inc()
        _forget_backlog(number)
        runner = self.runners.pop(number)
        await runner.stop(grace_s=self.config.bridge.shutdown_grace_s)
        self._held.pop(number, None)
        with contextlib.suppress(*UNAVAILABLE):
            await self.leases.release(self.keys.lease(number))

    async def _publish_nightly(self) -> None:
        """Mirror each held shard's last nightly day (recorded in the shard) for ``cluster status``."""
        days: dict[Any, Any] = {str(n): day for n, runner in list(self.runners.items()) if (day := await runner.follow_nightly())}
        if days:
            await self.redis.hset(self.keys.nightly(), mapping=days)

    async def _publish_backlog(self) -> None:
        """Each held shard's stream length, pending entries and lag, for ``/metrics``."""
        for number in sorted(self.runners):
            stream = self.keys.stream(number)
            lag, pending = await backlog(self.redis, stream)
            label = str(number)
            metrics.STREAM_LENGTH.labels(label).set(await self.redis.xlen(stream))
            metrics.STREAM_PENDING.labels(label).set(pending)
            metrics.STREAM_LAG.labels(label).set(lag)

    def readiness(self) -> list[tuple[str, Check]]:
        """``/readyz`` of a worker: Redis answers, and each held shard's index and flush worker."""
        checks: list[tuple[str, Check]] = [("redis", lambda: redis_problem(str(self.config.cluster.redis_url)))]
        for number, services in sorted(self.workspaces_by_shard().items()):
            checks += [(f"shard {number} {name}", check) for name, check in workspace_checks(services)]
        return checks

    def workspaces_by_shard(self) -> dict[int, Services]:
        return {n: runner.services for n, runner in list(self.runners.items()) if runner.services is not None}

    def _say(self) -> None:
        """One status line whenever the set of shards held changes (an operator's, and a test's, signal)."""
        held = compact(list(self.runners))
        if held != self._said:
            self._said = held
            status.info("worker %s holds shards %s", self.id, held)


def _forget_backlog(number: int) -> None:
    """A shard no longer held is another worker's to report."""
    for gauge in (metrics.STREAM_LENGTH, metrics.STREAM_PENDING, metrics.STREAM_LAG):
        with contextlib.suppress(KeyError):
            gauge.remove(str(number))


async def run_worker(services: Services) -> None:
    """Run shards until SIGINT/SIGTERM, answering through the enabled chat channels."""
    config = services.config.model_copy(deep=True)
    config.channels.terminal.enabled = False  # answers go to Telegram or Slack, never to this terminal
    stop = asyncio.Event()
    stop_on_signals(stop.set)
    redis = connect(config.cluster)
    channels = {channel.name: channel for channel in build_channels(Services(config), stop.set)}
    try:
        for channel in channels.values():
            await channel.connect()
        status.info("worker running: %d shard(s) in %s; Ctrl-C or SIGTERM stops it",
                    config.cluster.shards, redact_url(config.cluster.redis_url))
        worker = ClusterWorker(config, redis, channels)
        stop_health = start_health(config.metrics, worker.readiness, lambda: worker.workspaces_by_shard().values())
        try:
            await worker.run(stop)
        finally:
            stop_health()
    finally:
        for channel in channels.values():
            with contextlib.suppress(Exception):
                await channel.stop()
        await redis.aclose()
        status.info("worker stopped")
