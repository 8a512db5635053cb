"""A fake Telegram Bot API on 127.0.0.1, faithful enough for the real python-telegram-bot.

Tests drive the real library against it, so it checks what Telegram checks: the token in the
path, MarkdownV2 escaping (a reserved character left bare is refused with Telegram's own
"can't parse entities" error), the 4096-character limit after parsing, edits that change nothing.
A formatting bug the real API would reject therefore fails a test here first.

Scripting: ``push_*`` queues updates for ``getUpdates`` (the ``*_update`` builders only build them,
e.g. to post to a webhook), ``fail_next`` makes the next calls of a method fail, and ``sent``,
``edits``, ``actions``, ``calls`` and ``offsets`` (of getUpdates: what the bot confirmed) record
what the bot did; ``on_poll`` checks each offset as it comes. ``host_file`` puts a file behind
``getFile`` and ``/file/bot<token>/<file_path>`` (``files`` scripts and records its downloads).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import ClientSession, web

from . import HANG_GUARD_S
from .file_host import FileHost

__all__ = [
    "BOT_ID",
    "BOT_USERNAME",
    "TOKEN",
    "FakeTelegram",
    "MarkdownV2Error",
    "auto_entities",
    "parse_markdown_v2",
]

log = logging.getLogger(__name__)

TOKEN = "123456:TEST-fake-token"
BOT_ID = 900_000_001
BOT_USERNAME = "membridge_bot"
MAX_TEXT = 4096
MAX_CAPTION = 1024
MAX_UPLOAD = 50 * 1000 * 1000  # what a bot may upload through the Bot API
MAX_DOWNLOAD = 20 * 1000 * 1000  # what getFile lets a bot download

# Form-encoded bodies carry every value as a string; these are turned back into what they were.
_INT_PARAMS = frozenset(
    {"chat_id", "message_id", "offset", "limit", "timeout", "message_thread_id",
     "reply_to_message_id", "max_connections"}
)
_JSON_PARAMS = frozenset(
    {"reply_parameters", "entities", "caption_entities", "allowed_updates", "reply_markup",
     "link_preview_options"}
)
_BOOL_PARAMS = frozenset({"drop_pending_updates", "disable_notification", "protect_content"})


class MarkdownV2Error(ValueError):
    """Text Telegram would refuse with "can't parse entities"."""


class _ApiError(Exception):
    """A Bot API error, answered in Telegram's envelope with the HTTP status it uses."""

    def __init__(self, code: int, description: str, retry_after: float | None = None) -> None:
        super().__init__(description)
        self.code = code
        self.description = description
        self.retry_after = retry_after

    def response(self) -> web.Response:
        body: dict[str, Any] = {
            "ok": False, "error_code": self.code, "description": self.description
        }
        if self.retry_after is not None:
            body["parameters"] = {"retry_after": self.retry_after}
        return web.json_response(body, status=self.code)


