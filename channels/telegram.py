"""Telegram: private chats and addressed group messages, over long polling or a webhook.

python-telegram-bot (PTB) speaks the Bot API. This module runs the bot (connect, poll or serve the
webhook, stop) and is the :class:`Channel` the bridge talks to; :mod:`channels.telegram_intake`
decides which updates are turns and what they become, :mod:`channels.telegram_delivery` gets the
answers through (MarkdownV2 with a plain fallback, flood control, "typing…").

A reply is split at 4096 characters first (Telegram counts the text after parsing, which Markdown
rendering rarely makes longer), then each part is sent on its own; only the first quotes the
message it answers.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from functools import partial
from typing import Any, Literal
from urllib.parse import urlsplit

from telegram import Bot, BotCommand, ReplyParameters, Update
from telegram.constants import UpdateType
from telegram.ext import Application, ApplicationBuilder, TypeHandler

from .base import Attachment, Channel, IncomingMessage, MessageHandler, OutgoingFile, Reply, split_message
from .telegram_delivery import TelegramDelivery
from .telegram_files import attachment_from_wire
from .telegram_intake import NON_TEXT_NOTE, AllowedUsers, TelegramIntake
from .telegram_markdown import to_markdown_v2
from .telegram_polling import UpdatePoller

__all__ = ["NON_TEXT_NOTE", "TelegramChannel", "to_markdown_v2"]

log = logging.getLogger(__name__)

#: Only new messages are turns; asking for nothing else spares traffic.
_ALLOWED_UPDATES = [UpdateType.MESSAGE]
#: The largest file the Bot API lets a bot send (multipart upload).
MAX_UPLOAD_BYTES = 50 * 1000 * 1000
_UPLOAD_TIMEOUT_S = 120.0

_App = Application[Any, Any, Any, Any, Any, Any]


class TelegramChannel(Channel):
    """A Telegram bot; :mod:`channels.telegram_intake` says what becomes a turn and how order is kept."""

    name = "telegram"
    max_message_chars = 4096

    def __init__(
        self,
        *,
        token: str,
        base_url: str = "https://api.telegram.org/bot",
        base_file_url: str | None = None,
        mode: Literal["polling", "webhook"] = "polling",
        webhook_url: str | None = None,
        webhook_host: str = "127.0.0.1",
        webhook_port: int = 8443,
        webhook_path: str | None = None,
        secret_token: str | None = None,
        allowed_users: Sequence[str | int] = (),
        poll_interval: float = 0.0,
        poll_timeout: int = 10,
        typing_interval: float = 4.0,
        flood_attempts: int = 5,
        album_wait_s: float = 1.0,
    ) -> None:
        """``base_url`` is PTB's form (the token is appended); ``base_file_url`` defaults to its
        ``/file/bot`` sibling. ``webhook_path`` is where the local server listens, by default the
        path of ``webhook_url``. ``poll_timeout`` is the long-poll wait in seconds,
        ``typing_interval`` how often "typing…" is renewed, ``flood_attempts`` how many tries a
        call gets under flood control, ``album_wait_s`` how long an album's parts are awaited after
        the last one came (:mod:`channels.telegram_albums`)."""
        if mode not in ("polling", "webhook"):
            raise ValueError(f"mode must be 'polling' or 'webhook', not {mode!r}")
        if mode == "webhook" and not webhook_url:
            raise ValueError("webhook mode needs the public webhook_url Telegram should post to")
        self._token = token
        self._base_url = base_url
        self._base_file_url = base_file_url or _file_url(base_url)
        self._mode = mode
        self._webhook_url = webhook_url
        self._webhook_host = webhook_host
        self._webhook_port = webhook_port
        local_path = webhook_path if webhook_path is not None else urlsplit(webhook_url or "").path
        self._webhook_path = local_path.strip("/")
        self._secret_token = secret_token
        self._allowed = AllowedUsers.parse(allowed_users)
        self._poll_interval = poll_interval
        self._poll_timeout = poll_timeout
        if album_wait_s <= 0:
            raise ValueError(f"album_wait_s must be positive, not {album_wait_s}")
        self._album_wait_s = album_wait_s
        self._delivery = TelegramDelivery(self._require_bot, flood_attempts=flood_attempts,
                                          typing_interval=typing_interval)
        self._intake: TelegramIntake | None = None  # made with the application, at start
        self._app: _App | None = None
        self._poller: UpdatePoller | None = None  # polling mode, while started
        self._bot: Bot | None = None
        self._bot_username: str | None = None

    @property
    def bot_username(self) -> str | None:
        """The bot's @username without the '@', known once ``start`` has returned."""
        return self._bot_username

    def describe(self) -> str:
        return f"telegram: @{self._bot_username} ({self._mode})"

    def attachment_from_wire(self, data: dict[str, Any]) -> Attachment:
        return attachment_from_wire(data, self._require_bot())

    async def start(self, on_message: MessageHandler) -> None:
        """Connect (``getMe``), then poll or serve the webhook; returns once updates flow."""
        if self._app is not None:
            raise RuntimeError("TelegramChannel is already started")
        self._app = app = self._build_application(on_message)
        try:
            await app.initialize()
            self._learn_identity(app.bot)
            await app.start()
            await self._start_updater(app)
        except BaseException:
            await self.stop()
            raise
        log.debug("Telegram: receiving as @%s by %s", self._bot_username, self._mode)

    async def publish_commands(self, commands: Sequence[tuple[str, str]]) -> None:
        """``setMyCommands``: the menu Telegram shows when a user types "/".

        Names Telegram would refuse (1-32 of ``a-z0-9_``) are left out; descriptions are cut to
        its 256 characters.
        """
        if self._app is None:
            raise RuntimeError("TelegramChannel.publish_commands needs a started channel")
        menu = [BotCommand(name, description[:256]) for name, description in commands
                if _COMMAND_NAME.fullmatch(name) and description.strip()]
        await self._app.bot.set_my_commands(menu)

    async def stop_receiving(self) -> None:
        """Stop fetching updates; the bot stays connected so turns in flight can still answer.

        Updates not fetched yet, or fetched and not accepted by :meth:`stop`, stay with Telegram and
        come again at the next start.
        """
        await self._stop_fetching(self._app)
        if self._intake is not None:
            await self._intake.flush()

    def accepted(self, message: IncomingMessage) -> None:
        """Polling: the updates of ``message`` may be confirmed to Telegram (at the next getUpdates)."""
        if self._poller is not None:
            self._poller.receipts.accept(message.dedupe_key)

    async def connect(self) -> None:
        """A bot that only sends (``getMe`` once, no updates fetched), for a cluster worker."""
        if self._bot is None:
            bot = Bot(self._token, base_url=self._base_url, base_file_url=self._base_file_url)
            await bot.initialize()
            self._learn_identity(bot)

    async def stop(self) -> None:
        """Stop intake, then disconnect (the bridge lets turns in flight finish before this)."""
        app, self._app = self._app, None
        if app is None:
            bot, self._bot = self._bot, None
            if bot is not None:  # connected to send only
                await bot.shutdown()
            return
        try:
            await self._stop_fetching(app)
            if app.running:
                await app.stop()  # hands over updates already fetched (webhook)
            if self._intake is not None:
                await self._intake.flush()  # and the albums gathered from them
            if self._poller is not None:
                await self._poller.confirm()  # what was accepted meanwhile
        finally:
            self._poller = None
            await app.shutdown()
            await app.bot.shutdown()  # the app skips it if getMe failed in start; a no-op otherwise
            self._bot = None

    async def send(self, reply: Reply, to: IncomingMessage) -> None:
        """Send ``reply`` to ``to``'s chat (and forum topic) in parts of at most 4096 characters."""
        bot = self._require_bot()
        target: dict[str, Any] = {
            "chat_id": int(to.chat_id),
            "message_thread_id": _int_or_none(reply.thread_id or to.thread_id),
        }
        replying = _replying_to(reply.reply_to)
        for part in split_message(reply.text, self.max_message_chars):
            if not part.strip():
                continue
            call = partial(bot.send_message, reply_parameters=replying, **target)
            await self._delivery.put_text(call, part, reply.markdown)
            replying = None  # only the first part answers the message

    async def send_file(self, file: OutgoingFile, to: IncomingMessage) -> None:
        """``sendDocument`` in ``to``'s chat (and topic); over the Bot API's 50 MB, a note instead."""
        data = await self._bytes_to_upload(file, to, MAX_UPLOAD_BYTES, "Telegram")
        if data is None:
            return
        await self._delivery.retrying(
            self._require_bot().send_document, chat_id=int(to.chat_id), document=data, filename=file.name,
            message_thread_id=_int_or_none(to.thread_id), write_timeout=_UPLOAD_TIMEOUT_S,
        )

    async def edit(
        self, to: IncomingMessage, message_id: str, text: str, *, markdown: bool = True
    ) -> None:
        """Replace the text of the bot's message ``message_id`` in ``to``'s chat.

        ``text`` must fit one message. The same text again is a no-op: Telegram calls it an
        error, but a caller updating a message as an answer grows should not have to care.
        """
        bot = self._require_bot()
        call = partial(bot.edit_message_text, chat_id=int(to.chat_id), message_id=int(message_id))
        await self._delivery.put_text(call, text, markdown)

    def working(self, to: IncomingMessage) -> AbstractAsyncContextManager[None]:
        """Shows "typing…" in ``to``'s chat for as long as the block runs."""
        return self._delivery.typing(int(to.chat_id), _int_or_none(to.thread_id))

    # ------------------------------------------------------------------------------ running

    def _build_application(self, on_message: MessageHandler) -> _App:
        app = (
            ApplicationBuilder()
            .token(self._token)
            .base_url(self._base_url)
            .base_file_url(self._base_file_url)
            .concurrent_updates(False)
            .job_queue(None)
            .build()
        )
        if self._mode == "polling":
            self._poller = UpdatePoller(app.bot, app.process_update, timeout_s=self._poll_timeout,
                                        allowed_updates=_ALLOWED_UPDATES, interval_s=self._poll_interval)
        self._intake = TelegramIntake(channel_name=self.name, bot=self._require_bot, allowed=self._allowed,
                                      on_message=on_message, say=self._say, album_wait_s=self._album_wait_s,
                                      receipts=self._poller.receipts if self._poller else None)
        app.add_handler(TypeHandler(Update, self._intake.on_update))
        return app

    async def _stop_fetching(self, app: _App | None) -> None:
        if self._poller is not None:
            await self._poller.stop()
        elif app is not None and app.updater is not None and app.updater.running:
            await app.updater.stop()

    def _learn_identity(self, bot: Bot) -> None:
        """The bot the channel sends with; its handle is also what ``describe`` shows."""
        self._bot = bot
        self._bot_username = bot.username

    async def _start_updater(self, app: _App) -> None:
        """Polling: our own loop (:mod:`channels.telegram_polling`), which confirms an update only
        once it is accepted; webhook: PTB's server (Telegram counts an update delivered once the
        server has answered its POST)."""
        if self._poller is not None:
            await self._poller.start()
            return
        updater = app.updater
        if updater is None:
            raise RuntimeError("the Telegram application was built without an updater")
        if not self._secret_token:
            log.warning("Telegram webhook without secret_token: anyone with the URL can post")
        await updater.start_webhook(
            listen=self._webhook_host,
            port=self._webhook_port,
            url_path=self._webhook_path,
            webhook_url=self._webhook_url,
            secret_token=self._secret_token,
            allowed_updates=_ALLOWED_UPDATES,
            drop_pending_updates=False,
        )

    async def _say(self, chat_id: int, text: str) -> None:
        """Plain text to a chat outside any turn (the intake's non-text note), flood control waited out."""
        await self._delivery.retrying(self._require_bot().send_message, chat_id=chat_id, text=text)

    def _require_bot(self) -> Bot:
        if self._bot is None:
            raise RuntimeError("TelegramChannel is not started")
        return self._bot


_COMMAND_NAME = re.compile(r"[a-z0-9_]{1,32}")  # what setMyCommands accepts


def _file_url(base_url: str) -> str:
    """PTB's file endpoint sits beside the API one: ``…/bot`` gives ``…/file/bot``."""
    root, marker, tail = base_url.rpartition("/bot")
    return f"{root}/file/bot{tail}" if marker else base_url


def _int_or_none(value: str | None) -> int | None:
    return int(value) if value else None


def _replying_to(message_id: str | None) -> ReplyParameters | None:
    """A reply that still goes out if the message it answers was deleted meanwhile."""
    if not message_id:
        return None
    return ReplyParameters(int(message_id), allow_sending_without_reply=True)
