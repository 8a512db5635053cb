"""A test-only attachment: bytes in memory, read like a channel's download (bounded, counted)."""

from __future__ import annotations

from channels import Attachment, AttachmentError, AttachmentKind, AttachmentTooLarge


class MemoryAttachment(Attachment):
    """An attachment whose bytes are already here; ``reads`` counts downloads, ``fail`` makes one fail."""

    def __init__(self, kind: AttachmentKind, name: str, data: bytes, mime_type: str = "application/octet-stream",
                 *, duration_s: float | None = None, size: int | None = -1, fail: str | None = None) -> None:
        super().__init__(kind, name, mime_type, len(data) if size == -1 else size, duration_s)
        self.data = data
        self.reads = 0
        self.fail = fail

    async def read(self, max_bytes: int) -> bytes:
        self.reads += 1
        if self.fail is not None:
            raise AttachmentError(self.fail)
        if len(self.data) > max_bytes:
            raise AttachmentTooLarge(self.name, len(self.data), max_bytes)
        return self.data