def _utf16_len(text: str) -> int:
    """Telegram measures entity offsets in UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


# ----------------------------------------------------------------------------- MarkdownV2 parsing

_RESERVED = frozenset("_*[]()~`>#+-=|{}.!")
_TOGGLES = (  # longest first: "__" is underline, greedily
    ("__", "underline"), ("||", "spoiler"), ("*", "bold"), ("_", "italic"), ("~", "strikethrough")
)
_LINK_SCHEMES = ("http://", "https://", "tg://")


class _MarkdownV2Parser:
    """Telegram's MarkdownV2 rules, strictly: what this accepts, Telegram accepts."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.out: list[str] = []
        self.size = 0  # UTF-16 length of the visible text so far
        self.entities: list[dict[str, Any]] = []
        self.open: list[tuple[str, int, int]] = []  # (entity type, visible offset, source position)
        self.quote_from: int | None = None

    def parse(self) -> tuple[str, list[dict[str, Any]]]:
        while self.pos < len(self.text):
            self._step()
        self._close_quote()
        if self.open:
            kind, _, at = self.open[-1]
            raise self._unclosed(kind, at)
        self.entities.sort(key=lambda e: (e["offset"], -e["length"]))
        return "".join(self.out), self.entities

    def _step(self) -> None:
        text, pos = self.text, self.pos
        char = text[pos]
        if char == "\r":  # Telegram ignores it; it separates "_" from "__"
            self.pos += 1
        elif char == "\\":
            self._escape()
        elif char == ">" and (pos == 0 or text[pos - 1] == "\n"):
            if self.quote_from is None:
                self.quote_from = self.size
            self.pos += 1
        elif char == "\n":
            if self.quote_from is not None and not text.startswith(">", pos + 1):
                self._close_quote()
            self._emit("\n")
            self.pos += 1
        elif text.startswith("```", pos):
            self._pre()
        elif char == "`":
            self._code()
        elif char == "[":
            if any(kind == "text_link" for kind, _, _ in self.open):
                raise _reserved("[")
            self.open.append(("text_link", self.size, pos))
            self.pos += 1
        elif char == "]":
            self._link_end()
        else:
            self._toggle_or_char()

    def _toggle_or_char(self) -> None:
        for mark, kind in _TOGGLES:
            if self.text.startswith(mark, self.pos):
                self._toggle(kind, self.pos)
                self.pos += len(mark)
                return
        char = self.text[self.pos]
        if char in _RESERVED:
            raise _reserved(char)
        self._emit(char)
        self.pos += 1

    def _escape(self) -> None:
        nxt = self.text[self.pos + 1 : self.pos + 2]
        if not nxt or not 1 <= ord(nxt) <= 126:
            raise MarkdownV2Error(f"Bad escape at byte offset {self._byte(self.pos)}")
        self._emit(nxt)
        self.pos += 2

    def _toggle(self, kind: str, at: int) -> None:
        if not any(open_kind == kind for open_kind, _, _ in self.open):
            self.open.append((kind, self.size, at))
            return
        top_kind, start, _ = self.open.pop()
        if top_kind != kind:
            raise self._unclosed(top_kind, at)
        self._add(kind, start)

    def _code(self) -> None:
        end = self._code_end(self.pos + 1, "`")
        start = self.size
        self._emit(self._unescape_code(self.pos + 1, end))
        self._add("code", start)
        self.pos = end + 1

    def _pre(self) -> None:
        body_from = self.pos + 3
        end = self._code_end(body_from, "```")
        newline = self.text.find("\n", body_from, end)
        language = self.text[body_from:newline] if newline != -1 else ""
        if language and re.fullmatch(r"[\w#+.-]+", language):
            body_from = newline + 1
        elif newline == body_from:
            body_from += 1
        start = self.size
        self._emit(self._unescape_code(body_from, end))
        self._add("pre", start, language=language or None)
        self.pos = end + 3

    def _code_end(self, pos: int, closing: str) -> int:
        """Where an unescaped ``closing`` ends a code entity; only ` and \\ are escaped inside."""
        while pos < len(self.text):
            if self.text.startswith(closing, pos):
                return pos
            char = self.text[pos]
            if char == "\\":
                if self.text[pos + 1 : pos + 2] not in ("`", "\\"):
                    raise MarkdownV2Error(f"Bad escape in code at byte offset {self._byte(pos)}")
                pos += 2
            elif char == "`":
                raise _reserved("`")
            else:
                pos += 1
        raise self._unclosed("code", self.pos)

    def _unescape_code(self, start: int, end: int) -> str:
        return re.sub(r"\\([`\\])", r"\1", self.text[start:end])

    def _link_end(self) -> None:
        if not self.open or self.open[-1][0] != "text_link":
            raise _reserved("]")
        _, start, _ = self.open.pop()
        if not self.text.startswith("(", self.pos + 1):
            raise _reserved("]")
        pos = self.pos + 2
        url: list[str] = []
        while pos < len(self.text) and self.text[pos] != ")":
            if self.text[pos] == "\\":
                pos += 1
            url.append(self.text[pos : pos + 1])
            pos += 1
        if pos >= len(self.text):
            raise MarkdownV2Error(f"Can't find end of a URL at byte offset {self._byte(self.pos)}")
        target = "".join(url)
        if not target.startswith(_LINK_SCHEMES):
            raise MarkdownV2Error(f"Wrong HTTP URL: {target!r}")
        self._add("text_link", start, url=target)
        self.pos = pos + 1

    def _close_quote(self) -> None:
        if self.quote_from is not None:
            self._add("blockquote", self.quote_from)
            self.quote_from = None

    def _emit(self, text: str) -> None:
        self.out.append(text)
        self.size += _utf16_len(text)

    def _add(self, kind: str, start: int, **extra: Any) -> None:
        if self.size > start:
            entity = {"type": kind, "offset": start, "length": self.size - start}
            entity.update({key: value for key, value in extra.items() if value is not None})
            self.entities.append(entity)

    def _byte(self, pos: int) -> int:
        return len(self.text[:pos].encode())

    def _unclosed(self, kind: str, pos: int) -> MarkdownV2Error:
        return MarkdownV2Error(f"Can't find end of {kind} entity at byte offset {self._byte(pos)}")


