"""The console's conversation view: a scope's latest turns, each with what auto-recall put before
the model for it, and why.

The turns come from the conversation store, newest first, a page at a time
(:class:`memory.Exchange`); each is matched to its recall log row by its session and the seq of
the person's message, the key the agent logs it under, so the match is exact. ``recall`` says
what the row holds: ``recalled`` (its notes), ``nothing`` (recall ran and found nothing worth
putting in), ``off`` (``memory.auto_recall.enabled: false`` then), ``failed`` (the log has why) or
``unknown`` (the log no longer holds the turn: a chat keeps its last 50, a forget clears the
scope's).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memory import Cursor, Exchange, RecallState

from ..overview import iso_time
from ..wiring.app import Services
from .recalls import recalled_entry
from .views import BadRequest, existing_scope, parse_limit

JSON = dict[str, Any]
PAGE = 20  # turns on a page unless ``limit`` says otherwise


def conversation(services: Services, scope: str, query: Mapping[str, str]) -> JSON:
    """``GET /api/scopes/{scope}/conversation?limit=N&before=MARK``: a page of turns, newest first,
    and ``next``, the mark of the page after it (None on the last page)."""
    scope = existing_scope(services, scope)
    limit = parse_limit(query.get("limit")) or PAGE
    found = services.conversations.exchanges(scope, limit + 1, _parse_mark(query.get("before")))
    page = found[:limit]
    logged = services.memory.recalls.for_turns([(turn.session_id, turn.seq) for turn in page])
    return {"scope": scope,
            "turns": [_turn(services, scope, turn, logged.get((turn.session_id, turn.seq))) for turn in page],
            "next": _mark(page[-1].cursor) if len(found) > limit else None}


def _turn(services: Services, scope: str, turn: Exchange, logged: tuple[RecallState, list[JSON]] | None) -> JSON:
    entries = logged[1] if logged else []
    return {"chat": turn.chat, "seq": turn.seq, "at": iso_time(turn.at), "message": turn.message,
            "answer": turn.answer, "recall": _recall(logged),
            "recalled": [recalled_entry(services, scope, entry) for entry in entries]}


def _recall(logged: tuple[RecallState, list[JSON]] | None) -> str:
    """What the recall log says of a turn, in the API's words."""
    if logged is None:
        return "unknown"
    state, entries = logged
    if state == "on":
        return "recalled" if entries else "nothing"
    return state


def _mark(cursor: Cursor) -> str:
    """A page's end as text for an address: ``<time>~<seq>~<session>`` (the session last: it may hold ``~``)."""
    at, session_id, seq = cursor
    return f"{at!r}~{seq}~{session_id}"


def _parse_mark(raw: str | None) -> Cursor | None:
    if not raw:
        return None
    parts = raw.split("~", 2)
    try:
        return (float(parts[0]), parts[2], int(parts[1]))
    except (ValueError, IndexError):
        raise BadRequest(f"before={raw!r} is not a page mark: use the 'next' value of the page before, "
                         "or leave it out for the newest turns") from None
