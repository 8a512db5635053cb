"""Whose memory a message may use (DESIGN.md §3): privacy by construction.

A direct message uses the sender's own scope; a group, channel or thread uses the chat's scope,
never a member's private one. With ``memory.scope: global`` everything shares one scope.
"""

from __future__ import annotations

import re

from channels import IncomingMessage
from memory.scopes import GLOBAL_SCOPE

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def _clean(part: str) -> str:
    return _UNSAFE.sub("_", part)


def scope_for(message: IncomingMessage, mode: str = "user", *, thread_scope: bool = False) -> str:
    if mode == "global":
        return GLOBAL_SCOPE
    prefix = [message.channel] + ([message.team] if message.team else [])
    if message.chat_type == "direct":
        parts = [*prefix, message.user_id]
    else:
        parts = [*prefix, "chat", message.chat_id]
        if thread_scope and message.thread_id:
            parts.append(message.thread_id)
    return "-".join(_clean(p) for p in parts)[:128]
