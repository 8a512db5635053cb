"""What auto-recall put before the model, per turn, for the console to show ("what and why").

A row per turn: the session, the seq of the person's message, whether recall ran (``on``), was
turned off (``off``) or failed (``failed``), and each recalled entry's file, lines, date, relevance,
reason and the hash of its text, but never the text: it stays in the memory files alone, and the
console reads the lines back, showing them only while they still hash the same (an edit or a
forget since shows as such). A forget or an erase in a scope deletes the scope's rows (a short
text's hash could be guessed). Bounded: a session keeps its last :data:`KEEP_PER_SESSION` rows.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from typing import Any, Literal

from ..index.database import Database

KEEP_PER_SESSION = 50
_FIELDS = ("path", "start_line", "end_line", "date", "relevance", "why")
#: Whether recall ran for a turn ("on": its entries, maybe none), was turned off, or failed.
RecallState = Literal["on", "off", "failed"]


def line_hash(text: str) -> str:
    """How a recalled entry's lines are recognised later."""
    return hashlib.sha256(text.strip().encode("utf-8")).hexdigest()

SCHEMA = """
CREATE TABLE IF NOT EXISTS recalls (
    session_id TEXT NOT NULL, seq INTEGER NOT NULL, scope TEXT NOT NULL, at REAL NOT NULL,
    entries TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'on', PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS recalls_scope ON recalls (scope, at);
"""


class RecallLog:
    def __init__(self, db: Database) -> None:
        self.db = db
        db.execute_script(SCHEMA)
        self._migrate_state()

    def _migrate_state(self) -> None:
        """The first recall log kept only turns that recalled something: each of its rows ran ("on")."""
        if _has_state(self.db.query("PRAGMA table_info(recalls)")):
            return  # the usual case: no write lock taken at start
        with self.db.transaction() as conn:
            if not _has_state(conn.execute("PRAGMA table_info(recalls)").fetchall()):  # or another process did it
                conn.execute("ALTER TABLE recalls ADD COLUMN state TEXT NOT NULL DEFAULT 'on'")

    def record(self, session_id: str, seq: int, scope: str, recalled: Sequence[dict[str, Any]],
               state: RecallState = "on") -> None:
        """Keep what was recalled for the message ``seq`` of ``session_id`` (no text: see the module doc)."""
        entries = json.dumps([{**{key: entry.get(key) for key in _FIELDS}, "text_hash": line_hash(str(entry["text"]))}
                              for entry in recalled])
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO recalls (session_id, seq, scope, at, entries, state) VALUES (?, ?, ?, ?, ?, ?)"
                         " ON CONFLICT (session_id, seq) DO UPDATE SET at = excluded.at, entries = excluded.entries,"
                         " state = excluded.state", (session_id, seq, scope, time.time(), entries, state))
            conn.execute("DELETE FROM recalls WHERE session_id = ? AND seq NOT IN (SELECT seq FROM recalls"
                         " WHERE session_id = ? ORDER BY seq DESC LIMIT ?)", (session_id, session_id, KEEP_PER_SESSION))

    @staticmethod
    def still_reads(entry: dict[str, Any], text: str) -> bool:
        """Whether ``text`` (the entry's lines read now) is what was recalled."""
        return line_hash(text) == entry.get("text_hash")

    def for_scope(self, scope: str, limit: int = 50) -> list[dict[str, Any]]:
        """The scope's latest turns that recalled something, newest first: {session_id, seq, at, entries}."""
        rows = self.db.query("SELECT session_id, seq, at, entries FROM recalls WHERE scope = ? AND entries != '[]'"
                             " ORDER BY at DESC LIMIT ?", (scope, limit))
        return [{"session_id": r[0], "seq": r[1], "at": r[2], "entries": json.loads(r[3])} for r in rows]

    def for_turns(self, turns: Sequence[tuple[str, int]]) -> dict[tuple[str, int], tuple[RecallState, list[dict[str, Any]]]]:
        """(state, entries) of each turn, by its (session_id, seq), of those the log still holds."""
        if not turns:
            return {}
        pairs = ", ".join("(?, ?)" for _ in turns)
        rows = self.db.query(f"SELECT session_id, seq, state, entries FROM recalls WHERE (session_id, seq) IN"
                             f" (VALUES {pairs})", tuple(value for turn in turns for value in turn))
        return {(r[0], r[1]): (r[2], json.loads(r[3])) for r in rows}

    def erase_scope(self, scope: str) -> int:
        with self.db.transaction() as conn:
            return conn.execute("DELETE FROM recalls WHERE scope = ?", (scope,)).rowcount


def _has_state(columns: Sequence[Sequence[object]]) -> bool:
    return any(column[1] == "state" for column in columns)
