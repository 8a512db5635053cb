"""A scope's memory at a glance: what ``membridge memory stats`` prints and the console opens on.

One function counts, so the command line and the console can never disagree: MEMORY.md entries,
the daily files (days) and the notes in them, dream diaries, knowledge pages, when the index last
took in a change of the scope, when Deep Dream last read it and when it runs next, the embedder,
and the notes of each of the last :data:`CHART_DAYS` days. It reads files and SQLite: call it from
a worker thread.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory import count_entries

if TYPE_CHECKING:
    from .app import Services

#: The days the notes-per-day chart covers, ending today: thirteen weeks.
CHART_DAYS = 91
_DATED_NAME_RE = re.compile(r"^(\d{4}-\d{2}-\d{2})\.md$")


def iso_time(timestamp: float) -> str:
    """UTC with an explicit offset, so a browser can show it in its own time zone."""
    return datetime.fromtimestamp(timestamp, tz=UTC).isoformat(timespec="seconds")


def dated_files(folder: Path) -> list[tuple[str, Path]]:
    """``(date, path)`` of the regular ``YYYY-MM-DD.md`` files in ``folder``, newest first.

    Symbolic links are left out: the memory index does not follow them either.
    """
    try:
        with os.scandir(folder) as entries:
            found = [
                (match.group(1), Path(entry.path))
                for entry in entries
                if (match := _DATED_NAME_RE.match(entry.name)) and entry.is_file(follow_symlinks=False)
            ]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(found, reverse=True)


def scope_overview(services: Services, scope: str, *, now: datetime | None = None) -> dict[str, Any]:
    """The overview of an existing ``scope`` as one JSON-ready dict (see README "Memory console")."""
    now = now or datetime.now().astimezone()
    workspace = services.workspace
    notes = {day: count_entries(_read(path)) for day, path in dated_files(workspace.daily_dir(scope))}
    last_indexed = max((record.indexed_at for record in services.memory.storage.files(scope).values()), default=None)
    last_dream = services.dreamer.last_dreamt(scope)
    settings = services.config.embedding
    return {
        "scope": scope,
        "memory_entries": count_entries(_read(workspace.memory_file(scope))),
        "days": len(notes),
        "notes": sum(notes.values()),
        "first_day": min(notes, default=None),
        "last_day": max(notes, default=None),
        "dream_diaries": len(dated_files(workspace.dreams_dir(scope))),
        "knowledge_pages": len(services.knowledge.list_pages()),
        "last_sync": None if last_indexed is None else iso_time(last_indexed),
        "last_dream": None if last_dream is None else iso_time(last_dream),
        "next_dream": _next_dream(services, now),
        "embedding": {"provider": settings.provider, "model": _embedding_model(services)},
        "notes_per_day": [{"date": day, "notes": notes.get(day, 0)} for day in _chart_days(now.date())],
    }


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def _next_dream(services: Services, now: datetime) -> str | None:
    """The nightly run's next start (its jitter included), or None when Deep Dream is off."""
    if not services.config.memory.dream.enabled:
        return None
    naive = now.astimezone().replace(tzinfo=None)  # the timer works in local wall-clock time
    return services.timer.next_run_blocking(naive).astimezone().isoformat(timespec="seconds")


def _embedding_model(services: Services) -> str | None:
    settings = services.config.embedding
    return {"local": settings.local_model, "openai": settings.model}.get(settings.provider)


def _chart_days(today: date) -> list[str]:
    first = today - timedelta(days=CHART_DAYS - 1)
    return [(first + timedelta(days=offset)).isoformat() for offset in range(CHART_DAYS)]
