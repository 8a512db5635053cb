"""What a turn costs and whether it may run: the agent's one link to usage and limits.

Before the model is asked, :meth:`TurnMeter.refusal` checks the turn's scope against ``limits:``
(admins exempt; a group's turns count against the group's scope): over a limit, the person gets one
answer saying when the day resets, and no model request is made. After the turn, :meth:`record`
writes its outcome and tokens to the usage book (:mod:`bridge.ops.usage`) and counts it for Prometheus
(:mod:`bridge.ops.metrics`). :meth:`charge` books the model requests of memory upkeep (a flush, the
daily summary, a Deep Dream) to the scope whose memory they summarised, under their own kind, so
that what a person costs is whole and yet no limit refuses them for what the nightly pass spent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta

from .. import offload
from ..config import LimitsSettings
from ..llm import LLMResponse
from . import metrics
from .usage import CHAT, TurnRecord, UsageBook

log = logging.getLogger(__name__)


@dataclass
class Tally:
    """The model requests of one turn, added up as they come back."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False
    request_ms: list[float] = field(default_factory=list)

    def add(self, response: LLMResponse) -> None:
        if response.usage is not None:
            self.prompt_tokens += response.usage.prompt_tokens
            self.completion_tokens += response.usage.completion_tokens
            self.estimated = self.estimated or response.usage.estimated
        self.request_ms.append(response.elapsed_s * 1000)


class TurnMeter:
    """Limits before a turn, the record after it; ``clock`` is the local time (the day of a limit)."""

    def __init__(self, book: UsageBook, limits: LimitsSettings, clock: Callable[[], datetime] = datetime.now) -> None:
        self.book = book
        self.limits = limits
        self.clock = clock

    async def refusal(self, scope: str, is_admin: bool) -> str | None:
        """The answer for a turn over its scope's daily limit, or None when it may run."""
        if is_admin or (self.limits.daily_tokens is None and self.limits.daily_turns is None):
            return None
        now = self.clock()
        tokens, turns = await offload.run(self.book.spent, scope, now.date())
        over = _over(tokens, self.limits.daily_tokens, "token") or _over(turns, self.limits.daily_turns, "message")
        if over is None:
            return None
        reset = datetime.combine(now.date() + timedelta(days=1), time())
        minutes = max(1, round((reset - now).total_seconds() / 60))
        return (f"You have reached today's limit of {over} with me. It resets at midnight "
                f"({reset:%Y-%m-%d %H:%M}, in {minutes // 60} h {minutes % 60} min); your message is saved, "
                "and I'll answer again after that.")

    async def record(self, scope: str, channel: str, outcome: str, tally: Tally | None = None) -> None:
        """Count the turn and write it to the usage book (``outcome``: :data:`bridge.ops.usage.OUTCOMES`);
        a failure to write is logged and never fails the turn."""
        metrics.TURNS.labels(channel, outcome).inc()
        await self._write(scope, channel, outcome, tally or Tally())

    async def charge(self, scope: str, kind: str, response: LLMResponse) -> None:
        """Book one upkeep request (``kind``: ``flush``, ``daily_summary`` or ``dream``) to ``scope``; not
        a turn, so neither ``membridge_turns_total`` nor a limit counts it. Never fails the upkeep."""
        tally = Tally()
        tally.add(response)
        await self._write(scope, "", "answered", tally, kind)

    async def _write(self, scope: str, channel: str, outcome: str, tally: Tally, kind: str = CHAT) -> None:
        try:
            await offload.run(self.book.record, TurnRecord(
                self.clock(), scope, channel, outcome, tally.prompt_tokens, tally.completion_tokens, tally.estimated,
                tuple(tally.request_ms), kind))
        except Exception:
            log.exception("could not record a %s %s of %s in the usage book", outcome, kind, scope)


def _over(spent: int, limit: int | None, what: str) -> str | None:
    if limit is None or spent < limit:
        return None
    return f"{limit:,} {what}{'' if limit == 1 else 's'} a day"
