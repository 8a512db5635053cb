"""Cluster roles as real processes (``python -m bridge run --role ...``) for the cluster tests.

Each process's stderr is read line by line as it comes; tests wait on the lines a role logs (a
worker says which shards it holds whenever that changes), never on time.
"""

from __future__ import annotations

import asyncio
import re
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from fakes import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]
_HOLDS = re.compile(r"worker (\S+) holds shards (\S+)")


def cluster_config(tmp_path: Path, *, redis_url: str, llm_url: str, telegram_url: str, shards: int = 8,
                   lease_ttl_s: float = 2.0, name: str = "config.yaml", **extra: Any) -> Path:
    """A config.yaml for the roles of one test deployment (Telegram polling, no embeddings); ``extra``
    updates top-level sections (``channels={"telegram": {...}}`` replaces that channel's settings)."""
    data: dict[str, Any] = {
        "workspace": str(tmp_path / "unused-workspace"),
        "embedding": {"provider": "none"},
        "llm": {"base_url": llm_url, "api_key": "test-key", "max_retries": 0, "timeout_s": 60, "stream": False},
        "channels": {"terminal": {"enabled": False},
                     "telegram": {"enabled": True, "token": "123456:TEST-fake-token", "base_url": telegram_url}},
        "cluster": {"redis_url": redis_url, "shards": shards, "root": str(tmp_path / "cluster"),
                    "lease_ttl_s": lease_ttl_s},
        "memory": {"dream": {"enabled": False}},
        "bridge": {"shutdown_grace_s": 5},
    }
    for key, value in extra.items():
        data[key] = {**data.get(key, {}), **value}
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def parse_shards(text: str) -> set[int]:
    """``0-2,5`` -> {0, 1, 2, 5}; ``none`` -> set()."""
    found: set[int] = set()
    for part in text.split(","):
        if part == "none":
            continue
        low, _, high = part.partition("-")
        found.update(range(int(low), int(high or low) + 1))
    return found


class Role:
    """One running role process and everything it has logged so far."""

    def __init__(self, name: str, process: asyncio.subprocess.Process) -> None:
        self.name = name
        self.process = process
        self.lines: list[str] = []
        self.worker_id: str | None = None
        self.shards: set[int] = set()
        self._changed = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, config: Path, role: str, name: str) -> Role:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bridge", "--config", str(config), "run", "--role", role, cwd=ROOT,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        return cls(name, process)

    async def _read(self) -> None:
        assert self.process.stderr is not None
        while line := await self.process.stderr.readline():
            text = line.decode(errors="replace").rstrip("\n")
            self.lines.append(text)
            if match := _HOLDS.search(text):
                self.worker_id, self.shards = match.group(1), parse_shards(match.group(2))
            self._changed.set()
        self._changed.set()

    async def wait_for(self, predicate: Callable[[], bool], what: str, timeout: float = HANG_GUARD_S) -> None:
        """Until ``predicate()`` holds after some line of ours (or a check of the caller's own)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not predicate():
            remaining = deadline - loop.time()
            if remaining <= 0 or (self.process.returncode is not None and self._reader.done()):
                raise AssertionError(f"{self.name}: no {what} (timed out or exited); its log:\n" + self.log())
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), min(remaining, 0.1))
            except TimeoutError:
                pass

    async def wait_line(self, needle: str, timeout: float = HANG_GUARD_S) -> None:
        await self.wait_for(lambda: any(needle in line for line in self.lines), f"line with {needle!r}", timeout)

    def log(self) -> str:
        return "\n".join(self.lines[-80:])

    def kill(self) -> None:
        self.process.kill()

    async def stop(self) -> int:
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = await asyncio.wait_for(self.process.wait(), 60)
        except TimeoutError:
            self.process.kill()
            code = await self.process.wait()
        await self._reader
        return code


async def wait_all(roles: list[Role], predicate: Callable[[], bool], what: str, timeout: float = HANG_GUARD_S) -> None:
    """Until ``predicate()`` holds, re-checked whenever any role logs a line."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}; logs:\n" + "\n---\n".join(
                f"[{role.name}]\n{role.log()}" for role in roles))
        waiters = [asyncio.create_task(role._changed.wait()) for role in roles]
        for role in roles:
            role._changed.clear()
        _done, pending = await asyncio.wait(waiters, timeout=0.1, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
