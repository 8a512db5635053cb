"""A scope's memory at a glance: what ``membridge memory stats`` prints and the console opens on.

One function counts, so the command line and the console can never disagree: MEMORY.md entries,
the daily files (days) and the notes in them, dream diaries, knowledge pages, when the index last
took in a change of the scope, when Deep Dream last read it and when it runs next, the embedder,
and the notes of each of the last :data:`CHART_DAYS` days. It reads files and SQLite: call it from
a worker thread.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory import ScopeFile, count_entries, scope_files

if TYPE_CHECKING:
    from .wiring.app import Services

#: The days the notes-per-day chart covers, ending today: thirteen weeks.
CHART_DAYS = 91


def iso_time(timestamp: float) -> str:
    """UTC with an explicit offset, so a browser can show it in its own time zone."""
    return datetime.fromtimestamp(timestamp, tz=UTC).isoformat(timespec="seconds")


def dated_files(held: list[ScopeFile], kind: str) -> list[tuple[str, Path]]:
    """``(date, path)`` of a scope's daily files or dream diaries (``kind``) among ``held``, newest
    first; what a scope holds is :func:`memory.scope_files`'s to say (symbolic links never)."""
    return sorted(((file.day.isoformat(), file.path) for file in held if file.kind == kind and file.day), reverse=True)


def scope_overview(services: Services, scope: str, *, now: datetime | None = None) -> dict[str, Any]:
    """The overview of an existing ``scope`` as one JSON-ready dict (see README "Memory console")."""
    now = now or datetime.now().astimezone()
    workspace = services.workspace
    held = scope_files(workspace, scope)
    notes = {day: count_entries(_read(path)) for day, path in dated_files(held, "daily_files")}
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
        "dream_diaries": len(dated_files(held, "dream_diaries")),
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
