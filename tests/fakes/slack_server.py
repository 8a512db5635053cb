"""A scriptable, in-process stand-in for Slack's Web API and Socket Mode.

Tests drive the *real* slack_sdk / slack-bolt against it, so token handling, retries on 429,
JSON vs form bodies and the Socket Mode envelope/ack protocol are exercised on the wire rather
than against mocks of the client library.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import time
import urllib.parse
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from aiohttp import WSMsgType, web

from . import HANG_GUARD_S
from .file_host import FileHost

__all__ = ["FakeSlack", "event_callback", "sign", "slash_command"]

BOT_TOKEN = "xoxb-fake-bot-token"
APP_TOKEN = "xapp-fake-app-token"
TEAM_ID = "T0FAKE"
BOT_USER_ID = "UBOT"
BOT_ID = "BBOT"
APP_ID = "AFAKE"

_MAX_BODY = 64 << 20  # bytes a request may carry (uploads)

# Methods that take the app-level token instead of the bot token.
_APP_TOKEN_METHODS = {"apps.connections.open"}


def sign(body: bytes, secret: str, timestamp: int | str | None = None) -> dict[str, str]:
    """Headers Slack would send with ``body``: the v0 HMAC-SHA256 of ``v0:{ts}:{body}``."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    base = b"v0:" + ts.encode() + b":" + body
    digest = hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": f"v0={digest}",
        "Content-Type": "application/json",
    }


def event_callback(
    event: dict[str, Any], *, event_id: str | None = None, team_id: str = TEAM_ID
) -> dict[str, Any]:
    """Wrap an event the way the Events API (and a Socket Mode ``payload``) carries it."""
    return {
        "token": "verification-token",
        "team_id": team_id,
        "api_app_id": APP_ID,
        "event": event,
        "type": "event_callback",
        "event_id": event_id or f"Ev{uuid.uuid4().hex[:10].upper()}",
        "event_time": int(time.time()),
        "authorizations": [
            {"team_id": team_id, "user_id": BOT_USER_ID, "is_bot": True, "is_enterprise_install": False}
        ],
    }


def slash_command(
    command: str, text: str, *, channel_id: str, user_id: str, response_url: str, team_id: str = TEAM_ID
) -> dict[str, str]:
    """The form fields Slack posts (or sends as a Socket Mode payload) for a slash command."""
    return {
        "token": "verification-token",
        "team_id": team_id,
        "team_domain": "fake",
        "channel_id": channel_id,
        "channel_name": "directmessage" if channel_id.startswith("D") else "general",
        "user_id": user_id,
        "user_name": user_id.lower(),
        "command": command,
        "text": text,
        "api_app_id": APP_ID,
        "is_enterprise_install": "false",
        "response_url": response_url,
        "trigger_id": f"{next(_triggers)}.{uuid.uuid4().hex[:8]}",
    }


_triggers = itertools.count(1_000_000)


@dataclass
class _Failure:
    status: int
    retry_after: int | None
    error: str
    times: int


