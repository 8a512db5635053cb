"""Flush jobs: the durable hand-over of a session's turns to daily memory.

Each session has one watermark, ``summarized_seq``: every message up to it belongs to a job already
recorded. Every path that moves turns toward daily memory (a trim, ``/clear``, the nightly summary)
records a job for the range past the watermark and advances it in the same transaction, so each
turn is queued exactly once, and a crash at any point either keeps the old state or leaves a job
that the next start completes. A job stays pending until it succeeds: a failed attempt is
recorded with its error and the time of the next try, later each time (:data:`RETRY_BASE_S`
doubling up to :data:`RETRY_MAX_S`), never given up in silence.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass

from ..index.database import Database
from .conversation_rows import SESSION_COLUMNS, Session, last_seq, session_row

DAILY_REASON = "daily"
RETRY_BASE_S = 30.0  # the wait after a job's first failed attempt; it doubles with each one after
RETRY_MAX_S = 3600.0  # however long a job has failed, it is tried again at least hourly


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

    @property
    def is_daily_summary(self) -> bool:
        """The nightly summary's job (the rest are turns leaving the context: overflow, ``/clear``)."""
        return self.reason == DAILY_REASON


@dataclass(frozen=True)
class FailingJob:
    """A pending job whose attempts failed so far: what ``doctor``, the console and the log show."""

    id: int
    scope: str
    attempts: int
    error: str | None
    created_at: float
    last_try_at: float
    next_try_at: float


