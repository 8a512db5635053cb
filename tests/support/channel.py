"""An in-memory channel: the test pushes messages in and reads what the bot sent."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from fakes import HANG_GUARD_S

from channels import Channel, IncomingMessage, MessageHandler, OutgoingFile, Reply

T = TypeVar("T")


class RecordingChannel(Channel):
    def __init__(self, name: str = "telegram") -> None:
        self.name = name
        self.sent: list[tuple[Reply, IncomingMessage]] = []
        self.files: list[tuple[str, bytes, IncomingMessage]] = []  # (name, bytes as sent, to)
        self._handler: MessageHandler | None = None
        self._new = asyncio.Event()
        self.accepted_keys: list[str] = []  # Channel.accepted calls, in order: what may be confirmed

    def accepted(self, message: IncomingMessage) -> None:
        self.accepted_keys.append(message.dedupe_key)
        self._new.set()

    async def start(self, on_message: MessageHandler) -> None:
        self._handler = on_message

    async def stop(self) -> None:
        self._handler = None

    async def send(self, reply: Reply, to: IncomingMessage) -> None:
        self.sent.append((reply, to))
        self._new.set()

    async def send_file(self, file: OutgoingFile, to: IncomingMessage) -> None:
        self.files.append((file.name, file.path.read_bytes(), to))

    async def push(self, message: IncomingMessage) -> None:
        assert self._handler is not None, "channel not started"
        await self._handler(message)

    async def _until(self, done: Callable[[], T | None], timeout: float) -> T:
        """``done()``'s first answer that is not None, asked again after each send or acceptance."""
        async def until() -> T:
            while (found := done()) is None:
                self._new.clear()
                await self._new.wait()
            return found

        return await asyncio.wait_for(until(), timeout)

    async def wait_sent(self, count: int, timeout: float = HANG_GUARD_S) -> list[tuple[Reply, IncomingMessage]]:
        return await self._until(lambda: self.sent if len(self.sent) >= count else None, timeout)

    async def wait_accepted(self, count: int, timeout: float = HANG_GUARD_S) -> list[str]:
        """The keys of the first ``count`` messages the bridge is done with (sent to or not)."""
        return await self._until(lambda: self.accepted_keys if len(self.accepted_keys) >= count else None, timeout)

    async def wait_reply_to(self, message: IncomingMessage, timeout: float = HANG_GUARD_S) -> Reply:
        """The first reply sent to ``message`` (the same delivery: its dedupe key)."""
        return await self._until(lambda: next((reply for reply, to in self.sent
                                               if to.dedupe_key == message.dedupe_key), None), timeout)

    def texts(self, chat_id: str | None = None) -> list[str]:
        return [reply.text for reply, to in self.sent if chat_id is None or to.chat_id == chat_id]


class SlowPlatform(RecordingChannel):
    """A send reaches the platform at once (recorded) and its response comes when the test says."""

    def __init__(self) -> None:
        super().__init__()
        self.sending = asyncio.Event()
        self.respond = asyncio.Event()

    async def send(self, reply: Reply, to: IncomingMessage) -> None:
        await super().send(reply, to)
        self.sending.set()
        await self.respond.wait()
