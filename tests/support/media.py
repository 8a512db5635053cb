"""Helpers of the media tests: messages carrying attachments, an echoing summariser, what a chat stored."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bridge.messages import to_message
from bridge.wiring.runtime import Bridge
from channels import IncomingMessage
from support.attachments import MemoryAttachment
from support.bot import dm, is_summary_request


def with_files(caption: str, *files: MemoryAttachment, user: str = "42") -> IncomingMessage:
    """A direct message from ``user`` carrying ``files`` with ``caption`` as its text."""
    return replace(dm(caption, user=user), attachments=files)


def echo_summary(request: dict[str, Any]) -> str | None:
    """A summariser keeping each user line that marks an attachment (so what reaches daily memory is
    what was stored); the default answer for any other request."""
    if not is_summary_request(request):
        return None
    turns = request["messages"][-1]["content"]
    return "\n".join(f"- {line}" for line in turns.splitlines() if "[" in line)


def stored(bridge: Bridge, user: str = "42") -> list[dict[str, Any]]:
    """The messages stored for the direct chat of ``user``, as the bridge sends them to the model."""
    session = bridge.services.agent.identify(dm("x", user=user)).session_id
    return [to_message(turn) for turn in bridge.services.conversations.load_messages(session, 50)]
