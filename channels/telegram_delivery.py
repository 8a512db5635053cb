"""Telegram delivery: getting a bot's text through the Bot API, and "typing…" while a turn runs.

A part is rendered to MarkdownV2 (:mod:`channels.telegram_markdown`); if Telegram still refuses
it, it goes again as plain text, so a reply is never lost to formatting. An edit that changes
nothing is no error. Flood control (429) is waited out a bounded number of times by our own loop:
PTB's ``AIORateLimiter`` would put typing actions in the same per-group budget (20 a minute) as
the answers they announce, and it holds every request of the bot while one chat waits.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from telegram import Bot
from telegram.constants import ChatAction, ParseMode
from telegram.error import BadRequest, RetryAfter

from .telegram_files import ptb_seconds
from .telegram_markdown import to_markdown_v2

__all__ = ["ApiCall", "TelegramDelivery"]

log = logging.getLogger(__name__)

T = TypeVar("T")
#: A Bot API method with its target already bound (``partial(bot.send_message, chat_id=…)``).
ApiCall = Callable[..., Awaitable[object]]


class TelegramDelivery:
    """Bot API calls of one bot that survive flood control and refused formatting.

    ``bot`` returns the connected bot (it raises before the channel is started).
    """

    def __init__(self, bot: Callable[[], Bot], *, flood_attempts: int, typing_interval: float) -> None:
        self._bot = bot
        self._flood_attempts = max(1, flood_attempts)
        self._typing_interval = typing_interval

    async def put_text(self, call: ApiCall, text: str, markdown: bool) -> None:
        """Send or edit one part; an edit that changes nothing is not an error."""
        try:
            await self._put_formatted(call, text, markdown)
        except BadRequest as exc:
            if not _is_not_modified(exc):
                raise
            log.debug("Telegram: message already shows this text")

    async def retrying(self, call: Callable[..., Awaitable[T]], **kwargs: Any) -> T:
        """One Bot API call, waiting out flood control (429 ``retry_after``) a bounded time."""
        attempt = 1
        while True:
            try:
                return await call(**kwargs)
            except RetryAfter as exc:
                if attempt >= self._flood_attempts:
                    raise
                delay = _retry_after_seconds(exc)
                attempt += 1
                log.info(
                    "Telegram flood control: try %d of %d in %.1f s",
                    attempt, self._flood_attempts, delay,
                )
                await asyncio.sleep(delay)

    @asynccontextmanager
    async def typing(self, chat_id: int, thread_id: int | None) -> AsyncIterator[None]:
        """Shows "typing…" in the chat (and topic) for as long as the block runs."""
        pinger = asyncio.create_task(
            self._keep_typing(chat_id, thread_id), name=f"telegram-typing-{chat_id}"
        )
        try:
            yield
        finally:
            pinger.cancel()
            await asyncio.wait([pinger])

    async def _put_formatted(self, call: ApiCall, text: str, markdown: bool) -> None:
        """MarkdownV2 first; plain text when Telegram refuses the formatted version."""
        if markdown:
            try:
                formatted = to_markdown_v2(text)
                await self.retrying(call, text=formatted, parse_mode=ParseMode.MARKDOWN_V2)
                return
            except BadRequest as exc:
                if _is_not_modified(exc):
                    raise
                log.warning("Telegram refused formatted text (%s); sending it plain", exc.message)
        await self.retrying(call, text=text)

    async def _keep_typing(self, chat_id: int, thread_id: int | None) -> None:
        """Telegram shows "typing…" for about five seconds per action, so it is renewed."""
        while True:
            try:
                await self._bot().send_chat_action(
                    chat_id=chat_id, action=ChatAction.TYPING, message_thread_id=thread_id
                )
            except Exception as exc:  # a lost typing hint must never fail a turn
                log.debug("Telegram: typing action in %s failed: %s", chat_id, exc)
            await asyncio.sleep(self._typing_interval)


def _is_not_modified(exc: BadRequest) -> bool:
    return "message is not modified" in exc.message.lower()


def _retry_after_seconds(exc: RetryAfter) -> float:
    return ptb_seconds(exc, "retry_after") or 0.0
