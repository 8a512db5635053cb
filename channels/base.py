"""What every channel shares: the message types, the Channel interface, reply splitting.

A channel turns its platform's updates into :class:`IncomingMessage` objects, hands each to the
callback the bridge gave it, and sends the :class:`Reply` the bridge returns. It knows nothing of
memory, scopes or the LLM.
"""

from __future__ import annotations

import asyncio
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

ChatType = Literal["direct", "group"]
AttachmentKind = Literal["voice", "audio", "photo", "document"]


class AttachmentError(Exception):
    """An attachment could not be fetched. ``str(exc)`` is said to the person as it is."""


def sizes_over(size: int, limit: int) -> tuple[str, str]:
    """``size`` and ``limit`` as a refusal says them ("1.7 MB", "1.5 MB"), in the largest unit
    whose one decimal still tells them apart, else in bytes ("2,001 bytes", "2,000 bytes"): a
    refusal never claims a file is over a limit that reads as larger."""
    for unit, scale in (("MB", 1_000_000), ("KB", 1_000)):
        shown, allowed = round(size / scale, 1), round(limit / scale, 1)
        if limit >= scale and shown > allowed:
            return f"{_decimal(shown)} {unit}", f"{_decimal(allowed)} {unit}"
    return f"{size:,} bytes", f"{limit:,} bytes"


def _decimal(value: float) -> str:
    """One decimal, dropped when it is 0 ("25", "1.7")."""
    return f"{value:.1f}".removesuffix(".0")


class AttachmentTooLarge(AttachmentError):
    """An attachment is over the size the bridge accepts (or the platform lets a bot download)."""

    def __init__(self, name: str, size: int, limit: int) -> None:
        shown, allowed = sizes_over(size, limit)
        super().__init__(f"{name} is {shown}, over the limit of {allowed}, so it was not read.")
        self.name = name
        self.size = size
        self.limit = limit


class Attachment(ABC):
    """A file that came with a message: a voice note, an audio file, a photo or a document.

    Nothing is downloaded until the bridge calls :meth:`read`, so a refusal (an unknown type, a
    size over a limit) costs no transfer. ``name`` is what the platform calls the file: it is shown
    to people and used to guess a type, never as a path on this machine.
    """

    def __init__(self, kind: AttachmentKind, name: str, mime_type: str, size: int | None = None,
                 duration_s: float | None = None) -> None:
        self.kind: AttachmentKind = kind
        self.name = name
        self.mime_type = mime_type
        self.size = size
        self.duration_s = duration_s

    @abstractmethod
    async def read(self, max_bytes: int) -> bytes:
        """The file's bytes, streamed and time-limited.

        Raises :class:`AttachmentTooLarge` past ``max_bytes`` (before any transfer when the size
        is known, else as soon as the stream passes it) and :class:`AttachmentError` when the
        platform fails or times out.
        """

    def to_wire(self) -> dict[str, Any]:
        """JSON data from which the channel that made this attachment makes it again in another
        process (:meth:`Channel.attachment_from_wire`): a cluster receiver queues messages that a
        worker answers. ``source`` is the channel's own part (file ids, not bytes)."""
        return {"kind": self.kind, "name": self.name, "mime_type": self.mime_type, "size": self.size,
                "duration_s": self.duration_s, "source": self.wire_source()}

    def wire_source(self) -> dict[str, Any]:
        """What the channel needs to fetch the file again. An attachment that lives only in this
        process (a local file) cannot leave it."""
        raise TypeError(f"{type(self).__name__} cannot be sent to another process")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.kind} {self.name!r} {self.mime_type} {self.size} bytes>"


