"""The conversation store: sessions, their messages and durable flush jobs, in ``index.db``.

Messages are turns (:mod:`memory.turns`: role, text and the caller's string fields; no chat API's
format), append-only with a ``seq`` that only grows per session. The LLM context of a session
starts at ``context_start_seq``: trimming or ``/clear`` moves that boundary, older rows stay on
disk. Each session has one watermark, ``summarized_seq``: every message up to it belongs to a flush
job already recorded. Every path that moves turns toward daily memory (a trim, ``/clear``, the
nightly summary) records a job for the range past the watermark and advances it in the same
transaction, so each turn is queued exactly once, and a crash at any point either keeps the old
state or leaves a job that the next start completes.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .database import Database
from .turns import (
    SCHEDULED_PREFIX,
    Turn,
    decode_meta,
    encode_meta,
    has_turn_columns,
    is_scheduled,
    is_visible_turn,
    migrate_v1_rows,
    searchable_text,
)

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
_SESSION_COLUMNS = "id, scope, channel, context_start_seq, summary, updated_at, summarized_seq, cleared_seq"
DAILY_REASON = "daily"


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


@dataclass(frozen=True)
class StoredMessage:
    seq: int
    turn: Turn
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


class ConversationStore:
    def __init__(self, db: Database) -> None:
        self.db = db
        db.execute_script(SCHEMA)
        self._migrate()

    def _migrate(self) -> None:
        self._migrate_watermark()
        self._migrate_turns()

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
        rows = self.db.query(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,))
        return Session(*rows[0]) if rows else None

    def sessions_active_since(self, since: float) -> list[Session]:
        rows = self.db.query(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE updated_at >= ? ORDER BY id", (since,))
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
            last = _last_seq(conn, session_id)
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

    def clear_context(self, session_id: str, day: str) -> FlushJob | None:
        """Start the LLM context afresh; the rows stay on disk. The turns not yet in daily memory
        become a flush job (the nightly summary reads only the context, so they would be lost), and
        ``cleared_seq`` tells a flush that finishes later that the fresh context is not its own."""
        with self.db.transaction() as conn:
            session = _session(conn, session_id)
            if session is None:
                return None
            end = _last_seq(conn, session_id)
            conn.execute(
                "UPDATE sessions SET context_start_seq = ?, cleared_seq = ?, summary = NULL WHERE id = ?",
                (end + 1, end + 1, session_id),
            )
            return _record_job(conn, session, end, "clear", day)

    def trim(self, session_id: str, new_start_seq: int, reason: str, day: str) -> FlushJob | None:
        """Move the context boundary to ``new_start_seq``; what left it and is not yet in daily memory
        becomes a flush job, in the same transaction: never lost, never queued twice."""
        with self.db.transaction() as conn:
            session = _session(conn, session_id)
            if session is None or new_start_seq <= session.context_start_seq:
                return None
            conn.execute("UPDATE sessions SET context_start_seq = ? WHERE id = ?", (new_start_seq, session_id))
            return _record_job(conn, session, new_start_seq - 1, reason, day)

    def record_daily_jobs(self, until: float, day: str) -> list[FlushJob]:
        """The nightly summary: in every session, the turns written before ``until`` that are not yet
        in daily memory become one job for ``day``. The context keeps them; a later trim does not
        queue them again."""
        with self.db.transaction() as conn:
            rows = conn.execute(
                f"SELECT {_SESSION_COLUMNS}, (SELECT max(seq) FROM messages m WHERE m.session_id = s.id"
                " AND m.created_at < ?) FROM sessions s ORDER BY id",
                (until,),
            ).fetchall()
            jobs = [_record_job(conn, Session(*row[:-1]), row[-1], DAILY_REASON, day) for row in rows if row[-1]]
        return [job for job in jobs if job is not None]

    def remember_summary(self, job: FlushJob, summary: str, keep_chars: int) -> bool:
        """Add a finished job's summary to the head of its session's context, so the thread is not
        lost: only when its turns have left the context and no ``/clear`` came after it was recorded
        (its summary belongs to the old context). Checked and written in one transaction."""
        with self.db.transaction() as conn:
            session = _session(conn, job.session_id)
            if session is None or job.seq_to >= session.context_start_seq or job.seq_from < session.cleared_seq:
                return False
            previous = session.summary or ""
            if summary in previous:
                return False
            combined = f"{previous}\n{summary}".strip()[-keep_chars:]
            conn.execute("UPDATE sessions SET summary = ? WHERE id = ?", (combined, job.session_id))
        return True

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
                "DELETE FROM jobs WHERE status IN ('done', 'failed') AND coalesce(done_at, created_at) < ?", (cutoff,)
            )
        return int(deleted)

    def prune_scheduled(self, keep_last_n: int) -> int:
        """:meth:`prune_scheduled_messages` in every session (``conversation.keep_scheduled``, nightly);
        returns rows deleted. A flush drops these pairs anyway, so no turn's memory goes with them."""
        ids = [row[0] for row in self.db.query(
            "SELECT DISTINCT session_id FROM messages WHERE body LIKE ? ORDER BY session_id", (f"%{SCHEDULED_PREFIX}%",),
        )]
        return sum(self.prune_scheduled_messages(session_id, keep_last_n) for session_id in ids)

    def job_counts(self) -> dict[str, int]:
        """Flush jobs by status (pending, done, failed)."""
        return self.job_backlog()[0]

    def job_backlog(self) -> tuple[dict[str, int], float | None]:
        """Flush jobs by status, and when the oldest pending one was recorded (None: none pending)."""
        rows = self.db.query("SELECT status, count(*), min(created_at) FROM jobs GROUP BY status")
        oldest = next((float(row[2]) for row in rows if row[0] == "pending"), None)
        return {str(row[0]): int(row[1]) for row in rows}, oldest

    # ------------------------------------------------------------ forgetting
    def find_text(self, scope: str, matches: Callable[[str], bool]) -> list[tuple[str, str, str]]:
        """(kind, where, text) of each message and session-summary line of ``scope``'s sessions that
        ``matches``: kind ``message`` (where: ``session#seq``) or ``summary`` (``session``)."""
        found = [("message", f"{sid}#{seq}", text) for sid, seq, _turn, text in self._scope_messages(scope) if matches(text)]
        for sid, summary in self.db.query("SELECT id, summary FROM sessions WHERE scope = ? ORDER BY id", (scope,)):
            found += [("summary", sid, line) for line in (summary or "").splitlines() if matches(line)]
        return found

    def forget_text(self, scope: str, matches: Callable[[str], bool]) -> int:
        """Delete every turn of ``scope``'s sessions that has a matching message (the question, its
        tool steps and the answer go together, so the model never sees a call without its result),
        and the matching lines of their summaries and job errors. Returns messages deleted."""
        rows = self._scope_messages(scope)
        doomed_turns = {(sid, turn) for sid, _seq, turn, text in rows if matches(text)}
        doomed = [(sid, seq) for sid, seq, turn, _text in rows if (sid, turn) in doomed_turns]
        with self.db.transaction() as conn:
            conn.executemany("DELETE FROM messages WHERE session_id = ? AND seq = ?", doomed)
            for sid, summary in conn.execute("SELECT id, summary FROM sessions WHERE scope = ?", (scope,)).fetchall():
                kept = [line for line in (summary or "").splitlines() if not matches(line)]
                if summary and len(kept) != len(summary.splitlines()):
                    conn.execute("UPDATE sessions SET summary = ? WHERE id = ?", ("\n".join(kept) or None, sid))
            for job_id, error in conn.execute("SELECT id, error FROM jobs WHERE scope = ? AND error IS NOT NULL",
                                              (scope,)).fetchall():
                if matches(error):
                    conn.execute("UPDATE jobs SET error = NULL WHERE id = ?", (job_id,))
        return len(doomed)

    def erase_scope(self, scope: str) -> int:
        """Delete ``scope``'s sessions, their messages and their jobs; returns messages deleted.
        A group's sessions have the group's scope, so what a person said there stays there."""
        with self.db.transaction() as conn:
            deleted = conn.execute("DELETE FROM messages WHERE session_id IN (SELECT id FROM sessions WHERE scope = ?)",
                                   (scope,)).rowcount
            conn.execute("DELETE FROM jobs WHERE scope = ?", (scope,))
            conn.execute("DELETE FROM sessions WHERE scope = ?", (scope,))
        return int(deleted)

    def _scope_messages(self, scope: str) -> list[tuple[str, int, int, str]]:
        """(session, seq, turn number, searchable text) of every message of ``scope``, in order."""
        rows = self.db.query(
            "SELECT m.session_id, m.seq, m.visible, m.role, m.body, m.meta FROM messages m"
            " JOIN sessions s ON s.id = m.session_id WHERE s.scope = ? ORDER BY m.session_id, m.seq", (scope,))
        out: list[tuple[str, int, int, str]] = []
        turn, session = 0, None
        for sid, seq, visible, role, body, meta in rows:
            turn = 0 if sid != session else turn + int(bool(visible))
            session = sid
            out.append((sid, seq, turn, searchable_text(stored_turn(role, body, meta))))
        return out

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
                " status = CASE WHEN attempts + 1 >= ? THEN 'failed' ELSE status END,"
                " done_at = CASE WHEN attempts + 1 >= ? THEN ? ELSE done_at END WHERE id = ?",
                (error[:500], max_attempts, max_attempts, time.time(), job_id),
            )


