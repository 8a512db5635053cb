"""Telegram attachments: voice notes, audio, photos and documents, fetched only when read.

A message carries file ids, not bytes. :class:`TelegramAttachment` keeps the ids and sizes from
the message; ``read`` asks ``getFile`` (through python-telegram-bot) for the download path and
then fetches the bytes itself, streamed and bounded (see :mod:`channels.download`).

The Bot API lets a bot download files of at most 20 MB. When the message already says a file is
bigger than that (or than the caller's limit), ``read`` refuses before any call. A photo comes
in several sizes; the largest one within the limit is read. ``getFile`` answers a path relative
to the file endpoint; a local path (what a Bot API server in local mode gives) is refused, so no
path from a message or the server is ever opened on this machine.
"""

from __future__ import annotations

import mimetypes
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, get_args

from telegram import Bot, Message, PhotoSize
from telegram.error import TelegramError
from telegram.warnings import PTBDeprecationWarning

from .base import Attachment, AttachmentError, AttachmentKind, AttachmentTooLarge
from .download import download, time_limited

__all__ = ["BOT_API_DOWNLOAD_LIMIT", "TelegramAttachment", "attachment_from_wire", "attachments_of", "ptb_seconds"]

#: The largest file the Bot API lets a bot download (getFile refuses bigger ones).
BOT_API_DOWNLOAD_LIMIT = 20 * 1000 * 1000
#: How long one attachment's read (getFile and the download) may take.
DEFAULT_DOWNLOAD_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class _Variant:
    """One downloadable file: a document, or one of a photo's sizes."""

    file_id: str
    size: int | None


class TelegramAttachment(Attachment):
    """A file of a Telegram message; ``read`` downloads it (the largest fitting size of a photo)."""

    def __init__(self, kind: AttachmentKind, name: str, mime_type: str, variants: Sequence[_Variant], *,
                 bot: Bot, timeout_s: float, duration_s: float | None = None) -> None:
        fitting = [v for v in variants if v.size is None or v.size <= BOT_API_DOWNLOAD_LIMIT]
        shown = (fitting or list(variants))[-1]
        super().__init__(kind, name, mime_type, shown.size, duration_s)
        self._variants = tuple(variants)  # smallest first
        self._bot = bot
        self._timeout_s = timeout_s

    async def read(self, max_bytes: int) -> bytes:
        limit = min(max_bytes, BOT_API_DOWNLOAD_LIMIT)
        variant = self._pick(limit)
        async with time_limited(self.name, self._timeout_s):
            url = await self._file_url(variant, limit)
            return await download(url, name=self.name, max_bytes=limit, platform="Telegram")

    def wire_source(self) -> dict[str, Any]:
        return {"variants": [[v.file_id, v.size] for v in self._variants]}

    def _pick(self, limit: int) -> _Variant:
        """The largest variant the message says fits ``limit``; refused before any transfer else."""
        fitting = [v for v in self._variants if v.size is None or v.size <= limit]
        if not fitting:
            raise AttachmentTooLarge(self.name, min(v.size or 0 for v in self._variants), limit)
        return fitting[-1]

    async def _file_url(self, variant: _Variant, limit: int) -> str:
        """``getFile``: where to download the file (an http(s) URL, never a local path)."""
        try:
            file = await self._bot.get_file(variant.file_id)
        except TelegramError as exc:
            raise AttachmentError(f"Telegram did not hand over {self.name} ({exc.message}). "
                                  "Try sending it again.") from exc
        if file.file_size is not None and file.file_size > limit:
            raise AttachmentTooLarge(self.name, file.file_size, limit)
        url = file.file_path or ""
        if not url.startswith(("https://", "http://")):
            raise AttachmentError(f"Telegram gave no download address for {self.name}, so it was not read.")
        return url


def attachments_of(message: Message, bot: Bot, timeout_s: float = DEFAULT_DOWNLOAD_TIMEOUT_S
                   ) -> tuple[TelegramAttachment, ...]:
    """The voice note, audio, photo or document of ``message``; empty for anything else
    (stickers, videos, locations: the channel answers those with a note)."""
    found = _described(message)
    if found is None:
        return ()
    kind, name, mime, variants, duration = found
    return (TelegramAttachment(kind, name, mime, variants, bot=bot, timeout_s=timeout_s, duration_s=duration),)