@dataclass(frozen=True)
class IncomingMessage:
    """One message from a person, in a channel-neutral form.

    ``chat_type`` is ``direct`` for a one-to-one chat and ``group`` for anything shared (groups,
    channels, threads): the bridge derives whose memory a turn may use from it.
    """

    channel: str
    chat_id: str
    chat_type: ChatType
    user_id: str
    user_name: str
    text: str
    message_id: str
    thread_id: str | None = None
    team: str | None = None
    received_at: float = field(default_factory=time.time)
    raw: Any = field(default=None, compare=False, repr=False)
    #: Files sent with the message; ``text`` is then the caption (possibly empty).
    attachments: tuple[Attachment, ...] = field(default=(), compare=False)

    @property
    def chat_key(self) -> str:
        """Messages with the same key are answered strictly in order."""
        return f"{self.channel}:{self.team or ''}:{self.chat_id}:{self.thread_id or ''}"

    @property
    def dedupe_key(self) -> str:
        """The same delivery seen twice has the same key, so it is answered once."""
        return f"{self.channel}:{self.team or ''}:{self.chat_id}:{self.message_id}"


@dataclass(frozen=True)
class OutgoingFile:
    """A file the bot sends as a document: ``path`` on this machine, shown to the person as ``name``.

    ``temporary`` files were made for this one reply; the bridge deletes them once the reply is
    sent (or could not be).
    """

    path: Path
    name: str
    mime_type: str = "application/octet-stream"
    temporary: bool = False


@dataclass(frozen=True)
class Reply:
    """What the bot answers. ``text`` is Markdown unless ``markdown`` is False; ``file``, if any,
    follows the text as a document."""

    text: str
    thread_id: str | None = None
    reply_to: str | None = None
    markdown: bool = True
    file: OutgoingFile | None = None


#: The callback a channel gets from whoever answers (the bridge, a cluster receiver). It only
#: queues the message and returns without waiting for the turn: ordering each chat's turns and
#: dropping redeliveries (the same :attr:`IncomingMessage.dedupe_key` again) are the callback's
#: job (:mod:`channels.ordering`). A channel therefore calls and awaits it in arrival order, straight
#: from its intake path, and neither orders nor dedupes messages itself.
#: Once the message is safe with it (appended to Redis, or its turn stored), the callback's owner
#: calls :meth:`Channel.accepted`: a channel that confirms deliveries to its platform does so then.
MessageHandler = Callable[[IncomingMessage], Awaitable[None]]


class Channel(ABC):
    """A chat platform. ``start`` returns once the channel receives; ``stop`` stops intake."""

    name: str = "channel"
    #: The longest message the platform accepts; longer replies are split.
    max_message_chars: int = 4000

    @abstractmethod
    async def start(self, on_message: MessageHandler) -> None:
        """Begin receiving; call ``on_message`` for every message meant for the bot."""

    @abstractmethod
    async def stop(self) -> None:
        """Stop receiving and release connections. Safe to call twice."""

    async def connect(self) -> None:  # noqa: B027 - most channels can send as soon as they exist
        """Be ready to ``send`` without receiving: a cluster worker answers messages another process
        took in. :meth:`stop` disconnects."""

    def accepted(self, message: IncomingMessage) -> None:  # noqa: B027 - most platforms need not know
        """``message`` is safe with whoever answers it (appended to the cluster's stream, or its turn
        stored), so the platform may stop delivering it. Until then a channel that can (Telegram
        polling) leaves it unconfirmed, and a crash means it is delivered again rather than lost.
        Called on the event loop; a second call, or one for a message this channel does not hold,
        does nothing."""

    async def stop_receiving(self) -> None:  # noqa: B027 - optional first step of a shutdown
        """Take no new messages, but keep what ``send`` needs: in-flight turns may still answer.

        A shutdown calls this first, waits for the turns in flight, then calls :meth:`stop`.
        Messages not taken are left with the platform (redelivered at the next start).
        """

    @abstractmethod
    async def send(self, reply: Reply, to: IncomingMessage) -> None:
        """Deliver ``reply`` in the chat (and thread) of ``to``, split to the platform's limit."""

    @abstractmethod
    async def send_file(self, file: OutgoingFile, to: IncomingMessage) -> None:
        """Deliver ``file`` as a document in the chat (and thread) of ``to``. A file over the
        platform's size limit is not sent: the chat gets a message saying so instead."""

    async def _bytes_to_upload(self, file: OutgoingFile, to: IncomingMessage, limit_bytes: int,
                               platform: str) -> bytes | None:
        """``file``'s bytes for :meth:`send_file`, read off the event loop (the platform libraries
        would read them on it); None when the file is over ``platform``'s upload limit, after
        saying so in ``to``'s chat instead."""
        notice = oversize_notice(file, limit_bytes, platform)
        if notice is not None:
            await self.send(Reply(notice, markdown=False), to)
            return None
        return await asyncio.to_thread(file.path.read_bytes)

    def working(self, to: IncomingMessage) -> AbstractAsyncContextManager[None]:
        """Shown while a turn runs (a typing action, a placeholder); nothing by default."""
        return nullcontext()

    def describe(self) -> str:
        """Who the bot is on this channel, once started: a status line of ``membridge run``."""
        return self.name

    def attachment_from_wire(self, data: dict[str, Any]) -> Attachment:
        """The attachment :meth:`Attachment.to_wire` described, readable through this channel
        (connected, in this process). ValueError if ``data`` is not one of this channel's."""
        raise ValueError(f"the {self.name} channel has no attachments to rebuild")

    async def publish_commands(self, commands: Sequence[tuple[str, str]]) -> None:  # noqa: B027 - optional
        """Show the bot's chat commands, ``(name, description)``, in the platform's command menu
        where it has one that a bot can set (Telegram); nothing by default."""


