"""Chat channels: Telegram, Slack and the terminal, behind one :class:`Channel` interface."""

from __future__ import annotations

from .base import Channel, ChatType, IncomingMessage, MessageHandler, OutgoingFile, Reply, split_message

__all__ = ["Channel", "ChatType", "IncomingMessage", "MessageHandler", "OutgoingFile", "Reply", "split_message"]
