"""An optional reranker: a cross-encoder on another machine, behind the ``/rerank`` HTTP contract.

A cross-encoder reads the question and a note together, so it judges a match better than two
vectors can, but a useful one wants a GPU and weights that no wheel ships. An operator runs one
(Hugging Face TEI, Infinity, vLLM) or rents one (Cohere, Jina) and sets ``memory.rerank.base_url``;
search then sends the question with its best candidates and orders them by the scores it gets back.

It is an improvement, never a dependency: any failure (refused, slow, a reply that does not fit)
makes :meth:`Reranker.rerank` return None after one WARNING line naming the server and the cause,
and the caller keeps the order it had. There is no retry: a search waits for it once, at most
``timeout_s``.

Two wire formats, told apart by the reply's JSON type:

- Cohere, Jina, Infinity, vLLM: ``{"model", "query", "documents", "top_n"}`` in,
  ``{"results": [{"index", "relevance_score"}, ...]}`` out.
- Hugging Face TEI: ``{"query", "texts"}`` in, a bare list ``[{"index", "score"}, ...]`` out. TEI
  refuses the first form with HTTP 422 naming the missing ``texts``; the reranker then sends that
  call again in TEI's form and keeps to it (one extra request in the reranker's life, within the
  same ``timeout_s``).

httpx is imported on the first call, so a command that never reranks does not pay for it.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeGuard
from urllib.parse import urlsplit

from ..config import RerankSettings

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)

#: A reply larger than this is not a list of scores for at most 200 documents.
MAX_REPLY_BYTES = 1 << 20
#: Connections kept to the server: searches run in a few worker threads at most.
MAX_CONNECTIONS = 4


class _Failure(Exception):
    """Why one call gave no scores; the message is what the warning says after the server."""


def endpoint_url(base_url: str) -> str:
    """The URL to POST to. ``base_url`` is what comes before ``/rerank`` (``http://gpu:8080``,
    ``http://gpu:8000/v1``, ``https://api.cohere.com/v2``); a trailing slash, or the whole
    endpoint ending in ``/rerank``, is taken as well."""
    base = base_url.rstrip("/")
    return base if base.endswith("/rerank") else f"{base}/rerank"


def reranked_order(scores: Sequence[float | None]) -> list[int]:
    """Positions in their new order: scored ones by score, highest first, then those without a
    score (left out by the server, or past ``top_n``) in the order they had. Ties keep the old order."""
    return sorted(range(len(scores)), key=lambda i: (scores[i] is None, -(scores[i] or 0.0), i))


class Reranker:
    """Scores documents against a query on a remote ``/rerank`` server; safe to share between threads."""

    def __init__(self, settings: RerankSettings) -> None:
        if settings.base_url is None:
            raise ValueError("memory.rerank.base_url is not set: leave the reranker off instead")
        self.settings = settings
        self.endpoint = endpoint_url(settings.base_url)
        parts = urlsplit(self.endpoint)
        #: How log lines name the server: no user name, password or query string.
        self.server = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"
        self._tei = False  # set once the server has shown it speaks TEI's form
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()

    def rerank(self, query: str, documents: Sequence[str]) -> list[float | None] | None:
        """One score per document, in input order; None when the server failed (logged once).

        Only the first ``top_n`` documents are sent; the rest, and any the server leaves out, get
        None: :func:`reranked_order` puts them below every scored one.
        """
        sent = list(documents[: self.settings.top_n])
        if not sent:
            return []
        try:
            scores = self._scores(self._call(query, sent), len(sent))
        except Exception as exc:  # a reranker must never fail a search
            log.warning("rerank server %s failed, search keeps its order: %s", self.server, self._cause(exc))
            return None
        return scores + [None] * (len(documents) - len(sent))

    def close(self) -> None:
        """Close the pooled connections (a later call opens new ones)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def _call(self, query: str, documents: list[str]) -> Any:
        """POST the request and return the parsed JSON reply, switching to TEI's form if asked to."""
        deadline = time.monotonic() + self.settings.timeout_s
        status, body = self._post(self._body(query, documents), deadline)
        if status == 422 and not self._tei and b"texts" in body:
            log.info("rerank server %s speaks Hugging Face TEI's /rerank: sending it texts", self.server)
            self._tei = True
            status, body = self._post(self._body(query, documents), deadline)
        if not 200 <= status < 300:
            raise _Failure(self._status_problem(status, body))
        try:
            return json.loads(body)
        except ValueError:
            raise _Failure(f"the reply is not JSON: {_excerpt(body)}") from None

    def _body(self, query: str, documents: list[str]) -> dict[str, Any]:
        if self._tei:
            return {"query": query, "texts": documents}
        return {"model": self.settings.model, "query": query, "documents": documents, "top_n": len(documents)}

    def _post(self, body: dict[str, Any], deadline: float) -> tuple[int, bytes]:
        """Send ``body``; the reply is read whole by ``deadline``, however slowly the server trickles it."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _Failure(f"no whole reply within {self.settings.timeout_s:g} s")
        with self._http().stream("POST", self.endpoint, json=body, timeout=remaining) as response:
            received = bytearray()
            for chunk in response.iter_bytes():
                received += chunk
                if len(received) > MAX_REPLY_BYTES:
                    raise _Failure(f"the reply is over {MAX_REPLY_BYTES} bytes")
                if time.monotonic() > deadline:
                    raise _Failure(f"no whole reply within {self.settings.timeout_s:g} s")
            return response.status_code, bytes(received)

    def _http(self) -> httpx.Client:
        import httpx

        with self._lock:
            if self._client is None:
                key = self.settings.api_key
                self._client = httpx.Client(
                    timeout=httpx.Timeout(self.settings.timeout_s),
                    limits=httpx.Limits(max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_CONNECTIONS),
                    headers={"Authorization": f"Bearer {key}"} if key else None,
                )
            return self._client

    def _scores(self, reply: Any, count: int) -> list[float | None]:
        """The scores of ``reply`` by document index; a reply naming a document that was not sent,
        twice, or with a score that is not a number is refused whole."""
        if isinstance(reply, dict) and isinstance(reply.get("results"), list):
            items, field = reply["results"], "relevance_score"
        elif isinstance(reply, list):
            items, field = reply, "score"
        else:
            raise _Failure(f"the reply is neither {{\"results\": [...]}} nor TEI's list: {_excerpt(reply)}")
        scores: list[float | None] = [None] * count
        for item in items:
            index, score = (item.get("index"), item.get(field)) if isinstance(item, dict) else (None, None)
            if not _is_int(index) or not 0 <= index < count:
                raise _Failure(f"the reply names document {index!r} of the {count} sent")
            if scores[index] is not None:
                raise _Failure(f"the reply scores document {index} twice")
            if not _is_number(score):
                raise _Failure(f"the reply gives document {index} the {field} {score!r}, not a number")
            scores[index] = float(score)
        if count and all(score is None for score in scores):
            raise _Failure(f"the reply scores none of the {count} documents")
        return scores

    def _status_problem(self, status: int, body: bytes) -> str:
        if status in (401, 403):
            return f"HTTP {status}, the API key was refused (memory.rerank.api_key): {_excerpt(body)}"
        return f"HTTP {status}: {_excerpt(body)}"

    def _cause(self, exc: Exception) -> str:
        """What went wrong, in words, without the API key even if the server echoed it."""
        import httpx

        if isinstance(exc, _Failure):
            cause = str(exc)
        elif isinstance(exc, httpx.TimeoutException):
            cause = f"no answer within {self.settings.timeout_s:g} s ({type(exc).__name__})"
        else:
            cause = f"{type(exc).__name__}: {exc}"
        key = self.settings.api_key
        return cause.replace(key, "***") if key else cause


def make_reranker(settings: RerankSettings) -> Reranker | None:
    """The reranker ``settings`` ask for, or None when ``base_url`` is not set (the default)."""
    return None if settings.base_url is None else Reranker(settings)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _excerpt(data: object, limit: int = 200) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else json.dumps(data, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"
