"""Telegram long polling that confirms an update only once whoever answers has it for good.

``getUpdates`` with ``offset=N`` confirms every update below N to Telegram, which then forgets
them. python-telegram-bot's Updater asks for the next batch with the offset past everything it
fetched, so an update is confirmed while it is still only in this process's memory (a turn queued
behind its chat's earlier ones, an append waiting for Redis) and a crash loses it. Here the offset
passes an update only once it is *settled*: ignored by the intake, or its message accepted by the
handler (:meth:`channels.base.Channel.accepted`: appended to Redis, or its user turn stored). An
update whose handing-on failed is *released* and handed on again when the next fetch brings it
back; one fetched again while still in hand is not handed on twice.

Telegram answers a long poll at once while any unconfirmed update exists, so while an update is in
hand a fetch that brings nothing new is followed by a wait until something settles, or at most
:data:`REFETCH_S` (new updates of other chats still come within that). What is held is bounded by
one batch (``limit``, 100): once a whole batch is in hand, no new update is fetched until one
settles.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta

from telegram import Bot, Update
from telegram.error import RetryAfter, TelegramError

log = logging.getLogger(__name__)

#: The longest wait before fetching again while an update is in hand and nothing new came.
REFETCH_S = 1.0
RETRY_FIRST_S = 0.5
RETRY_MAX_S = 30.0


class Receipts:
    """Which fetched updates are still in hand, and so the offset that confirms all the others.

    Updates are recorded in fetch order, which is ``update_id`` order; the offset is the id of the
    first one not settled (or one past the last fetched, when all are)."""

    def __init__(self) -> None:
        self._in_hand: dict[int, bool | None] = {}  # update_id -> settled (None: to hand on again), in id order
        self._next: int | None = None  # one past the highest update_id fetched
        self._messages: dict[str, tuple[int, ...]] = {}  # a handed-on message's key -> its updates
        self.changed = asyncio.Event()  # set whenever something settles or is released

    @property
    def offset(self) -> int | None:
        """What the next ``getUpdates`` may confirm up to (None: nothing fetched yet)."""
        return next(iter(self._in_hand), self._next)

    @property
    def holding(self) -> int:
        return len(self._in_hand)

    def fetched(self, updates: Sequence[Update]) -> list[Update]:
        """Record a batch; returns the updates to hand on (those not already in hand)."""
        floor = self.offset
        fresh = [update for update in updates if self._in_hand.get(update.update_id) is None
                 and (floor is None or update.update_id >= floor)]
        for update in fresh:
            self._in_hand[update.update_id] = False
            self._next = max(self._next or 0, update.update_id + 1)
        self._in_hand = dict(sorted(self._in_hand.items()))
        return fresh

    def expect(self, key: str, update_ids: Sequence[int]) -> None:
        """These updates became the message ``key``: they settle when it is accepted."""
        self._messages[key] = tuple(dict.fromkeys((*self._messages.get(key, ()), *update_ids)))

    def accept(self, key: str) -> None:
        """The message ``key`` is safe with whoever answers it."""
        self.settle(self._messages.pop(key, ()))

    def settle(self, update_ids: Sequence[int]) -> None:
        """Nothing more is owed for these updates: the offset may pass them."""
        for update_id in update_ids:
            if update_id in self._in_hand:
                self._in_hand[update_id] = True
        for update_id, settled in list(self._in_hand.items()):  # the settled run at the front goes
            if not settled:
                break
            del self._in_hand[update_id]
        self.changed.set()

    def release(self, update_ids: Sequence[int]) -> None:
        """Handing these on failed: the next fetch that brings them back hands them on again."""
        for update_id in update_ids:
            if update_id in self._in_hand:
                self._in_hand[update_id] = None
        self._messages = {key: ids for key, ids in self._messages.items() if not set(ids) & set(update_ids)}
        self.changed.set()


class UpdatePoller:
    """The one ``getUpdates`` loop of a polling bot: fetch, hand each new update to ``process`` in
    order, and confirm only what :class:`Receipts` says is settled."""

    def __init__(self, bot: Bot, process: Callable[[Update], Awaitable[object]], *, timeout_s: int,
                 allowed_updates: Sequence[str], interval_s: float = 0.0) -> None:
        self._bot = bot
        self._process = process
        self._timeout = timedelta(seconds=timeout_s)
        self._allowed = list(allowed_updates)
        self._interval_s = interval_s
        self.receipts = Receipts()
        self._told: int | None = None  # the last offset Telegram was sent
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Make sure no webhook is set (Telegram refuses getUpdates then), then poll in a task."""
        await self._bot.delete_webhook(drop_pending_updates=False)
        self._task = asyncio.create_task(self._poll(), name="telegram-poller")

    async def stop(self) -> None:
        """Fetch no more. Updates in hand stay unconfirmed until :meth:`confirm`."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def confirm(self) -> None:
        """Tell Telegram what is settled by now (at shutdown: what is still in hand comes again at
        the next start, to this process or another)."""
        offset = self.receipts.offset
        if offset is None or offset == self._told:
            return
        try:
            await self._bot.get_updates(offset=offset, limit=1, timeout=0, allowed_updates=self._allowed)
            self._told = offset
        except TelegramError as exc:
            log.warning("Telegram: could not confirm the updates handled (%s); they come again at the next start", exc)

    async def _poll(self) -> None:
        delay = RETRY_FIRST_S
        while True:
            try:
                fresh = await self._fetch()
                delay = RETRY_FIRST_S
            except RetryAfter as exc:
                wait = exc.retry_after.total_seconds() if isinstance(exc.retry_after, timedelta) else exc.retry_after
                log.warning("Telegram: getUpdates under flood control; fetching again in %.0fs", wait)
                await asyncio.sleep(float(wait))
                continue
            except Exception as exc:  # TelegramError, or a reply the library could not read
                log.warning("Telegram: getUpdates failed (%s); fetching again in %.1fs", exc, delay)
                await asyncio.sleep(delay)  # a back-off between tries
                delay = min(delay * 2, RETRY_MAX_S)
                continue
            if not await self._hand_on(fresh):
                await asyncio.sleep(delay)  # handing on failed: the same updates come back next time
                delay = min(delay * 2, RETRY_MAX_S)
            elif not fresh and self.receipts.holding:
                await self._until_settled()
            elif self._interval_s:
                await asyncio.sleep(self._interval_s)

    async def _fetch(self) -> list[Update]:
        offset = self.receipts.offset
        updates = await self._bot.get_updates(offset=offset, timeout=self._timeout, allowed_updates=self._allowed)
        self._told = offset
        return self.receipts.fetched(updates)

    async def _hand_on(self, updates: list[Update]) -> bool:
        """``process`` each update in order; False when one failed (it and the rest are released)."""
        for done, update in enumerate(updates):
            try:
                await self._process(update)
            except Exception:
                log.exception("Telegram: handing on update %s failed; it is fetched again", update.update_id)
                self.receipts.release([later.update_id for later in updates[done:]])
                return False
        return True

    async def _until_settled(self) -> None:
        """Telegram would answer again at once with what is in hand: wait for a change first."""
        self.receipts.changed.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(REFETCH_S):  # not wait_for: on 3.11 it can swallow a cancel
                await self.receipts.changed.wait()
