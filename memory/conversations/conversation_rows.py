"""The rows of the conversation tables as values, and the reads every part of the store shares.

:class:`~memory.conversations.conversations.ConversationStore` is assembled from parts, one per concern (sessions
and messages, flush jobs, retention, forgetting); what more than one part reads is here.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from .turns import Turn, decode_meta

SESSION_COLUMNS = "id, scope, channel, context_start_seq, summary, updated_at, summarized_seq, cleared_seq"


def session_id(scope: str, chat_key: str) -> str:
    """The session of a chat in a scope: ``<scope>|<chat>`` (scope names never contain ``|``)."""
    return f"{scope}|{chat_key}"


def chat_of(session: str, scope: str) -> str:
    """The chat part of a session id of ``scope``: what stays the same when a scope is moved."""
    return session.removeprefix(f"{scope}|")


@dataclass(frozen=True)
class Session:
    id: str
    scope: str
    channel: str
    context_start_seq: int
    summary: str | None
    updated_at: float
    summarized_seq: int = 0  # every message up to here belongs to a recorded flush job
    cleared_seq: int = 0  # where the last /clear started a fresh context


def stored_turn(role: str, body: str, meta: str | None) -> Turn:
    """A stored row as a turn."""
    return Turn(role, body, decode_meta(meta))


def session_row(conn: sqlite3.Connection, session_id: str) -> Session | None:
    row = conn.execute(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return Session(*row) if row else None


def last_seq(conn: sqlite3.Connection, session_id: str) -> int:
    """The highest seq the session ever used: its rows, or a boundary or watermark past them."""
    row = conn.execute(
        "SELECT max(coalesce((SELECT max(seq) FROM messages WHERE session_id = s.id), 0),"
        " s.summarized_seq, s.context_start_seq - 1) FROM sessions s WHERE s.id = ?",
        (session_id,),
    ).fetchone()
    return int(row[0]) if row else 0