def stored_turn(role: str, body: str, meta: str | None) -> Turn:
    """A stored row as a turn."""
    return Turn(role, body, decode_meta(meta))


def _has_watermark(columns: Sequence[Sequence[object]]) -> bool:
    return any(column[1] == "summarized_seq" for column in columns)


def _session(conn: sqlite3.Connection, session_id: str) -> Session | None:
    row = conn.execute(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return Session(*row) if row else None


def _last_seq(conn: sqlite3.Connection, session_id: str) -> int:
    """The highest seq the session ever used: its rows, or a boundary or watermark past them."""
    row = conn.execute(
        "SELECT max(coalesce((SELECT max(seq) FROM messages WHERE session_id = s.id), 0),"
        " s.summarized_seq, s.context_start_seq - 1) FROM sessions s WHERE s.id = ?",
        (session_id,),
    ).fetchone()
    return int(row[0]) if row else 0


def _record_job(conn: sqlite3.Connection, session: Session, seq_to: int, reason: str, day: str) -> FlushJob | None:
    """Queue the session's messages past its watermark up to ``seq_to`` and advance the watermark:
    the one place a turn is handed to daily memory, so no turn is handed over twice."""
    seq_from = session.summarized_seq + 1
    if seq_to < seq_from:
        return None
    conn.execute("UPDATE sessions SET summarized_seq = ? WHERE id = ?", (seq_to, session.id))
    cursor = conn.execute(
        "INSERT INTO jobs (kind, session_id, scope, seq_from, seq_to, reason, day, created_at)"
        " VALUES ('flush', ?, ?, ?, ?, ?, ?, ?)",
        (session.id, session.scope, seq_from, seq_to, reason, day, time.time()),
    )
    return FlushJob(int(cursor.lastrowid or 0), session.id, session.scope, seq_from, seq_to, reason, day, 0)
