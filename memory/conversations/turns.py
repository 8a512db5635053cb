"""A conversation turn as memory keeps it: a role, its text, and string fields for the caller.

Memory stores, flushes, forgets and exports turns without knowing any chat API's message format.
What a caller needs to rebuild its own messages (the bridge's tool-call bookkeeping) travels in
``meta`` as plain strings; memory reads those values only as text to search and forget.

The conversation store's first format (and export formats 1 and 2, in ``messages.jsonl``) kept each
message as the chat API's JSON object. :func:`turn_from_v1` reads such an object, so an old ``index.db``
migrates in place and an old export still imports.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field

SCHEDULED_PREFIX = "[SCHEDULED]"
_MIGRATE_BATCH = 1000  # rows converted per statement while an old database migrates (memory stays bounded)


@dataclass(frozen=True)
class Turn:
    """One stored step of a conversation: who spoke (``role``: user, assistant, tool...), what was
    said (``text``), and ``meta``: the caller's own fields, opaque to memory."""

    role: str
    text: str = ""
    meta: dict[str, str] = field(default_factory=dict)


def is_visible_turn(turn: Turn) -> bool:
    """A real user message starts a visible turn; tool results and assistant steps belong to it."""
    return turn.role == "user"


def is_scheduled(turn: Turn) -> bool:
    """A scheduler-injected prompt (its answer goes with it when pruning or flushing)."""
    return turn.text.startswith(SCHEDULED_PREFIX)


def searchable_text(turn: Turn) -> str:
    """Every string a turn holds, one per line, JSON inside ``meta`` (where non-ASCII text may be
    escaped) decoded too: what a search for a text (forget) must look through."""
    return value_text([turn.text, *turn.meta.values()])


def value_text(value: object) -> str:
    """Every string inside ``value`` (nested lists and dicts, JSON in strings), one per line."""
    if isinstance(value, dict):
        return "\n".join(value_text(item) for item in value.values())
    if isinstance(value, list):
        return "\n".join(value_text(item) for item in value)
    if not isinstance(value, str):
        return ""
    if value[:1] in ("{", "["):
        try:
            return value + "\n" + value_text(json.loads(value))
        except ValueError:
            pass
    return value


def encode_meta(meta: Mapping[str, str]) -> str | None:
    """``meta`` as stored in the ``messages.meta`` column (NULL when empty)."""
    return json.dumps(dict(meta), ensure_ascii=False, sort_keys=True) if meta else None


def decode_meta(raw: str | None) -> dict[str, str]:
    return {str(key): str(value) for key, value in json.loads(raw).items()} if raw else {}


def checked_turn(role: object, text: object, meta: object) -> Turn:
    """A turn from untrusted fields (an import); ValueError names what is wrong."""
    if not isinstance(role, str) or not isinstance(text, str):
        raise ValueError("a message needs a string role and text")
    if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise ValueError("a message's meta must map strings to strings")
    return Turn(role, text, dict(meta))


def turn_from_v1(message: Mapping[str, object]) -> Turn:
    """A message as format 1 kept it (a JSON object with ``role``, ``content`` and other fields):
    the content is the text; every other field goes to ``meta``, non-strings as JSON text."""
    content = message.get("content")
    meta = {
        str(key): value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        for key, value in message.items()
        if key not in ("role", "content") and value is not None
    }
    return Turn(str(message.get("role") or ""), content if isinstance(content, str) else "", meta)


def has_turn_columns(conn: sqlite3.Connection) -> bool:
    return any(column[1] == "meta" for column in conn.execute("PRAGMA table_info(messages)").fetchall())


def migrate_v1_rows(conn: sqlite3.Connection) -> int:
    """Rewrite every format-1 row (``body`` holding the message's JSON) as a turn (``body`` its text,
    ``meta`` its other fields), inside the caller's transaction; returns rows rewritten. The new
    ``meta`` column marks the database as migrated, so this runs once."""
    conn.execute("ALTER TABLE messages ADD COLUMN meta TEXT")
    done, after = 0, ("", -1)
    while True:
        rows = conn.execute(
            "SELECT session_id, seq, body FROM messages WHERE (session_id, seq) > (?, ?)"
            " ORDER BY session_id, seq LIMIT ?", (*after, _MIGRATE_BATCH),
        ).fetchall()
        for session, seq, body in rows:
            turn = turn_from_v1(_v1_object(body))
            conn.execute("UPDATE messages SET body = ?, meta = ? WHERE session_id = ? AND seq = ?",
                         (turn.text, encode_meta(turn.meta), session, seq))
        done += len(rows)
        if len(rows) < _MIGRATE_BATCH:
            return done
        after = (rows[-1][0], rows[-1][1])


def _v1_object(body: str) -> Mapping[str, object]:
    """A format-1 body; one that is not a JSON object (never written, but a hand edit) is kept as text."""
    try:
        value = json.loads(body)
    except ValueError:
        return {"content": body}
    return value if isinstance(value, dict) else {"content": body}
