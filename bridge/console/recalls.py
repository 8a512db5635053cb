"""The console's view of auto-recall: per turn, what was put before the model, and why.

The recall log keeps no text (:mod:`memory.retrieval.recall_log`): the person's message is read from the
conversation store, and each recalled entry's lines from its file, shown only while they still
hash as they did when recalled: ``"state"`` is ``"same"``, else ``"changed"`` (the lines read
otherwise now, ``"text": null``) or ``"forgotten"`` (the file or the lines are gone).
"""

from __future__ import annotations

from typing import Any, Literal

from memory import MemoryPathError

from ..overview import iso_time
from ..wiring.app import Services
from .views import existing_scope

JSON = dict[str, Any]
_SHOWN = ("path", "start_line", "end_line", "date", "relevance", "why")


def recalls(services: Services, scope: str) -> list[JSON]:
    """``GET /api/scopes/{scope}/recalls``: the scope's latest turns that recalled notes, newest first."""
    scope = existing_scope(services, scope)
    shown = []
    for row in services.memory.recalls.for_scope(scope):
        turns = services.conversations.messages_between(row["session_id"], row["seq"], row["seq"])
        shown.append({"at": iso_time(row["at"]), "message": turns[0].text if turns else None,
                      "entries": [recalled_entry(services, scope, entry) for entry in row["entries"]]})
    return shown


def recalled_entry(services: Services, scope: str, entry: JSON) -> JSON:
    """A logged entry as the console shows it: where, why, and its lines while they read the same."""
    start, end = int(entry["start_line"]), int(entry["end_line"])
    try:
        text: str | None = services.memory.read_lines(scope, str(entry["path"]), start, end - start + 1)
    except MemoryPathError:
        text = None
    state = _state(services, entry, text)
    return {key: entry.get(key) for key in _SHOWN} | {"text": text if state == "same" else None, "state": state}


def _state(services: Services, entry: JSON, text: str | None) -> Literal["same", "changed", "forgotten"]:
    if text is None or not text.strip():
        return "forgotten"
    return "same" if services.memory.recalls.still_reads(entry, text) else "changed"
