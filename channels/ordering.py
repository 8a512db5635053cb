"""Per-chat order and delivery dedupe: the one implementation every part of membridge uses.

Whoever takes messages in for answering needs the same two things: a chat's messages handled one
after another in arrival order while other chats go on in parallel (:class:`ChatLanes`), and a
redelivered message recognised without remembering every message ever seen (:class:`RecentKeys`).
The bridge in one process, a cluster receiver appending to Redis and a cluster shard worker all
use these classes; the channels use neither, they hand each message on in arrival order (see
:data:`channels.base.MessageHandler`).

Why here, in ``channels``: both ideas are about chats and deliveries, the bridge already imports
``channels`` for the message types, and ``channels`` imports nothing of ``bridge`` or ``memory``,
so this is the one place every side may import without a cycle or a layering breach.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Hashable
from contextlib import AbstractAsyncContextManager, nullcontext

__all__ = ["ChatLanes", "Job", "RecentKeys"]

log = logging.getLogger(__name__)

Job = Callable[[], Awaitable[object]]


class ChatLanes:
    """Jobs of one chat run one after another in submission order; different chats run in parallel.

    ``slots`` bounds how many jobs run at once across all chats (a semaphore, so several lanes may
    share one bound); it is taken per job, so a busy chat cannot keep other chats waiting for more
    than one of its jobs. ``max_pending`` bounds the jobs queued or running: :meth:`submit` waits
    for room, which pushes back on whoever reads messages in. A chat's worker task ends when its
    queue is empty, so idle chats cost nothing and the maps hold only busy chats.

    A job that raises is logged and the chat goes on with its next job.
    """

    def __init__(self, name: str, *, slots: asyncio.Semaphore | None = None, max_pending: int | None = None) -> None:
        self._name = name
        self._slots = slots
        self._room = asyncio.Semaphore(max_pending) if max_pending is not None else None
        self._queues: dict[Hashable, deque[Job]] = {}
        self._workers: dict[Hashable, asyncio.Task[None]] = {}
        self._pending = 0
        self._closed = False

    @property
    def pending(self) -> int:
        """Jobs queued or running."""
        return self._pending

    @property
    def busy_chats(self) -> int:
        """Chats with a job queued or running (the size of the lanes' maps)."""
        return len(self._workers)

    async def submit(self, chat: Hashable, job: Job) -> bool:
        """Queue ``job`` behind ``chat``'s earlier jobs; False (and the job dropped) once closed.

        Returns as soon as the job is queued, not when it has run; waits only while
        ``max_pending`` jobs are held, and waiting submitters get room in the order they came.
        """
        if self._room is not None:
            await self._room.acquire()
        if self._closed:
            if self._room is not None:
                self._room.release()
            return False
        self._pending += 1
        queue = self._queues.get(chat)
        if queue is not None:
            queue.append(job)
            return True
        self._queues[chat] = deque([job])
        self._workers[chat] = asyncio.create_task(self._work(chat), name=f"{self._name}:{chat}")
        return True

    async def close(self, timeout: float) -> int:
        """Take no more jobs; let queued ones finish for up to ``timeout`` seconds, then cancel what
        is left. Returns how many chats were cut short."""
        self._closed = True
        workers = list(self._workers.values())
        if not workers:
            return 0
        _, late = await asyncio.wait(workers, timeout=timeout)
        for worker in late:
            worker.cancel()
        if late:
            log.warning("%s: cancelled %d chat(s) still busy at stop", self._name, len(late))
            await asyncio.wait(late)
        return len(late)

    async def _work(self, chat: Hashable) -> None:
        queue = self._queues[chat]
        try:
            while queue:
                job = queue[0]
                try:
                    async with self._slot():
                        await job()
                except Exception:
                    log.exception("%s: a job of chat %s failed", self._name, chat)
                finally:
                    queue.popleft()
                    self._release(1)
        finally:
            self._release(len(queue))  # jobs a cancellation left unrun
            del self._queues[chat]
            del self._workers[chat]

    def _slot(self) -> AbstractAsyncContextManager[object]:
        return self._slots if self._slots is not None else nullcontext()

    def _release(self, count: int) -> None:
        for _ in range(count):
            self._pending -= 1
            if self._room is not None:
                self._room.release()


class RecentKeys:
    """The last ``size`` keys seen: enough to recognise a redelivery without growing forever."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("size must be positive")
        self._size = size
        self._keys: OrderedDict[Hashable, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._keys)

    def add(self, key: Hashable) -> bool:
        """Remember ``key``; False if it was already among the last ``size`` keys."""
        if key in self._keys:
            return False
        self._keys[key] = None
        if len(self._keys) > self._size:
            self._keys.popitem(last=False)
        return True
