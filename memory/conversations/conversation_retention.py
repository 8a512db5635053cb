"""Retention of conversations: old messages that reached daily memory and old scheduler pairs go.

Both run in the nightly pass (``conversation.max_age_days``, ``conversation.keep_scheduled``). A
turn no flush job has taken yet, or whose job is still pending, always stays: retention never
deletes what daily memory has not received.
"""

from __future__ import annotations

import time

from ..index.database import Database
from .turns import SCHEDULED_PREFIX, Turn, is_scheduled


class ConversationRetention:
    """Deleting old conversation rows within the configured limits (a part of the conversation store)."""

    db: Database

    def prune_scheduled_messages(self, session_id: str, keep_last_n: int) -> int:
        """Keep only the newest ``keep_last_n`` scheduler-injected pairs; returns rows deleted."""
        stored = self.db.query("SELECT seq, role, body FROM messages WHERE session_id = ? ORDER BY seq", (session_id,))
        pairs: list[list[int]] = []
        for index, (seq, role, body) in enumerate(stored):
            if is_scheduled(Turn(role, body)):
                pair = [seq]
                if index + 1 < len(stored) and stored[index + 1][1] == "assistant":
                    pair.append(stored[index + 1][0])
                pairs.append(pair)
        doomed = [seq for pair in (pairs[:-keep_last_n] if keep_last_n else pairs) for seq in pair]
        if doomed:
            with self.db.transaction() as conn:
                conn.executemany("DELETE FROM messages WHERE session_id = ? AND seq = ?", [(session_id, s) for s in doomed])
        return len(doomed)

    def cleanup(self, max_age_days: float, now: float | None = None) -> int:
        """Delete messages older than ``max_age_days`` that already reached daily memory (a turn no
        job has taken yet, or whose job is pending, stays) and sessions left empty; returns rows
        deleted. A session's watermark lives in its row, so a chat that comes back starts afresh."""
        cutoff = (now or time.time()) - max_age_days * 86400
        with self.db.transaction() as conn:
            deleted = conn.execute(
                "DELETE FROM messages WHERE created_at < ?"
                " AND seq <= (SELECT summarized_seq FROM sessions s WHERE s.id = messages.session_id)"
                " AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.session_id = messages.session_id"
                " AND j.status = 'pending' AND messages.seq BETWEEN j.seq_from AND j.seq_to)",
                (cutoff,),
            ).rowcount
            conn.execute(
                "DELETE FROM sessions WHERE updated_at < ? AND NOT EXISTS"
                " (SELECT 1 FROM messages WHERE messages.session_id = sessions.id)",
                (cutoff,),
            )
            conn.execute(
                "DELETE FROM jobs WHERE status = 'done' AND coalesce(done_at, created_at) < ?", (cutoff,)
            )
        return int(deleted)

    def prune_scheduled(self, keep_last_n: int) -> int:
        """:meth:`prune_scheduled_messages` in every session (``conversation.keep_scheduled``, nightly);
        returns rows deleted. A flush drops these pairs anyway, so no turn's memory goes with them."""
        ids = [row[0] for row in self.db.query(
            "SELECT DISTINCT session_id FROM messages WHERE body LIKE ? ORDER BY session_id", (f"%{SCHEDULED_PREFIX}%",),
        )]
        return sum(self.prune_scheduled_messages(session_id, keep_last_n) for session_id in ids)
