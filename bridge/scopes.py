"""Whose memory a message may use (DESIGN.md §3): privacy by construction.

A direct message uses the sender's own scope; a group, channel or thread uses the chat's scope,
never a member's private one. With ``memory.scope: global`` everything shares one scope.

This module is the only place a scope name is derived: the agent's turns, the plugins, the CLI's
default ``--scope`` and the terminal banner all call it, so they can never disagree on a name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memory import GLOBAL_SCOPE

if TYPE_CHECKING:  # channels imports asyncio (~15 ms), which a reading command never needs
    from channels import IncomingMessage

    from .config import AppConfig

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_MAX_LEN = 128


def _clean(part: str) -> str:
    return _UNSAFE.sub("_", part)


def _join(parts: list[str]) -> str:
    return "-".join(_clean(p) for p in parts)[:_MAX_LEN]


def _direct(channel: str, team: str | None, user_id: str) -> list[str]:
    return [channel, *([team] if team else []), user_id]


def scope_for(message: IncomingMessage, mode: str = "user", *, thread_channels: frozenset[str] = frozenset()) -> str:
    """The scope of ``message``. Only the channels in ``thread_channels`` give each thread a memory of
    its own (Slack's ``thread_scope``); elsewhere a thread, e.g. a Telegram forum topic, shares its chat's."""
    if mode == "global":
        return GLOBAL_SCOPE
    if message.chat_type == "direct":
        return _join(_direct(message.channel, message.team, message.user_id))
    parts = [message.channel, *([message.team] if message.team else []), "chat", message.chat_id]
    if message.thread_id and message.channel in thread_channels:
        parts.append(message.thread_id)
    return _join(parts)


def terminal_scope(user: str, mode: str = "user") -> str:
    """The scope of ``user`` at the terminal: exactly the scope of a message they type there."""
    if mode == "global":
        return GLOBAL_SCOPE
    return _join(_direct("terminal", None, user))


def thread_scope_channels(config: AppConfig) -> frozenset[str]:
    """The channels whose threads get a memory of their own (Slack's ``thread_scope``): the agent
    and a cluster receiver must derive the same scope for the same message."""
    return frozenset({"slack"} if config.channels.slack.thread_scope else ())


@dataclass(frozen=True)
class TurnIdentity:
    """Who a turn is for: its session (one per chat and scope), scope and permissions."""

    session_id: str
    scope: str
    user: str
    is_admin: bool
