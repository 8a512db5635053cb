"""Telegram albums: the photos and files a person sends together become one turn.

Telegram delivers an album as one message per item, all sharing a ``media_group_id``, and only
one of them (usually the first) carries the caption. Someone who sends three photos captioned
"which one should I frame?" asks one question, so the parts are gathered and handed on together:
when no part of the album has come for ``wait_s`` seconds (a client sends an album's parts back to
back), at once when the tenth part arrives (the most an album holds), or when the chat's next
message (or another album) arrives, since Telegram never interleaves an album with other messages
of the same chat.

Order. Every message of the channel, album part or not, passes through :meth:`AlbumGatherer.submit`,
and every hand-off happens under one lock, so a chat's messages reach ``emit`` in the order they
came, with an album in the place of its first part. A timer that fires while a later message is
being handed on waits for the lock and then finds its album already gone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

#: The most items Telegram puts in one album.
MAX_ALBUM_PARTS = 10

Part = TypeVar("Part")
AlbumKey = tuple[Hashable, str]  # (chat, media_group_id)


@dataclass
class _Album(Generic[Part]):
    parts: list[Part] = field(default_factory=list)
    timer: asyncio.Task[None] | None = None


class AlbumGatherer(Generic[Part]):
    """Hands a channel's messages on one at a time, an album's parts as one list.

    ``emit`` receives the parts of one message: a single-item list for an ordinary message, the
    parts of an album in arrival order otherwise. It is awaited under the gatherer's lock, so it
    should only queue work (as :data:`channels.base.MessageHandler` does).
    """

    def __init__(self, emit: Callable[[list[Part]], Awaitable[None]], *, wait_s: float) -> None:
        if wait_s <= 0:
            raise ValueError(f"the album wait must be positive, not {wait_s}")
        self._emit = emit
        self._wait_s = wait_s
        self._albums: dict[AlbumKey, _Album[Part]] = {}
        self._lock = asyncio.Lock()

    async def submit(self, chat: Hashable, album_id: str | None, part: Part) -> None:
        """Take one message of ``chat``; ``album_id`` is its ``media_group_id`` (None: no album)."""
        async with self._lock:
            key = None if album_id is None else (chat, album_id)
            for other in [k for k in self._albums if k[0] == chat and k != key]:
                await self._hand_on(other)
            if key is None:
                await self._emit_logged([part])
                return
            album = self._albums.setdefault(key, _Album())
            album.parts.append(part)
            if len(album.parts) >= MAX_ALBUM_PARTS:
                await self._hand_on(key)
                return
            if album.timer is not None:
                album.timer.cancel()
            album.timer = asyncio.create_task(self._after_quiet(key), name=f"telegram album {album_id}")

    async def flush(self) -> None:
        """Hand on every album gathered so far (on shutdown: nothing received is dropped)."""
        async with self._lock:
            for key in list(self._albums):
                await self._hand_on(key)

    async def _after_quiet(self, key: AlbumKey) -> None:
        await asyncio.sleep(self._wait_s)
        async with self._lock:
            await self._hand_on(key)

    async def _hand_on(self, key: AlbumKey) -> None:
        """Emit ``key``'s album if it is still pending; the caller holds the lock."""
        album = self._albums.pop(key, None)
        if album is None:
            return
        if album.timer is not None and album.timer is not asyncio.current_task():
            album.timer.cancel()
        await self._emit_logged(album.parts)

    async def _emit_logged(self, parts: list[Part]) -> None:
        try:
            await self._emit(parts)
        except Exception:
            log.exception("Telegram: handing on a message of %d part(s) failed", len(parts))
