"""A file on this machine as an attachment: the terminal's ``/attach PATH``.

Here the path is the local user's own choice (they could open the file anyway); it is checked when
attached (exists, is a file, is readable) so a mistake is said at once, and read only when the
bridge asks, bounded like a download.
"""

from __future__ import annotations

import asyncio
import mimetypes
import os
from pathlib import Path

from .base import Attachment, AttachmentError, AttachmentKind, AttachmentTooLarge

PHOTO_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".webp", ".gif"})
AUDIO_SUFFIXES = frozenset({".mp3", ".m4a", ".wav", ".ogg", ".oga", ".opus", ".flac", ".webm"})


def kind_of(path: Path) -> AttachmentKind:
    """``photo`` or ``audio`` by the file's extension, else ``document``."""
    suffix = path.suffix.lower()
    return "photo" if suffix in PHOTO_SUFFIXES else "audio" if suffix in AUDIO_SUFFIXES else "document"


class LocalFileAttachment(Attachment):
    def __init__(self, path: Path) -> None:
        """Raises :class:`AttachmentError` (said as it is) for a path that is missing, a folder or unreadable."""
        if not path.exists():
            raise AttachmentError(f"There is no file at {path}.")
        if not path.is_file():
            raise AttachmentError(f"{path} is not a file.")
        if not os.access(path, os.R_OK):
            raise AttachmentError(f"I can't read {path} (permission denied).")
        mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        super().__init__(kind_of(path), path.name, mime, path.stat().st_size)
        self.path = path

    async def read(self, max_bytes: int) -> bytes:
        return await asyncio.to_thread(self._read, max_bytes)

    def _read(self, max_bytes: int) -> bytes:
        try:
            with self.path.open("rb") as handle:
                data = handle.read(max_bytes + 1)
        except OSError as exc:
            raise AttachmentError(f"I couldn't read {self.path}: {exc.strerror or exc}.") from None
        if len(data) > max_bytes:
            raise AttachmentTooLarge(self.name, max(len(data), self.size or 0), max_bytes)
        return data
