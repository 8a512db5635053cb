"""The conversation store's part of a forget or an erase (driven by :mod:`memory.privacy.forgetting`).

A turn goes whole when any of its messages holds the text (the question, its tool steps and the
answer together, so the model never sees a call without its result); a session summary or a job
error loses the matching lines, by :mod:`memory.files.line_removal`'s rule.
"""

from __future__ import annotations

from ..files.line_removal import Matcher, matching_lines, without_lines
from ..index.database import Database
from .conversation_rows import stored_turn
from .turns import searchable_text


class ConversationForgetting:
    """Finding and deleting a text in a scope's conversations (a part of the conversation store)."""

    db: Database

    def find_text(self, scope: str, matches: Matcher) -> list[tuple[str, str, str]]:
        """(kind, where, text) of each message and session-summary line of ``scope``'s sessions that
        ``matches``: kind ``message`` (where: ``session#seq``) or ``summary`` (``session``)."""
        found = [("message", f"{sid}#{seq}", text) for sid, seq, _turn, text in self._scope_messages(scope) if matches(text)]
        for sid, summary in self.db.query("SELECT id, summary FROM sessions WHERE scope = ? ORDER BY id", (scope,)):
            found += [("summary", sid, line) for _number, line in matching_lines(summary or "", matches)]
        return found

    def forget_text(self, scope: str, matches: Matcher) -> int:
        """Delete every turn of ``scope``'s sessions that has a matching message (the question, its
        tool steps and the answer go together, so the model never sees a call without its result),
        and the matching lines of their summaries and job errors. Returns messages deleted."""
        rows = self._scope_messages(scope)
        doomed_turns = {(sid, turn) for sid, _seq, turn, text in rows if matches(text)}
        doomed = [(sid, seq) for sid, seq, turn, _text in rows if (sid, turn) in doomed_turns]
        with self.db.transaction() as conn:
            conn.executemany("DELETE FROM messages WHERE session_id = ? AND seq = ?", doomed)
            for sid, summary in conn.execute("SELECT id, summary FROM sessions WHERE scope = ?", (scope,)).fetchall():
                kept = without_lines(summary or "", matches)
                if kept is not None:
                    conn.execute("UPDATE sessions SET summary = ? WHERE id = ?", (kept.strip("\n") or None, sid))
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