def oversize_notice(file: OutgoingFile, limit_bytes: int, platform: str) -> str | None:
    """What to say instead of sending ``file`` when it is over ``platform``'s limit, else None."""
    size = file.path.stat().st_size
    if size <= limit_bytes:
        return None
    shown, allowed = sizes_over(size, limit_bytes)
    return f"{file.name} is {shown}, over the {allowed} {platform} lets a bot send, so it was not sent here."


_FENCE_RE = re.compile(r"^\s*(```|~~~)")


def _fence_ranges(text: str) -> list[tuple[int, int]]:
    """Character ranges of fenced code blocks, so splits avoid landing inside them."""
    ranges: list[tuple[int, int]] = []
    offset = 0
    opened: int | None = None
    for line in text.splitlines(keepends=True):
        if _FENCE_RE.match(line):
            if opened is None:
                opened = offset
            else:
                ranges.append((opened, offset + len(line)))
                opened = None
        offset += len(line)
    if opened is not None:
        ranges.append((opened, len(text)))
    return ranges


def _best_cut(text: str, limit: int, fences: list[tuple[int, int]]) -> int:
    """Where to cut ``text`` (at most ``limit`` chars): paragraph, then line, then word, then hard."""

    def inside_fence(pos: int) -> bool:
        return any(start < pos < end for start, end in fences)

    floor = limit // 3
    for separator in ("\n\n", "\n", " "):
        pos = text.rfind(separator, floor, limit)
        while pos > 0 and inside_fence(pos):
            pos = text.rfind(separator, floor, pos)
        if pos > 0:
            return pos + len(separator)
    for separator in ("\n\n", "\n", " "):
        pos = text.rfind(separator, floor, limit)
        if pos > 0:
            return pos + len(separator)
    return limit


def split_message(text: str, limit: int) -> list[str]:
    """Split ``text`` into pieces of at most ``limit`` characters at natural boundaries.

    Paragraphs first, then lines, then words; a cut inside a fenced code block is avoided when
    another boundary exists. Every piece is non-empty and joining them gives back the text
    (whitespace at the cuts aside).
    """
    if limit < 1:
        raise ValueError("limit must be positive")
    pieces: list[str] = []
    rest = text
    while len(rest) > limit:
        cut = _best_cut(rest, limit, _fence_ranges(rest))
        piece = rest[:cut].rstrip()
        if piece:
            pieces.append(piece)
        rest = rest[cut:].lstrip("\n")
    if rest.strip() or not pieces:
        pieces.append(rest)
    return pieces
