"""The conversation store: sessions, their messages and durable flush jobs, in ``index.db``.

Messages are append-only with a ``seq`` that continues per session. The LLM context of a session
starts at ``context_start_seq``: trimming or ``/clear`` moves that boundary, older rows stay on
disk. Trimming records a flush job in the same transaction that moves the boundary, so a crash at
any point either keeps the old context or leaves a job that the next start completes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .storage import Database

Message = dict[str, Any]
SCHEDULED_PREFIX = "[SCHEDULED]"

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY, scope TEXT NOT NULL, channel TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL, updated_at REAL NOT NULL,
    context_start_seq INTEGER NOT NULL DEFAULT 0, summary TEXT
);
CREATE TABLE IF NOT EXISTS messages (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE, seq INTEGER NOT NULL,
    role TEXT NOT NULL, body TEXT NOT NULL, visible INTEGER NOT NULL, created_at REAL NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS messages_created ON messages (created_at);
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, session_id TEXT NOT NULL, scope TEXT NOT NULL,
    seq_from INTEGER NOT NULL, seq_to INTEGER NOT NULL, reason TEXT NOT NULL, day TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending', attempts INTEGER NOT NULL DEFAULT 0, error TEXT,
    created_at REAL NOT NULL, done_at REAL
);
CREATE INDEX IF NOT EXISTS jobs_status ON jobs (status);
CREATE TABLE IF NOT EXISTS daily_summaries (session_id TEXT PRIMARY KEY, last_seq INTEGER NOT NULL);
"""


@dataclass(frozen=True)
class Session:
    id: str
    scope: str
    channel: str
    context_start_seq: int
    summary: str | None
    updated_at: float


@dataclass(frozen=True)
class StoredMessage:
    seq: int
    message: Message
    visible: bool
    created_at: float


@dataclass(frozen=True)
class FlushJob:
    id: int
    session_id: str
    scope: str
    seq_from: int
    seq_to: int
    reason: str
    day: str
    attempts: int


def is_visible_turn(message: Message) -> bool:
    """A real user message starts a visible turn; tool results and assistant steps belong to it."""
    return message.get("role") == "user"


def is_scheduled(message: Message) -> bool:
    content = message.get("content")
    return isinstance(content, str) and content.startswith(SCHEDULED_PREFIX)


