"""A stand-in for a ``/rerank`` server (Cohere, Jina, Infinity, vLLM; or Hugging Face TEI).

Tests talk to it with the real httpx client through :class:`memory.retrieval.rerank.Reranker`. It scores a
document by a rule a test can work out by hand: the share of the query's words the document holds
(lower-cased, split on anything that is not a letter or digit). It serves ``/rerank`` and
``/v1/rerank``, records every request (path, Authorization header, JSON body), and can be told to
misbehave on the next requests: an HTTP status, a hang, a reply trickled byte by byte, a body that
is not JSON, an index out of range, a reply that leaves documents out, or any reply verbatim.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
from collections import deque
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal

from aiohttp import web

from . import HANG_GUARD_S

__all__ = ["FakeReranker", "Fault", "RerankRequest", "Verbatim", "overlap_score"]


@dataclass(frozen=True)
class Verbatim:
    """A reply sent as it is (JSON-encoded, NaN allowed) with status 200."""

    body: Any


#: What the next request gets instead of an honest answer (an int is an HTTP status).
Fault = int | Verbatim | Literal["hang", "trickle", "garbage", "bad_index", "omit_last"]

_WORD = re.compile(r"[^\W_]+")
_TEI_MISSING_TEXTS = "Failed to deserialize the JSON body into the target type: missing field `texts` at line 1 column 2"


def overlap_score(query: str, document: str) -> float:
    """The share of the query's distinct words that the document holds."""
    asked = set(_WORD.findall(query.lower()))
    held = set(_WORD.findall(document.lower()))
    return len(asked & held) / len(asked) if asked else 0.0


@dataclass(frozen=True)
class RerankRequest:
    """One request as the fake saw it."""

    path: str
    authorization: str | None
    body: Any


class FakeReranker:
    """A scriptable ``/rerank`` server on 127.0.0.1; ``tei=True`` speaks TEI's form instead."""

    def __init__(self, *, api_key: str | None = None, tei: bool = False) -> None:
        self.api_key = api_key
        self.tei = tei
        self.requests: list[RerankRequest] = []
        self.faults: deque[Fault] = deque()
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._released = asyncio.Event()

    def fail_next(self, *faults: Fault) -> None:
        """The next requests, one each, get these faults in order."""
        self.faults.extend(faults)

    @property
    def root(self) -> str:
        """``http://127.0.0.1:PORT``: the base URL of a server answering at ``/rerank``."""
        if self._port is None:
            raise RuntimeError("FakeReranker is not running")
        return f"http://127.0.0.1:{self._port}"

    async def __aenter__(self) -> FakeReranker:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self._port = sock.getsockname()[1]
        app = web.Application()
        app.router.add_post("/rerank", self._handle)
        app.router.add_post("/v1/rerank", self._handle)
        # handler_cancellation: a client that gave up abandons its request, and a hung handler ends.
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5, handler_cancellation=True)
        await self._runner.setup()
        await web.SockSite(self._runner, sock).start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._released.set()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        text = await request.text()
        try:
            body: Any = json.loads(text)
        except ValueError:
            body = text
        self.requests.append(RerankRequest(request.path, request.headers.get("Authorization"), body))
        if self.api_key is not None and request.headers.get("Authorization") != f"Bearer {self.api_key}":
            given = request.headers.get("Authorization", "")
            return web.json_response({"message": f"invalid api key: {given}"}, status=401)
        fault = self.faults.popleft() if self.faults else None
        if isinstance(fault, int):
            return web.json_response({"message": f"fake: {fault}"}, status=fault)
        if isinstance(fault, Verbatim):
            return web.json_response(fault.body)
        if fault == "hang":
            await asyncio.wait_for(self._released.wait(), HANG_GUARD_S)
        if fault == "garbage":
            return web.Response(text='{"results": [', content_type="application/json")
        reply = self._answer(body)
        if isinstance(reply, web.Response):
            return reply
        reply = self._spoil(reply, fault)
        if fault == "trickle":
            return await self._trickle(request, json.dumps(reply).encode())
        return web.json_response(reply)

    def _answer(self, body: Any) -> Any:
        """An honest reply in the server's own form, or its refusal of a body it cannot read."""
        field = "texts" if self.tei else "documents"
        documents = body.get(field) if isinstance(body, dict) else None
        if not isinstance(documents, list) or not isinstance(body.get("query"), str):
            message = _TEI_MISSING_TEXTS if self.tei else "query and documents are required"
            return web.Response(status=422, text=message)
        scored = sorted(
            ((index, overlap_score(body["query"], str(document))) for index, document in enumerate(documents)),
            key=lambda pair: -pair[1],
        )
        if self.tei:
            return [{"index": index, "score": score} for index, score in scored]
        top_n = body.get("top_n") or len(documents)
        return {"results": [{"index": index, "relevance_score": score} for index, score in scored[:top_n]]}

    def _spoil(self, reply: Any, fault: Fault | None) -> Any:
        results = reply if isinstance(reply, list) else reply["results"]
        if fault == "bad_index" and results:
            results[0]["index"] = len(results) + 5
        if fault == "omit_last" and results:
            last = max(item["index"] for item in results)
            results[:] = [item for item in results if item["index"] != last]
        return reply

    async def _trickle(self, request: web.Request, data: bytes) -> web.StreamResponse:
        """A slow server: leading spaces (valid JSON whitespace) every 0.05 s until released."""
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        for _ in range(int(HANG_GUARD_S / 0.05)):
            if self._released.is_set():
                break
            await response.write(b" ")
            await asyncio.sleep(0.05)
        await response.write(data)
        await response.write_eof()
        return response
