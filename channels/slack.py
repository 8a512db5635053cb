"""Slack: DMs, @mentions in channels and slash commands, over Socket Mode or the HTTP Events API.

Everything Slack-specific stays here: slack-bolt verifies and acknowledges deliveries, this
module turns the events that are meant for the bot into :class:`IncomingMessage` objects and
sends answers back as Slack ``mrkdwn``.

Files. A message that shares files (subtype ``file_share``, or a mention with files) is a turn
whose attachments are those files (see :mod:`channels.slack_files`) and whose text is the message.

Threads and chats. A mention in a channel is answered in the mention's thread. With
``thread_scope`` off the whole channel is one chat (one ``chat_key``), so ``thread_id`` stays
``None`` and :meth:`SlackChannel.send` derives the reply thread from the raw event instead; with
``thread_scope`` on, ``thread_id`` is the thread's ts and every thread is a chat of its own.

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
import os
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager, nullcontext
from dataclasses import replace
from typing import Any

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncRateLimitErrorRetryHandler,
    async_default_handlers,
)
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from .base import (
    Attachment,
    Channel,
    ChatType,
    IncomingMessage,
    MessageHandler,
    OutgoingFile,
    Reply,
    oversize_notice,
    split_message,
)
from .slack_files import attachment_from_wire, attachments_of

__all__ = ["SlackChannel", "markdown_to_mrkdwn"]

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
SLASH_COMMAND = "slash_command"  # IncomingMessage.raw["type"] of a turn that came as a slash command
PLACEHOLDER_TEXT = "…"
#: Message subtypes that are still a person's message (other subtypes are edits, joins, bots…).
_PERSON_SUBTYPES = frozenset({"file_share"})
#: Placeholders whose answer never came are forgotten after this many newer ones.
_PLACEHOLDER_MEMORY = 256
_RATE_LIMIT_RETRIES = 3
#: The largest file Slack takes in one upload (slack_sdk refuses bigger ones itself).
MAX_UPLOAD_BYTES = 1024 * 1024 * 1024
_SOCKET_CONNECT_TIMEOUT_S = 30.0


class SlackChannel(Channel):
    """A Slack app: every DM is a turn, and so is every @mention in a channel."""

    name = "slack"
    max_message_chars = 3900

    def __init__(
        self,
        *,
        bot_token: str,
        app_token: str | None = None,
        signing_secret: str | None = None,
        api_url: str = "https://slack.com/api/",
        host: str = "127.0.0.1",
        port: int = 3000,
        thread_scope: bool = False,
        progress: bool = False,
    ) -> None:
        if not app_token and not signing_secret:
            raise ValueError(
                "Slack over the HTTP Events API needs channels.slack.signing_secret "
                "(or set channels.slack.app_token to use Socket Mode)"
            )
        self._bot_token = bot_token
        self._app_token = app_token or None
        self._host = host
        self._port = port
        self._thread_scope = thread_scope
        self._progress = progress
        self._client = AsyncWebClient(token=bot_token, base_url=api_url, retry_handlers=_retry_handlers())
        self._app = self._build_app(signing_secret or "", api_url)
        self._on_message: MessageHandler | None = None
        self._auth: AuthorizeResult | None = None
        self._bot_user_id = ""
        self._identity = ""  # "team <name> as @<bot>", from auth.test at start
        self._placeholders: dict[str, str] = {}
        #: DM channel id -> the person the bot's own DM there is with, None for a DM that is not
        #: the bot's (a slash command works in any DM, also one between two people). Learned from
        #: message.im events and conversations.info.
        self._im_partner: dict[str, str | None] = {}
        self._im_lookup = asyncio.Lock()
        self._runner: web.AppRunner | None = None
        self._socket: AsyncSocketModeHandler | None = None

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def http_port(self) -> int | None:
        """The port the Events API endpoint really listens on (useful with ``port=0``)."""
        if self._runner is None or not self._runner.addresses:
            return None
        return int(self._runner.addresses[0][1])

    async def start(self, on_message: MessageHandler) -> None:
        """Learn who the bot is, then listen on Socket Mode or the HTTP endpoint."""
        self._on_message = on_message
        identity = await self._client.auth_test()
        self._bot_user_id = identity.get("user_id") or ""
        self._identity = f"team {identity.get('team') or identity.get('team_id')} as @{identity.get('user')}"
        self._auth = AuthorizeResult.from_auth_test_response(
            bot_token=self._bot_token, auth_test_response=identity
        )
        if self._app_token:
            await self._start_socket_mode(self._app_token)
        else:
            await self._start_http()

    def describe(self) -> str:
        where = "Socket Mode" if self._app_token else f"Events API at http://{self._host}:{self.http_port}{EVENTS_PATH}"
        return f"slack: {self._identity} ({where})"

    def attachment_from_wire(self, data: dict[str, Any]) -> Attachment:
        return attachment_from_wire(data, client=self._client, bot_token=self._bot_token)

    async def stop(self) -> None:
        """Stop intake. Turns already handed on finish on their own: the bridge owns them."""
        socket, self._socket = self._socket, None
        if socket is not None:
            await socket.close_async()  # type: ignore[no-untyped-call]  # slack_sdk is untyped here
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def stop_receiving(self) -> None:
        """Closing the socket or the HTTP server is all it takes: ``send`` keeps its own client."""
        await self.stop()

    async def _start_socket_mode(self, app_token: str) -> None:
        handler = AsyncSocketModeHandler(self._app, app_token, web_client=self._client)
        self._socket = handler
        try:
            # slack_sdk's connect loop retries every error forever, so fetch the URL ourselves:
            # a bad app token then fails start() at once, and a dead endpoint within the timeout.
            opened = await self._client.apps_connections_open(app_token=app_token)
            handler.client.wss_uri = opened["url"]
            await asyncio.wait_for(handler.connect_async(), _SOCKET_CONNECT_TIMEOUT_S)  # type: ignore[no-untyped-call]
        except TimeoutError:
            await self.stop()
            raise ConnectionError(
                f"Slack Socket Mode did not connect within {_SOCKET_CONNECT_TIMEOUT_S:.0f} s"
            ) from None
        except BaseException:
            await self.stop()
            raise

    async def _start_http(self) -> None:
        web_app = web.Application()
        web_app.router.add_post(EVENTS_PATH, self._handle_http)
        runner = web.AppRunner(web_app)
        await runner.setup()
        self._runner = runner
        try:
            await web.TCPSite(runner, self._host, self._port).start()
        except BaseException:
            await self.stop()
            raise
        log.debug("Slack Events API listening on http://%s:%s%s", self._host, self.http_port, EVENTS_PATH)

    async def _handle_http(self, request: web.Request) -> web.Response:
        """bolt checks the signature and timestamp (401 otherwise) and answers url_verification."""
        response = await self._app.async_dispatch(await to_bolt_request(request))
        return await to_aiohttp_response(response)

    # -- intake ------------------------------------------------------------------------------

    def _build_app(self, signing_secret: str, api_url: str) -> AsyncApp:
        """A bolt app authorized from our own start-time ``auth.test`` (no fetch per event).

        Its client has no token of its own: bolt takes the token from the authorize result. bolt
        also reads ``SLACK_BOT_TOKEN`` from the environment when it is given none, and warns "As you
        gave client as well, token will be unused"; that variable is kept from it (it is ours, read
        through config.yaml) while the app is built.
        """

        async def authorize() -> AuthorizeResult | None:
            # A closure, not a method: bolt passes arguments by the names it finds, "self" included.
            return self._auth

        with _hidden_from_bolt("SLACK_BOT_TOKEN"):
            app = AsyncApp(
                name="membridge",
                signing_secret=signing_secret,
                client=AsyncWebClient(base_url=api_url, retry_handlers=_retry_handlers()),
                authorize=authorize,  # type: ignore[arg-type]  # bolt takes None as "not authorised"
            )

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
        return app

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
        team = command.get("team_id") or (self._auth.team_id if self._auth else None)
        await self._hand_over(IncomingMessage(
            channel=self.name,
            chat_id=channel_id,
            chat_type="direct" if direct else "group",
            user_id=user,
            user_name=command.get("user_name") or user,
            text=f"{command.get('command', '')} {self._clean_text(command.get('text') or '')}".strip(),
            message_id=trigger or f"{channel_id}:{user}:{command.get('command')}:{command.get('text')}",
            team=team,
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
        team = team or event.get("team") or (self._auth.team_id if self._auth else None)
        return IncomingMessage(
            channel=self.name,
            chat_id=event["channel"],
            chat_type=chat_type,
            user_id=event["user"],
            user_name=event["user"],
            text=self._clean_text(event.get("text") or ""),
            message_id=event["ts"],
            thread_id=_reply_thread(event) if self._thread_scope else None,
            team=team,
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
            if message.chat_type == "direct" and _is_command(message):
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

    # -- output ------------------------------------------------------------------------------

    async def send(self, reply: Reply, to: IncomingMessage) -> None:
        """Post the answer in the turn's thread; the first part replaces a progress placeholder.

        A slash command is answered through its ``response_url``: in the bot's own DM for everyone
        to see, elsewhere (a channel, a DM between two people) only to the person who typed it. If that URL is refused (it expires after
        30 minutes), the answer is posted in the channel instead.
        """
        text = markdown_to_mrkdwn(reply.text) if reply.markdown else _escape(reply.text)
        parts = [part for part in split_message(text, self.max_message_chars) if part.strip()]
        if _is_command(to) and await self._respond(parts, to):
            return
        thread_ts = reply.thread_id or to.thread_id or _reply_thread(to.raw)
        placeholder = self._placeholders.pop(to.dedupe_key, None)
        for index, part in enumerate(parts):
            if index == 0 and placeholder is not None:
                await self._client.chat_update(channel=to.chat_id, ts=placeholder, text=part)
            else:
                await self._client.chat_postMessage(channel=to.chat_id, text=part, thread_ts=thread_ts)

    async def send_file(self, file: OutgoingFile, to: IncomingMessage) -> None:
        """Upload ``file`` into ``to``'s conversation (and thread) with Slack's v2 flow, through
        slack_sdk's ``files_upload_v2``: files.getUploadURLExternal, the upload, then
        files.completeUploadExternal, which shares it. Needs the ``files:write`` scope."""
        notice = oversize_notice(file, MAX_UPLOAD_BYTES, "Slack")
        if notice is not None:
            await self.send(Reply(notice, markdown=False), to)
            return
        data = await asyncio.to_thread(file.path.read_bytes)
        await self._client.files_upload_v2(channel=to.chat_id, file=data, filename=file.name, title=file.name,
                                           thread_ts=to.thread_id or _reply_thread(to.raw))

    async def _respond(self, parts: list[str], to: IncomingMessage) -> bool:
        url = to.raw.get("response_url") if isinstance(to.raw, dict) else None
        if not url:
            return False
        webhook = AsyncWebhookClient(url, retry_handlers=_retry_handlers())
        visibility = "in_channel" if to.chat_type == "direct" else "ephemeral"
        for index, part in enumerate(parts):
            try:
                response = await webhook.send(text=part, response_type=visibility)
            except Exception as error:
                log.warning("Slack response_url failed: %s", error)
                response = None
            if response is None or response.status_code != 200:
                log.warning("Slack refused the command's response_url (%s); posting in %s instead",
                            getattr(response, "status_code", "no answer"), to.chat_id)
                for rest in parts[index:]:
                    await self._client.chat_postMessage(channel=to.chat_id, text=rest)
                return True
        return True

    def working(self, to: IncomingMessage) -> AbstractAsyncContextManager[None]:
        """With ``progress`` on, a "…" message that :meth:`send` later turns into the answer.

        Not for slash commands: their answer goes to the ``response_url``, not into the channel.
        """
        return self._placeholder(to) if self._progress and not _is_command(to) else nullcontext()

    @asynccontextmanager
    async def _placeholder(self, to: IncomingMessage) -> AsyncIterator[None]:
        thread_ts = to.thread_id or _reply_thread(to.raw)
        try:
            posted = await self._client.chat_postMessage(
                channel=to.chat_id, text=PLACEHOLDER_TEXT, thread_ts=thread_ts
            )
        except SlackApiError as error:
            log.warning("Slack placeholder not posted in %s: %s", to.chat_id, error)
        else:
            self._placeholders[to.dedupe_key] = posted["ts"]
            if len(self._placeholders) > _PLACEHOLDER_MEMORY:
                del self._placeholders[next(iter(self._placeholders))]
        yield


@contextmanager
def _hidden_from_bolt(name: str) -> Iterator[None]:
    """Unset an environment variable for the few lines that build the bolt app, then restore it.

    The app is built synchronously at start-up, before any thread of ours could read the variable.
    """
    value = os.environ.pop(name, None)
    try:
        yield
    finally:
        if value is not None:
            os.environ[name] = value


def _retry_handlers() -> list[AsyncRetryHandler]:
    """slack_sdk's connection retries plus waiting out 429s as their Retry-After says."""
    return [*async_default_handlers(), AsyncRateLimitErrorRetryHandler(max_retry_count=_RATE_LIMIT_RETRIES)]