def attachment_from_wire(data: Mapping[str, Any], bot: Bot, timeout_s: float = DEFAULT_DOWNLOAD_TIMEOUT_S
                         ) -> TelegramAttachment:
    """The attachment :meth:`TelegramAttachment.to_wire` described, read through ``bot``."""
    try:
        kind = data["kind"]
        if kind not in get_args(AttachmentKind):
            raise ValueError(f"unknown kind {kind!r}")
        variants = [_Variant(str(file_id), None if size is None else int(size))
                    for file_id, size in data["source"]["variants"]]
        duration = data.get("duration_s")
        return TelegramAttachment(kind, str(data["name"]), str(data["mime_type"]), variants, bot=bot,
                                  timeout_s=timeout_s, duration_s=None if duration is None else float(duration))
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise ValueError(f"not a Telegram attachment ({exc!r})") from exc


_Described = tuple[AttachmentKind, str, str, list[_Variant], float | None]


def _described(message: Message) -> _Described | None:
    """Kind, name, MIME type, variants and duration of the message's file, if it has one we read."""
    if message.voice is not None:
        voice = message.voice
        mime = voice.mime_type or "audio/ogg"
        return ("voice", _generated_name("voice", voice.file_unique_id, mime), mime,
                [_Variant(voice.file_id, voice.file_size)], ptb_seconds(voice, "duration"))
    if message.audio is not None:
        audio = message.audio
        mime = audio.mime_type or _guess_type(audio.file_name, "audio/mpeg")
        name = audio.file_name or _generated_name("audio", audio.file_unique_id, mime)
        return ("audio", name, mime, [_Variant(audio.file_id, audio.file_size)], ptb_seconds(audio, "duration"))
    if message.photo:
        largest = message.photo[-1]
        return ("photo", f"photo-{largest.file_unique_id}.jpg", "image/jpeg", _photo_variants(message.photo), None)
    if message.document is not None:
        document = message.document
        mime = document.mime_type or _guess_type(document.file_name, "application/octet-stream")
        name = document.file_name or _generated_name("document", document.file_unique_id, mime)
        return ("document", name, mime, [_Variant(document.file_id, document.file_size)], None)
    return None


def _photo_variants(sizes: Sequence[PhotoSize]) -> list[_Variant]:
    """A photo's sizes, smallest first (Telegram lists them so, but the order is not promised)."""
    ordered = sorted(sizes, key=lambda p: (p.file_size or 0, p.width * p.height))
    return [_Variant(p.file_id, p.file_size) for p in ordered]


def _generated_name(stem: str, unique_id: str, mime: str) -> str:
    """A name for a file Telegram gives none (voice notes, some audio), e.g. ``voice-AgAD….ogg``."""
    return f"{stem}-{unique_id}{_TYPES.guess_extension(mime) or ''}"


def _guess_type(name: str | None, default: str) -> str:
    guessed, _ = _TYPES.guess_type(name or "")
    return guessed or default


def _known_types() -> mimetypes.MimeTypes:
    """Python's built-in table (not this machine's /etc/mime.types, so names are the same
    everywhere) plus the audio types Telegram sends that it lacks."""
    types = mimetypes.MimeTypes()
    for mime, extension in (("audio/ogg", ".ogg"), ("audio/mp4", ".m4a"), ("audio/x-m4a", ".m4a"),
                            ("audio/opus", ".opus"), ("audio/flac", ".flac")):
        types.add_type(mime, extension)
    return types


_TYPES = _known_types()


def ptb_seconds(obj: Any, attribute: str) -> float | None:
    """A PTB duration attribute in seconds: PTB 22 gives an int (with a deprecation warning) or
    a timedelta, depending on the PTB_TIMEDELTA environment variable."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = getattr(obj, attribute)
    if value is None:
        return None
    return value.total_seconds() if isinstance(value, timedelta) else float(value)
