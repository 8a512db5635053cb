"""What auto-recall put before the model, per turn, for the console to show ("what and why").

A row per turn that recalled anything: the session, the seq of the person's message, and each
recalled entry's file, lines, date, relevance, reason and the hash of its text, but never the text:
it stays in the memory files alone, and the console reads the lines back, showing them only while
they still hash the same (an edit or a forget since shows as such). A forget or an erase in a scope
deletes the scope's rows (a short text's hash could be guessed). Bounded: a session keeps its last
:data:`KEEP_PER_SESSION` rows.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from typing import Any

from ..index.database import Database

KEEP_PER_SESSION = 50
_FIELDS = ("path", "start_line", "end_line", "date", "relevance", "why")


def line_hash(text: str) -> str:
    """How a recalled entry's lines are recognised later."""
    return hashlib.sha256(text.strip().encode("utf-8")).hexdigest()

SCHEMA = """
CREATE TABLE IF NOT EXISTS recalls (
    session_id TEXT NOT NULL, seq INTEGER NOT NULL, scope TEXT NOT NULL, at REAL NOT NULL,
    entries TEXT NOT NULL, PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS recalls_scope ON recalls (scope, at);
"""


class RecallLog:
    def __init__(self, db: Database) -> None:
        self.db = db
        db.execute_script(SCHEMA)

    def record(self, session_id: str, seq: int, scope: str, recalled: Sequence[dict[str, Any]]) -> None:
        """Keep what was recalled for the message ``seq`` of ``session_id`` (no text: see the module doc)."""
        entries = json.dumps([{**{key: entry.get(key) for key in _FIELDS}, "text_hash": line_hash(str(entry["text"]))}
                              for entry in recalled])
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO recalls (session_id, seq, scope, at, entries) VALUES (?, ?, ?, ?, ?)"
                         " ON CONFLICT (session_id, seq) DO UPDATE SET at = excluded.at, entries = excluded.entries",
                         (session_id, seq, scope, time.time(), entries))
            conn.execute("DELETE FROM recalls WHERE session_id = ? AND seq NOT IN (SELECT seq FROM recalls"
                         " WHERE session_id = ? ORDER BY seq DESC LIMIT ?)", (session_id, session_id, KEEP_PER_SESSION))

    @staticmethod
    def still_reads(entry: dict[str, Any], text: str) -> bool:
        """Whether ``text`` (the entry's lines read now) is what was recalled."""
        return line_hash(text) == entry.get("text_hash")

    def for_scope(self, scope: str, limit: int = 50) -> list[dict[str, Any]]:
        """The scope's latest recalls, newest first: {session_id, seq, at, entries}."""
        rows = self.db.query("SELECT session_id, seq, at, entries FROM recalls WHERE scope = ? ORDER BY at DESC LIMIT ?",
                             (scope, limit))
        return [{"session_id": r[0], "seq": r[1], "at": r[2], "entries": json.loads(r[3])} for r in rows]

    def erase_scope(self, scope: str) -> int:
        with self.db.transaction() as conn:
            return conn.execute("DELETE FROM recalls WHERE scope = ?", (scope,)).rowcount
