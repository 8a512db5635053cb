"""A scriptable, in-process stand-in for the OpenAI HTTP API.

Tests talk to it with the *real* ``openai`` client, so the bot's retry,
streaming and error-handling code is exercised against the actual wire
protocol instead of against mocks of the client library.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import hashlib
import itertools
import json
import math
import re
import socket
import struct
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from aiohttp import web

from .openai_audio import FakeTranscriptions

__all__ = [
    "Embedder",
    "FakeOpenAI",
    "Responder",
    "ToolArguments",
    "error_envelope",
    "hashed_embedding",
]

ToolArguments = dict[str, Any] | str
ResponderResult = str | dict[str, Any] | None
Responder = Callable[[dict[str, Any]], ResponderResult]
Embedder = Callable[[str], list[float]]

MISSING_MODEL = "missing-model"
DEFAULT_REPLY = "ok"
LISTED_MODEL = "fake-model"

# A 200 body that is cut off mid-object, like a truncated proxy response.
_BROKEN_JSON = '{"id": "chatcmpl-broken", "choices": ['

# Roughly token-sized pieces: a word (with its leading space) cut to <= 5 chars.
_TOKEN = re.compile(r"\s*\S{1,5}|\s+")

# status -> (message, type, param, code), mirroring what the real API sends.
_DEFAULT_ERRORS: dict[int, tuple[str, str, str | None, str | None]] = {
    400: (
        "This model's maximum context length is 128000 tokens. However, your "
        "messages resulted in 130000 tokens. Please reduce the length of the messages.",
        "invalid_request_error",
        "messages",
        "context_length_exceeded",
    ),
    401: ("Incorrect API key provided.", "invalid_request_error", None, "invalid_api_key"),
    403: ("You are not allowed to access this resource.", "invalid_request_error", None, None),
    404: (
        "The model does not exist or you do not have access to it.",
        "invalid_request_error",
        None,
        "model_not_found",
    ),
    429: ("Rate limit reached for requests.", "requests", None, "rate_limit_exceeded"),
    500: ("The server had an error while processing your request.", "server_error", None, None),
    503: ("The engine is currently overloaded, please try again later.", "server_error", None, None),
}


def error_envelope(
    message: str, *, type: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """Build OpenAI's error body; the client reads ``code``/``type`` from exactly this shape."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def _default_error_body(status: int) -> dict[str, Any]:
    """Pick a realistic error body so tests need not spell one out for common statuses."""
    generic_type = "server_error" if status >= 500 else "invalid_request_error"
    message, kind, param, code = _DEFAULT_ERRORS.get(
        status, (f"Fake OpenAI error {status}.", generic_type, None, None)
    )
    return error_envelope(message, type=kind, param=param, code=code)


def _to_float32(values: list[float]) -> list[float]:
    """Round to float32 so the float and base64 encodings carry identical numbers."""
    packed = struct.pack(f"<{len(values)}f", *values)
    return list(struct.unpack(f"<{len(values)}f", packed))


def hashed_embedding(text: str, *, dim: int) -> list[float]:
    """Deterministic unit vector for ``text``: stable across runs, no model needed."""
    digest = hashlib.shake_256(text.encode("utf-8")).digest(dim * 4)
    raw = [
        int.from_bytes(digest[i : i + 4], "little") / 2**31 - 1.0
        for i in range(0, dim * 4, 4)
    ]
    norm = math.sqrt(sum(x * x for x in raw)) or 1.0
    return _to_float32([x / norm for x in raw])


def _encode_embedding(vector: list[float], encoding_format: str) -> list[float] | str:
    """Base64 is little-endian float32 bytes, which is what the client decodes."""
    if encoding_format == "float":
        return vector
    packed = struct.pack(f"<{len(vector)}f", *vector)
    return base64.b64encode(packed).decode("ascii")


def _pieces(text: str) -> list[str]:
    """Split text into token-like chunks so streams have many small deltas."""
    return _TOKEN.findall(text)


def _count_tokens(text: str) -> int:
    """Cheap, deterministic token estimate for ``usage`` fields."""
    return len(_pieces(text))


