"""The daily timer: each night at ``memory.dream.time`` plus jitter, distil the day.

The last run date is stored in SQLite, so a restart never runs a day twice, and a day missed while
the process was down is caught up at start. It is read and written in a worker thread
(:mod:`bridge.offload`): another process holding the write lock must not stall the event loop.
Time and sleep are injectable so tests run a night in milliseconds.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable
from datetime import date, datetime, time, timedelta

from memory import DreamSettings

from .. import offload

log = logging.getLogger(__name__)

NightlyJob = Callable[[date, int], Awaitable[None]]
"""``job(day, lookback_days)``: summarise, flush and dream for ``day``."""


class DailyTimer:
    def __init__(
        self,
        job: NightlyJob,
        settings: DreamSettings,
        *,
        get_last_run: Callable[[], date | None],
        set_last_run: Callable[[date], None],
        clock: Callable[[], datetime] = datetime.now,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.job = job
        self.settings = settings
        self._get_last_run = get_last_run
        self._set_last_run = set_last_run
        self._clock = clock
        self._sleep = sleep

    def fire_time(self, day: date) -> datetime:
        """The moment to run for ``day``: the configured time plus a jitter fixed per day."""
        hour, minute = (int(part) for part in self.settings.time.split(":"))
        digest = hashlib.sha256(day.isoformat().encode()).digest()
        jitter_s = int.from_bytes(digest[:4], "big") % (self.settings.jitter_minutes * 60 + 1)
        return datetime.combine(day, time(hour, minute)) + timedelta(seconds=jitter_s)

    async def catch_up(self) -> None:
        """Run once for yesterday when the process was down at its time, covering the missed days."""
        today = self._clock().date()
        last = await offload.run(self._get_last_run)
        yesterday = today - timedelta(days=1)
        if last is None or last >= yesterday:
            return
        missed = min(30, (yesterday - last).days)
        log.info("catching up the nightly run missed for %s (%d day(s))", yesterday, missed)
        await self._run(yesterday, max(self.settings.lookback_days, missed))

    async def run_forever(self) -> None:
        await self.catch_up()
        while True:
            await self.tick()

    async def next_run(self, now: datetime | None = None) -> datetime:
        """When the job runs next: today's fire time, or tomorrow's once today's has run."""
        return await offload.run(self.next_run_blocking, now)

    def next_run_blocking(self, now: datetime | None = None) -> datetime:
        """:meth:`next_run` for a worker thread (the console's overview): it reads SQLite."""
        return self.next_run_after(now or self._clock(), self._get_last_run())

    def next_run_after(self, now: datetime, last_run: date | None) -> datetime:
        """:meth:`next_run` for a caller that has read the last run itself (the console's status page)."""
        today = now.date()
        return self.fire_time(today) if last_run != today else self.fire_time(today + timedelta(days=1))

    async def tick(self) -> None:
        """Run today's job if its time has come and it has not run, else sleep until it is due."""
        now = self._clock()
        due = await self.next_run(now)
        if now >= due:
            await self._run(due.date(), self.settings.lookback_days)
            return
        await self._sleep(min((due - now).total_seconds(), 3600.0))

    async def _run(self, day: date, lookback_days: int) -> None:
        try:
            await self.job(day, lookback_days)
        except Exception:
            log.exception("nightly run for %s failed", day)
        await offload.run(self._set_last_run, day)
