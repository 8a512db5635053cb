"""Flush: conversation turns on their way out become a few lines of daily memory.

A job (recorded by the :class:`ConversationStore` whenever turns leave the context or the nightly
summary takes them) is summarised by an injected async ``summarize`` callable (the bridge passes
one backed by the LLM; this package knows no LLM), told which job it summarises so that it can say
whose memory the request was for and why. The "nothing worth keeping" sentinel writes
nothing; an LLM failure falls back to a rule-based summary. Each block carries its job id in an
HTML comment, so re-running a job after a crash between the write and the "done" mark writes
nothing twice.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from enum import StrEnum

from ..conversations.conversations import ConversationStore
from ..conversations.flush_jobs import FlushJob
from ..conversations.turns import Turn, is_scheduled
from ..files.files import append_once
from ..index.chunker import SECTION_TITLES
from ..manager import MemoryManager
from .offload import Offload, to_thread

log = logging.getLogger(__name__)

Summarizer = Callable[[FlushJob, Sequence[Turn]], Awaitable[str]]

_SENTINELS = {"none", "nothing", "n/a", "无", "没有", "无内容", "nothing worth keeping"}
_SUMMARY_KEEP_CHARS = 2000
_FLUSH_ATTEMPTS = 3  # summaries made over turns that changed meanwhile (a forget) before giving up for now
_LOUD_AFTER = 5  # failed attempts after which each further failure is logged as an error, not a warning


class FlushOutcome(StrEnum):
    WRITTEN = "written"
    FALLBACK = "fallback"
    NOTHING = "nothing"
    ALREADY = "already"


def is_sentinel(text: str) -> bool:
    """True for the model's "nothing worth keeping" answers (English or Chinese, any punctuation)."""
    cleaned = re.sub(r"[\s。.!！*`\"'“”]+", " ", text).strip().lower()
    return not cleaned or cleaned in _SENTINELS


def strip_scheduled_pairs(messages: Sequence[Turn]) -> list[Turn]:
    """Drop scheduler-injected ``[SCHEDULED]`` prompts and the assistant answer that follows each."""
    kept: list[Turn] = []
    skip_answer = False
    for message in messages:
        if is_scheduled(message):
            skip_answer = True
            continue
        if skip_answer and message.role in ("assistant", "tool"):
            continue
        skip_answer = False
        kept.append(message)
    return kept


def conversation_text(messages: Sequence[Turn]) -> str:
    """The human-readable part of a message list (user and assistant text, no tool plumbing)."""
    lines = []
    for message in messages:
        if message.role in ("user", "assistant") and message.text.strip():
            lines.append(f"{message.role}: {message.text.strip()}")
    return "\n".join(lines)


def fallback_summary(messages: Sequence[Turn], max_lines: int = 8, max_chars: int = 200) -> str:
    """A rule-based summary when the LLM is down: what the user said, one line per message."""
    lines = []
    for message in messages:
        if message.role == "user" and message.text.strip():
            text = " ".join(message.text.split())
            lines.append(f"- user said: {text[:max_chars]}{'…' if len(text) > max_chars else ''}")
    return "\n".join(lines[-max_lines:])


async def _summarize(job: FlushJob, messages: Sequence[Turn], summarize: Summarizer) -> tuple[str, FlushOutcome]:
    """The LLM's summary, or the rule-based one when the LLM fails: turns are never lost."""
    try:
        return (await summarize(job, messages)).strip(), FlushOutcome.WRITTEN
    except Exception as exc:
        log.warning("flush job %d: summariser failed (%s); using the rule-based summary", job.id, exc)
        return fallback_summary(messages), FlushOutcome.FALLBACK


def _marker(job_id: int) -> str:
    return f"<!-- flush:{job_id} -->"


class Flusher:
    """Runs flush jobs; safe to run again after a crash at any point."""

    def __init__(self, store: ConversationStore, memory: MemoryManager, *, clock: Callable[[], datetime] = datetime.now,
                 offload: Offload = to_thread) -> None:
        self.store = store
        self.memory = memory
        self._clock = clock
        self._offload = offload

    async def run_pending(self, summarize: Summarizer) -> int:
        """Run every pending job in order; returns how many finished."""
        finished = 0
        now = self._clock().timestamp()
        for job in await self._offload(self.store.pending_jobs, now):
            try:
                await self.run_job(job, summarize)
                finished += 1
            except Exception as exc:
                wait = await self._offload(self.store.fail_job_attempt, job.id, str(exc), now)
                log.log(logging.ERROR if job.attempts + 1 >= _LOUD_AFTER else logging.WARNING,
                        "flush job %d of scope %s failed (attempt %d: %s); it stays pending and is tried again in "
                        "%.0fs (membridge doctor lists failing jobs)", job.id, job.scope, job.attempts + 1, exc, wait,
                        exc_info=job.attempts == 0)
        return finished

    async def run_job(self, job: FlushJob, summarize: Summarizer) -> FlushOutcome:
        """Summarise the job's turns and append the summary once. When its turns change while the
        model answers (a forget deleted some), the summary is made again from what is left: a
        summary of forgotten turns is never written."""
        for _attempt in range(_FLUSH_ATTEMPTS):
            outcome = await self._run_once(job, summarize)
            if outcome is not None:
                return outcome
        raise RuntimeError(f"flush job {job.id}: its turns kept changing while they were summarised")

    async def _run_once(self, job: FlushJob, summarize: Summarizer) -> FlushOutcome | None:
        messages = await self._offload(self._messages, job)
        if not conversation_text(messages):
            await self._offload(self.store.finish_job, job.id)
            return FlushOutcome.NOTHING
        summary, outcome = await _summarize(job, messages, summarize)
        if is_sentinel(summary):
            await self._offload(self.store.finish_job, job.id)
            return FlushOutcome.NOTHING
        written = await self._offload(self._append_once, job, summary, messages)
        if written is None:
            log.info("flush job %d: its turns changed while the model answered; summarising again", job.id)
            return None
        await self._offload(self.store.finish_job, job.id)
        return outcome if written else FlushOutcome.ALREADY

    def _messages(self, job: FlushJob) -> list[Turn]:
        return strip_scheduled_pairs(self.store.messages_between(job.session_id, job.seq_from, job.seq_to))

    def _append_once(self, job: FlushJob, summary: str, summarized: list[Turn]) -> bool | None:
        """Append the job's block unless it is already there (a re-run after a crash), and keep the
        summary at the head of the session's context; None, and nothing written, when the turns are
        no longer those summarised. All under the lock a forget holds while it deletes: a forget
        comes before the check (the job is summarised again) or after both writes (it removes both)."""
        title = SECTION_TITLES[1] if job.is_daily_summary else SECTION_TITLES[0]
        target = self.memory.workspace.daily_file(job.scope, job.day)
        marker = _marker(job.id)
        with self.memory.lock:
            if self._messages(job) != summarized:
                return None
            written = append_once(target, f"## {self._clock():%H:%M} {title} {marker}\n{summary}\n", marker)
            self.store.remember_summary(job, summary, _SUMMARY_KEEP_CHARS)
        if written:
            self.memory.indexer.mark_dirty(job.scope)
        return written