def _reserved(char: str) -> MarkdownV2Error:
    return MarkdownV2Error(
        f"Character '{char}' is reserved and must be escaped with the preceding '\\'"
    )


def parse_markdown_v2(text: str) -> tuple[str, list[dict[str, Any]]]:
    """The visible text and entities Telegram makes of ``text``; MarkdownV2Error if it refuses."""
    return _MarkdownV2Parser(text).parse()


_AUTO_ENTITY_RE = re.compile(r"(?P<command>^/\w+(?:@\w+)?)|(?P<mention>(?<![\w@])@\w{3,32})")


def auto_entities(text: str) -> list[dict[str, Any]]:
    """The ``bot_command`` and ``mention`` entities Telegram attaches to a user's text."""
    return [
        {
            "type": "bot_command" if match["command"] else "mention",
            "offset": _utf16_len(text[: match.start()]),
            "length": _utf16_len(match.group()),
        }
        for match in _AUTO_ENTITY_RE.finditer(text)
    ]


# ----------------------------------------------------------------------------------- the server


async def _read_params(request: web.Request) -> dict[str, Any]:
    """PTB posts form-encoded or multipart bodies, other clients JSON; all end up the same."""
    params: dict[str, Any] = {key: _decode(key, value) for key, value in request.query.items()}
    if request.content_type == "application/json":
        body = await request.text()
        params.update(json.loads(body) if body.strip() else {})
    elif request.content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
        form = await request.post()
        for key, value in form.items():
            is_text = isinstance(value, str)
            params[key] = _decode(key, value) if is_text else {
                "file": value.filename, "content_type": value.content_type, "data": value.file.read()}
    return params


def _decode(key: str, value: str) -> Any:
    if key in _JSON_PARAMS:
        return json.loads(value)
    if key in _INT_PARAMS and re.fullmatch(r"-?\d+", value):
        return int(value)
    if key in _BOOL_PARAMS:
        return value.lower() == "true"
    return value


