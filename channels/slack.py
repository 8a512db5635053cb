"""Slack: DMs, @mentions in channels and slash commands, over Socket Mode or the HTTP Events API.

Everything Slack-specific stays in this module and its siblings: slack-bolt verifies and
acknowledges deliveries, :mod:`channels.slack_intake` turns the events that are meant for the bot
into :class:`IncomingMessage` objects (which events, files, threads, ordering), and this module runs
the connection and sends answers back as Slack ``mrkdwn`` (:mod:`channels.slack_mrkdwn`).

Answers go in the turn's thread; a slash command's through its ``response_url``. With ``progress``
on, a "…" placeholder is posted while a turn runs and becomes the answer's first part.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager, nullcontext
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

from .base import Attachment, Channel, IncomingMessage, MessageHandler, OutgoingFile, Reply, split_message
from .slack_files import attachment_from_wire
from .slack_intake import SlackIntake, is_command, reply_thread
from .slack_mrkdwn import escape_mrkdwn, markdown_to_mrkdwn

__all__ = ["SlackChannel", "markdown_to_mrkdwn"]

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
PLACEHOLDER_TEXT = "…"
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
        self._progress = progress
        self._client = AsyncWebClient(token=bot_token, base_url=api_url, retry_handlers=_retry_handlers())
        self._intake = SlackIntake(channel_name=self.name, client=self._client, bot_token=bot_token,
                                   thread_scope=thread_scope)
        self._app = self._build_app(signing_secret or "", api_url)
        self._auth: AuthorizeResult | None = None
        self._identity = ""  # "team <name> as @<bot>", from auth.test at start
        self._placeholders: dict[str, str] = {}
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
        identity = await self._client.auth_test()
        self._identity = f"team {identity.get('team') or identity.get('team_id')} as @{identity.get('user')}"
        self._auth = AuthorizeResult.from_auth_test_response(
            bot_token=self._bot_token, auth_test_response=identity
        )
        self._intake.begin(on_message, bot_user_id=identity.get("user_id") or "", team_id=self._auth.team_id)
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

    def _build_app(self, signing_secret: str, api_url: str) -> AsyncApp:
        """A bolt app authorized from our own start-time ``auth.test`` (no fetch per event), with
        the intake's listeners.

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
        self._intake.register(app)
        return app

    # -- output ------------------------------------------------------------------------------

    async def send(self, reply: Reply, to: IncomingMessage) -> None:
        """Post the answer in the turn's thread; the first part replaces a progress placeholder.

        A slash command is answered through its ``response_url``: in the bot's own DM for everyone
        to see, elsewhere (a channel, a DM between two people) only to the person who typed it. If
        that URL is refused (it expires after 30 minutes), the answer is posted in the channel instead.
        """
        text = markdown_to_mrkdwn(reply.text) if reply.markdown else escape_mrkdwn(reply.text)
        parts = [part for part in split_message(text, self.max_message_chars) if part.strip()]
        if is_command(to) and await self._respond(parts, to):
            return
        thread_ts = reply.thread_id or to.thread_id or reply_thread(to.raw)
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
        data = await self._bytes_to_upload(file, to, MAX_UPLOAD_BYTES, "Slack")
        if data is None:
            return
        await self._client.files_upload_v2(channel=to.chat_id, file=data, filename=file.name, title=file.name,
                                           thread_ts=to.thread_id or reply_thread(to.raw))

    async def _respond(self, parts: list[str], to: IncomingMessage) -> bool:
        """Answer a slash command through its ``response_url``; False when it has none."""
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
        return self._placeholder(to) if self._progress and not is_command(to) else nullcontext()

    @asynccontextmanager
    async def _placeholder(self, to: IncomingMessage) -> AsyncIterator[None]:
        thread_ts = to.thread_id or reply_thread(to.raw)
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
