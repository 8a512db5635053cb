"""Flush: trimmed conversation turns become a few lines of daily memory.

A job (recorded by :meth:`ConversationStore.trim`) is summarised by an injected async
``summarize`` callable (the bridge passes one backed by the LLM; this package knows no LLM). The
"nothing worth keeping" sentinel writes nothing; an LLM failure falls back to a rule-based
summary. Each block carries its job id in an HTML comment, so re-running a job after a crash
between the write and the "done" mark writes nothing twice.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from enum import Enum

from .conversations import ConversationStore, FlushJob, Message, is_scheduled
from .manager import MemoryManager, append_text

log = logging.getLogger(__name__)

Summarizer = Callable[[Sequence[Message]], Awaitable[str]]

_SENTINELS = {"none", "nothing", "n/a", "无", "没有", "无内容", "nothing worth keeping"}
_SUMMARY_KEEP_CHARS = 2000


class FlushOutcome(str, Enum):
    WRITTEN = "written"
    FALLBACK = "fallback"
    NOTHING = "nothing"
    ALREADY = "already"


def is_sentinel(text: str) -> bool:
    """True for the model's "nothing worth keeping" answers (English or Chinese, any punctuation)."""
    cleaned = re.sub(r"[\s。.!！*`\"'“”]+", " ", text).strip().lower()
    return not cleaned or cleaned in _SENTINELS


def strip_scheduled_pairs(messages: Sequence[Message]) -> list[Message]:
    """Drop scheduler-injected ``[SCHEDULED]`` prompts and the assistant answer that follows each."""
    kept: list[Message] = []
    skip_answer = False
    for message in messages:
        if is_scheduled(message):
            skip_answer = True
            continue
        if skip_answer and message.get("role") in ("assistant", "tool"):
            continue
        skip_answer = False
        kept.append(message)
    return kept


def conversation_text(messages: Sequence[Message]) -> str:
    """The human-readable part of a message list (user and assistant text, no tool plumbing)."""
    lines = []
    for message in messages:
        content = message.get("content")
        if message.get("role") in ("user", "assistant") and isinstance(content, str) and content.strip():
            lines.append(f"{message['role']}: {content.strip()}")
    return "\n".join(lines)


def fallback_summary(messages: Sequence[Message], max_lines: int = 8, max_chars: int = 200) -> str:
    """A rule-based summary when the LLM is down: what the user said, one line per message."""
    lines = []
    for message in messages:
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, str) and content.strip():
            text = " ".join(content.split())
            lines.append(f"- user said: {text[:max_chars]}{'…' if len(text) > max_chars else ''}")
    return "\n".join(lines[-max_lines:])


async def _summarize(messages: Sequence[Message], summarize: Summarizer, what: str) -> tuple[str, FlushOutcome]:
    """The LLM's summary, or the rule-based one when the LLM fails: turns are never lost."""
    try:
        return (await summarize(messages)).strip(), FlushOutcome.WRITTEN
    except Exception as exc:  # noqa: BLE001 - any summariser failure falls back
        log.warning("%s: summariser failed (%s); using the rule-based summary", what, exc)
        return fallback_summary(messages), FlushOutcome.FALLBACK


def _marker(job_id: int) -> str:
    return f"<!-- flush:{job_id} -->"


class Flusher:
    """Runs flush jobs; safe to run again after a crash at any point."""

    def __init__(self, store: ConversationStore, memory: MemoryManager, *, clock: Callable[[], datetime] = datetime.now) -> None:
        self.store = store
        self.memory = memory
        self._clock = clock

    async def run_pending(self, summarize: Summarizer) -> int:
        """Run every pending job in order; returns how many finished."""
        finished = 0
        for job in await asyncio.to_thread(self.store.pending_jobs):
            try:
                await self.run_job(job, summarize)
                finished += 1
            except Exception as exc:  # noqa: BLE001 - one bad job must not block the others
                log.exception("flush job %d failed; it stays pending for a retry", job.id)
                await asyncio.to_thread(self.store.fail_job_attempt, job.id, str(exc))
        return finished

    async def run_job(self, job: FlushJob, summarize: Summarizer) -> FlushOutcome:
        messages = strip_scheduled_pairs(
            await asyncio.to_thread(self.store.messages_between, job.session_id, job.seq_from, job.seq_to)
        )
        if not conversation_text(messages):
            await asyncio.to_thread(self.store.finish_job, job.id)
            return FlushOutcome.NOTHING
        summary, outcome = await _summarize(messages, summarize, f"flush job {job.id}")
        if is_sentinel(summary):
            await asyncio.to_thread(self.store.finish_job, job.id)
            return FlushOutcome.NOTHING
        written = await asyncio.to_thread(self._append_once, job, summary)
        await asyncio.to_thread(self._remember_in_context, job.session_id, summary)
        await asyncio.to_thread(self.store.finish_job, job.id)
        return outcome if written else FlushOutcome.ALREADY

    def _append_once(self, job: FlushJob, summary: str) -> bool:
        return self._append_block(job.scope, job.day, _marker(job.id), "conversation notes", summary)

    def _append_block(self, scope: str, day: str, marker: str, title: str, summary: str) -> bool:
        """Append a titled block unless one with ``marker`` is already there (a re-run after a crash)."""
        target = self.memory.workspace.daily_file(scope, day)
        with self.memory.lock:
            if target.is_file() and marker in target.read_text(encoding="utf-8", errors="replace"):
                return False
            append_text(target, f"## {self._clock():%H:%M} {title} {marker}\n{summary}\n")
        self.memory.mark_dirty(scope)
        return True

    async def daily_summary(self, session_id: str, day: str, summarize: Summarizer) -> FlushOutcome:
        """Summarise what a session said on ``day`` since its last daily summary (the nightly pass).

        Trimmed turns already reached daily memory through flush jobs; this covers the turns still
        in the context, so that Deep Dream sees the whole day. Nothing new → nothing is written.
        """
        session = await asyncio.to_thread(self.store.get_session, session_id)
        if session is None:
            return FlushOutcome.NOTHING
        since = await asyncio.to_thread(self.store.daily_summary_seq, session_id)
        start = max(since + 1, session.context_start_seq)
        stored = [
            m for m in await asyncio.to_thread(self.store.context_messages, session_id)
            if m.seq >= start and datetime.fromtimestamp(m.created_at).strftime("%Y-%m-%d") == day
        ]
        messages = strip_scheduled_pairs([m.message for m in stored])
        if not stored or not conversation_text(messages):
            return FlushOutcome.NOTHING
        last_seq = stored[-1].seq
        summary, outcome = await _summarize(messages, summarize, f"daily summary of {session_id}")
        if is_sentinel(summary):
            outcome = FlushOutcome.NOTHING
        else:
            marker = f"<!-- daily:{session_id}:{last_seq} -->"
            await asyncio.to_thread(self._append_block, session.scope, day, marker, "daily summary", summary)
        await asyncio.to_thread(self.store.set_daily_summary_seq, session_id, last_seq)
        return outcome

    def _remember_in_context(self, session_id: str, summary: str) -> None:
        """Put the summary at the head of the remaining context, so the thread is not lost."""
        session = self.store.get_session(session_id)
        previous = session.summary if session and session.summary else ""
        if summary in previous:
            return
        combined = f"{previous}\n{summary}".strip()
        self.store.set_summary(session_id, combined[-_SUMMARY_KEEP_CHARS:])
