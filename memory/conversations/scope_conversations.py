"""A scope's conversations as plain records, for an export and its import (:mod:`memory.privacy.portability`).

A message record is a turn (``role``, ``text``, ``meta``) with its place (chat, seq) and time; an
export of format 1 or 2 carried the chat API's message object under ``message`` instead, which an import
still reads.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from typing import Any

from .conversations import ConversationStore, chat_of, session_id
from .turns import Turn, checked_turn, decode_meta, encode_meta, turn_from_v1

_EXPORT_BATCH = 1000  # messages read per query while exporting a scope (memory stays bounded)


class ScopeConversations:
    """A scope's sessions and messages as plain records, for an export and its import.

    Sessions are named by their chat (the scope's own prefix removed) so an import into another
    scope keys them anew; each session's ``summarized_seq`` counts only turns whose daily memory was
    written (a pending flush job's turns count as not yet summarised), so an import, which brings the
    daily files but no jobs, lets the nightly summary take those turns again.
    """

    def __init__(self, store: ConversationStore, scope: str) -> None:
        self.store = store
        self.scope = scope

    def sessions(self) -> list[dict[str, Any]]:
        rows = self.store.db.query(
            "SELECT s.id, s.channel, s.created_at, s.updated_at, s.context_start_seq, s.summary, s.cleared_seq,"
            " min(s.summarized_seq, coalesce((SELECT min(j.seq_from) - 1 FROM jobs j WHERE j.session_id = s.id"
            " AND j.status = 'pending'), s.summarized_seq)) FROM sessions s WHERE s.scope = ? ORDER BY s.id",
            (self.scope,),
        )
        keys = ("channel", "created_at", "updated_at", "context_start_seq", "summary", "cleared_seq", "summarized_seq")
        return [{"chat": chat_of(row[0], self.scope), **dict(zip(keys, row[1:], strict=True))} for row in rows]

    def messages(self) -> Iterator[dict[str, Any]]:
        """Every message of the scope, session by session in seq order, read in bounded batches."""
        for (session,) in self.store.db.query("SELECT id FROM sessions WHERE scope = ? ORDER BY id", (self.scope,)):
            after = -1
            while True:
                rows = self.store.db.query(
                    "SELECT seq, role, visible, created_at, body, meta FROM messages WHERE session_id = ? AND seq > ?"
                    " ORDER BY seq LIMIT ?", (session, after, _EXPORT_BATCH),
                )
                for seq, role, visible, created_at, body, meta in rows:
                    yield {"chat": chat_of(session, self.scope), "seq": seq, "role": role, "visible": bool(visible),
                           "created_at": created_at, "text": body, "meta": decode_meta(meta)}
                if len(rows) < _EXPORT_BATCH:
                    break
                after = int(rows[-1][0])

    def counts(self) -> tuple[int, int]:
        """(sessions, messages) of the scope."""
        row = self.store.db.query(
            "SELECT count(*), (SELECT count(*) FROM messages m JOIN sessions s ON s.id = m.session_id"
            " WHERE s.scope = ?1) FROM sessions WHERE scope = ?1", (self.scope,),
        )[0]
        return int(row[0]), int(row[1])

    def restore(self, conn: sqlite3.Connection, sessions: Iterable[dict[str, Any]],
                messages: Iterable[dict[str, Any]]) -> tuple[int, int]:
        """Insert exported records into this scope inside the caller's transaction; returns
        (sessions, messages). A message whose session is not among ``sessions`` is refused. A message
        of export format 1 or 2 (the chat API's JSON under ``message``) is read as a turn."""
        known: set[str] = set()
        for record in sessions:
            conn.execute(
                "INSERT INTO sessions (id, scope, channel, created_at, updated_at, context_start_seq, summary,"
                " summarized_seq, cleared_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (session_id(self.scope, record["chat"]), self.scope, record["channel"], record["created_at"],
                 record["updated_at"], record["context_start_seq"], record["summary"], record["summarized_seq"],
                 record["cleared_seq"]),
            )
            known.add(record["chat"])
        count = 0
        for record in messages:
            if record["chat"] not in known:
                raise ValueError(f"a message belongs to chat {record['chat']!r}, which has no session record")
            turn = _record_turn(record)
            conn.execute(
                "INSERT INTO messages (session_id, seq, role, body, meta, visible, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (session_id(self.scope, record["chat"]), record["seq"], record["role"], turn.text,
                 encode_meta(turn.meta), int(record["visible"]), record["created_at"]),
            )
            count += 1
        return len(known), count


def _record_turn(record: dict[str, Any]) -> Turn:
    """An exported message record as a turn (format 3: ``text`` and ``meta``; formats 1 and 2: ``message``)."""
    if "message" in record:
        message = record["message"]
        if not isinstance(message, dict):
            raise ValueError("an old format's message record needs a JSON object under 'message'")
        return turn_from_v1(message)
    return checked_turn(record["role"], record["text"], record.get("meta", {}))