class ConversationStore:
    def __init__(self, db: Database) -> None:
        self.db = db
        db.execute_script(SCHEMA)

    # ------------------------------------------------------------- sessions
    def ensure_session(self, session_id: str, scope: str, channel: str = "") -> Session:
        now = time.time()
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO sessions (id, scope, channel, created_at, updated_at) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (id) DO NOTHING",
                (session_id, scope, channel, now, now),
            )
        session = self.get_session(session_id)
        assert session is not None
        return session

    def get_session(self, session_id: str) -> Session | None:
        rows = self.db.query(
            "SELECT id, scope, channel, context_start_seq, summary, updated_at FROM sessions WHERE id = ?", (session_id,)
        )
        return Session(*rows[0]) if rows else None

    def sessions_active_since(self, since: float) -> list[Session]:
        rows = self.db.query(
            "SELECT id, scope, channel, context_start_seq, summary, updated_at FROM sessions WHERE updated_at >= ?"
            " ORDER BY id",
            (since,),
        )
        return [Session(*row) for row in rows]

    # ------------------------------------------------------------- messages
    def recent_scopes(self, since: float, limit: int = 20) -> list[str]:
        """The scopes of sessions active since ``since``, most recent first (for warming caches)."""
        sessions = sorted(self.sessions_active_since(since), key=lambda session: -session.updated_at)
        return list(dict.fromkeys(session.scope for session in sessions))[:limit]

    def append_messages(self, session_id: str, messages: Sequence[Message]) -> list[int]:
        """Append in order; ``seq`` continues from the session's last (safe with concurrent writers)."""
        if not messages:
            return []
        now = time.time()
        with self.db.transaction() as conn:
            last = conn.execute("SELECT coalesce(max(seq), 0) FROM messages WHERE session_id = ?", (session_id,)).fetchone()[0]
            seqs = list(range(last + 1, last + 1 + len(messages)))
            conn.executemany(
                "INSERT INTO messages (session_id, seq, role, body, visible, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (session_id, seq, m.get("role", ""), json.dumps(m, ensure_ascii=False), int(is_visible_turn(m)), now)
                    for seq, m in zip(seqs, messages)
                ],
            )
            conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id))
        return seqs

    def context_messages(self, session_id: str) -> list[StoredMessage]:
        """Every message inside the session's LLM context, oldest first."""
        rows = self.db.query(
            "SELECT m.seq, m.body, m.visible, m.created_at FROM messages m JOIN sessions s ON s.id = m.session_id"
            " WHERE m.session_id = ? AND m.seq >= s.context_start_seq ORDER BY m.seq",
            (session_id,),
        )
        return [StoredMessage(row[0], json.loads(row[1]), bool(row[2]), row[3]) for row in rows]

    def load_messages(self, session_id: str, max_turns: int) -> list[Message]:
        """The context's last ``max_turns`` visible user turns, with their tool steps."""
        if max_turns < 1:
            raise ValueError("max_turns must be 1 or more")
        stored = self.context_messages(session_id)
        starts = [i for i, item in enumerate(stored) if item.visible]
        first = starts[-max_turns] if len(starts) > max_turns else (starts[0] if starts else len(stored))
        return [item.message for item in stored[first:]]

    def messages_between(self, session_id: str, seq_from: int, seq_to: int) -> list[Message]:
        rows = self.db.query(
            "SELECT body FROM messages WHERE session_id = ? AND seq BETWEEN ? AND ? ORDER BY seq",
            (session_id, seq_from, seq_to),
        )
        return [json.loads(row[0]) for row in rows]

    def clear_context(self, session_id: str) -> None:
        """Start the LLM context afresh; the rows stay on disk."""
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE sessions SET context_start_seq = (SELECT coalesce(max(seq), 0) + 1 FROM messages"
                " WHERE session_id = ?), summary = NULL WHERE id = ?",
                (session_id, session_id),
            )

    def trim(self, session_id: str, new_start_seq: int, reason: str, day: str) -> FlushJob | None:
        """Move the context boundary to ``new_start_seq`` and record a flush job for what left.

        Both happen in one transaction: the trimmed range is never lost and never queued twice.
        """
        with self.db.transaction() as conn:
            row = conn.execute("SELECT scope, context_start_seq FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if row is None or new_start_seq <= row[1]:
                return None
            scope, old_start = row
            seq_to = new_start_seq - 1
            conn.execute("UPDATE sessions SET context_start_seq = ? WHERE id = ?", (new_start_seq, session_id))
            cursor = conn.execute(
                "INSERT INTO jobs (kind, session_id, scope, seq_from, seq_to, reason, day, created_at)"
                " VALUES ('flush', ?, ?, ?, ?, ?, ?, ?)",
                (session_id, scope, old_start, seq_to, reason, day, time.time()),
            )
            job_id = int(cursor.lastrowid or 0)
        return FlushJob(job_id, session_id, scope, old_start, seq_to, reason, day, 0)

    def set_summary(self, session_id: str, summary: str | None) -> None:
        with self.db.transaction() as conn:
            conn.execute("UPDATE sessions SET summary = ? WHERE id = ?", (summary, session_id))

    def prune_scheduled_messages(self, session_id: str, keep_last_n: int) -> int:
        """Keep only the newest ``keep_last_n`` scheduler-injected pairs; returns rows deleted."""
        stored = self.db.query("SELECT seq, body FROM messages WHERE session_id = ? ORDER BY seq", (session_id,))
        pairs: list[list[int]] = []
        for index, (seq, body) in enumerate(stored):
            if is_scheduled(json.loads(body)):
                pair = [seq]
                if index + 1 < len(stored) and json.loads(stored[index + 1][1]).get("role") == "assistant":
                    pair.append(stored[index + 1][0])
                pairs.append(pair)
        doomed = [seq for pair in (pairs[:-keep_last_n] if keep_last_n else pairs) for seq in pair]
        if doomed:
            with self.db.transaction() as conn:
                conn.executemany("DELETE FROM messages WHERE session_id = ? AND seq = ?", [(session_id, s) for s in doomed])
        return len(doomed)

    def cleanup(self, max_age_days: float, now: float | None = None) -> int:
        """Delete messages older than ``max_age_days`` and sessions left empty; returns rows deleted."""
        cutoff = (now or time.time()) - max_age_days * 86400
        with self.db.transaction() as conn:
            deleted = conn.execute("DELETE FROM messages WHERE created_at < ?", (cutoff,)).rowcount
            conn.execute(
                "DELETE FROM sessions WHERE updated_at < ? AND NOT EXISTS"
                " (SELECT 1 FROM messages WHERE messages.session_id = sessions.id)",
                (cutoff,),
            )
            conn.execute("DELETE FROM jobs WHERE status = 'done' AND done_at < ?", (cutoff,))
        return int(deleted)

    def daily_summary_seq(self, session_id: str) -> int:
        """The last seq covered by a nightly summary of this session (0 when none yet)."""
        rows = self.db.query("SELECT last_seq FROM daily_summaries WHERE session_id = ?", (session_id,))
        return int(rows[0][0]) if rows else 0

    def set_daily_summary_seq(self, session_id: str, seq: int) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO daily_summaries (session_id, last_seq) VALUES (?, ?)"
                " ON CONFLICT (session_id) DO UPDATE SET last_seq = excluded.last_seq",
                (session_id, seq),
            )

    # ----------------------------------------------------------------- jobs
    def pending_jobs(self) -> list[FlushJob]:
        rows = self.db.query(
            "SELECT id, session_id, scope, seq_from, seq_to, reason, day, attempts FROM jobs"
            " WHERE status = 'pending' ORDER BY id"
        )
        return [FlushJob(*row) for row in rows]

    def finish_job(self, job_id: int) -> None:
        with self.db.transaction() as conn:
            conn.execute("UPDATE jobs SET status = 'done', done_at = ? WHERE id = ?", (time.time(), job_id))

    def fail_job_attempt(self, job_id: int, error: str, max_attempts: int = 5) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE jobs SET attempts = attempts + 1, error = ?,"
                " status = CASE WHEN attempts + 1 >= ? THEN 'failed' ELSE status END WHERE id = ?",
                (error[:500], max_attempts, job_id),
            )
