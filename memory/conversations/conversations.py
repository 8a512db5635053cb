"""The conversation store: sessions and their messages in ``index.db``, with its parts for flush
jobs (:mod:`memory.conversations.flush_jobs`), retention (:mod:`memory.conversations.conversation_retention`), forgetting
(:mod:`memory.conversations.conversation_forgetting`) and reading (:mod:`memory.conversations.exchanges`).

Messages are turns (:mod:`memory.conversations.turns`: role, text and the caller's string fields; no chat API's
format), append-only with a ``seq`` that only grows per session. The LLM context of a session
starts at ``context_start_seq``: trimming or ``/clear`` moves that boundary, older rows stay on
disk.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..index.database import Database
from .conversation_forgetting import ConversationForgetting
from .conversation_retention import ConversationRetention
from .conversation_rows import SESSION_COLUMNS, Session, chat_of, last_seq, session_id, stored_turn
from .exchanges import ConversationExchanges, Exchange
from .flush_jobs import DAILY_REASON, FlushJob, FlushJobs
from .turns import Turn, encode_meta, has_turn_columns, is_visible_turn, migrate_v1_rows

__all__ = ["DAILY_REASON", "SCHEMA", "ConversationStore", "Exchange", "FlushJob", "Session", "StoredMessage",
           "chat_of", "session_id", "stored_turn"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY, scope TEXT NOT NULL, channel TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL, updated_at REAL NOT NULL,
    context_start_seq INTEGER NOT NULL DEFAULT 0, summary TEXT,
    summarized_seq INTEGER NOT NULL DEFAULT 0, cleared_seq INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS messages (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE, seq INTEGER NOT NULL,
    role TEXT NOT NULL, body TEXT NOT NULL, visible INTEGER NOT NULL, created_at REAL NOT NULL, meta TEXT,
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
"""


@dataclass(frozen=True)
class StoredMessage:
    seq: int
    turn: Turn
    visible: bool
    created_at: float


