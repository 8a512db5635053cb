"""``media.keep``: the bytes of a photo or file kept under its scope's folder, by a generated name.

The name the platform gave the file never becomes a path: the kept file is ``<uuid><suffix>`` in
``scopes/<scope>/media/``, the suffix chosen from the MIME type's well-known ones. Erasing the scope
(``membridge memory erase``) removes the folder with everything else of the scope.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from memory.files import atomic_write, make_folders
from memory.scopes import Workspace

_SUFFIXES = {
    "image/jpeg": ".jpg", "image/png": ".png", "image/webp": ".webp", "image/gif": ".gif",
    "audio/ogg": ".ogg", "audio/mpeg": ".mp3", "audio/mp4": ".m4a", "audio/wav": ".wav", "audio/x-wav": ".wav",
    "audio/webm": ".webm", "audio/flac": ".flac", "application/pdf": ".pdf", "text/plain": ".txt",
    "text/markdown": ".md", "text/csv": ".csv", "application/json": ".json",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
}


def keep_bytes(workspace: Workspace, scope: str, data: bytes, mime_type: str) -> Path:
    """Write ``data`` (atomically) as a new file in the scope's media folder; returns its path."""
    folder = workspace.media_dir(scope)
    make_folders(folder)
    suffix = _SUFFIXES.get(mime_type.split(";", 1)[0].strip().lower(), ".bin")
    target = folder / f"{uuid.uuid4().hex}{suffix}"
    atomic_write(target, data)
    return target
