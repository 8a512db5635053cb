"""Chat channels: Telegram, Slack and the terminal, behind one :class:`Channel` interface."""

from __future__ import annotations

from .base import (
    Attachment,
    AttachmentError,
    AttachmentKind,
    AttachmentTooLarge,
    Channel,
    ChatType,
    IncomingMessage,
    MessageHandler,
    OutgoingFile,
    Reply,
    sizes_over,
    split_message,
)

__all__ = ["Attachment", "AttachmentError", "AttachmentKind", "AttachmentTooLarge", "Channel", "ChatType", "IncomingMessage", "MessageHandler", "OutgoingFile", "Reply", "sizes_over", "split_message"]
