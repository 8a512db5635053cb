"""Telegram: private chats and addressed group messages, over long polling or a webhook.

python-telegram-bot (PTB) speaks the Bot API; this module decides which updates are turns, turns
them into :class:`IncomingMessage` objects and sends answers as MarkdownV2.

Which messages are turns. In a private chat every text (or caption) is one. In a group only what
is meant for the bot: a ``@botname`` mention, a reply to one of the bot's messages, or a
``/command`` (bare, or ``/command@botname``); the handle is removed from the text the bridge
sees. Voice notes, audio, photos and documents come as attachments (see
:mod:`channels.telegram_files`), the caption as the text; a group's are turns when addressed like
text (a caption mention, a reply to the bot). An album (several photos or files sent together)
is one turn with all of them (:mod:`channels.telegram_albums`). Edits, service messages and other update kinds are
ignored; other media (stickers, videos, locations) get a short note in private chats only.
``allowed_users`` is checked before anything else.

Ordering. PTB hands updates over one at a time (``concurrent_updates`` off) and the handler
filters an update and awaits ``on_message`` with it, which only queues the turn (the contract of
:data:`~channels.base.MessageHandler`), through the album gatherer's one lock. Messages therefore
reach ``on_message`` in arrival order by construction (an album in its first part's place); ordering the turns per chat and dropping redeliveries (same chat and message id)
is the receiving side's one job (:mod:`channels.ordering`), not this module's.
``concurrent_updates(True)`` would run every update as a task of its own and promise no order. The
non-text note is the one thing sent from the handler itself: one short call, so it keeps its
place among the chat's messages too.

Formatting and delivery. A reply is split at 4096 characters first (Telegram counts the text
after parsing, which Markdown rendering rarely makes longer), then each part is rendered to
MarkdownV2 (:mod:`channels.telegram_markdown`); if Telegram still refuses a part, that part goes
again as plain text, so a reply is never lost to formatting. Flood control (429) is waited out a
bounded number of times by our own loop: PTB's ``AIORateLimiter`` would put typing actions in the same per-group budget (20 a minute)
as the answers they announce, and it holds every request of the bot while one chat waits.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import timedelta
from functools import partial
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

from telegram import Bot, BotCommand, Chat, Message, ReplyParameters, Update, User
from telegram.constants import ChatAction, ParseMode, UpdateType
from telegram.error import BadRequest, RetryAfter
from telegram.ext import Application, ApplicationBuilder, TypeHandler, filters

from .base import (
    Attachment,
    Channel,
    IncomingMessage,
    MessageHandler,
    OutgoingFile,
    Reply,
    oversize_notice,
    split_message,
)
from .telegram_albums import AlbumGatherer
from .telegram_files import attachment_from_wire, attachments_of, ptb_seconds
from .telegram_markdown import to_markdown_v2

__all__ = ["NON_TEXT_NOTE", "TelegramChannel", "to_markdown_v2"]

log = logging.getLogger(__name__)

#: Said in a private chat to a message with neither text nor a file the bot reads (a sticker, a video).
NON_TEXT_NOTE = "I can read text, voice notes, audio, photos and documents, but not this kind of message."
#: Only new messages are turns; asking for nothing else spares traffic.
_ALLOWED_UPDATES = [UpdateType.MESSAGE]
#: The largest file the Bot API lets a bot send (multipart upload).
MAX_UPLOAD_BYTES = 50 * 1000 * 1000
_UPLOAD_TIMEOUT_S = 120.0

T = TypeVar("T")
Job = Callable[[], Awaitable[Any]]
_App = Application[Any, Any, Any, Any, Any, Any]
_ApiCall = Callable[..., Awaitable[object]]


class TelegramChannel(Channel):
    """A Telegram bot; see the module docstring for what becomes a turn and how order is kept."""

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
        self._allowed_ids, self._allowed_names = _parse_allowed(allowed_users)
        self._poll_interval = poll_interval
        self._poll_timeout = poll_timeout
        self._typing_interval = typing_interval
        self._flood_attempts = max(1, flood_attempts)
        if album_wait_s <= 0:
            raise ValueError(f"album_wait_s must be positive, not {album_wait_s}")
        self._album_wait_s = album_wait_s
        self._albums: AlbumGatherer[Update] | None = None
        self._app: _App | None = None
        self._bot: Bot | None = None
        self._bot_id = 0
        self._bot_username: str | None = None
        self._mention_re = _NEVER  # until start() learns the bot's handle

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

        Updates not fetched yet stay with Telegram and come again at the next start.
        """
        app = self._app
        if app is not None and app.updater is not None and app.updater.running:
            await app.updater.stop()
        if self._albums is not None:
            await self._albums.flush()

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
            if app.updater is not None and app.updater.running:
                await app.updater.stop()
            if app.running:
                await app.stop()  # hands over updates already fetched
            if self._albums is not None:
                await self._albums.flush()  # and the albums gathered from them
        finally:
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
            await self._put_text(call, part, reply.markdown)
            replying = None  # only the first part answers the message

    async def send_file(self, file: OutgoingFile, to: IncomingMessage) -> None:
        """``sendDocument`` in ``to``'s chat (and topic); over the Bot API's 50 MB, a note instead."""
        notice = oversize_notice(file, MAX_UPLOAD_BYTES, "Telegram")
        if notice is not None:
            await self.send(Reply(notice, markdown=False), to)
            return
        data = await asyncio.to_thread(file.path.read_bytes)  # PTB would read it on the event loop
        await self._retrying(
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
        await self._put_text(call, text, markdown)

    def working(self, to: IncomingMessage) -> AbstractAsyncContextManager[None]:
        """Shows "typing…" in ``to``'s chat for as long as the block runs."""
        return self._typing(int(to.chat_id), _int_or_none(to.thread_id))

    # ------------------------------------------------------------------------------ intake

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
        app.add_handler(TypeHandler(Update, self._on_update))
        self._albums = AlbumGatherer(partial(self._hand_on, on_message), wait_s=self._album_wait_s)
        return app

    def _learn_identity(self, bot: Bot) -> None:
        """The bot's id and handle decide which group messages are addressed to it."""
        self._bot = bot
        self._bot_id = bot.id
        self._bot_username = bot.username
        self._mention_re = re.compile(
            rf"(?<![\w@/])@{re.escape(bot.username)}(?!\w)[,:]?[ \t]?", re.IGNORECASE
        )

    async def _start_updater(self, app: _App) -> None:
        updater = app.updater
        if updater is None:
            raise RuntimeError("the Telegram application was built without an updater")
        if self._mode == "polling":
            await updater.start_polling(
                poll_interval=self._poll_interval,
                timeout=timedelta(seconds=self._poll_timeout),
                allowed_updates=_ALLOWED_UPDATES,
                drop_pending_updates=False,
            )
            return
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

    async def _on_update(self, update: Update, _context: object) -> None:
        """Sort one update and pass its message to the album gatherer, which hands it on."""
        if not self._is_allowed(update.effective_user):
            log.debug("Telegram: dropped update %s from a user not allowed", update.update_id)
            return
        message = update.message
        if message is None:
            log.debug("Telegram: ignored update %s (not a new message)", update.update_id)
            return
        await self._require_albums().submit(message.chat_id, message.media_group_id, update)

    async def _hand_on(self, on_message: MessageHandler, updates: list[Update]) -> None:
        """One message, or an album's parts in order: run what it calls for."""
        job = self._job_for(updates, on_message)
        if job is not None:
            await job()

    def _job_for(self, updates: list[Update], on_message: MessageHandler) -> Job | None:
        """What a message (or an album) calls for: a turn, the non-text note, or nothing.

        An album is one turn: its caption (whichever part carries it) is the text, and the files
        of all its parts are the attachments, in the order they came."""
        messages = [update.message for update in updates if update.message is not None]
        first = messages[0]
        private = first.chat.type == Chat.PRIVATE
        raw_text = next((text for text in map(_text_of, messages) if text is not None), None)
        user = first.from_user
        bot = self._require_bot()
        attachments = tuple(attachment for message in messages for attachment in attachments_of(message, bot))
        if raw_text is None and not attachments:
            if private and not filters.StatusUpdate.ALL.check_update(updates[0]):
                return partial(self._send_note, first.chat_id)
            log.debug("Telegram: ignored a message without text in chat %s", first.chat_id)
            return None
        text, addressed = self._read_text(raw_text or "")
        replied = any(self._replies_to_bot(message) for message in messages)
        if user is None or not (private or addressed or replied):
            log.debug("Telegram: ignored a message not meant for the bot in %s", first.chat_id)
            return None
        incoming = IncomingMessage(
            channel=self.name,
            chat_id=str(first.chat_id),
            chat_type="direct" if private else "group",
            user_id=str(user.id),
            user_name=user.username or user.first_name,
            text=text,
            message_id=str(first.message_id),
            thread_id=str(first.message_thread_id) if first.is_topic_message else None,
            raw=updates[0],
            attachments=attachments,
        )
        return partial(on_message, incoming)

    def _is_allowed(self, user: User | None) -> bool:
        if not (self._allowed_ids or self._allowed_names):
            return True
        if user is None:
            return False
        return user.id in self._allowed_ids or (user.username or "").lower() in self._allowed_names

    def _read_text(self, text: str) -> tuple[str, bool]:
        """The text without the bot's handle, and whether the text itself addressed the bot."""
        text, commanded = self._own_command(text)
        stripped, mentions = self._mention_re.subn("", text)
        if not mentions:
            return text, commanded
        return stripped.strip() or text, True

    def _own_command(self, text: str) -> tuple[str, bool]:
        """``/cmd@thisbot …`` becomes ``/cmd …``; a bare command counts as addressed to us."""
        match = _COMMAND_RE.match(text)
        if match is None:
            return text, False
        target = match["bot"]
        if target is None:
            return text, True
        if target.lower() != (self._bot_username or "").lower():
            return text, False  # another bot's command
        return f"/{match['command']}{text[match.end():]}", True

    def _replies_to_bot(self, message: Message) -> bool:
        replied = message.reply_to_message
        if replied is None or replied.from_user is None or replied.forum_topic_created is not None:
            return False  # in a forum topic every message "replies" to the topic's opening
        return replied.from_user.id == self._bot_id

    async def _send_note(self, chat_id: int) -> None:
        await self._retrying(self._require_bot().send_message, chat_id=chat_id, text=NON_TEXT_NOTE)

    # ----------------------------------------------------------------------------- output

    async def _put_text(self, call: _ApiCall, text: str, markdown: bool) -> None:
        """Send or edit one part; an edit that changes nothing is not an error."""
        try:
            await self._put_formatted(call, text, markdown)
        except BadRequest as exc:
            if not _is_not_modified(exc):
                raise
            log.debug("Telegram: message already shows this text")

    async def _put_formatted(self, call: _ApiCall, text: str, markdown: bool) -> None:
        """MarkdownV2 first; plain text when Telegram refuses the formatted version."""
        if markdown:
            try:
                formatted = to_markdown_v2(text)
                await self._retrying(call, text=formatted, parse_mode=ParseMode.MARKDOWN_V2)
                return
            except BadRequest as exc:
                if _is_not_modified(exc):
                    raise
                log.warning("Telegram refused formatted text (%s); sending it plain", exc.message)
        await self._retrying(call, text=text)

    async def _retrying(self, call: Callable[..., Awaitable[T]], **kwargs: Any) -> T:
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
    async def _typing(self, chat_id: int, thread_id: int | None) -> AsyncIterator[None]:
        pinger = asyncio.create_task(
            self._keep_typing(chat_id, thread_id), name=f"telegram-typing-{chat_id}"
        )
        try:
            yield
        finally:
            pinger.cancel()
            await asyncio.wait([pinger])

    async def _keep_typing(self, chat_id: int, thread_id: int | None) -> None:
        """Telegram shows "typing…" for about five seconds per action, so it is renewed."""
        while True:
            try:
                await self._require_bot().send_chat_action(
                    chat_id=chat_id, action=ChatAction.TYPING, message_thread_id=thread_id
                )
            except Exception as exc:  # a lost typing hint must never fail a turn
                log.debug("Telegram: typing action in %s failed: %s", chat_id, exc)
            await asyncio.sleep(self._typing_interval)

    def _require_albums(self) -> AlbumGatherer[Update]:
        if self._albums is None:
            raise RuntimeError("TelegramChannel received an update before start()")
        return self._albums

    def _require_bot(self) -> Bot:
        if self._bot is None:
            raise RuntimeError("TelegramChannel is not started")
        return self._bot


_NEVER = re.compile(r"(?!)")
_COMMAND_RE = re.compile(r"^/(?P<command>\w+)(?:@(?P<bot>\w+))?(?=\s|$)")
_COMMAND_NAME = re.compile(r"[a-z0-9_]{1,32}")  # what setMyCommands accepts


def _parse_allowed(entries: Sequence[str | int]) -> tuple[frozenset[int], frozenset[str]]:
    """Numeric entries are user ids, the rest usernames (any '@' and case ignored)."""
    ids: set[int] = set()
    names: set[str] = set()
    for entry in entries:
        text = str(entry).strip().lstrip("@")
        if re.fullmatch(r"-?\d+", text):
            ids.add(int(text))
        elif text:
            names.add(text.lower())
    return frozenset(ids), frozenset(names)


def _file_url(base_url: str) -> str:
    """PTB's file endpoint sits beside the API one: ``…/bot`` gives ``…/file/bot``."""
    root, marker, tail = base_url.rpartition("/bot")
    return f"{root}/file/bot{tail}" if marker else base_url


def _text_of(message: Message) -> str | None:
    """A message's text, or its caption when it carries a file."""
    return message.text if message.text is not None else message.caption


def _int_or_none(value: str | None) -> int | None:
    return int(value) if value else None


def _replying_to(message_id: str | None) -> ReplyParameters | None:
    """A reply that still goes out if the message it answers was deleted meanwhile."""
    if not message_id:
        return None
    return ReplyParameters(int(message_id), allow_sending_without_reply=True)


def _is_not_modified(exc: BadRequest) -> bool:
    return "message is not modified" in exc.message.lower()


def _retry_after_seconds(exc: RetryAfter) -> float:
    return ptb_seconds(exc, "retry_after") or 0.0
