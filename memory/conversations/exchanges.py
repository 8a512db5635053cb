"""A scope's latest exchanges for a person to read: each message with the answer it got, newest first.

An exchange is a visible user message and what followed it up to the next one; its answer is the
last thing the assistant said there in words (tool steps are not shown). A forget deletes a turn
whole, so a forgotten message never comes back here. Pages are keyed by the last exchange shown
(its time, session and seq), so exchanges that arrive meanwhile do not shift the next page.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..index.database import Database
from .conversation_rows import chat_of

#: (created_at, session_id, seq) of the last exchange of the page before.
Cursor = tuple[float, str, int]


@dataclass(frozen=True)
class Exchange:
    """A person's message (``seq`` of ``session_id``, the scope's ``chat``) and the answer it got
    (None: none yet, or the turn failed)."""

    session_id: str
    chat: str
    seq: int
    at: float
    message: str
    answer: str | None

    @property
    def cursor(self) -> Cursor:
        return (self.at, self.session_id, self.seq)


# The page first (sessions, then their messages by primary key: the index on created_at alone would
# walk every scope's messages; 0.3 ms against 54 ms on 300k messages), then the answer of each of
# its turns only: the last assistant message with text before the next visible one.
_QUERY = """
SELECT p.session_id, p.seq, p.created_at, p.body, (
    SELECT a.body FROM messages a WHERE a.session_id = p.session_id AND a.seq > p.seq AND a.role = 'assistant'
    AND a.body != '' AND a.seq < coalesce((SELECT min(n.seq) FROM messages n WHERE n.session_id = p.session_id
    AND n.seq > p.seq AND n.visible = 1), 9223372036854775807) ORDER BY a.seq DESC LIMIT 1)
FROM (
    SELECT m.session_id, m.seq, m.created_at, m.body FROM sessions s CROSS JOIN messages m ON m.session_id = s.id
    WHERE s.scope = ? AND m.visible = 1 AND (m.created_at, m.session_id, m.seq) < (?, ?, ?)
    ORDER BY m.created_at DESC, m.session_id DESC, m.seq DESC LIMIT ?
) p ORDER BY p.created_at DESC, p.session_id DESC, p.seq DESC
"""
_NEWEST: Cursor = (float("inf"), "", 0)


class ConversationExchanges:
    """Reading a scope's exchanges a page at a time (a part of the conversation store)."""

    db: Database

    def exchanges(self, scope: str, limit: int, before: Cursor | None = None) -> list[Exchange]:
        """``scope``'s latest ``limit`` exchanges older than ``before`` (default: the newest), newest first."""
        rows = self.db.query(_QUERY, (scope, *(before or _NEWEST), limit))
        return [Exchange(row[0], chat_of(row[0], scope), row[1], row[2], row[3], row[4]) for row in rows]
