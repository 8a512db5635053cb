"""Checks that FakeOpenAI is faithful enough for the real ``openai`` client.

If these break after an ``openai`` upgrade, the fake (not the bot) needs
updating, which is why they drive the official client rather than raw HTTP.
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import struct
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
import pytest_asyncio

from .openai_server import FakeOpenAI, hashed_embedding

pytestmark = pytest.mark.asyncio

API_KEY = "test-key"
EMBED_DIM = 8
MODEL = "gpt-test"
USER_MESSAGE: list[Any] = [{"role": "user", "content": "hi"}]


@pytest_asyncio.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(api_key=API_KEY, embed_dim=EMBED_DIM) as server:
        yield server


@pytest_asyncio.fixture
async def client(fake: FakeOpenAI) -> AsyncIterator[openai.AsyncOpenAI]:
    """No retries by default so error tests see the first failure immediately."""
    async with openai.AsyncOpenAI(api_key=API_KEY, base_url=fake.base_url, max_retries=0, timeout=5.0) as c:
        yield c


async def _chat(client: openai.AsyncOpenAI, **kwargs: Any) -> Any:
    return await client.chat.completions.create(model=MODEL, messages=USER_MESSAGE, **kwargs)


async def _stream_chunks(client: openai.AsyncOpenAI, **kwargs: Any) -> list[Any]:
    stream = await _chat(client, stream=True, **kwargs)
    return [chunk async for chunk in stream]


def _decode_base64(encoded: str) -> list[float]:
    raw = base64.b64decode(encoded)
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


# --------------------------------------------------------------------- chat


async def test_non_streamed_reply(fake: FakeOpenAI, client: openai.AsyncOpenAI) -> None:
    fake.reply("Hello from the fake.")
    completion = await _chat(client)
    choice = completion.choices[0]
    assert choice.message.content == "Hello from the fake."
    assert choice.finish_reason == "stop"
    assert completion.usage is not None and completion.usage.total_tokens > 0
    assert fake.requests == [{"model": MODEL, "messages": USER_MESSAGE}]


async def test_sync_client_reply(fake: FakeOpenAI) -> None:
    """The sync client blocks, so it runs in a thread while the loop serves it."""

    def call() -> str | None:
        with openai.OpenAI(api_key=API_KEY, base_url=fake.base_url, max_retries=0, timeout=5.0) as c:
            completion = c.chat.completions.create(model=MODEL, messages=USER_MESSAGE)
            return completion.choices[0].message.content

    fake.reply("sync works")
    assert await asyncio.to_thread(call) == "sync works"


async def test_default_and_responder(fake: FakeOpenAI, client: openai.AsyncOpenAI) -> None:
    assert (await _chat(client)).choices[0].message.content == "ok"
    fake.responder = lambda body: f"echo: {body['messages'][-1]['content']}"
    assert (await _chat(client)).choices[0].message.content == "echo: hi"
    fake.responder = lambda body: {"tool_calls": [("lookup", {"q": "x"})]}
    call = (await _chat(client)).choices[0].message.tool_calls[0]
    assert (call.function.name, json.loads(call.function.arguments)) == ("lookup", {"q": "x"})


async def test_streamed_reply_reassembles(fake: FakeOpenAI, client: openai.AsyncOpenAI) -> None:
    text = "The quick brown fox jumps over the extraordinarily lazy dog."
    fake.reply(text)
    chunks = await _stream_chunks(client)
    first = chunks[0].choices[0].delta
    assert (first.role, first.content) == ("assistant", "")
    pieces = [c.choices[0].delta.content for c in chunks[1:] if c.choices[0].delta.content]
    assert len(pieces) > 5
    assert "".join(pieces) == text
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert fake.requests[0]["stream"] is True


async def test_streamed_usage_chunk(fake: FakeOpenAI, client: openai.AsyncOpenAI) -> None:
    fake.reply("counted")
    chunks = await _stream_chunks(client, stream_options={"include_usage": True})
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    assert all(c.usage is None for c in chunks[:-1])


async def test_streamed_tool_call_reassembles(fake: FakeOpenAI, client: openai.AsyncOpenAI) -> None:
    arguments = {"query": "favourite colour of the user", "limit": 3}
    fake.tool_call("search_memory", arguments, call_id="call_abc")
    chunks = await _stream_chunks(client, tools=[_tool_schema("search_memory")])
    deltas = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    head, rest = deltas[0], deltas[1:]
    assert (head.index, head.id, head.type) == (0, "call_abc", "function")
    assert (head.function.name, head.function.arguments) == ("search_memory", "")
    assert len(rest) > 1 and all(d.id is None and d.function.name is None for d in rest)
    assert json.loads("".join(d.function.arguments for d in rest)) == arguments
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert fake.requests[0]["tools"][0]["function"]["name"] == "search_memory"


async def test_parallel_tool_calls_and_raw_arguments(fake: FakeOpenAI, client: openai.AsyncOpenAI) -> None:
    fake.tool_calls([("a", {"x": 1}), ("b", '{"broken": ')])
    message = (await _chat(client)).choices[0].message
    assert message.content is None
    assert [(c.function.name, c.function.arguments) for c in message.tool_calls] == [
        ("a", '{"x":1}'),
        ("b", '{"broken": '),
    ]
    assert len({c.id for c in message.tool_calls}) == 2


def _tool_schema(name: str) -> dict[str, Any]:
    parameters = {"type": "object", "properties": {"query": {"type": "string"}}}
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


# --------------------------------------------------------------------- errors


async def test_rate_limit_is_retried_by_client(fake: FakeOpenAI) -> None:
    fake.fail(429, retry_after=0)
    fake.reply("after the storm")
    async with openai.AsyncOpenAI(api_key=API_KEY, base_url=fake.base_url, max_retries=2, timeout=5.0) as c:
        completion = await _chat(c)
    assert completion.choices[0].message.content == "after the storm"
    assert len(fake.requests) == 2


async def test_retry_after_header_and_envelope(fake: FakeOpenAI, client: openai.AsyncOpenAI) -> None:
    fake.fail(429, retry_after=7)
    with pytest.raises(openai.RateLimitError) as caught:
        await _chat(client)
    assert caught.value.response.headers["retry-after"] == "7"
    assert "x-should-retry" not in caught.value.response.headers
    assert caught.value.code == "rate_limit_exceeded"


async def test_wrong_api_key(fake: FakeOpenAI) -> None:
    fake.reply("must not be consumed")
    async with openai.AsyncOpenAI(api_key="wrong", base_url=fake.base_url, max_retries=0) as c:
        with pytest.raises(openai.AuthenticationError) as caught:
            await _chat(c)
    assert caught.value.code == "invalid_api_key"
    async with openai.AsyncOpenAI(api_key=API_KEY, base_url=fake.base_url, max_retries=0) as c:
        assert (await _chat(c)).choices[0].message.content == "must not be consumed"


async def test_missing_model(client: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        await client.chat.completions.create(model="missing-model", messages=USER_MESSAGE)
    assert caught.value.code == "model_not_found"


async def test_context_length_400(fake: FakeOpenAI, client: openai.AsyncOpenAI) -> None:
    fake.fail(400)
    with pytest.raises(openai.BadRequestError) as caught:
        await _chat(client)
    assert caught.value.code == "context_length_exceeded"


async def test_hang_causes_client_timeout(fake: FakeOpenAI, client: openai.AsyncOpenAI) -> None:
    fake.hang(5)
    with pytest.raises(openai.APITimeoutError):
        await _chat(client, timeout=0.2)


async def test_garbage_body(fake: FakeOpenAI, client: openai.AsyncOpenAI) -> None:
    """The client surfaces a bare JSONDecodeError here, not an openai error."""
    fake.garbage()
    with pytest.raises(ValueError):
        await _chat(client)


# --------------------------------------------------------------------- embeddings


async def test_embeddings_formats_agree(fake: FakeOpenAI, client: openai.AsyncOpenAI) -> None:
    texts = ["alpha", "beta", "alpha"]
    default = await client.embeddings.create(model="embed", input=texts)
    floats = await client.embeddings.create(model="embed", input=texts, encoding_format="float")
    raw_b64 = await client.embeddings.create(model="embed", input=texts, encoding_format="base64")
    vectors = [d.embedding for d in default.data]
    assert len(vectors) == 3 and all(len(v) == EMBED_DIM for v in vectors)
    assert vectors[0] == vectors[2] != vectors[1]
    assert math.isclose(math.sqrt(sum(x * x for x in vectors[0])), 1.0, rel_tol=1e-5)
    assert [d.embedding for d in floats.data] == vectors
    assert [_decode_base64(d.embedding) for d in raw_b64.data] == vectors  # type: ignore[arg-type]
    assert vectors[1] == hashed_embedding("beta", dim=EMBED_DIM)
    sent = [r["encoding_format"] for r in fake.embed_requests]
    assert sent == ["base64", "float", "base64"]


async def test_single_string_and_custom_embedder(fake: FakeOpenAI, client: openai.AsyncOpenAI) -> None:
    fake.embedder = lambda text: [float(len(text))] * EMBED_DIM
    result = await client.embeddings.create(model="embed", input="four")
    assert [d.embedding for d in result.data] == [[4.0] * EMBED_DIM]


async def test_embeddings_batch_limit() -> None:
    async with FakeOpenAI(api_key=API_KEY, max_embed_batch=2) as small:
        async with openai.AsyncOpenAI(api_key=API_KEY, base_url=small.base_url, max_retries=0) as c:
            with pytest.raises(openai.BadRequestError):
                await c.embeddings.create(model="embed", input=["a", "b", "c"])


async def test_embedding_failures(fake: FakeOpenAI, client: openai.AsyncOpenAI) -> None:
    fake.fail_embeddings(500)
    with pytest.raises(openai.InternalServerError):
        await client.embeddings.create(model="embed", input="x")
    assert len((await client.embeddings.create(model="embed", input="x")).data) == 1


async def test_sync_client_embeddings(fake: FakeOpenAI) -> None:
    def call() -> list[list[float]]:
        with openai.OpenAI(api_key=API_KEY, base_url=fake.base_url, max_retries=0, timeout=5.0) as c:
            return [d.embedding for d in c.embeddings.create(model="embed", input=["a", "b", "c"]).data]

    vectors = await asyncio.to_thread(call)
    assert vectors == [hashed_embedding(t, dim=EMBED_DIM) for t in "abc"]


# --------------------------------------------------------------------- models


async def test_models_list(client: openai.AsyncOpenAI) -> None:
    page = await client.models.list()
    assert [m.id for m in page.data] == ["fake-model"]
