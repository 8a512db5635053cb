"""The background flush worker: runs pending flush jobs without ever blocking a reply.

It wakes when a job is recorded and at start (jobs left pending by a crash run then). Jobs are
recorded in worker threads, so :meth:`FlushWorker.notify` may be called from any thread: it hands
the wake-up to the event loop with ``call_soon_threadsafe``. A pass that fails (even reading the
job list) is logged and retried later; the worker never dies. The summariser is the LLM with a
prompt that asks for events in the user's own language and for an exact sentinel when nothing is
worth keeping; each of its requests is charged to the scope whose turns it summarised.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence

from memory import Flusher, FlushJob, Summarizer, Turn, conversation_text

from .. import offload
from ..llm import LLMClient, LLMResponse
from ..ops.usage import DAILY_SUMMARY, FLUSH

log = logging.getLogger(__name__)

SUMMARY_PROMPT = """You keep a person's daily memory. Below is part of a conversation that is leaving the context.
Write 1-5 short bullet lines ("- ...") of what is worth remembering later: events, facts about the person,
decisions, plans with absolute dates (today is given in the conversation if needed). Write in the same
language the user writes in. Invent nothing. If nothing is worth keeping, answer exactly: NONE"""


#: Books an upkeep request to a scope: (scope, kind, the model's response); ``TurnMeter.charge``.
Charge = Callable[[str, str, LLMResponse], Awaitable[None]]


def llm_summarizer(llm: LLMClient, charge: Charge) -> Summarizer:
    async def summarize(job: FlushJob, messages: Sequence[Turn]) -> str:
        request = [
            {"role": "system", "content": SUMMARY_PROMPT},
            {"role": "user", "content": conversation_text(messages)[:24_000]},
        ]
        response = await llm.complete(request)
        await charge(job.scope, DAILY_SUMMARY if job.is_daily_summary else FLUSH, response)
        return response.content

    return summarize


class FlushWorker:
    def __init__(self, flusher: Flusher, summarize: Summarizer, *, retry_delay_s: float = 30.0) -> None:
        self.flusher = flusher
        self.summarize = summarize
        self.retry_delay_s = retry_delay_s
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._passes_started = 0
        self._passes_done = 0
        self._pass_done = asyncio.Condition()

    def notify(self) -> None:
        """A job was recorded: run it soon. Safe from any thread; before :meth:`start` it does nothing
        (the job is recorded, and the start runs it)."""
        loop = self._loop
        if loop is None:
            return
        try:
            loop.call_soon_threadsafe(self._wake.set)
        except RuntimeError:  # the loop is closed: the job stays recorded for the next start
            log.info("flush worker stopped; the recorded job runs at the next start")

    @property
    def alive(self) -> bool:
        """Started and not dead (``/readyz``)."""
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        if self._task is None:
            self._loop = asyncio.get_running_loop()
            self._task = asyncio.create_task(self._run(), name="flush-worker")
            self._wake.set()

    async def stop(self) -> None:
        """Stop after the job in progress; unfinished jobs stay recorded for the next start."""
        self._loop = None
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
            async with self._pass_done:  # a drain waiting for a pass that will not come returns
                self._pass_done.notify_all()

    async def drain(self) -> None:
        """Wait until every job recorded before this call has had its turn (the nightly pass needs
        that before Deep Dream): one whole pass that starts after the call. However slow the LLM, a
        pass ends (each summary falls back to rules when the LLM fails), so there is no timeout
        that could skip the night; jobs recorded meanwhile do not extend the wait."""
        if self._task is None:
            await self.flusher.run_pending(self.summarize)
            return
        wanted = self._passes_started + 1
        self._wake.set()
        async with self._pass_done:
            await self._pass_done.wait_for(lambda: self._passes_done >= wanted or self._task is None)

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            self._passes_started += 1
            await self._one_pass()
            self._passes_done = self._passes_started
            async with self._pass_done:
                self._pass_done.notify_all()

    async def _one_pass(self) -> None:
        """Run the pending jobs; when some stay pending (or the pass failed), try again later."""
        try:
            await self.flusher.run_pending(self.summarize)
            retry = bool(await offload.run(self.flusher.store.pending_jobs))
        except Exception:
            log.exception("flush worker pass failed; retrying in %.0fs", self.retry_delay_s)
            retry = True
        if retry and not self._wake.is_set():
            asyncio.get_running_loop().call_later(self.retry_delay_s, self._wake.set)
