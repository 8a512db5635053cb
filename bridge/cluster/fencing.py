"""A worker's right to act for a shard: its lease grant's fencing token, and its own deadline.

A lease only says who Redis thinks holds a shard *now*; a worker that is cut off from Redis, paused
or starved of CPU learns that it lost it too late. Two checks keep such a worker from answering a
message the shard's next holder answers too:

- **its own clock.** A renewal sent at ``t`` keeps the lease in Redis until at least ``t + TTL``, so
  the worker stops writing and sending at ``t + TTL × LOCAL_SHARE`` unless a later renewal succeeds
  first. The next holder can only claim the shard after the lease expired, later still. One write
  goes on past that deadline: the ledger's record that a reply went out
  (:data:`bridge.ledger.RECORDING_SENT`), which only a newer token refuses.
- **the token, in the shard.** Each grant carries a number that only grows (:mod:`.leases`). The
  holder writes its token into the shard's SQLite when it opens the shard, under the workspace lock;
  every later write transaction and every write under the workspace lock first reads it back and is
  refused when a larger token is there. A write that passed the clock check and then stalled (a
  paused thread) is still refused once the next holder opened the shard.

Every send checks both just before it goes. A check that fails raises :class:`Fenced`.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from channels import Channel, IncomingMessage, MessageHandler, OutgoingFile, Reply
from memory import Database, WorkspaceLock

from .. import offload
from ..ledger import RECORDING_SENT, TurnAbandoned

#: Share of the lease TTL, counted from the moment a renewal was sent, after which a worker that
#: heard nothing back stops work on the shard. Renewals go every third of the TTL, so one late or
#: lost renewal costs nothing; the rest of the TTL is the margin before another worker may claim it.
LOCAL_SHARE = 0.75
WATCH_S = 0.1  # how often a lease holder compares its deadline with the clock

SCHEMA = """
CREATE TABLE IF NOT EXISTS cluster_fence (
    id INTEGER PRIMARY KEY CHECK (id = 0), token INTEGER NOT NULL, holder TEXT NOT NULL, since REAL NOT NULL
);
"""


class Fenced(TurnAbandoned):
    """This worker may no longer act for the shard: its lease lapsed by its own clock, or a newer
    holder's token is in the shard. Nothing was written or sent."""


class FenceBehind(Fenced):
    """The shard holds a token larger than the one just granted (Redis lost its counter)."""

    def __init__(self, shard: int, stored: int, token: int) -> None:
        super().__init__(f"shard {shard} holds fencing token {stored}, above the {token} just granted")
        self.stored = stored


class LeaseClock:
    """How long a lease is surely still ours, by our own clock: ``LOCAL_SHARE`` of its TTL from the
    moment the last successful claim or renewal was sent."""

    def __init__(self, ttl_s: float, granted_at: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.valid_s = ttl_s * LOCAL_SHARE
        self._clock = clock
        self.deadline = granted_at + self.valid_s

    def renewed(self, sent_at: float) -> None:
        """A claim or renewal sent at ``sent_at`` (this clock) succeeded."""
        self.deadline = max(self.deadline, sent_at + self.valid_s)

    def revoke(self) -> None:
        """The lease is known lost: every check fails from now on."""
        self.deadline = float("-inf")

    def expired(self) -> bool:
        return self._clock() >= self.deadline

    def remaining_s(self) -> float:
        """Seconds until the deadline (negative once past it)."""
        return self.deadline - self._clock()


class ShardFence(LeaseClock):
    """The grant this worker holds for one shard: its token and the deadline it keeps by itself."""

    def __init__(self, shard: int, token: int, ttl_s: float, granted_at: float, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(ttl_s, granted_at, clock=clock)
        self.shard = shard
        self.token = token
        self._db: Database | None = None

    def regrant(self, token: int) -> None:
        """The lease holder's token was advanced (:meth:`.leases.Leases.advance`)."""
        self.token = token

    def check(self) -> None:
        """Before a send: raise :class:`Fenced` unless this grant is still good (blocking: a read)."""
        self._check_clock()
        if self._db is not None:
            self._check_stored(self._db.query("SELECT token FROM cluster_fence WHERE id = 0"))

    def install(self, db: Database, lock: WorkspaceLock, holder: str) -> None:
        """Write this grant's token into the shard (under the workspace lock, so no write of an older
        holder that passed its check is still under way), then guard every later write."""
        db.execute_script(SCHEMA)
        with lock, db.transaction() as conn:
            stored = _stored(conn.execute("SELECT token FROM cluster_fence WHERE id = 0").fetchall())
            if stored > self.token:
                raise FenceBehind(self.shard, stored, self.token)
            conn.execute("INSERT INTO cluster_fence (id, token, holder, since) VALUES (0, ?, ?, ?) ON CONFLICT (id)"
                         " DO UPDATE SET token = excluded.token, holder = excluded.holder, since = excluded.since",
                         (self.token, holder, time.time()))
        self._db = db
        db.guard = self._guard_transaction
        lock.guard = self.check

    def _guard_transaction(self, conn: sqlite3.Connection) -> None:
        if not RECORDING_SENT.get():  # a reply already out is recorded past the clock (see RECORDING_SENT)
            self._check_clock()
        self._check_stored(conn.execute("SELECT token FROM cluster_fence WHERE id = 0").fetchall())

    def _check_clock(self) -> None:
        late = self._clock() - self.deadline
        if late >= 0:
            raise Fenced(f"shard {self.shard}: lease not renewed in time ({late:.1f}s past this worker's own "
                         "deadline); it may have moved")

    def _check_stored(self, rows: list[sqlite3.Row] | list[tuple[int]]) -> None:
        stored = _stored(rows)
        if stored > self.token:
            raise Fenced(f"shard {self.shard}: a newer holder (fencing token {stored}, ours {self.token}) has it")


def _stored(rows: list[sqlite3.Row] | list[tuple[int]]) -> int:
    return int(rows[0][0]) if rows else 0


class FencedChannel(Channel):
    """A shard's view of a chat channel: every send first checks the shard's fence, so a worker that
    may have lost the shard says nothing more in its chats. Receiving is not a shard's business."""

    def __init__(self, inner: Channel, fence: ShardFence) -> None:
        self.inner = inner
        self.fence = fence
        self.name = inner.name
        self.max_message_chars = inner.max_message_chars

    async def start(self, on_message: MessageHandler) -> None:
        raise RuntimeError("a shard's channel only sends: the worker's channel is connected for it")

    async def stop(self) -> None:
        """The worker stops its channels, not a shard."""

    async def send(self, reply: Reply, to: IncomingMessage) -> None:
        await offload.run(self.fence.check)
        await self.inner.send(reply, to)

    async def send_file(self, file: OutgoingFile, to: IncomingMessage) -> None:
        await offload.run(self.fence.check)
        await self.inner.send_file(file, to)

    def working(self, to: IncomingMessage) -> AbstractAsyncContextManager[None]:
        return self.inner.working(to)

    def describe(self) -> str:
        return self.inner.describe()

    def attachment_from_wire(self, data: dict[str, Any]) -> Any:
        return self.inner.attachment_from_wire(data)

    async def publish_commands(self, commands: Sequence[tuple[str, str]]) -> None:
        """Published by the worker's own channel, once."""