class FlushJobs:
    """The ``jobs`` table: recording, running order, outcome (a part of the conversation store)."""

    db: Database

    def _migrate_retries(self) -> None:
        """Give ``jobs`` its retry times, and put back the jobs an older version gave up on after 5
        failed attempts (their turns never reached daily memory): they are retried like any other."""
        if "next_try_at" in {column[1] for column in self.db.query("PRAGMA table_info(jobs)")}:
            return  # the usual case: no write lock taken at start
        with self.db.transaction() as conn:
            if "next_try_at" in {column[1] for column in conn.execute("PRAGMA table_info(jobs)").fetchall()}:
                return  # another process migrated it meanwhile
            conn.execute("ALTER TABLE jobs ADD COLUMN next_try_at REAL")
            conn.execute("ALTER TABLE jobs ADD COLUMN last_try_at REAL")
            conn.execute("UPDATE jobs SET status = 'pending', done_at = NULL WHERE status = 'failed'")

    def clear_context(self, session_id: str, day: str) -> FlushJob | None:
        """Start the LLM context afresh; the rows stay on disk. The turns not yet in daily memory
        become a flush job (the nightly summary reads only the context, so they would be lost), and
        ``cleared_seq`` tells a flush that finishes later that the fresh context is not its own."""
        with self.db.transaction() as conn:
            session = session_row(conn, session_id)
            if session is None:
                return None
            end = last_seq(conn, session_id)
            conn.execute(
                "UPDATE sessions SET context_start_seq = ?, cleared_seq = ?, summary = NULL WHERE id = ?",
                (end + 1, end + 1, session_id),
            )
            return record_job(conn, session, end, "clear", day)

    def trim(self, session_id: str, new_start_seq: int, reason: str, day: str) -> FlushJob | None:
        """Move the context boundary to ``new_start_seq``; what left it and is not yet in daily memory
        becomes a flush job, in the same transaction: never lost, never queued twice."""
        with self.db.transaction() as conn:
            session = session_row(conn, session_id)
            if session is None or new_start_seq <= session.context_start_seq:
                return None
            conn.execute("UPDATE sessions SET context_start_seq = ? WHERE id = ?", (new_start_seq, session_id))
            return record_job(conn, session, new_start_seq - 1, reason, day)

    def record_daily_jobs(self, until: float, day: str) -> list[FlushJob]:
        """The nightly summary: in every session, the turns written before ``until`` that are not yet
        in daily memory become one job for ``day``. The context keeps them; a later trim does not
        queue them again."""
        with self.db.transaction() as conn:
            rows = conn.execute(
                f"SELECT {SESSION_COLUMNS}, (SELECT max(seq) FROM messages m WHERE m.session_id = s.id"
                " AND m.created_at < ?) FROM sessions s ORDER BY id",
                (until,),
            ).fetchall()
            jobs = [record_job(conn, Session(*row[:-1]), row[-1], DAILY_REASON, day) for row in rows if row[-1]]
        return [job for job in jobs if job is not None]

    def remember_summary(self, job: FlushJob, summary: str, keep_chars: int) -> bool:
        """Add a finished job's summary to the head of its session's context, so the thread is not
        lost: only when its turns have left the context and no ``/clear`` came after it was recorded
        (its summary belongs to the old context). Checked and written in one transaction."""
        with self.db.transaction() as conn:
            session = session_row(conn, job.session_id)
            if session is None or job.seq_to >= session.context_start_seq or job.seq_from < session.cleared_seq:
                return False
            previous = session.summary or ""
            if summary in previous:
                return False
            combined = f"{previous}\n{summary}".strip()[-keep_chars:]
            conn.execute("UPDATE sessions SET summary = ? WHERE id = ?", (combined, job.session_id))
        return True

    def job_counts(self) -> dict[str, int]:
        """Flush jobs by status (pending, done)."""
        return self.job_backlog()[0]

    def job_backlog(self) -> tuple[dict[str, int], float | None]:
        """Flush jobs by status, and when the oldest pending one was recorded (None: none pending)."""
        rows = self.db.query("SELECT status, count(*), min(created_at) FROM jobs GROUP BY status")
        oldest = next((float(row[2]) for row in rows if row[0] == "pending"), None)
        return {str(row[0]): int(row[1]) for row in rows}, oldest

    def pending_jobs(self, due_at: float | None = None) -> list[FlushJob]:
        """The jobs not done yet, oldest first; with ``due_at``, only those whose next try has come."""
        rows = self.db.query(
            "SELECT id, session_id, scope, seq_from, seq_to, reason, day, attempts FROM jobs"
            " WHERE status = 'pending' AND (?1 IS NULL OR coalesce(next_try_at, 0) <= ?1) ORDER BY id", (due_at,),
        )
        return [FlushJob(*row) for row in rows]

    def failing_jobs(self) -> list[FailingJob]:
        """The pending jobs that failed at least once, oldest first."""
        rows = self.db.query(
            "SELECT id, scope, attempts, error, created_at, last_try_at, next_try_at FROM jobs"
            " WHERE status = 'pending' AND attempts > 0 ORDER BY id")
        return [FailingJob(*row) for row in rows]

    def finish_job(self, job_id: int) -> None:
        with self.db.transaction() as conn:
            conn.execute("UPDATE jobs SET status = 'done', done_at = ? WHERE id = ?", (time.time(), job_id))

    def fail_job_attempt(self, job_id: int, error: str, now: float | None = None) -> float:
        """Record a failed attempt; the job stays pending and is due again after a wait that doubles
        with each failure (:data:`RETRY_BASE_S` up to :data:`RETRY_MAX_S`). Returns that wait."""
        now = time.time() if now is None else now
        with self.db.transaction() as conn:
            row = conn.execute("SELECT attempts FROM jobs WHERE id = ?", (job_id,)).fetchone()
            wait = float(min(RETRY_BASE_S * 2 ** min(int(row[0]) if row else 0, 20), RETRY_MAX_S))
            conn.execute("UPDATE jobs SET attempts = attempts + 1, error = ?, last_try_at = ?, next_try_at = ? WHERE id = ?",
                         (error[:500], now, now + wait, job_id))
        return wait


def record_job(conn: sqlite3.Connection, session: Session, seq_to: int, reason: str, day: str) -> FlushJob | None:
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