class FakeTelegram:
    """The Bot API for one bot, served on a random port of 127.0.0.1 while the context is open."""

    def __init__(self, token: str = TOKEN, *, bot_username: str = BOT_USERNAME) -> None:
        self.token = token
        self.bot_user: dict[str, Any] = {
            "id": BOT_ID,
            "is_bot": True,
            "first_name": "Membridge",
            "username": bot_username,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }
        self.sent: list[dict[str, Any]] = []
        self.edits: list[dict[str, Any]] = []
        self.actions: list[dict[str, Any]] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.webhook: dict[str, Any] | None = None
        self.port = 0
        self._pending: list[dict[str, Any]] = []
        self._failures: dict[str, list[_ApiError]] = defaultdict(list)
        self._messages: dict[tuple[Any, int], dict[str, Any]] = {}
        self._chats: dict[int, dict[str, Any]] = {}
        self._next_update_id = 1000
        self._next_message_id = 1
        self._changed = asyncio.Event()
        self._closing = False
        self._runner: web.AppRunner | None = None
        self._methods: dict[str, Callable[[dict[str, Any]], Awaitable[Any]]] = {
            "getme": self._get_me,
            "getupdates": self._get_updates,
            "setwebhook": self._set_webhook,
            "deletewebhook": self._delete_webhook,
            "sendmessage": self._send_message,
            "editmessagetext": self._edit_message_text,
            "sendchataction": self._send_chat_action,
            "setmycommands": self._set_my_commands,
            "senddocument": self._send_document,
            "getfile": self._get_file,
        }
        self.files = FileHost()  # what getFile and the file endpoint serve, by file_path
        self._file_paths: dict[str, tuple[str, str]] = {}  # file_id -> (file_unique_id, file_path)
        self.documents: list[dict[str, Any]] = []  # sendDocument uploads, with the bytes received
        self.commands: list[dict[str, str]] | None = None  # the menu set by setMyCommands
        self.offsets: list[int | None] = []  # the ``offset`` of every getUpdates, in order
        self.fetched: set[int] = set()  # update_ids getUpdates has returned
        #: Awaited with a getUpdates call's offset before it confirms anything: a test's check of
        #: what the bot may confirm at that moment.
        self.on_poll: Callable[[int | None], Awaitable[None]] | None = None

    async def __aenter__(self) -> FakeTelegram:
        app = web.Application(client_max_size=MAX_UPLOAD + (1 << 20))
        app.router.add_route("*", "/bot{token}/{method}", self._handle)
        app.router.add_get("/file/bot{token}/{file_path:.+}", self._download)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._closing = True  # long polls answer at once instead of holding shutdown up
        self._changed.set()
        self.files.release()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def base_url(self) -> str:
        """In python-telegram-bot's form: the token is appended to it."""
        return f"http://127.0.0.1:{self.port}/bot"

    @property
    def base_file_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/file/bot"

    # ------------------------------------------------------------------------- scripting

    def fail_next(
        self,
        method: str,
        error_code: int,
        description: str,
        retry_after: float | None = None,
        times: int = 1,
    ) -> None:
        """The next ``times`` calls of ``method`` fail with this error instead of running."""
        error = _ApiError(error_code, description, retry_after)
        self._failures[method.lower()].extend([error] * times)

    def host_file(self, data: bytes, *, size: int | None = None, file_path: str | None = None) -> dict[str, Any]:
        """Serve ``data`` as a new file; the ``file_id``/``file_unique_id``/``file_size`` fields
        a message's voice, audio, photo size or document carries. ``size`` is what Telegram claims
        (by default the real length): a file over 20 MB is refused by getFile as Telegram does."""
        number = len(self._file_paths) + 1
        file_id, unique = f"BQACAgIAAx{number:06d}", f"AgAD{number:04d}"
        path = file_path or f"documents/file_{number}"
        self._file_paths[file_id] = (unique, path)
        hosted = self.files.add(path, data, size)
        return {"file_id": file_id, "file_unique_id": unique, "file_size": hosted.size}

    def push_update(self, update: dict[str, Any]) -> dict[str, Any]:
        """Queue ``update`` as it is; pushing the same dict twice delivers a duplicate update_id."""
        self._next_update_id = max(self._next_update_id, update["update_id"] + 1)
        self._pending.append(update)
        self._notify()
        return update

    def push_message(
        self, chat_id: int, user_id: int, fields: dict[str, Any], **kwargs: Any
    ) -> dict[str, Any]:
        return self.push_update(self.message_update(chat_id, user_id, fields, **kwargs))

    def push_text(self, chat_id: int, user_id: int, text: str, **kwargs: Any) -> dict[str, Any]:
        return self.push_update(self.text_update(chat_id, user_id, text, **kwargs))

    def push_photo(self, chat_id: int, user_id: int, **kwargs: Any) -> dict[str, Any]:
        return self.push_update(self.photo_update(chat_id, user_id, **kwargs))

    def text_update(
        self,
        chat_id: int,
        user_id: int,
        text: str,
        *,
        entities: list[dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """A text message; entities default to the commands and mentions Telegram would mark."""
        fields: dict[str, Any] = {"text": text}
        found = auto_entities(text) if entities is None else entities
        if found:
            fields["entities"] = found
        return self.message_update(chat_id, user_id, fields, **kwargs)

    def photo_update(
        self,
        chat_id: int,
        user_id: int,
        *,
        caption: str | None = None,
        caption_entities: list[dict[str, Any]] | None = None,
        media_group_id: str | None = None,
        photo: str = "",
        **kwargs: Any,
    ) -> dict[str, Any]:
        """A photo in two sizes (file ids ``p<photo><side>``); ``media_group_id`` makes it part of
        an album, as Telegram sends each photo of an album as its own message."""
        sizes = [
            {"file_id": f"p{photo}{side}", "file_unique_id": f"u{photo}{side}", "width": side, "height": side}
            for side in (90, 320)
        ]
        fields: dict[str, Any] = {"photo": sizes}
        if media_group_id is not None:
            fields["media_group_id"] = media_group_id
        if caption is not None:
            fields["caption"] = caption
            found = auto_entities(caption) if caption_entities is None else caption_entities
            if found:
                fields["caption_entities"] = found
        return self.message_update(chat_id, user_id, fields, **kwargs)

    def message_update(
        self,
        chat_id: int,
        user_id: int,
        fields: dict[str, Any],
        *,
        chat_type: str = "private",
        username: str | None = None,
        first_name: str = "Tester",
        edited: bool = False,
        reply_to_bot: bool = False,
        thread_id: int | None = None,
        message_id: int | None = None,
    ) -> dict[str, Any]:
        """An Update carrying a message (or an edit) with ``fields`` (text, photo, sticker, …)."""
        user: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": first_name}
        if username:
            user["username"] = username
        chat = self._chat(chat_id, chat_type, user, forum=thread_id is not None)
        message: dict[str, Any] = {
            "message_id": message_id if message_id is not None else self._new_message_id(),
            "date": int(time.time()),
            "chat": chat,
            "from": user,
            **fields,
        }
        if thread_id is not None:
            message.update(message_thread_id=thread_id, is_topic_message=True)
        if reply_to_bot:
            message["reply_to_message"] = self._bot_message_in(chat)
        if edited:
            message["edit_date"] = int(time.time())
        update_id = self._next_update_id
        self._next_update_id += 1
        return {"update_id": update_id, "edited_message" if edited else "message": message}

    async def wait_until(
        self, predicate: Callable[[], bool], timeout: float = HANG_GUARD_S, what: str = "it"
    ) -> None:
        """Return once ``predicate()`` holds; fail the test (not hang it) after ``timeout``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not predicate():
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}")
            self._changed.clear()
            try:  # woken by the fake's own activity; re-checked often for anything else
                await asyncio.wait_for(self._changed.wait(), min(remaining, 0.05))
            except TimeoutError:
                pass

    async def wait_confirmed(self, timeout: float = HANG_GUARD_S) -> None:
        """Return once the bot has fetched every pushed update and confirmed it (next ``offset``)."""
        await self.wait_until(lambda: not self._pending, timeout, "every update confirmed")

    async def wait_fetched(self, timeout: float = HANG_GUARD_S) -> None:
        """Return once getUpdates has returned every pushed update (confirmed or not)."""
        await self.wait_until(lambda: all(u["update_id"] in self.fetched for u in self._pending), timeout,
                              "every update fetched")

    async def wait_sent(self, n: int, timeout: float = HANG_GUARD_S) -> list[dict[str, Any]]:
        """The first ``n`` messages the bot sent, once there are that many."""
        await self.wait_until(lambda: len(self.sent) >= n, timeout, f"{n} sent message(s)")
        return self.sent[:n]

    async def wait_actions(self, n: int, timeout: float = HANG_GUARD_S) -> list[dict[str, Any]]:
        await self.wait_until(lambda: len(self.actions) >= n, timeout, f"{n} chat action(s)")
        return self.actions[:n]

    @staticmethod
    async def post_webhook(url: str, update: dict[str, Any], *, secret: str | None = None) -> int:
        """POST ``update`` to the bot's webhook like Telegram does; the HTTP status it answered."""
        headers = {"X-Telegram-Bot-Api-Secret-Token": secret} if secret is not None else {}
        async with ClientSession() as session, session.post(url, json=update, headers=headers) as response:
            return response.status

    # -------------------------------------------------------------------------- serving

    async def _handle(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return _ApiError(401, "Unauthorized").response()
        method = request.match_info["method"]
        params = await _read_params(request)
        self.calls.append((method, params))
        self._notify()
        failures = self._failures.get(method.lower())
        if failures:
            return failures.pop(0).response()
        handler = self._methods.get(method.lower(), self._harmless)
        try:
            result = await handler(params)
        except _ApiError as error:
            return error.response()
        return web.json_response({"ok": True, "result": result})

    async def _download(self, request: web.Request) -> web.StreamResponse:
        """The file endpoint: the bytes of a file_path getFile gave out, for this bot's token only."""
        authorized = request.match_info["token"] == self.token
        response = await self.files.serve(request, request.match_info["file_path"], authorized=authorized)
        self._notify()
        return response

    async def _get_file(self, params: dict[str, Any]) -> dict[str, Any]:
        file_id = str(params.get("file_id") or "")
        if file_id not in self._file_paths:
            raise _ApiError(400, "Bad Request: invalid file_id")
        unique, path = self._file_paths[file_id]
        hosted = self.files.files[path]
        if hosted.size > MAX_DOWNLOAD:
            raise _ApiError(400, "Bad Request: file is too big")
        return {"file_id": file_id, "file_unique_id": unique, "file_size": hosted.size, "file_path": path}

    async def _harmless(self, params: dict[str, Any]) -> bool:
        log.info("fake Telegram: %s answered with true", self.calls[-1][0])
        return True

    async def _set_my_commands(self, params: dict[str, Any]) -> bool:
        """Checked as Telegram does: 1-32 of a-z0-9_ per name, 1-256 characters per description."""
        commands = params.get("commands")
        if isinstance(commands, str):
            commands = json.loads(commands)
        if not isinstance(commands, list) or len(commands) > 100:
            raise _ApiError(400, "Bad Request: commands must be a list of at most 100 commands")
        for command in commands:
            name, description = command.get("command", ""), command.get("description", "")
            if not re.fullmatch(r"[a-z0-9_]{1,32}", name) or not 1 <= len(description) <= 256:
                raise _ApiError(400, "Bad Request: BOT_COMMAND_INVALID")
        self.commands = commands
        return True

    async def _get_me(self, params: dict[str, Any]) -> dict[str, Any]:
        return self.bot_user

    async def _set_webhook(self, params: dict[str, Any]) -> bool:
        self.webhook = params
        return True

    async def _delete_webhook(self, params: dict[str, Any]) -> bool:
        self.webhook = None
        return True

    async def _get_updates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        """Long poll: confirm what lies below ``offset``, answer as soon as anything is queued."""
        offset = params.get("offset")
        self.offsets.append(offset)
        if self.on_poll is not None:
            await self.on_poll(offset)
        limit = params.get("limit") or 100
        loop = asyncio.get_running_loop()
        deadline = loop.time() + float(params.get("timeout") or 0)
        while True:
            if offset is not None:
                self._pending = [u for u in self._pending if u["update_id"] >= offset]
            remaining = deadline - loop.time()
            if self._pending or remaining <= 0 or self._closing:
                self.fetched.update(u["update_id"] for u in self._pending[:limit])
                return self._pending[:limit]
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)

    async def _send_message(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = params.get("chat_id")
        if chat_id is None:
            raise _ApiError(400, "Bad Request: chat_id is empty")
        visible, entities = self._parse_text(params)
        message = self._bot_message(chat_id, visible, entities, params.get("message_thread_id"))
        reply = params.get("reply_parameters") or {}
        self.sent.append(
            {
                "chat_id": chat_id,
                "text": params["text"],
                "visible": visible,
                "parse_mode": params.get("parse_mode"),
                "entities": entities,
                "reply_to": reply.get("message_id", params.get("reply_to_message_id")),
                "message_thread_id": params.get("message_thread_id"),
                "message_id": message["message_id"],
            }
        )
        self._notify()
        return message

    async def _send_document(self, params: dict[str, Any]) -> dict[str, Any]:
        """A multipart upload, checked as Telegram does: a document, at most 50 MB, caption ≤ 1024."""
        chat_id = params.get("chat_id")
        document = params.get("document")
        if chat_id is None:
            raise _ApiError(400, "Bad Request: chat_id is empty")
        if not isinstance(document, dict):
            raise _ApiError(400, "Bad Request: there is no document in the request")
        if len(document["data"]) > MAX_UPLOAD:
            raise _ApiError(413, "Request Entity Too Large")
        if len(params.get("caption") or "") > MAX_CAPTION:
            raise _ApiError(400, "Bad Request: message caption is too long")
        message = self._bot_message(chat_id, "", [], params.get("message_thread_id"))
        del message["text"]
        message["document"] = {"file_id": f"doc{message['message_id']}", "file_unique_id": f"u{message['message_id']}",
                               "file_name": document["file"], "mime_type": document["content_type"],
                               "file_size": len(document["data"])}
        self.documents.append({"chat_id": chat_id, "filename": document["file"], "data": document["data"],
                               "content_type": document["content_type"], "caption": params.get("caption"),
                               "message_thread_id": params.get("message_thread_id")})
        self._notify()
        return message

    async def wait_documents(self, n: int, timeout: float = HANG_GUARD_S) -> list[dict[str, Any]]:
        """The first ``n`` documents the bot sent, once there are that many."""
        await self.wait_until(lambda: len(self.documents) >= n, timeout, f"{n} document(s)")
        return self.documents[:n]

    async def _edit_message_text(self, params: dict[str, Any]) -> dict[str, Any]:
        key = (params.get("chat_id"), params.get("message_id"))
        message = self._messages.get(key)
        if message is None:
            raise _ApiError(400, "Bad Request: message to edit not found")
        visible, entities = self._parse_text(params)
        if visible == message["text"] and entities == message.get("entities", []):
            raise _ApiError(
                400,
                "Bad Request: message is not modified: specified new message content and reply "
                "markup are exactly the same as a current content and reply markup of the message",
            )
        message.update(text=visible, entities=entities, edit_date=int(time.time()))
        self.edits.append({"chat_id": key[0], "message_id": key[1], "text": params["text"],
                           "visible": visible, "parse_mode": params.get("parse_mode")})
        self._notify()
        return message

    async def _send_chat_action(self, params: dict[str, Any]) -> bool:
        self.actions.append(
            {key: params.get(key) for key in ("chat_id", "action", "message_thread_id")}
        )
        self._notify()
        return True

    # --------------------------------------------------------------------------- helpers

    def _parse_text(self, params: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        text = params.get("text") or ""
        mode = params.get("parse_mode")
        if mode == "MarkdownV2":
            try:
                visible, entities = parse_markdown_v2(text)
            except MarkdownV2Error as error:
                raise _ApiError(400, f"Bad Request: can't parse entities: {error}") from error
        elif mode in (None, ""):
            visible, entities = text, list(params.get("entities") or [])
        else:
            raise _ApiError(400, f"Bad Request: parse_mode {mode!r} is not supported by the fake")
        if not visible.strip():
            raise _ApiError(400, "Bad Request: message text is empty")
        if len(visible) > MAX_TEXT:
            raise _ApiError(400, "Bad Request: message is too long")
        return visible, entities

    def _chat(
        self, chat_id: int, chat_type: str, user: dict[str, Any], *, forum: bool
    ) -> dict[str, Any]:
        if chat_type == "private":
            chat = {"id": chat_id, "type": "private", "first_name": user["first_name"]}
            if "username" in user:
                chat["username"] = user["username"]
        else:
            chat = {"id": chat_id, "type": chat_type, "title": "Test group"}
            if forum:
                chat["is_forum"] = True
        self._chats[chat_id] = chat
        return chat

    def _bot_message(
        self, chat_id: Any, text: str, entities: list[dict[str, Any]], thread_id: int | None
    ) -> dict[str, Any]:
        private = isinstance(chat_id, int) and chat_id > 0
        fallback = {"id": chat_id, "type": "private" if private else "supergroup"}
        message: dict[str, Any] = {
            "message_id": self._new_message_id(),
            "date": int(time.time()),
            "chat": self._chats.get(chat_id, fallback),
            "from": self.bot_user,
            "text": text,
        }
        if entities:
            message["entities"] = entities
        if thread_id is not None:
            message.update(message_thread_id=thread_id, is_topic_message=True)
        self._messages[(chat_id, message["message_id"])] = message
        return message

    def _bot_message_in(self, chat: dict[str, Any]) -> dict[str, Any]:
        """The bot's latest message in ``chat`` (one is invented if it never spoke there)."""
        for (chat_id, _), message in reversed(self._messages.items()):
            if chat_id == chat["id"]:
                return message
        return self._bot_message(chat["id"], "An earlier answer.", [], None)

    def _new_message_id(self) -> int:
        self._next_message_id += 1
        return self._next_message_id

    def _notify(self) -> None:
        self._changed.set()
