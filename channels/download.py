"""Fetching an attachment's bytes over HTTP: streamed, bounded, time-limited, credentials kept home.

Telegram and Slack both hand a bot a URL to GET a file from. Neither platform library streams
with a bound (python-telegram-bot's ``download_to_memory`` reads the whole body whatever its
size), so the body is read here chunk by chunk and given up as soon as it passes the limit.
Content-Encoding is not undone: the bytes counted are the bytes on the wire, so a gzip bomb
cannot inflate past the bound. Redirects are followed by hand, a few at most, and credential
headers go only to the origin they were meant for: the same scheme, host and port (a redirect
from https to http on the same host would carry them in clear text).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from urllib.parse import urljoin, urlsplit

from aiohttp import ClientError, ClientResponse, ClientSession, ClientTimeout

from .base import AttachmentError, AttachmentTooLarge

__all__ = ["download", "time_limited"]

_CHUNK = 64 * 1024
_MAX_REDIRECTS = 3
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


@asynccontextmanager
async def time_limited(name: str, timeout_s: float) -> AsyncIterator[None]:
    """Everything a read does (metadata calls and the transfer) within ``timeout_s`` seconds.

    One deadline for the whole read, not per request: a server that trickles bytes, or answers
    each of several calls just in time, still cannot hold a turn longer than this.
    """
    try:
        async with asyncio.timeout(timeout_s):
            yield
    except TimeoutError:
        raise AttachmentError(
            f"Fetching {name} took longer than {timeout_s:g} s, so it was not read. Try again later."
        ) from None


async def download(
    url: str,
    *,
    name: str,
    max_bytes: int,
    platform: str,
    headers: Mapping[str, str] | None = None,
) -> bytes:
    """GET ``url`` and return its body, at most ``max_bytes`` of it.

    ``headers`` (a bearer token) are sent to ``url``'s origin only (scheme, host and port); a
    redirect elsewhere, or to plain http, is followed without them. A declared Content-Length over the limit is refused before the body
    is read; a body that grows past it is cut off at once. Either way: :class:`AttachmentTooLarge`.
    Any other failure is an :class:`AttachmentError` naming ``platform``.
    """
    home = _origin(url)
    try:
        async with ClientSession(auto_decompress=False, timeout=ClientTimeout(total=None)) as session:
            for _ in range(_MAX_REDIRECTS + 1):
                sent = dict(headers or {}) if _origin(url) == home else {}
                async with session.get(url, headers=sent, allow_redirects=False) as response:
                    location = response.headers.get("Location")
                    if response.status in _REDIRECTS and location:
                        url = urljoin(url, location)
                        continue
                    _check_status(response, name, platform)
                    return await _bounded_body(response, name, max_bytes)
    except ClientError as exc:
        raise AttachmentError(f"{platform} did not hand over {name} ({type(exc).__name__}). "
                              "Try sending it again.") from exc
    raise AttachmentError(f"{platform} redirected the download of {name} too often, so it was not read.")


def _origin(url: str) -> tuple[str, str]:
    """(scheme, host:port) of ``url``: where a credential may go."""
    parts = urlsplit(url)
    return parts.scheme.lower(), parts.netloc.lower()


def _check_status(response: ClientResponse, name: str, platform: str) -> None:
    if response.status != 200:
        raise AttachmentError(f"{platform} did not hand over {name} (HTTP {response.status}). "
                              "Try sending it again.")


async def _bounded_body(response: ClientResponse, name: str, max_bytes: int) -> bytes:
    declared = response.content_length
    if declared is not None and declared > max_bytes:
        raise AttachmentTooLarge(name, declared, max_bytes)
    body = bytearray()
    async for chunk in response.content.iter_chunked(_CHUNK):
        body += chunk
        if len(body) > max_bytes:
            raise AttachmentTooLarge(name, len(body), max_bytes)
    return bytes(body)
