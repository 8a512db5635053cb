"""The background flush worker: runs pending flush jobs without ever blocking a reply.

It wakes when the agent records a job and at start (jobs left pending by a crash run then).
The summariser is the LLM with a prompt that asks for events in the user's own language and for
an exact sentinel when nothing is worth keeping.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from memory.conversations import Message
from memory.flush import Flusher, Summarizer, conversation_text

from .llm import LLMClient

log = logging.getLogger(__name__)

SUMMARY_PROMPT = """You keep a person's daily memory. Below is part of a conversation that is leaving the context.
Write 1-5 short bullet lines ("- ...") of what is worth remembering later: events, facts about the person,
decisions, plans with absolute dates (today is given in the conversation if needed). Write in the same
language the user writes in. Invent nothing. If nothing is worth keeping, answer exactly: NONE"""


def llm_summarizer(llm: LLMClient) -> Summarizer:
    async def summarize(messages: Sequence[Message]) -> str:
        request = [
            {"role": "system", "content": SUMMARY_PROMPT},
            {"role": "user", "content": conversation_text(messages)[:24_000]},
        ]
        response = await llm.complete(request)
        return response.content

    return summarize


class FlushWorker:
    def __init__(self, flusher: Flusher, summarize: Summarizer, *, retry_delay_s: float = 30.0) -> None:
        self.flusher = flusher
        self.summarize = summarize
        self.retry_delay_s = retry_delay_s
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()
        self._idle.set()

    def notify(self) -> None:
        """A job was recorded: run it soon. Safe to call from any coroutine of the loop."""
        self._idle.clear()
        self._wake.set()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="flush-worker")
            self.notify()

    async def stop(self) -> None:
        """Stop after the job in progress; unfinished jobs stay recorded for the next start."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    async def drain(self, timeout_s: float = 60.0) -> None:
        """Wait until the pending jobs have run (the daily timer needs that before Deep Dream)."""
        if self._task is None:
            await self.flusher.run_pending(self.summarize)
            return
        self.notify()
        await asyncio.wait_for(self._idle.wait(), timeout_s)

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self.flusher.run_pending(self.summarize)
            except Exception:  # noqa: BLE001 - the worker must survive anything
                log.exception("flush worker pass failed")
            pending = await asyncio.to_thread(self.flusher.store.pending_jobs)
            if pending and not self._wake.is_set():
                asyncio.get_running_loop().call_later(self.retry_delay_s, self._wake.set)
            if not self._wake.is_set():
                self._idle.set()