class ConversationStore(FlushJobs, ConversationRetention, ConversationForgetting, ConversationExchanges):
    """Sessions and their messages; its parts add flush jobs, retention, forgetting and exchanges to read."""

    def __init__(self, db: Database) -> None:
        self.db = db
        db.execute_script(SCHEMA)
        self._migrate()

    def _migrate(self) -> None:
        self._migrate_watermark()
        self._migrate_turns()
        self._migrate_retries()

    def _migrate_turns(self) -> None:
        """Format 1 kept each message as the chat API's JSON; rewrite it as a turn, once, in place."""
        with self.db.lock:
            if has_turn_columns(self.db.conn):
                return  # the usual case: no write lock taken at start
        with self.db.transaction() as conn:
            if not has_turn_columns(conn):  # another process may have migrated it meanwhile
                migrate_v1_rows(conn)

    def _migrate_watermark(self) -> None:
        """An older index.db kept the nightly summary's progress in ``daily_summaries``, apart from the
        trim jobs (so a turn could be summarised twice); fold it into the one watermark per session."""
        if _has_watermark(self.db.query("PRAGMA table_info(sessions)")):
            return  # the usual case: no write lock taken at start
        with self.db.transaction() as conn:
            if _has_watermark(conn.execute("PRAGMA table_info(sessions)").fetchall()):
                return  # another process migrated it meanwhile
            for column in ("summarized_seq", "cleared_seq"):
                conn.execute(f"ALTER TABLE sessions ADD COLUMN {column} INTEGER NOT NULL DEFAULT 0")
            conn.execute("UPDATE sessions SET summarized_seq = max(context_start_seq - 1, 0)")
            if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'daily_summaries'").fetchone():
                conn.execute(
                    "UPDATE sessions SET summarized_seq = max(summarized_seq, (SELECT last_seq FROM daily_summaries d"
                    " WHERE d.session_id = sessions.id)) WHERE id IN (SELECT session_id FROM daily_summaries)"
                )
                conn.execute("DROP TABLE daily_summaries")

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
        rows = self.db.query(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,))
        return Session(*rows[0]) if rows else None

    def scopes(self) -> list[str]:
        """Every scope that has a session, sorted."""
        return [str(row[0]) for row in self.db.query("SELECT DISTINCT scope FROM sessions ORDER BY scope")]

    def sessions_active_since(self, since: float) -> list[Session]:
        rows = self.db.query(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE updated_at >= ? ORDER BY id", (since,))
        return [Session(*row) for row in rows]

    # ------------------------------------------------------------- messages
    def recent_scopes(self, since: float, limit: int = 20) -> list[str]:
        """The scopes of sessions active since ``since``, most recent first (for warming caches)."""
        sessions = sorted(self.sessions_active_since(since), key=lambda session: -session.updated_at)
        return list(dict.fromkeys(session.scope for session in sessions))[:limit]

    def append_messages(self, session_id: str, messages: Sequence[Turn],
                        also: Callable[[sqlite3.Connection], object] | None = None, *,
                        answering: int | None = None) -> list[int]:
        """Append in order (safe with concurrent writers). ``seq`` continues past every seq the session
        ever had, even when pruning or retention deleted the newest rows, so a recorded job's range
        never comes to cover new turns. ``also`` writes in the same transaction (a caller's record
        that these messages are stored: both land, or neither). ``answering``: the seq of the user
        message these messages answer; when a forget deleted it meanwhile, nothing is written and
        [] is returned, since an answer to a forgotten question would bring its text back."""
        if not messages:
            return []
        now = time.time()
        with self.db.transaction() as conn:
            if answering is not None and conn.execute(
                    "SELECT 1 FROM messages WHERE session_id = ? AND seq = ?", (session_id, answering)).fetchone() is None:
                return []
            last = last_seq(conn, session_id)
            seqs = list(range(last + 1, last + 1 + len(messages)))
            conn.executemany(
                "INSERT INTO messages (session_id, seq, role, body, meta, visible, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (session_id, seq, t.role, t.text, encode_meta(t.meta), int(is_visible_turn(t)), now)
                    for seq, t in zip(seqs, messages, strict=True)
                ],
            )
            conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id))
            if also is not None:
                also(conn)
        return seqs

    def user_seq(self, session_id: str, text: str) -> int | None:
        """The seq of the session's newest user message reading ``text`` (a message stored by an
        earlier delivery: a chat's turns run one at a time), None when there is none (a forget)."""
        rows = self.db.query("SELECT max(seq) FROM messages WHERE session_id = ? AND visible = 1 AND body = ?",
                             (session_id, text))
        return None if rows[0][0] is None else int(rows[0][0])

    def has_message(self, session_id: str, seq: int) -> bool:
        """Whether the message ``seq`` of the session is still stored (a forget deletes it)."""
        return bool(self.db.query("SELECT 1 FROM messages WHERE session_id = ? AND seq = ?", (session_id, seq)))

    def context_messages(self, session_id: str) -> list[StoredMessage]:
        """Every message inside the session's LLM context, oldest first."""
        rows = self.db.query(
            "SELECT m.seq, m.role, m.body, m.meta, m.visible, m.created_at FROM messages m"
            " JOIN sessions s ON s.id = m.session_id WHERE m.session_id = ? AND m.seq >= s.context_start_seq ORDER BY m.seq",
            (session_id,),
        )
        return [StoredMessage(row[0], stored_turn(*row[1:4]), bool(row[4]), row[5]) for row in rows]

    def load_messages(self, session_id: str, max_turns: int) -> list[Turn]:
        """The context's last ``max_turns`` visible user turns, with their tool steps."""
        if max_turns < 1:
            raise ValueError("max_turns must be 1 or more")
        stored = self.context_messages(session_id)
        starts = [i for i, item in enumerate(stored) if item.visible]
        first = starts[-max_turns] if len(starts) > max_turns else (starts[0] if starts else len(stored))
        return [item.turn for item in stored[first:]]

    def messages_between(self, session_id: str, seq_from: int, seq_to: int) -> list[Turn]:
        rows = self.db.query(
            "SELECT role, body, meta FROM messages WHERE session_id = ? AND seq BETWEEN ? AND ? ORDER BY seq",
            (session_id, seq_from, seq_to),
        )
        return [stored_turn(*row) for row in rows]



def _has_watermark(columns: Sequence[Sequence[object]]) -> bool:
    return any(column[1] == "summarized_seq" for column in columns)
