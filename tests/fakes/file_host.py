"""Files a fake platform hands out for download: Telegram's file endpoint, Slack's private URLs.

Both fakes keep their files here and route their download path to :meth:`FileHost.serve`, so the
scripting is the same for both: a declared size that differs from the bytes (a "25 MB" file that
must never be fetched), HTTP failures, a redirect, and a stall that holds the body half-sent until
the test (or the fake's shutdown) releases it. Every download request is recorded, so a test can
assert that a refused file was not transferred at all.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from aiohttp import web

from . import HANG_GUARD_S

__all__ = ["Download", "FileHost", "HostedFile"]


@dataclass
class HostedFile:
    """One file: its bytes, the size the platform's metadata claims, and what to do when fetched."""

    data: bytes
    size: int
    failures: list[int] = field(default_factory=list)  # HTTP statuses for the next downloads
    redirect_to: str | None = None
    stall: bool = False  # send the headers and half the body, then hold until released
    chunked: bool = False  # no Content-Length: the client learns the size only by reading


@dataclass(frozen=True)
class Download:
    """A download request as the fake saw it."""

    key: str
    authorization: str | None
    status: int


class FileHost:
    """The files one fake serves, keyed by the path part that names them."""

    def __init__(self) -> None:
        self.files: dict[str, HostedFile] = {}
        self.downloads: list[Download] = []
        self.stalled = asyncio.Event()  # set once a stalled download has sent its first half
        self._released = asyncio.Event()

    def add(self, key: str, data: bytes, size: int | None = None) -> HostedFile:
        hosted = HostedFile(data, len(data) if size is None else size)
        self.files[key] = hosted
        return hosted

    def release(self) -> None:
        """Let stalled downloads finish (the fakes call it when they shut down)."""
        self._released.set()

    async def wait_stalled(self, timeout: float = HANG_GUARD_S) -> None:
        await asyncio.wait_for(self.stalled.wait(), timeout)

    async def serve(self, request: web.Request, key: str, *, authorized: bool = True) -> web.StreamResponse:
        """Answer a download of ``key``: 401 unless ``authorized``, then as scripted."""
        hosted = self.files.get(key)
        status = 401 if not authorized else 404 if hosted is None else 200
        if hosted is not None and status == 200 and hosted.failures:
            status = hosted.failures.pop(0)
        if hosted is not None and status == 200 and hosted.redirect_to:
            status = 302
        self.downloads.append(Download(key, request.headers.get("Authorization"), status))
        if status == 302 and hosted is not None and hosted.redirect_to:
            raise web.HTTPFound(hosted.redirect_to)
        if status != 200 or hosted is None:
            return web.Response(status=status, text=f"fake: {status}")
        return await self._stream(request, hosted)

    async def _stream(self, request: web.Request, hosted: HostedFile) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        if hosted.chunked:
            response.enable_chunked_encoding()
        else:
            response.content_length = len(hosted.data)
        await response.prepare(request)
        half = len(hosted.data) // 2
        await response.write(hosted.data[:half])
        if hosted.stall:
            self.stalled.set()
            await self._released.wait()
        await response.write(hosted.data[half:])
        await response.write_eof()
        return response