def _is_command(message: IncomingMessage) -> bool:
    return isinstance(message.raw, dict) and message.raw.get("type") == SLASH_COMMAND


def _reply_thread(event: Any) -> str | None:
    """Where the answer to ``event`` goes: a mention's thread (new or existing), a DM's thread."""
    if not isinstance(event, dict):
        return None
    if event.get("type") == "app_mention":
        return event.get("thread_ts") or event.get("ts")
    return event.get("thread_ts")


# -- Markdown → mrkdwn ---------------------------------------------------------------------------

_FENCE = re.compile(r"^\s*(```|~~~)")
_QUOTE = re.compile(r"^\s{0,3}>(?:\s*>)*\s?")
_RULE = re.compile(r"^\s{0,3}([-*_])(?:\s*\1){2,}\s*$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)(?:\s+#+)?\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+")
_INLINE_CODE = re.compile(r"`[^`\n]+`")
_LINK = re.compile(r"!?\[([^\]\n]*)\]\(\s*<?([^\s)>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_AUTOLINK = re.compile(r"<((?:https?|mailto):[^\s>]+)>")
_BOLD_ITALIC = re.compile(r"\*\*\*(?=\S)(.+?)(?<=\S)\*\*\*")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|(?<!\w)__(?=\S)(.+?)(?<=\S)__(?!\w)")
_ITALIC = re.compile(r"(?<![*\w])\*(?=\S)(.+?)(?<=\S)\*(?![*\w])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_EMPHASIS_MARKS = re.compile(r"\*\*|__")
_STASHED = re.compile("\ue000(\\d+)\ue001")
_BOLD_MARK = "\ue002"  # stands in for "*" until italics are converted, so they stay bold
_RULE_TEXT = "──────────"


def markdown_to_mrkdwn(text: str) -> str:
    """Rewrite the Markdown an LLM writes into Slack's ``mrkdwn``.

    ``**b**`` → ``*b*``, ``*i*`` → ``_i_``, ``~~s~~`` → ``~s~``, ``[t](u)`` → ``<u|t>``,
    headings → bold lines, bullets → "•". ``&<>`` are escaped everywhere (Slack reads them as
    markup), which also keeps a model from writing live ``<!here>`` or ``<@U…>`` mentions.
    """
    lines: list[str] = []
    in_fence = False
    for line in text.split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
            lines.append("```")  # Slack shows a language tag as code text, so it goes
        else:
            lines.append(_escape(line) if in_fence else _convert_line(line))
    return "\n".join(lines)


def _convert_line(line: str) -> str:
    quote = _QUOTE.match(line)
    prefix, body = ("> ", line[quote.end() :]) if quote else ("", line)
    if _RULE.match(body):
        return prefix + _RULE_TEXT
    heading = _HEADING.match(body)
    if heading:
        return f"{prefix}*{_inline(_EMPHASIS_MARKS.sub('', heading.group(1)))}*"
    bullet = _BULLET.match(body)
    if bullet:
        return f"{prefix}{bullet.group(1)}• {_inline(body[bullet.end() :])}"
    return prefix + _inline(body)


def _inline(text: str) -> str:
    """Convert emphasis and links in one line; code spans and URLs are kept out of the way."""
    stash: list[str] = []

    def keep(converted: str) -> str:
        stash.append(converted)
        return f"\ue000{len(stash) - 1}\ue001"

    text = _INLINE_CODE.sub(lambda m: keep(_escape(m.group(0))), text)
    text = _LINK.sub(lambda m: keep(_link(m.group(2), m.group(1))), text)
    text = _AUTOLINK.sub(lambda m: keep(f"<{_escape(m.group(1))}>"), text)
    text = _escape(text)
    text = _BOLD_ITALIC.sub(lambda m: f"{_BOLD_MARK}_{m.group(1)}_{_BOLD_MARK}", text)
    text = _BOLD.sub(lambda m: f"{_BOLD_MARK}{m.group(1) or m.group(2)}{_BOLD_MARK}", text)
    text = _ITALIC.sub(r"_\1_", text)
    text = _STRIKE.sub(r"~\1~", text)
    text = text.replace(_BOLD_MARK, "*")
    return _STASHED.sub(lambda m: stash[int(m.group(1))], text)


def _link(url: str, label: str) -> str:
    label = _escape(_EMPHASIS_MARKS.sub("", label)).replace("|", "/")
    return f"<{_escape(url)}|{label}>" if label.strip() else f"<{_escape(url)}>"


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
