"""The LLM client: the official ``openai`` async client against any OpenAI-compatible base_url.

Streaming answers and tool calls are assembled from their deltas here, so the agent sees one
complete assistant message. The client's own retries (backoff that honours ``retry-after`` on 429
and 5xx) are used; what still fails becomes an :class:`LLMError` whose message says what went wrong
and never contains the API key.
"""

from __future__ import annotations

import json
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .config import LLMSettings
from .ops import metrics
from .redaction import redact

if TYPE_CHECKING:  # imported where used: ``import openai`` takes over a second, and most commands never call it
    import openai

log = logging.getLogger(__name__)

Message = dict[str, Any]


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text as the model wrote it; may be invalid

    def to_message_part(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True)
class Usage:
    """A request's tokens: the server's ``usage``, or (``estimated``) a guess from the characters."""

    prompt_tokens: int
    completion_tokens: int
    estimated: bool = False


CHARS_PER_TOKEN = 4  # the usual rough figure for English; only used when a server reports no usage


def estimate_usage(messages: Sequence[Message], answer: str, tool_calls: Sequence[ToolCall]) -> Usage:
    """What a request cost, guessed from its characters, for servers that send no ``usage``."""
    sent = len(json.dumps(list(messages), ensure_ascii=False))
    received = len(answer) + sum(len(call.name) + len(call.arguments) for call in tool_calls)
    return Usage(-(-sent // CHARS_PER_TOKEN), -(-received // CHARS_PER_TOKEN), estimated=True)


@dataclass
class LLMResponse:
    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None
    elapsed_s: float = 0.0  # how long the request took

    def to_message(self) -> Message:
        message: Message = {"role": "assistant", "content": self.content or None}
        if self.tool_calls:
            message["tool_calls"] = [call.to_message_part() for call in self.tool_calls]
        return message


class LLMError(RuntimeError):
    """The LLM could not answer. ``kind`` is one of: config, unreachable, auth, model, context_length,
    rate_limit, server, bad_response."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class ContextLengthExceeded(LLMError):
    def __init__(self, message: str) -> None:
        super().__init__("context_length", message)


NOT_CONFIGURED = ("no LLM is configured: set OPENAI_API_KEY, or llm.base_url (and llm.model) in config.yaml for "
                  "an OpenAI-compatible server, e.g. Ollama at http://localhost:11434/v1")


class LLMClient(ABC):
    """One chat completion: messages (and tool schemas) in, one assistant message out."""

    @abstractmethod
    async def complete(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]] = ()) -> LLMResponse: ...

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""


class OpenAIChat(LLMClient):
    def __init__(self, settings: LLMSettings) -> None:
        import openai

        self.settings = settings
        self._client = openai.AsyncOpenAI(
            base_url=settings.base_url,
            api_key=settings.api_key or "not-set",
            timeout=settings.timeout_s,
            max_retries=settings.max_retries,
        )

    async def close(self) -> None:
        await self._client.close()

    async def complete(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]] = ()) -> LLMResponse:
        if not self.settings.base_url and not self.settings.api_key:
            raise LLMError("config", NOT_CONFIGURED)
        kwargs: dict[str, Any] = {"model": self.settings.model, "messages": list(messages)}
        if tools:
            kwargs["tools"] = list(tools)
        if self.settings.temperature is not None:
            kwargs["temperature"] = self.settings.temperature
        started = time.perf_counter()
        try:
            response = await self._request(kwargs)
        except LLMError as exc:
            metrics.observe_model(self.settings.model, exc.kind, time.perf_counter() - started)
            raise
        response.elapsed_s = time.perf_counter() - started
        if response.usage is None:
            response.usage = estimate_usage(messages, response.content, response.tool_calls)
        metrics.observe_model(self.settings.model, "ok", response.elapsed_s)
        usage = response.usage
        metrics.observe_tokens(self.settings.model, usage.prompt_tokens, usage.completion_tokens, estimated=usage.estimated)
        return response

    async def _request(self, kwargs: dict[str, Any]) -> LLMResponse:
        """One request, streamed or not; every failure as an :class:`LLMError`."""
        import openai

        try:
            if self.settings.stream:
                return await self._streamed(kwargs)
            return _from_completion(await self._post(kwargs, stream=False))
        except openai.APIError as exc:
            raise self._translate(exc) from None
        except (json.JSONDecodeError, ValueError, KeyError, IndexError, TypeError) as exc:
            raise LLMError("bad_response", f"the LLM server sent a response that is not valid OpenAI JSON ({type(exc).__name__})") from None

    async def _post(self, kwargs: dict[str, Any], *, stream: bool) -> Any:
        """``chat.completions.create`` without the SDK's walk of every message and tool schema against
        its typed parameters before each call (~4 ms of CPU with a short history and the memory tools,
        the largest cost of a turn besides waiting; bench/README.md "Cluster"). Our messages and schemas
        are plain JSON in the wire format already, so they go as they are, through the same client
        (retries, timeouts, errors and response parsing unchanged)."""
        from openai import AsyncStream
        from openai.types.chat import ChatCompletion, ChatCompletionChunk

        body = {**kwargs, "stream": True} if stream else kwargs
        if stream and self.settings.stream_usage:
            body["stream_options"] = {"include_usage": True}
        return await self._client.post("/chat/completions", body=body, cast_to=ChatCompletion, stream=stream,
                                       stream_cls=AsyncStream[ChatCompletionChunk])

    async def _streamed(self, kwargs: dict[str, Any]) -> LLMResponse:
        stream = await self._post(kwargs, stream=True)
        content: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        finish: str | None = None
        usage: Usage | None = None
        async for chunk in stream:
            if chunk.usage is not None:  # the last chunk, when the server honours include_usage
                usage = Usage(chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
            if not chunk.choices:
                continue
            choice = chunk.choices[0]
            delta = choice.delta
            if delta is not None and delta.content:
                content.append(delta.content)
            for part in (delta.tool_calls or []) if delta is not None else []:
                slot = calls.setdefault(part.index, {"id": "", "name": "", "arguments": []})
                if part.id:
                    slot["id"] = part.id
                if part.function is not None:
                    if part.function.name:
                        slot["name"] = part.function.name
                    if part.function.arguments:
                        slot["arguments"].append(part.function.arguments)
            if choice.finish_reason:
                finish = choice.finish_reason
        tool_calls = [
            ToolCall(slot["id"] or f"call_{index}", slot["name"], "".join(slot["arguments"]))
            for index, slot in sorted(calls.items())
        ]
        return LLMResponse("".join(content), tool_calls, finish, usage)

    def _translate(self, exc: openai.APIError) -> LLMError:
        import openai

        where = self.settings.base_url or "the OpenAI API"
        detail = redact(getattr(exc, "message", None) or str(exc), self.settings.api_key)
        if isinstance(exc, openai.APITimeoutError):
            return LLMError("unreachable", f"the LLM at {where} did not answer within {self.settings.timeout_s:.0f}s")
        if isinstance(exc, openai.APIConnectionError):
            return LLMError("unreachable", f"cannot reach the LLM at {where}; check llm.base_url and that the server runs")
        if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
            return LLMError("auth", f"the LLM at {where} rejected the API key (llm.api_key): {detail}")
        if isinstance(exc, openai.NotFoundError):
            return LLMError("model", f"model {self.settings.model!r} was not found at {where} (llm.model): {detail}")
        if isinstance(exc, openai.RateLimitError):
            return LLMError("rate_limit", f"the LLM at {where} is rate-limiting us: {detail}")
        if isinstance(exc, openai.BadRequestError) and _is_context_error(exc):
            return ContextLengthExceeded(f"the conversation is too long for {self.settings.model}: {detail}")
        if isinstance(exc, openai.APIStatusError) and exc.status_code >= 500:
            return LLMError("server", f"the LLM at {where} failed with HTTP {exc.status_code}: {detail}")
        if isinstance(exc, openai.APIStatusError):
            return LLMError("bad_response", f"the LLM at {where} refused the request (HTTP {exc.status_code}): {detail}")
        return LLMError("bad_response", f"the LLM at {where} sent an unusable response: {detail}")


def _is_context_error(exc: openai.BadRequestError) -> bool:
    code = getattr(exc, "code", None)
    text = (getattr(exc, "message", "") or "").lower()
    return code == "context_length_exceeded" or "context length" in text or "maximum context" in text or "too long" in text


def _from_completion(response: Any) -> LLMResponse:
    choice = response.choices[0]
    message = choice.message
    calls = [ToolCall(c.id, c.function.name, c.function.arguments or "") for c in (message.tool_calls or [])]
    usage = getattr(response, "usage", None)
    counted = Usage(usage.prompt_tokens, usage.completion_tokens) if usage is not None else None
    return LLMResponse(message.content or "", calls, choice.finish_reason, counted)


MODELS_SHOWN = 20  # of the server's models, in a "model not found" message


def probe_llm(settings: LLMSettings, timeout_s: float = 10.0) -> str:
    """A cheap check for ``doctor`` (GET /models): the server answers and has ``llm.model``, or why not."""
    if not settings.base_url and not settings.api_key:
        raise RuntimeError(NOT_CONFIGURED)
    import openai

    client = openai.OpenAI(base_url=settings.base_url, api_key=settings.api_key or "not-set", timeout=timeout_s,
                           max_retries=0)
    try:
        models = [m.id for m in client.models.list().data]
    except openai.APIError as exc:
        raise RuntimeError(OpenAIChat(settings)._translate(exc).args[0]) from None
    finally:
        client.close()
    where = settings.base_url or "the OpenAI API"
    if not models:
        return f"{where} reachable; it lists no models, so llm.model {settings.model!r} could not be checked"
    if settings.model not in models:  # every chat would fail with "model not found"
        more = len(models) - MODELS_SHOWN
        shown = ", ".join(sorted(models)[:MODELS_SHOWN]) + (f" and {more} more" if more > 0 else "")
        raise RuntimeError(f"{where} has no model {settings.model!r} (llm.model); it has: {shown}")
    return f"{where} reachable, model {settings.model!r}"
