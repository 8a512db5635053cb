"""A real redis-server for tests: on a free 127.0.0.1 port, its data in a temporary folder.

Data is kept in an append-only file fsynced on every write (as a cluster deployment must run it),
so a restart finds every stream entry and lease again. The file's RDB base is written uncompressed,
so a test that reads the files back for a text sees every byte Redis keeps (LZF would hide it).
``scripts/test`` installs Debian's redis-server when it is missing; without it these tests say so
and are skipped.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from support.ports import free_port

READY = b"Ready to accept connections"


class RedisServer:
    """``start`` returns once the server accepts connections; ``restart`` keeps port and data."""

    def __init__(self, folder: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed and could not be: run scripts/test as root (it installs "
                        "Debian's redis-server) or `apt-get install redis-server`")
        self.binary = binary
        self.folder = folder
        self.port = free_port()
        self.process: asyncio.subprocess.Process | None = None
        folder.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def start(self) -> None:
        self.process = await asyncio.create_subprocess_exec(
            self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.folder),
            "--appendonly", "yes", "--appendfsync", "always", "--save", "", "--rdbcompression", "no", "--daemonize", "no",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        assert self.process.stdout is not None
        seen = b""
        while READY not in seen:
            line = await asyncio.wait_for(self.process.stdout.readline(), 30)
            if not line:
                raise RuntimeError(f"redis-server did not start:\n{seen.decode(errors='replace')}")
            seen += line
        self._drain = asyncio.create_task(self.process.stdout.read())

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.terminate()
            await asyncio.wait_for(self.process.wait(), 30)
            await self._drain
        self.process = None

    async def restart(self) -> None:
        await self.stop()
        await self.start()
