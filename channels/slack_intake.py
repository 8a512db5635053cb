"""Slack intake: which events are a person's turn, and the :class:`IncomingMessage` each becomes.

slack-bolt verifies and acknowledges deliveries (:mod:`channels.slack`); the listeners registered
here turn the events meant for the bot into messages: every DM, every @mention in a channel, every
slash command. Bots (ourselves included), edits, joins and other non-messages are not turns.

Files. A message that shares files (subtype ``file_share``, or a mention with files) is a turn
whose attachments are those files (see :mod:`channels.slack_files`) and whose text is the message.

Threads and chats. A mention in a channel is answered in the mention's thread. With
``thread_scope`` off the whole channel is one chat (one ``chat_key``), so ``thread_id`` stays
``None`` and :meth:`SlackChannel.send <channels.slack.SlackChannel.send>` derives the reply thread
from the raw event (:func:`reply_thread`) instead; with ``thread_scope`` on, ``thread_id`` is the
thread's ts and every thread is a chat of its own.

Ordering. slack-bolt acknowledges an event before any listener code runs. The listeners only
filter and hand the message on (``on_message`` just queues the turn: the contract of
:data:`~channels.base.MessageHandler`), and bolt authorizes from the ``auth.test`` result taken
at start instead of fetching it on the first event, so nothing suspends between receipt and
hand-over: hand-over order is arrival order. Ordering each chat's turns and dropping Slack's
retries (the same channel and ts, or the same slash command trigger, again) is the receiving
side's one job (:mod:`channels.ordering`), not this module's. A slash command is acknowledged
first (Slack wants that within 3 s); in a DM not seen before it then waits for one
``conversations.info``, and such lookups run one at a time, so commands keep their order.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import replace
from typing import Any

from slack_bolt.app.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from .base import ChatType, IncomingMessage, MessageHandler
from .slack_files import attachments_of

__all__ = ["SLASH_COMMAND", "SlackIntake", "is_command", "reply_thread"]

log = logging.getLogger(__name__)

SLASH_COMMAND = "slash_command"  # IncomingMessage.raw["type"] of a turn that came as a slash command
#: Message subtypes that are still a person's message (other subtypes are edits, joins, bots…).
_PERSON_SUBTYPES = frozenset({"file_share"})


class SlackIntake:
    """The bolt listeners of one Slack channel: events in, :class:`IncomingMessage` objects out.

    Registered on the bolt app when the channel is built; :meth:`begin` gives it, at start, the
    callback and who the bot is (the bot's own mention is removed from the text, its own messages
    are not turns).
    """

    def __init__(self, *, channel_name: str, client: AsyncWebClient, bot_token: str, thread_scope: bool) -> None:
        self._channel_name = channel_name
        self._client = client
        self._bot_token = bot_token
        self._thread_scope = thread_scope
        self._on_message: MessageHandler | None = None
        self._bot_user_id = ""
        self._team_id: str | None = None  # the workspace of the bot's token, for events that name none
        #: DM channel id -> the person the bot's own DM there is with, None for a DM that is not
        #: the bot's (a slash command works in any DM, also one between two people). Learned from
        #: message.im events and conversations.info.
        self._im_partner: dict[str, str | None] = {}
        self._im_lookup = asyncio.Lock()

    def begin(self, on_message: MessageHandler, *, bot_user_id: str, team_id: str | None) -> None:
        """Hand turns to ``on_message`` from now on; ``bot_user_id`` and ``team_id`` come from auth.test."""
        self._on_message = on_message
        self._bot_user_id = bot_user_id
        self._team_id = team_id

    def register(self, app: AsyncApp) -> None:
        """Listen for DMs, mentions and every slash command on ``app``.

        The listeners are closures: bolt passes arguments by the names it finds, "self" included.
        """

        async def on_message(body: dict[str, Any], event: dict[str, Any]) -> None:
            # Channel messages that mention the bot come again as app_mention; answer that one.
            if event.get("channel_type") == "im":
                if event.get("channel") and event.get("user") and not self._is_noise(event):
                    self._im_partner[event["channel"]] = event["user"]  # only the bot's own DMs send message.im
                await self._accept(event, body.get("team_id"), "direct")

        async def on_mention(body: dict[str, Any], event: dict[str, Any]) -> None:
            await self._accept(event, body.get("team_id"), "group")

        async def on_command(ack: Any, command: dict[str, Any]) -> None:
            await ack()
            await self._accept_command(command)

        app.event("message")(on_message)
        app.event("app_mention")(on_mention)
        app.command(re.compile(r"^/"))(on_command)

    async def _accept_command(self, command: dict[str, Any]) -> None:
        """A slash command (``/memory dream 2``) is a turn whose text is the whole command line.

        Slack keeps every message that starts with "/" for its own slash commands, so this is
        the only way chat commands reach the bot in Slack: the app registers them (README).
        """
        channel_id, user = command.get("channel_id") or "", command.get("user_id") or ""
        trigger = command.get("trigger_id") or ""
        if not channel_id or not user:
            return
        direct = channel_id.startswith("D") or command.get("channel_name") == "directmessage"
        await self._hand_over(IncomingMessage(
            channel=self._channel_name,
            chat_id=channel_id,
            chat_type="direct" if direct else "group",
            user_id=user,
            user_name=command.get("user_name") or user,
            text=f"{command.get('command', '')} {self._clean_text(command.get('text') or '')}".strip(),
            message_id=trigger or f"{channel_id}:{user}:{command.get('command')}:{command.get('text')}",
            team=command.get("team_id") or self._team_id,
            raw={"type": SLASH_COMMAND, **command},
        ))

    async def _accept(self, event: dict[str, Any], team: str | None, chat_type: ChatType) -> None:
        """Hand a person's message on (a redelivery too: the receiving side drops it by its key)."""
        if not self._is_noise(event):
            await self._hand_over(self._to_incoming(event, team, chat_type))

    def _is_noise(self, event: dict[str, Any]) -> bool:
        """Bots (ourselves included), edits, joins and other non-messages are not turns."""
        return bool(
            event.get("subtype") not in _PERSON_SUBTYPES | {None}
            or event.get("bot_id")
            or not event.get("user")
            or event.get("user") == self._bot_user_id
            or not event.get("ts")
        )

    def _to_incoming(self, event: dict[str, Any], team: str | None, chat_type: ChatType) -> IncomingMessage:
        return IncomingMessage(
            channel=self._channel_name,
            chat_id=event["channel"],
            chat_type=chat_type,
            user_id=event["user"],
            user_name=event["user"],
            text=self._clean_text(event.get("text") or ""),
            message_id=event["ts"],
            thread_id=reply_thread(event) if self._thread_scope else None,
            team=team or event.get("team") or self._team_id,
            raw=event,
            attachments=attachments_of(event, client=self._client, bot_token=self._bot_token),
        )

    def _clean_text(self, text: str) -> str:
        """Drop the bot's own @mention and undo Slack's escaping of ``&<>``."""
        if self._bot_user_id:
            text = re.sub(rf"\s*<@{re.escape(self._bot_user_id)}(?:\|[^>]*)?>\s*", " ", text)
        return text.strip().replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")

    async def _hand_over(self, message: IncomingMessage) -> None:
        """Give the turn to ``on_message``, which queues it; a failure is logged, never raised into bolt."""
        assert self._on_message is not None
        try:
            if message.chat_type == "direct" and is_command(message):
                async with self._im_lookup:  # one lookup at a time: commands are handed on in order
                    await self._on_message(await self._checked_dm(message))
            else:
                await self._on_message(message)
        except Exception:
            log.exception("Slack: handing on %s failed", message.dedupe_key)

    async def _checked_dm(self, message: IncomingMessage) -> IncomingMessage:
        """A command from a DM between two people (or one we cannot check) counts as a group's:
        the caller's private memory must not be used, nor shown there for the other person to see."""
        if await self._is_own_im(message.chat_id, message.user_id):
            return message
        return replace(message, chat_type="group")

    async def _is_own_im(self, channel_id: str, user: str) -> bool:
        """Whether ``channel_id`` is the bot's own DM with ``user``, not a DM between two people.

        The bot sees only its own DMs: ``conversations.info`` answers ``channel_not_found`` for
        others. Any failure counts as "not ours", so the command is answered as in a shared chat:
        with the chat's memory, and only to the caller.
        """
        if channel_id not in self._im_partner:
            try:
                response = await self._client.conversations_info(channel=channel_id)
            except SlackApiError as error:
                code = error.response.get("error") if error.response is not None else None
                if code not in {"channel_not_found", "not_in_channel"}:
                    log.warning("Slack: cannot tell whether %s is the bot's DM (%s; the app needs im:read); "
                                "answering its slash command as in a shared chat", channel_id, code)
                    return False
                self._im_partner[channel_id] = None
            except Exception as error:
                log.warning("Slack: cannot tell whether %s is the bot's DM (%s); answering its slash "
                            "command as in a shared chat", channel_id, error)
                return False
            else:
                info = response.get("channel") or {}
                self._im_partner[channel_id] = info.get("user") if info.get("is_im") else None
        return self._im_partner[channel_id] == user


def is_command(message: IncomingMessage) -> bool:
    """Whether ``message`` came as a slash command (its answer then goes to the ``response_url``)."""
    return isinstance(message.raw, dict) and message.raw.get("type") == SLASH_COMMAND


def reply_thread(event: Any) -> str | None:
    """Where the answer to ``event`` goes: a mention's thread (new or existing), a DM's thread."""
    if not isinstance(event, dict):
        return None
    if event.get("type") == "app_mention":
        return event.get("thread_ts") or event.get("ts")
    return event.get("thread_ts")