def _sse(payload: dict[str, Any]) -> bytes:
    """Frame one event the way OpenAI does: a single ``data:`` line plus a blank line."""
    return f"data: {json.dumps(payload, separators=(',', ':'))}\n\n".encode()


#: The biggest request body taken, as OpenAI takes audio files up to 25 MB (aiohttp: 1 MiB).
MAX_UPLOAD = 26 * 2**20


@dataclass(frozen=True)
class _ToolCall:
    """One function call inside an assistant message; ``arguments`` is sent verbatim."""

    id: str
    name: str
    arguments: str

    def as_message_json(self) -> dict[str, Any]:
        """Shape used in non-streamed ``message.tool_calls``."""
        function = {"name": self.name, "arguments": self.arguments}
        return {"id": self.id, "type": "function", "function": function}

    def stream_deltas(self, index: int) -> Iterator[dict[str, Any]]:
        """Header delta first, then argument fragments keyed only by ``index``."""
        head = {"index": index, "id": self.id, "type": "function"}
        head["function"] = {"name": self.name, "arguments": ""}
        yield {"tool_calls": [head]}
        for piece in _pieces(self.arguments):
            yield {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}


@dataclass(frozen=True)
class _Answer:
    """A successful assistant turn (text, tool calls, or both)."""

    content: str | None
    tool_calls: tuple[_ToolCall, ...] = ()

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.tool_calls else "stop"

    def completion_tokens(self) -> int:
        args = "".join(call.arguments for call in self.tool_calls)
        return _count_tokens((self.content or "") + args)


@dataclass(frozen=True)
class _Failure:
    """A scripted HTTP error."""

    status: int
    retry_after: float | None = None
    body: dict[str, Any] | None = None

    def response(self) -> web.Response:
        headers = {} if self.retry_after is None else {"retry-after": f"{self.retry_after:g}"}
        body = self.body if self.body is not None else _default_error_body(self.status)
        return web.json_response(body, status=self.status, headers=headers)


@dataclass(frozen=True)
class _Garbage:
    """A 200 whose body cannot be parsed, to test defensive decoding."""


_ChatAction = _Answer | _Failure | _Garbage


def _error(status: int, message: str, *, code: str | None = None, param: str | None = None) -> web.Response:
    """Error response in OpenAI's envelope for problems the fake detects itself."""
    kind = "server_error" if status >= 500 else "invalid_request_error"
    body = error_envelope(message, type=kind, param=param, code=code)
    return web.json_response(body, status=status)


def _embedding_inputs(raw: object) -> list[str] | None:
    """Normalise ``input`` (str, list of str, or token arrays) to one string per vector."""
    if isinstance(raw, str):
        return [raw]
    if not isinstance(raw, list) or not raw:
        return None
    if all(isinstance(item, int) for item in raw):
        return [json.dumps(raw)]
    if all(isinstance(item, (str, list)) for item in raw):
        return [item if isinstance(item, str) else json.dumps(item) for item in raw]
    return None


@dataclass
class _Queues:
    """Scripted behaviour, consumed one entry per request."""

    chat: deque[_ChatAction] = field(default_factory=deque)
    delays: deque[float] = field(default_factory=deque)
    embed_failures: deque[_Failure] = field(default_factory=deque)


