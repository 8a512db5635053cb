"""The conversation's rules in one place: which session a chat uses, and every move of its context.

A session is keyed by (scope, chat): when the configuration gives a chat another scope (e.g.
``memory.scope`` switched from ``global`` to ``user``), the chat starts a new session in the new
scope instead of flushing its turns into a scope nobody reads any more.

Turns reach daily memory through flush jobs only. A trim (over budget, or harder after a context
overflow), ``/clear`` and the nightly summary each record, in the transaction that moves the context
boundary, one job for the turns past the session's watermark (see ``memory.conversations.conversations``), then
wake the flush worker: a turn is summarised exactly once, whichever of them takes it first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import date, datetime, time, timedelta

from memory import ConversationStore, FlushJob
from memory import session_id as store_session_id

from . import offload
from .config import ContextSettings
from .context import trim_point

log = logging.getLogger(__name__)


def session_key(scope: str, chat_key: str) -> str:
    """The session of a chat in a scope (the store's own key form: an export renames it by scope)."""
    return store_session_id(scope, chat_key)


class Sessions:
    """Opens sessions and moves their context boundaries; each move that queues turns wakes the worker."""

    def __init__(
        self,
        store: ConversationStore,
        context: ContextSettings,
        *,
        on_job: Callable[[], None] = lambda: None,
        clock: Callable[[], datetime] = datetime.now,
    ) -> None:
        self.store = store
        self.context = context
        self._on_job = on_job
        self._clock = clock

    async def open(self, scope: str, chat_key: str, channel: str) -> str:
        """The session id of ``chat_key`` in ``scope``, created on first use."""
        session_id = session_key(scope, chat_key)
        await offload.run(self.store.ensure_session, session_id, scope, channel)
        return session_id

    async def trim(self, session_id: str, *, harder: bool = False) -> FlushJob | None:
        """Trim the context when over budget (or always, by half its turns, after an overflow)."""
        reason = "overflow" if harder else "trim"
        job = await offload.run(self._trim, session_id, reason, harder)
        return self._queued(job, session_id, reason)

    def _trim(self, session_id: str, reason: str, harder: bool) -> FlushJob | None:
        stored = self.store.context_messages(session_id)
        if harder:
            visible = [i for i, item in enumerate(stored) if item.visible]
            new_start = stored[visible[len(visible) // 2]].seq if len(visible) > 1 else None
        else:
            new_start = trim_point(stored, self.context.max_turns, self.context.max_tokens)
        if new_start is None:
            return None
        return self.store.trim(session_id, new_start, reason, self._today())

    async def clear(self, scope: str, chat_key: str) -> FlushJob | None:
        """``/clear``: a fresh context for the chat; its turns not yet in daily memory are flushed."""
        session_id = session_key(scope, chat_key)
        job = await offload.run(self.store.clear_context, session_id, self._today())
        return self._queued(job, session_id, "clear")

    async def summarize_day(self, day: date) -> list[FlushJob]:
        """The nightly summary: every session's turns of ``day`` and before that are still only in the
        context become flush jobs for ``day`` (Deep Dream then sees the whole day)."""
        until = datetime.combine(day + timedelta(days=1), time()).timestamp()
        jobs = await offload.run(self.store.record_daily_jobs, until, day.isoformat())
        log.info("nightly summary for %s: %d session(s) queued", day, len(jobs))
        if jobs:
            self._on_job()
        return jobs

    async def cleanup(self, max_age_days: float) -> int:
        """Drop conversation rows past retention (only those already in daily memory)."""
        return await offload.run(self.store.cleanup, max_age_days)

    def _today(self) -> str:
        return self._clock().strftime("%Y-%m-%d")

    def _queued(self, job: FlushJob | None, session_id: str, reason: str) -> FlushJob | None:
        """Log a recorded job and wake the flush worker (called on the event loop)."""
        if job is not None:
            log.info("session %s: seq %d-%d queued for daily memory (%s), flush job %d",
                     session_id, job.seq_from, job.seq_to, reason, job.id)
            self._on_job()
        return job