class FakeSlack:
    """Slack's Web API under ``/api/`` and a Socket Mode WebSocket, on 127.0.0.1.

    Use as ``async with FakeSlack() as slack:`` and point the client at ``slack.api_url``.
    Records what was posted (``posted``, ``updated``), every call (``calls``) and every Socket
    Mode ack (``acks``); ``fail_next`` scripts errors such as rate limits. ``host_file`` shares a
    file people sent: ``files.info`` describes it and its private URL serves it to the bot token
    only (``file_host`` scripts and records the downloads).
    """

    def __init__(
        self,
        *,
        bot_token: str = BOT_TOKEN,
        app_token: str = APP_TOKEN,
        team_id: str = TEAM_ID,
        bot_user_id: str = BOT_USER_ID,
        bot_id: str = BOT_ID,
    ) -> None:
        self.bot_token = bot_token
        self.app_token = app_token
        self.team_id = team_id
        self.bot_user_id = bot_user_id
        self.bot_id = bot_id
        self.calls: list[dict[str, Any]] = []
        self.posted: list[dict[str, Any]] = []
        self.updated: list[dict[str, Any]] = []
        self.acks: list[dict[str, Any]] = []
        self.responses: list[dict[str, Any]] = []  # what was posted to response_urls
        #: Files shared by files.completeUploadExternal: channel, thread_ts, filename, title, the bytes.
        self.files: list[dict[str, Any]] = []
        self._uploads: dict[str, dict[str, Any]] = {}  # file id -> the upload in progress
        self.file_host = FileHost()  # files people shared, served at their private URLs
        self._shared: dict[str, dict[str, Any]] = {}  # file id -> its file object, for files.info
        #: The bot's own DMs: channel id -> the person. conversations.info answers
        #: channel_not_found for any other DM (one between two people), as Slack does.
        self.ims: dict[str, str] = {}
        self.expired_responses = 0  # answer the next N response_url posts 404 "expired_url"
        self._failures: dict[str, _Failure] = {}
        self._sockets: list[web.WebSocketResponse] = []
        self._ts = itertools.count(1)
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self._port = 0

    async def __aenter__(self) -> FakeSlack:
        app = web.Application(client_max_size=_MAX_BODY)
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_post("/upload/{file_id}", self._upload)
        app.router.add_get("/socket/{connection}", self._socket)
        app.router.add_post("/response/{token}", self._response)
        app.router.add_get("/files-pri/{key}/{tail:.+}", self._private_file)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = int(self._runner.addresses[0][1])
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.file_host.release()
        for socket in list(self._sockets):
            await socket.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def api_url(self) -> str:
        """slack_sdk's ``base_url`` for this fake (with the trailing slash it expects)."""
        return f"http://127.0.0.1:{self._port}/api/"

    def response_url(self) -> str:
        """A fresh ``response_url`` for a slash command, served by this fake."""
        return f"http://127.0.0.1:{self._port}/response/{uuid.uuid4().hex}"

    # -- scripting and waiting -----------------------------------------------------------------

    def host_file(self, data: bytes, *, name: str, mimetype: str, filetype: str = "binary",
                  size: int | None = None, user: str = "U0ALICE", **extra: Any) -> dict[str, Any]:
        """Share ``data`` as a file a person uploaded; its file object, as events and files.info
        carry it. ``size`` is what Slack claims (by default the real length)."""
        file_id = f"F{next(self._ts):08d}"
        key = f"{self.team_id}-{file_id}"
        hosted = self.file_host.add(key, data, size)
        base = f"http://127.0.0.1:{self._port}/files-pri/{key}"
        quoted = urllib.parse.quote(name, safe="")
        file = {"id": file_id, "created": int(time.time()), "timestamp": int(time.time()), "name": name,
                "title": name, "mimetype": mimetype, "filetype": filetype, "pretty_type": filetype.upper(),
                "user": user, "user_team": self.team_id, "mode": "hosted", "editable": False,
                "is_external": False, "external_type": "", "is_public": False, "size": hosted.size,
                "url_private": f"{base}/{quoted}", "url_private_download": f"{base}/download/{quoted}",
                "permalink": f"https://fake.slack.com/files/{user}/{file_id}/{quoted}", **extra}
        self._shared[file_id] = file
        return file

    def fail_next(
        self, method: str, status: int = 429, retry_after: int | None = 1, times: int = 1, error: str | None = None
    ) -> None:
        """Answer the next ``times`` calls of ``method`` with ``status`` (and ``Retry-After``)."""
        default_error = "ratelimited" if status == 429 else "internal_error"
        self._failures[method] = _Failure(status, retry_after, error or default_error, times)

    async def wait_posted(self, n: int, timeout: float = HANG_GUARD_S) -> list[dict[str, Any]]:
        """Wait until at least ``n`` messages were posted; return them all."""
        await self._wait_for(lambda: len(self.posted) >= n, timeout, f"{n} posted messages")
        return self.posted

    async def wait_updated(self, n: int, timeout: float = HANG_GUARD_S) -> list[dict[str, Any]]:
        """Wait until at least ``n`` chat.update calls succeeded; return them all."""
        await self._wait_for(lambda: len(self.updated) >= n, timeout, f"{n} updated messages")
        return self.updated

    async def wait_responses(self, n: int, timeout: float = HANG_GUARD_S) -> list[dict[str, Any]]:
        """Wait until at least ``n`` response_url posts were accepted; return them all."""
        await self._wait_for(lambda: len(self.responses) >= n, timeout, f"{n} response_url posts")
        return self.responses

    async def wait_response_to(self, url: str, timeout: float = HANG_GUARD_S) -> dict[str, Any]:
        """Wait for the post to one ``response_url``: slash commands of different chats run
        concurrently, so their responses arrive in any order."""
        token = url.rsplit("/", 1)[-1]
        await self._wait_for(lambda: any(r["url_token"] == token for r in self.responses), timeout,
                             f"a response to {url}")
        return next(r for r in self.responses if r["url_token"] == token)

    async def wait_files(self, n: int, timeout: float = HANG_GUARD_S) -> list[dict[str, Any]]:
        """Wait until at least ``n`` uploaded files were shared; return them all."""
        await self._wait_for(lambda: len(self.files) >= n, timeout, f"{n} shared files")
        return self.files

    async def wait_acks(self, n: int, timeout: float = HANG_GUARD_S) -> list[dict[str, Any]]:
        """Wait until at least ``n`` Socket Mode envelopes were acknowledged; return the acks."""
        await self._wait_for(lambda: len(self.acks) >= n, timeout, f"{n} socket acks")
        return self.acks

    async def push_socket_event(
        self, payload: dict[str, Any], *, retry_attempt: int = 0, timeout: float = HANG_GUARD_S, kind: str = "events_api"
    ) -> str:
        """Send an envelope (``events_api``, or ``slash_commands`` for a command's fields) to the
        connected client; return its envelope id."""
        await self._wait_for(lambda: bool(self._sockets), timeout, "a Socket Mode connection")
        envelope_id = str(uuid.uuid4())
        envelope = {
            "envelope_id": envelope_id,
            "type": kind,
            "payload": payload,
            "accepts_response_payload": kind != "events_api",
            "retry_attempt": retry_attempt,
            "retry_reason": "timeout" if retry_attempt else "",
        }
        await self._sockets[-1].send_str(json.dumps(envelope))
        return envelope_id

    async def _wait_for(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        try:
            async with self._changed:
                await asyncio.wait_for(self._changed.wait_for(ready), timeout)
        except TimeoutError:
            raise AssertionError(f"FakeSlack: timed out after {timeout}s waiting for {what}") from None

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # -- Web API ---------------------------------------------------------------------------------

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args = await _read_args(request)
        self.calls.append({"method": method, "args": args})
        expected = self.app_token if method in _APP_TOKEN_METHODS else self.bot_token
        token = _bearer(request) or args.get("token")
        if token != expected:
            return web.json_response({"ok": False, "error": "not_authed" if not token else "invalid_auth"})
        failure = self._failures.get(method)
        if failure is not None:
            return self._fail(method, failure)
        handler = getattr(self, "_m_" + method.replace(".", "_"), None)
        body = handler(args) if handler is not None else {}
        await self._notify()
        return web.json_response({"ok": "error" not in body, **body})

    def _fail(self, method: str, failure: _Failure) -> web.Response:
        failure.times -= 1
        if failure.times <= 0:
            del self._failures[method]
        headers = {"Retry-After": str(failure.retry_after)} if failure.retry_after is not None else {}
        return web.json_response({"ok": False, "error": failure.error}, status=failure.status, headers=headers)

    def _m_auth_test(self, args: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": "https://fake.slack.com/",
            "team": "Fake Team",
            "user": "membridge",
            "team_id": self.team_id,
            "user_id": self.bot_user_id,
            "bot_id": self.bot_id,
            "is_enterprise_install": False,
        }

    def _m_chat_postMessage(self, args: dict[str, Any]) -> dict[str, Any]:
        if not args.get("channel"):
            return {"error": "channel_not_found"}
        if not args.get("text") and not args.get("blocks"):
            return {"error": "no_text"}
        ts = f"{1_700_000_000 + next(self._ts)}.000100"
        record = {"channel": args["channel"], "text": args.get("text"), "thread_ts": args.get("thread_ts"), "ts": ts}
        self.posted.append(record)
        message = {"type": "message", "user": self.bot_user_id, "bot_id": self.bot_id, **record}
        return {"channel": args["channel"], "ts": ts, "message": message}

    def _m_chat_update(self, args: dict[str, Any]) -> dict[str, Any]:
        if not args.get("channel") or not args.get("ts"):
            return {"error": "message_not_found"}
        self.updated.append({"channel": args["channel"], "ts": args["ts"], "text": args.get("text")})
        return {"channel": args["channel"], "ts": args["ts"], "text": args.get("text")}

    # Upload flow v2: reserve a file id and URL, POST the bytes there, complete to share it.
    def _m_files_getUploadURLExternal(self, args: dict[str, Any]) -> dict[str, Any]:
        filename, length = str(args.get("filename") or ""), str(args.get("length") or "")
        if not filename or not length.isdigit() or int(length) < 1:
            return {"error": "invalid_arguments"}
        file_id = f"F{next(self._ts):08d}"
        self._uploads[file_id] = {"filename": filename, "length": int(length), "data": None}
        return {"upload_url": f"http://127.0.0.1:{self._port}/upload/{file_id}", "file_id": file_id}

    async def _upload(self, request: web.Request) -> web.Response:
        """The upload URL: the raw bytes (or a multipart form with one file), as files.slack.com takes them."""
        upload = self._uploads.get(request.match_info["file_id"])
        if upload is None:
            return web.Response(status=404, text="unknown upload")
        if request.content_type == "multipart/form-data":
            fields = await request.post()
            data = next(field.file.read() for field in fields.values() if not isinstance(field, str))
        else:
            data = await request.read()
        upload["data"] = data
        return web.Response(text=f"OK - {len(data)}")

    def _m_files_completeUploadExternal(self, args: dict[str, Any]) -> dict[str, Any]:
        try:
            listed = json.loads(str(args.get("files") or ""))
        except ValueError:
            return {"error": "invalid_arguments"}
        shared = []
        for item in listed:
            upload = self._uploads.get(str(item.get("id")))
            if upload is None or upload["data"] is None:
                return {"error": "file_not_found"}
            if len(upload["data"]) != upload["length"]:
                return {"error": "file_upload_size_mismatch"}  # Slack's check of the declared length
        for item in listed:
            upload = self._uploads.pop(str(item["id"]))
            record = {"id": item["id"], "channel": args.get("channel_id"), "thread_ts": args.get("thread_ts"),
                      "initial_comment": args.get("initial_comment"), "filename": upload["filename"],
                      "title": item.get("title") or upload["filename"], "data": upload["data"]}
            self.files.append(record)
            shared.append({"id": item["id"], "name": upload["filename"], "title": record["title"],
                           "size": len(upload["data"])})
        return {"files": shared}

    def _m_files_info(self, args: dict[str, Any]) -> dict[str, Any]:
        file = self._shared.get(str(args.get("file") or ""))
        if file is None:
            return {"error": "file_not_found"}
        return {"file": file, "comments": [], "response_metadata": {"next_cursor": ""}}

    async def _private_file(self, request: web.Request) -> web.StreamResponse:
        """A file's private URL: the bytes for a request bearing the bot token, 401 otherwise."""
        authorized = _bearer(request) == self.bot_token
        response = await self.file_host.serve(request, request.match_info["key"], authorized=authorized)
        await self._notify()
        return response

    def _m_apps_connections_open(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"url": f"ws://127.0.0.1:{self._port}/socket/{uuid.uuid4().hex}"}

    def _m_conversations_info(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = str(args.get("channel") or "")
        if channel in self.ims:
            return {"channel": {"id": channel, "is_im": True, "user": self.ims[channel]}}
        if not channel or channel.startswith("D"):
            return {"error": "channel_not_found"}
        return {"channel": {"id": channel, "is_im": False, "is_channel": True}}

    def _m_users_info(self, args: dict[str, Any]) -> dict[str, Any]:
        user = str(args.get("user") or "")
        if not user:
            return {"error": "user_not_found"}
        name = user.lower()
        profile = {"display_name": name, "real_name": f"User {user}"}
        return {"user": {"id": user, "team_id": self.team_id, "name": name, "real_name": f"User {user}", "profile": profile}}

    async def _response(self, request: web.Request) -> web.Response:
        """A slash command's response_url: JSON in, a plain "ok" out (or 404 once it expired)."""
        if self.expired_responses > 0:
            self.expired_responses -= 1
            return web.Response(status=404, text="expired_url")
        body = await request.json()
        self.responses.append({"url_token": request.match_info["token"], **body})
        await self._notify()
        return web.Response(text="ok")

    # -- Socket Mode -----------------------------------------------------------------------------

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse(autoping=True)
        await socket.prepare(request)
        self._sockets.append(socket)
        await self._notify()
        hello = {
            "type": "hello",
            "num_connections": len(self._sockets),
            "debug_info": {"host": "fake-slack", "approximate_connection_time": 18060},
            "connection_info": {"app_id": APP_ID},
        }
        await socket.send_str(json.dumps(hello))
        try:
            async for frame in socket:
                if frame.type == WSMsgType.TEXT:
                    self.acks.append(json.loads(frame.data))
                    await self._notify()
        finally:
            self._sockets.remove(socket)
        return socket


async def _read_args(request: web.Request) -> dict[str, Any]:
    """Query string plus a JSON or form body, the ways slack_sdk sends arguments."""
    args: dict[str, Any] = dict(request.query)
    if request.content_type == "application/json":
        body = await request.json() if request.can_read_body else None
        if isinstance(body, dict):
            args.update(body)
    elif request.can_read_body:
        args.update(await request.post())
    return args


def _bearer(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    return header[len("Bearer ") :] if header.startswith("Bearer ") else None