class FakeOpenAI:
    """Scriptable OpenAI-compatible server.

    Chat requests consume, in order: the scripted queue (``reply``, ``tool_call``,
    ``fail``, ``garbage``), then ``responder``, then the default text ``"ok"``.
    Auth and ``missing-model`` checks happen before the queue is touched, so a
    rejected request never eats a scripted answer. ``requests``/``embed_requests``
    record every parsed body, rejected and failed ones included, so tests can
    count client retries. ``hang`` applies to chat requests only.
    """

    def __init__(
        self, *, api_key: str = "test-key", embed_dim: int = 16, max_embed_batch: int = 2048
    ) -> None:
        self.api_key = api_key
        self.embed_dim = embed_dim
        self.max_embed_batch = max_embed_batch
        self.responder: Responder | None = None
        self.embedder: Embedder = functools.partial(hashed_embedding, dim=embed_dim)
        self.requests: list[dict[str, Any]] = []
        self.embed_requests: list[dict[str, Any]] = []
        self.latency_s = 0.0  # every chat request takes this long (a model's think time), concurrently
        self._holds: list[tuple[Callable[[dict[str, Any]], bool], asyncio.Event, asyncio.Event | None]] = []
        self._queues = _Queues()
        self._call_ids = itertools.count(1)
        self._completion_ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._closing = asyncio.Event()
        self._arrivals = asyncio.Condition()
        #: ``/audio/transcriptions``: script it with ``audio.transcript``/``audio.fail``, read ``audio.requests``.
        self.audio = FakeTranscriptions(self._auth_error, lambda status, retry: _Failure(status, retry).response())

    # ----------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Bind an OS-chosen port on loopback so parallel tests never collide."""
        if self._runner is not None:
            raise RuntimeError("FakeOpenAI is already running")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self._port = sock.getsockname()[1]
        self._closing = asyncio.Event()
        # handler_cancellation: a client that times out abandons its request,
        # so a hung handler is cancelled instead of delaying shutdown.
        runner = web.AppRunner(self._app(), access_log=None, shutdown_timeout=0.5, handler_cancellation=True)
        await runner.setup()
        await web.SockSite(runner, sock).start()
        self._runner = runner

    async def stop(self) -> None:
        """Release hung handlers first so shutdown is quick even mid-``hang``."""
        if self._runner is None:
            return
        self._closing.set()
        runner, self._runner = self._runner, None
        await runner.cleanup()

    async def __aenter__(self) -> FakeOpenAI:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    @property
    def base_url(self) -> str:
        """URL to pass as ``base_url`` to ``openai.OpenAI``/``AsyncOpenAI``."""
        if self._runner is None or self._port is None:
            raise RuntimeError("FakeOpenAI is not running; call start() first")
        return f"http://127.0.0.1:{self._port}/v1"

    def _app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_UPLOAD)
        app.router.add_post("/v1/chat/completions", self._handle_chat)
        app.router.add_post("/v1/embeddings", self._handle_embeddings)
        app.router.add_get("/v1/models", self._handle_models)
        app.router.add_post("/v1/audio/transcriptions", self.audio.handle)
        return app

    # ----------------------------------------------------------------- scripting

    def reply(self, text: str) -> None:
        """Queue a plain assistant answer."""
        self._queues.chat.append(_Answer(content=text))

    def tool_call(self, name: str, arguments: ToolArguments, *, call_id: str | None = None) -> None:
        """Queue an assistant message calling one tool; str arguments go out raw (bad JSON allowed)."""
        call = self._make_call(name, arguments, call_id=call_id)
        self._queues.chat.append(_Answer(content=None, tool_calls=(call,)))

    def tool_calls(self, calls: list[tuple[str, ToolArguments]]) -> None:
        """Queue one assistant message with several parallel tool calls."""
        made = tuple(self._make_call(name, arguments) for name, arguments in calls)
        self._queues.chat.append(_Answer(content=None, tool_calls=made))

    def fail(
        self,
        status: int,
        *,
        retry_after: float | None = None,
        body: dict[str, Any] | None = None,
        times: int = 1,
    ) -> None:
        """Queue ``times`` HTTP errors; ``body`` (if given) replaces the whole JSON body."""
        self._queues.chat.extend(_Failure(status, retry_after, body) for _ in range(self._check_times(times)))

    def hang(self, seconds: float) -> None:
        """Delay the next chat request (before it is answered) to provoke client timeouts."""
        self._queues.delays.append(seconds)

    def hold_first(self, predicate: Callable[[dict[str, Any]], bool],
                   release: asyncio.Event | None = None) -> asyncio.Event:
        """The first chat request matching ``predicate`` is not answered until ``release`` is set (never,
        without one: its client may time out or die waiting, a turn caught mid-way); the event returned
        is set when it arrives."""
        arrived = asyncio.Event()
        self._holds.append((predicate, arrived, release))
        return arrived

    def garbage(self) -> None:
        """Queue a 200 response whose body is not valid JSON."""
        self._queues.chat.append(_Garbage())

    def fail_embeddings(self, status: int, *, times: int = 1, retry_after: float | None = None) -> None:
        """Queue ``times`` HTTP errors for the embeddings endpoint only."""
        failures = (_Failure(status, retry_after) for _ in range(self._check_times(times)))
        self._queues.embed_failures.extend(failures)

    @staticmethod
    def _check_times(times: int) -> int:
        if times < 1:
            raise ValueError("times must be >= 1")
        return times

    def _make_call(self, name: str, arguments: ToolArguments, *, call_id: str | None = None) -> _ToolCall:
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments, separators=(",", ":"))
        return _ToolCall(id=call_id or f"call_{next(self._call_ids):024d}", name=name, arguments=raw)

    # ----------------------------------------------------------------- shared checks

    async def _read_body(self, request: web.Request) -> dict[str, Any] | web.Response:
        """Parse the JSON body, answering 400 like OpenAI when it is malformed."""
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error(400, "We could not parse the JSON body of your request.")
        if not isinstance(body, dict):
            return _error(400, "The request body must be a JSON object.")
        return body

    def _auth_error(self, request: web.Request) -> web.Response | None:
        if request.headers.get("Authorization") == f"Bearer {self.api_key}":
            return None
        return _Failure(401).response()

    def _reject(self, request: web.Request, body: dict[str, Any]) -> web.Response | None:
        """Checks the real API makes before doing any work."""
        auth = self._auth_error(request)
        if auth is not None:
            return auth
        if body.get("model") == MISSING_MODEL:
            message = f"The model `{MISSING_MODEL}` does not exist or you do not have access to it."
            return _error(404, message, code="model_not_found")
        return None

    @property
    def images(self) -> list[str]:
        """The URL of every image content part the chat requests carried, in order of arrival."""
        return [part["image_url"]["url"] for body in self.requests for message in body.get("messages", [])
                if isinstance(message.get("content"), list)
                for part in message["content"] if part.get("type") == "image_url"]

    async def wait_for_chat(self, wanted: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The first chat request, already received or still to come, for which ``wanted`` holds.

        Woken by each arriving request, so a test waits on the request itself, not on a clock
        (the caller bounds it with ``asyncio.wait_for(..., HANG_GUARD_S)``)."""
        async with self._arrivals:
            await self._arrivals.wait_for(lambda: any(wanted(body) for body in self.requests))
        return next(body for body in self.requests if wanted(body))

    # ----------------------------------------------------------------- chat

    async def _handle_chat(self, request: web.Request) -> web.StreamResponse:
        body = await self._read_body(request)
        if isinstance(body, web.Response):
            return body
        self.requests.append(body)
        async with self._arrivals:
            self._arrivals.notify_all()
        rejection = self._reject(request, body)
        if rejection is not None:
            return rejection
        await self._pause()
        await self._held(body)
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        action = self._next_chat_action(body)
        if isinstance(action, _Failure):
            return action.response()
        if isinstance(action, _Garbage):
            return await self._garbage_response(request, body)
        if body.get("stream"):
            return await self._stream(request, body, action)
        return web.json_response(self._completion(body, action))

    async def _pause(self) -> None:
        if not self._queues.delays:
            return
        seconds = self._queues.delays.popleft()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closing.wait(), seconds)

    async def _held(self, body: dict[str, Any]) -> None:
        for predicate, arrived, release in self._holds:
            if not arrived.is_set() and predicate(body):
                arrived.set()
                waits = [asyncio.ensure_future(event.wait()) for event in (release, self._closing) if event]
                try:  # until released, the server stops, or the client leaves (cancelled)
                    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for wait in waits:
                        wait.cancel()

    def _next_chat_action(self, body: dict[str, Any]) -> _ChatAction:
        if self._queues.chat:
            return self._queues.chat.popleft()
        result = self.responder(body) if self.responder is not None else None
        return self._answer_from(result)

    def _answer_from(self, result: ResponderResult) -> _Answer:
        """Turn a responder's return value into an answer; ``None`` means the default."""
        if result is None:
            return _Answer(content=DEFAULT_REPLY)
        if isinstance(result, str):
            return _Answer(content=result)
        calls = tuple(self._make_call(name, args) for name, args in result.get("tool_calls", []))
        return _Answer(content=result.get("content"), tool_calls=calls)

    async def _garbage_response(self, request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        """Broken JSON in whichever framing the client expects."""
        if not body.get("stream"):
            return web.Response(status=200, text=_BROKEN_JSON, content_type="application/json")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
        await response.prepare(request)
        await response.write(f"data: {_BROKEN_JSON}\n\n".encode())
        await response.write_eof()
        return response

    def _envelope(self, body: dict[str, Any], kind: str) -> dict[str, Any]:
        """Fields shared by completions and every chunk of one stream."""
        return {
            "id": f"chatcmpl-fake{next(self._completion_ids):06d}",
            "object": kind,
            "created": int(time.time()),
            "model": body.get("model", ""),
            "system_fingerprint": "fp_fake",
        }

    def _usage(self, body: dict[str, Any], answer: _Answer) -> dict[str, int]:
        prompt = _count_tokens(json.dumps(body.get("messages", [])))
        completion = answer.completion_tokens()
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def _completion(self, body: dict[str, Any], answer: _Answer) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": answer.content, "refusal": None}
        if answer.tool_calls:
            message["tool_calls"] = [call.as_message_json() for call in answer.tool_calls]
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": answer.finish_reason}
        usage = self._usage(body, answer)
        return {**self._envelope(body, "chat.completion"), "choices": [choice], "usage": usage}

    async def _stream(
        self, request: web.Request, body: dict[str, Any], answer: _Answer
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        for chunk in self._chunks(body, answer):
            await response.write(_sse(chunk))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    def _chunks(self, body: dict[str, Any], answer: _Answer) -> Iterator[dict[str, Any]]:
        """Role delta, content deltas, tool-call deltas, finish chunk, optional usage chunk."""
        base = self._envelope(body, "chat.completion.chunk")
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        if include_usage:
            base["usage"] = None  # the real API sends an explicit null until the last chunk

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            return {**base, "choices": [choice]}

        yield chunk({"role": "assistant", "content": "", "refusal": None})
        for piece in _pieces(answer.content or ""):
            yield chunk({"content": piece})
        for index, call in enumerate(answer.tool_calls):
            yield from (chunk(delta) for delta in call.stream_deltas(index))
        yield chunk({}, answer.finish_reason)
        if include_usage:
            yield {**base, "choices": [], "usage": self._usage(body, answer)}

    # ----------------------------------------------------------------- embeddings

    async def _handle_embeddings(self, request: web.Request) -> web.Response:
        body = await self._read_body(request)
        if isinstance(body, web.Response):
            return body
        self.embed_requests.append(body)
        rejection = self._reject(request, body)
        if rejection is not None:
            return rejection
        if self._queues.embed_failures:
            return self._queues.embed_failures.popleft().response()
        return self._embeddings_response(body)

    def _embeddings_response(self, body: dict[str, Any]) -> web.Response:
        inputs = _embedding_inputs(body.get("input"))
        if inputs is None:
            return _error(400, "'input' must be a non-empty string or array.", param="input")
        if len(inputs) > self.max_embed_batch:
            message = f"'input' must have at most {self.max_embed_batch} elements, got {len(inputs)}."
            return _error(400, message, param="input")
        encoding_format = body.get("encoding_format") or "float"
        if encoding_format not in ("float", "base64"):
            return _error(400, f"Invalid encoding_format {encoding_format!r}.", param="encoding_format")
        vectors = [_encode_embedding(self.embedder(text), encoding_format) for text in inputs]
        data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
        tokens = sum(_count_tokens(text) for text in inputs)
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        payload = {"object": "list", "data": data, "model": body.get("model", ""), "usage": usage}
        return web.json_response(payload)

    # ----------------------------------------------------------------- models

    async def _handle_models(self, request: web.Request) -> web.Response:
        auth = self._auth_error(request)
        if auth is not None:
            return auth
        model = {"id": LISTED_MODEL, "object": "model", "created": 0, "owned_by": "membridge-tests"}
        return web.json_response({"object": "list", "data": [model]})
