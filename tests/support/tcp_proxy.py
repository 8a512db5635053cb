"""A TCP proxy on 127.0.0.1 that a test can cut and heal: a network partition between a process
and a server (a cluster worker and its Redis), with both processes left running.

``cut()`` is a black hole, the way a partition looks to a client: connections stay open but bytes
go nowhere in either direction, and new connections are accepted and then hear nothing, so a
client's request waits until its own timeout. ``heal()`` closes what was cut (the client sees its
connections drop and reconnects) and forwards again.
"""

from __future__ import annotations

import asyncio
import contextlib

from support.ports import free_port

_CHUNK = 65536


class TcpProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target_port`` until cut."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self.cut_at: float | None = None  # loop time of the last cut, None while forwarding
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._pumps: set[asyncio.Task[None]] = set()

    def url(self, scheme: str = "redis", path: str = "/0") -> str:
        return f"{scheme}://127.0.0.1:{self.port}{path}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        self._close_all()
        await asyncio.gather(*self._pumps, return_exceptions=True)

    async def __aenter__(self) -> TcpProxy:
        await self.start()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.stop()

    @property
    def is_cut(self) -> bool:
        return self.cut_at is not None

    def cut(self) -> None:
        """From now on nothing passes, on open connections or new ones."""
        self.cut_at = asyncio.get_running_loop().time()

    def heal(self) -> None:
        """Drop the connections that were cut and forward again."""
        self.cut_at = None
        self._close_all()

    def _close_all(self) -> None:
        for writer in list(self._writers):
            writer.close()
        self._writers.clear()

    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        self._writers.add(client_writer)
        try:
            server_reader, server_writer = await asyncio.open_connection(*self.target)
        except OSError:
            client_writer.close()
            return
        self._writers.add(server_writer)
        for reader, writer in ((client_reader, server_writer), (server_reader, client_writer)):
            task = asyncio.create_task(self._pump(reader, writer))
            self._pumps.add(task)
            task.add_done_callback(self._pumps.discard)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Copy ``reader`` to ``writer``; while cut, what is read is dropped (a black hole)."""
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await reader.read(_CHUNK):
                if self.is_cut:
                    continue
                writer.write(data)
                await writer.drain()
        writer.close()
        self._writers.discard(writer)
