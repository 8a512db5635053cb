"""How far each incoming message got: taken in, answered, sent. The one owner of "answer a message
once", in the workspace's own SQLite (``index.db``), for ``membridge run`` and for a cluster shard.

A platform delivers a message again when its first delivery was not confirmed: Telegram redelivers
every update from the oldest unconfirmed one after a crash (so messages of other chats already
answered come back too), a shard's stream entry stays pending until its reply is sent. The ledger
makes such a redelivery harmless (:meth:`bridge.wiring.runtime.Bridge.answer_once` reads it):

- ``started``: the user's message is stored (written in the transaction that stores it, with the
  stored message's seq), so the turn resumes from the stored history instead of storing the message
  twice, and finds that message by its seq: a photo's description or a voice note's transcript
  made again for the redelivery may read differently;
- ``answered``: the reply is stored (in the transaction that stores the assistant's answer), so the
  LLM is not asked again: the stored reply is sent;
- ``sent``: nothing left to do; the redelivery is only confirmed. The reply's text is dropped then:
  the conversation keeps it, where a forget reaches it; a copy here would outlive the forget.

Rows go ``RETENTION_S`` after their last change (the nightly pass prunes them), far past any
redelivery: Telegram keeps an unconfirmed update for 24 hours, a shard's stream entry is claimed
again within a lease TTL.
"""

from __future__ import annotations

import sqlite3
import time
from contextvars import ContextVar
from dataclasses import dataclass
from enum import StrEnum

from memory import Database

TABLE = "turn_ledger"
LEGACY_TABLE = "cluster_turns"  # its name while only a cluster shard kept one
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    message_key TEXT PRIMARY KEY, state TEXT NOT NULL, reply TEXT, markdown INTEGER NOT NULL DEFAULT 1,
    updated_at REAL NOT NULL, user_seq INTEGER
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS {TABLE}_updated ON {TABLE} (updated_at);
"""
RETENTION_S = 7 * 86400

#: True while :meth:`TurnLedger.mark_sent` writes. A write guard that refuses work past a deadline
#: (a cluster shard's lease clock) lets this record through: the answer is out already, and refusing
#: the record would only get it sent a second time by whoever reads the ledger next.
RECORDING_SENT: ContextVar[bool] = ContextVar("recording_sent", default=False)


class TurnState(StrEnum):
    STARTED = "started"
    ANSWERED = "answered"
    SENT = "sent"


@dataclass(frozen=True)
class TurnRecord:
    state: TurnState
    reply: str | None
    markdown: bool
    user_seq: int | None  # the stored user message (None: recorded by a version that did not keep it)


class TurnAbandoned(RuntimeError):
    """This process may no longer answer the message (a shard's lease moved): nothing of it is
    recorded or sent, so the platform's redelivery reaches whoever may."""


class TurnLedger:
    """The workspace's record of its turns, keyed by the message's dedupe key."""

    def __init__(self, db: Database) -> None:
        self.db = db
        tables = {row[0] for row in db.query("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if LEGACY_TABLE in tables and TABLE not in tables:  # a shard's ledger from before the rename
            db.execute_script(f"ALTER TABLE {LEGACY_TABLE} RENAME TO {TABLE};"
                              f" DROP INDEX IF EXISTS {LEGACY_TABLE}_updated;")
        db.execute_script(SCHEMA)
        if "user_seq" not in {row[1] for row in db.query(f"PRAGMA table_info({TABLE})")}:
            db.execute_script(f"ALTER TABLE {TABLE} ADD COLUMN user_seq INTEGER")

    def get(self, key: str) -> TurnRecord | None:
        rows = self.db.query(f"SELECT state, reply, markdown, user_seq FROM {TABLE} WHERE message_key = ?", (key,))
        return TurnRecord(TurnState(rows[0][0]), rows[0][1], bool(rows[0][2]), rows[0][3]) if rows else None

    def user_stored(self, key: str) -> bool:
        """The agent's question: was this message's user turn stored by an earlier delivery?"""
        return self.get(key) is not None

    def user_seq(self, key: str) -> int | None:
        """The seq that earlier delivery stored the user's message under (None: not recorded)."""
        record = self.get(key)
        return None if record is None else record.user_seq

    def mark_started(self, conn: sqlite3.Connection, key: str, user_seq: int | None) -> None:
        """Inside the transaction that stores the user's message (as ``user_seq``)."""
        self._put(conn, key, TurnState.STARTED, None, True)
        conn.execute(f"UPDATE {TABLE} SET user_seq = ? WHERE message_key = ?", (user_seq, key))

    def mark_answered(self, conn: sqlite3.Connection, key: str, reply: str, markdown: bool = True) -> None:
        """Inside the transaction that stores the answer (or alone, for a reply no turn stored)."""
        self._put(conn, key, TurnState.ANSWERED, reply, markdown)

    def mark_sent(self, key: str) -> None:
        recording = RECORDING_SENT.set(True)
        try:
            with self.db.transaction() as conn:
                conn.execute(
                    f"INSERT INTO {TABLE} (message_key, state, updated_at) VALUES (?, ?, ?) ON CONFLICT (message_key)"
                    " DO UPDATE SET state = excluded.state, reply = NULL, updated_at = excluded.updated_at",
                    (key, TurnState.SENT.value, time.time()),
                )
        finally:
            RECORDING_SENT.reset(recording)

    def prune(self, now: float | None = None) -> int:
        """Forget rows older than :data:`RETENTION_S`, whatever their state: the table must not grow
        forever, and a turn cut off a week ago (its message never delivered again) must not keep its
        answer's text here past a forget."""
        cutoff = (now or time.time()) - RETENTION_S
        with self.db.transaction() as conn:
            return conn.execute(f"DELETE FROM {TABLE} WHERE updated_at < ?", (cutoff,)).rowcount

    @staticmethod
    def _put(conn: sqlite3.Connection, key: str, state: TurnState, reply: str | None, markdown: bool) -> None:
        conn.execute(
            f"INSERT INTO {TABLE} (message_key, state, reply, markdown, updated_at) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (message_key) DO UPDATE SET state = excluded.state, reply = excluded.reply,"
            " markdown = excluded.markdown, updated_at = excluded.updated_at",
            (key, state.value, reply, int(markdown), time.time()),
        )
