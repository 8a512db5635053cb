"""``media.keep``: the bytes of a photo or file kept under its scope's folder, by a generated name.

The name the platform gave the file never becomes a path: the workspace names the kept file
(``scopes/<scope>/media/<random><suffix>``), the suffix chosen here from the MIME type's
well-known ones. Erasing the scope (``membridge memory erase``) removes the folder with the rest.
"""

from __future__ import annotations

from pathlib import Path

from memory import Workspace

_SUFFIXES = {
    "image/jpeg": ".jpg", "image/png": ".png", "image/webp": ".webp", "image/gif": ".gif",
    "audio/ogg": ".ogg", "audio/mpeg": ".mp3", "audio/mp4": ".m4a", "audio/wav": ".wav", "audio/x-wav": ".wav",
    "audio/webm": ".webm", "audio/flac": ".flac", "application/pdf": ".pdf", "text/plain": ".txt",
    "text/markdown": ".md", "text/csv": ".csv", "application/json": ".json",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
}


def keep_bytes(workspace: Workspace, scope: str, data: bytes, mime_type: str) -> Path:
    """Keep ``data`` in the scope's media folder; returns the new file."""
    return workspace.keep_media(scope, data, _SUFFIXES.get(mime_type.split(";", 1)[0].strip().lower(), ".bin"))
