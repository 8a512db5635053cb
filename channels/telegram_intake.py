"""Telegram intake: which updates are turns, and the :class:`IncomingMessage` each becomes.

``allowed_users`` is checked before anything else. In a private chat every text (or caption) is a
turn. In a group only what is meant for the bot: a ``@botname`` mention, a reply to one of the
bot's messages, or a ``/command`` (bare, or ``/command@botname``); the handle is removed from the
text the bridge sees. Voice notes, audio, photos and documents come as attachments (see
:mod:`channels.telegram_files`), the caption as the text; a group's are turns when addressed like
text (a caption mention, a reply to the bot). An album (several photos or files sent together) is
one turn with all of them (:mod:`channels.telegram_albums`). Edits, service messages and other
update kinds are ignored; other media (stickers, videos, locations) get a short note in private
chats only.

Ordering. PTB hands updates over one at a time (``concurrent_updates`` off) and the handler
filters an update and awaits ``on_message`` with it, which only queues the turn (the contract of
:data:`~channels.base.MessageHandler`), through the album gatherer's one lock. Messages therefore
reach ``on_message`` in arrival order by construction (an album in its first part's place);
ordering the turns per chat and dropping redeliveries (same chat and message id) is the receiving
side's one job (:mod:`channels.ordering`), not this module's. ``concurrent_updates(True)`` would
run every update as a task of its own and promise no order. The non-text note is the one thing
sent from the handler itself: one short call, so it keeps its place among the chat's messages too.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any

from telegram import Bot, Chat, Message, Update, User
from telegram.ext import filters

from .base import IncomingMessage, MessageHandler
from .telegram_albums import AlbumGatherer
from .telegram_files import attachments_of
from .telegram_polling import Receipts

__all__ = ["NON_TEXT_NOTE", "AllowedUsers", "TelegramIntake"]

log = logging.getLogger(__name__)

#: Said in a private chat to a message with neither text nor a file the bot reads (a sticker, a video).
NON_TEXT_NOTE = "I can read text, voice notes, audio, photos and documents, but not this kind of message."

Job = Callable[[], Awaitable[Any]]
_COMMAND_RE = re.compile(r"^/(?P<command>\w+)(?:@(?P<bot>\w+))?(?=\s|$)")


@dataclass(frozen=True)
class AllowedUsers:
    """Who may talk to the bot: user ids and lower-cased usernames; both empty lets everyone."""

    ids: frozenset[int]
    names: frozenset[str]

    @classmethod
    def parse(cls, entries: Sequence[str | int]) -> AllowedUsers:
        """Numeric entries are user ids, the rest usernames (any '@' and case ignored)."""
        ids: set[int] = set()
        names: set[str] = set()
        for entry in entries:
            text = str(entry).strip().lstrip("@")
            if re.fullmatch(r"-?\d+", text):
                ids.add(int(text))
            elif text:
                names.add(text.lower())
        return cls(frozenset(ids), frozenset(names))

    def admit(self, user: User | None) -> bool:
        if not (self.ids or self.names):
            return True
        if user is None:
            return False
        return user.id in self.ids or (user.username or "").lower() in self.names


class TelegramIntake:
    """Sorts a started bot's updates and hands each turn to ``on_message`` through the album gatherer.

    ``bot`` returns the connected bot (its id and handle decide which group messages are addressed
    to it); ``say`` sends a plain text to a chat, for the non-text note. ``receipts`` (polling only)
    learns what became of each update: settled when it called for nothing more, tied to its
    message's key when handed on (settled when the handler accepts it), released when that failed.
    """

    def __init__(
        self,
        *,
        channel_name: str,
        bot: Callable[[], Bot],
        allowed: AllowedUsers,
        on_message: MessageHandler,
        say: Callable[[int, str], Awaitable[object]],
        album_wait_s: float,
        receipts: Receipts | None = None,
    ) -> None:
        self._channel_name = channel_name
        self._bot = bot
        self._allowed = allowed
        self._on_message = on_message
        self._say = say
        self._receipts = receipts
        self._albums: AlbumGatherer[Update] = AlbumGatherer(self._hand_on, wait_s=album_wait_s)

    async def on_update(self, update: Update, _context: object) -> None:
        """Sort one update and pass its message to the album gatherer, which hands it on."""
        if not self._allowed.admit(update.effective_user):
            log.debug("Telegram: dropped update %s from a user not allowed", update.update_id)
            self._settle([update])
            return
        message = update.message
        if message is None:
            log.debug("Telegram: ignored update %s (not a new message)", update.update_id)
            self._settle([update])
            return
        await self._albums.submit(message.chat_id, message.media_group_id, update)

    async def flush(self) -> None:
        """Hand on the albums still gathering (at shutdown: nothing received is dropped)."""
        await self._albums.flush()

    async def _hand_on(self, updates: list[Update]) -> None:
        """One message, or an album's parts in order: run what it calls for. A turn's updates are
        settled when the handler accepts its message; anything else's once it has run."""
        ids = [update.update_id for update in updates]
        what = self._job_for(updates)
        turn = isinstance(what, IncomingMessage)
        if isinstance(what, IncomingMessage) and self._receipts is not None:
            self._receipts.expect(what.dedupe_key, ids)
        try:
            if isinstance(what, IncomingMessage):
                await self._on_message(what)
            elif what is not None:
                await what()
        except Exception:
            if self._receipts is not None:
                self._receipts.release(ids)
            raise
        if not turn:
            self._settle(updates)

    def _settle(self, updates: list[Update]) -> None:
        if self._receipts is not None:
            self._receipts.settle([update.update_id for update in updates])

    def _job_for(self, updates: list[Update]) -> Job | IncomingMessage | None:
        """What a message (or an album) calls for: a turn (its message), the non-text note, or nothing.

        An album is one turn: its caption (whichever part carries it) is the text, and the files
        of all its parts are the attachments, in the order they came."""
        messages = [update.message for update in updates if update.message is not None]
        first = messages[0]
        private = first.chat.type == Chat.PRIVATE
        raw_text = next((text for text in map(_text_of, messages) if text is not None), None)
        user = first.from_user
        bot = self._bot()
        attachments = tuple(attachment for message in messages for attachment in attachments_of(message, bot))
        if raw_text is None and not attachments:
            if private and not filters.StatusUpdate.ALL.check_update(updates[0]):
                return partial(self._say, first.chat_id, NON_TEXT_NOTE)
            log.debug("Telegram: ignored a message without text in chat %s", first.chat_id)
            return None
        text, addressed = _read_text(raw_text or "", bot.username)
        replied = any(_replies_to(message, bot.id) for message in messages)
        if user is None or not (private or addressed or replied):
            log.debug("Telegram: ignored a message not meant for the bot in %s", first.chat_id)
            return None
        incoming = IncomingMessage(
            channel=self._channel_name,
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
        return incoming


def _read_text(text: str, bot_username: str) -> tuple[str, bool]:
    """The text without the bot's handle, and whether the text itself addressed the bot."""
    text, commanded = _own_command(text, bot_username)
    stripped, mentions = _mention_of(bot_username).subn("", text)
    if not mentions:
        return text, commanded
    return stripped.strip() or text, True


def _own_command(text: str, bot_username: str) -> tuple[str, bool]:
    """``/cmd@thisbot …`` becomes ``/cmd …``; a bare command counts as addressed to us."""
    match = _COMMAND_RE.match(text)
    if match is None:
        return text, False
    target = match["bot"]
    if target is None:
        return text, True
    if target.lower() != bot_username.lower():
        return text, False  # another bot's command
    return f"/{match['command']}{text[match.end():]}", True


@lru_cache(maxsize=8)
def _mention_of(bot_username: str) -> re.Pattern[str]:
    """``@botname`` as a word of its own, with a comma or colon and one space after it."""
    return re.compile(rf"(?<![\w@/])@{re.escape(bot_username)}(?!\w)[,:]?[ \t]?", re.IGNORECASE)


def _replies_to(message: Message, bot_id: int) -> bool:
    """Whether ``message`` replies to one of the bot's own messages."""
    replied = message.reply_to_message
    if replied is None or replied.from_user is None or replied.forum_topic_created is not None:
        return False  # in a forum topic every message "replies" to the topic's opening
    return replied.from_user.id == bot_id


def _text_of(message: Message) -> str | None:
    """A message's text, or its caption when it carries a file."""
    return message.text if message.text is not None else message.caption
