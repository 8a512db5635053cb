"""What the console shows, read from the workspace: plain functions returning JSON-ready data.

These run in worker threads (they touch files and SQLite), so they take plain strings, never the
HTTP request. They raise :class:`BadRequest`, :class:`NotFound` or :class:`Conflict` (or the memory
package's own ``ScopeError``/``MemoryPathError``/``KnowledgeError``), which the API maps to statuses.

Files the console can edit (MEMORY.md, a daily file) are served with the SHA-256 of their bytes; an
edit names that hash as its base and is refused (409) when the file has changed since, so nobody
overwrites what they have not seen. Both keep a version for every edit (``memory.files.memory_file.MemoryFile``),
listed with the file, shown as a diff and revertible.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

from memory import (
    DAILY_DIR,
    MEMORY_FILE,
    FailingJob,
    KnowledgePage,
    MemoryFile,
    Version,
    count_entries,
    scope_files,
    unified_diff,
    validate_scope,
)

from ..overview import dated_files, iso_time, scope_overview
from ..wiring.app import Services
from .changes import plain_changes

MAX_SEARCH_LIMIT = 100
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")

JSON = dict[str, Any]


class BadRequest(ValueError):
    """The request itself is wrong (HTTP 400); the message says what is expected."""


class NotFound(LookupError):
    """The named scope, version, date or page does not exist (HTTP 404)."""


class Conflict(RuntimeError):
    """The request is valid but the memory's state does not allow it (HTTP 409)."""


# ------------------------------------------------------------------ scopes
def existing_scope(services: Services, scope: str) -> str:
    """``scope`` if it is a valid name (else ScopeError → 400) that exists on disk (else 404)."""
    if not scope:
        raise BadRequest("scope is required, e.g. scope=telegram-12345")
    validate_scope(scope)
    known = services.workspace.list_scopes()
    if scope not in known:
        raise NotFound(f"unknown scope {scope!r} (known scopes: {', '.join(known) or 'none yet'})")
    return scope


def overview(services: Services, scope: str) -> JSON:
    """The scope's overview (:func:`bridge.overview.scope_overview`): the console's landing page."""
    return scope_overview(services, existing_scope(services, scope))


def list_scopes(services: Services) -> list[JSON]:
    failing = services.conversations.failing_jobs()
    return [_scope_summary(services, scope, [job for job in failing if job.scope == scope])
            for scope in services.workspace.list_scopes()]


def _scope_summary(services: Services, scope: str, failing: list[FailingJob]) -> JSON:
    held = scope_files(services.workspace, scope)
    daily, dreams = dated_files(held, "daily_files"), dated_files(held, "dream_diaries")
    files = [file.path for file in held if file.kind in ("memory_md", "daily_files", "dream_diaries")]
    newest = max((path.stat().st_mtime for path in files), default=None)
    return {
        "scope": scope,
        "memory_entries": count_entries(_text(services.dreamer.memory_file.read(scope))),
        "daily_files": len(daily),
        "dream_files": len(dreams),
        "last_activity": None if newest is None else iso_time(newest),
        "versions": len(services.dreamer.memory_file.versions(scope)),
        # flush jobs that failed and are retried: their turns are not in daily memory yet
        "failing_flush_jobs": len(failing),
        "flush_error": failing[-1].error if failing else None,
    }


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------- MEMORY.md
def memory_view(services: Services, scope: str) -> JSON:
    memory_file = services.dreamer.memory_file
    scope = existing_scope(services, scope)
    data = memory_file.read(scope)
    return {
        "scope": scope,
        "content": _text(data),
        "sha256": _sha256(data),
        "versions": [_version_summary(version) for version in memory_file.versions(scope)],
    }


def _version_summary(version: Version) -> JSON:
    return {"id": version.id, "created_at": iso_time(version.created_at), "cause": version.cause,
            "entries": version.entries}


def parse_version(raw: str) -> int:
    if not raw.isdigit() or int(raw) < 1:
        raise BadRequest(f"version must be a whole number of 1 or more, got {raw!r}")
    return int(raw)


def version_view(services: Services, scope: str, version_id: int, file: str = MEMORY_FILE) -> JSON:
    """One version of ``file`` (MEMORY.md or a daily file): its bytes and its diff against the
    version before it (or an empty file)."""
    memory_file = services.dreamer.memory_file
    scope = existing_scope(services, scope)
    versions = memory_file.versions(scope, file)  # newest first
    position = next((index for index, version in enumerate(versions) if version.id == version_id), None)
    if position is None:
        raise NotFound(_missing_version(scope, version_id, versions, file))
    previous = versions[position + 1] if position + 1 < len(versions) else None
    content = _text(memory_file.content(scope, version_id, file))
    before = "" if previous is None else _text(memory_file.content(scope, previous.id, file))
    return {
        **_version_summary(versions[position]),
        "previous": None if previous is None else previous.id,
        "content": content,
        "diff": unified_diff(before, content, file),
        "changes": plain_changes(before, content),
    }


def _missing_version(scope: str, version_id: int, versions: list[Version], file: str) -> str:
    known = ", ".join(str(version.id) for version in versions) or "none"
    return f"{file} of scope {scope!r} has no version {version_id} (versions: {known})"


def parse_revert_body(body: object) -> int | None:
    """The ``version`` of a revert request: a positive whole number, or null for "the previous one"."""
    if not isinstance(body, dict):
        raise BadRequest('the body must be a JSON object like {"version": 3} or {"version": null}')
    version = body.get("version")
    if version is None:
        return None
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise BadRequest(f"version must be a whole number of 1 or more, or null; got {version!r}")
    return version


def revert(services: Services, scope: str, version: int | None, file: str = MEMORY_FILE) -> JSON:
    """Write the chosen version's exact bytes back to ``file`` (recorded as a new version)."""
    memory_file: MemoryFile = services.dreamer.memory_file
    scope = existing_scope(services, scope)
    with services.memory.lock:  # before and after are the revert's own (the lock is re-entrant)
        before = _text(memory_file.read(scope, file))
        try:
            new_version, diff = memory_file.revert(scope, version, file)
        except KeyError as exc:
            message = str(exc.args[0])
            raise (Conflict(message) if version is None else NotFound(message)) from None
        after = _text(memory_file.read(scope, file))
    return {"scope": scope, "version": new_version, "diff": diff, "changed": bool(diff),
            "changes": plain_changes(before, after)}


# ---------------------------------------------------------- daily / dreams
def parse_date(raw: str) -> str:
    """A real calendar date as ``YYYY-MM-DD``; anything else (paths included) is a 400."""
    try:
        if _DATE_RE.match(raw):
            return date.fromisoformat(raw).isoformat()
    except ValueError:
        pass
    raise BadRequest(f"date must be a calendar date like 2026-01-31, got {raw!r}")


def daily_list(services: Services, scope: str) -> list[JSON]:
    return _dated_list(services, scope, "daily_files")


def dreams_list(services: Services, scope: str) -> list[JSON]:
    return _dated_list(services, scope, "dream_diaries")


def _dated_list(services: Services, scope: str, kind: str) -> list[JSON]:
    held = scope_files(services.workspace, existing_scope(services, scope))
    return [{"date": day, "size": path.stat().st_size} for day, path in dated_files(held, kind)]


def daily_file(services: Services, scope: str, day: str) -> JSON:
    """A daily file and its versions (one per console edit, with the file as it was before)."""
    data = _dated_file(services, scope, day, "memory", "daily memory")
    versions = services.dreamer.memory_file.versions(scope, daily_path(data["date"]))
    return {**data, "versions": [_version_summary(version) for version in versions]}


def daily_path(day: str) -> str:
    """The versioned file of a date in the URL, ``memory/YYYY-MM-DD.md`` (a bad date is a 400)."""
    return f"{DAILY_DIR}/{parse_date(day)}.md"


def dream_file(services: Services, scope: str, day: str) -> JSON:
    return _dated_file(services, scope, day, "memory/dreams", "dream diary")


def _dated_file(services: Services, scope: str, day: str, folder: str, what: str) -> JSON:
    """Read through ``MemoryManager.resolve``, which refuses anything that leads out of the scope."""
    scope = existing_scope(services, scope)
    day = parse_date(day)
    path = services.workspace.resolve_memory_path(scope, f"{folder}/{day}.md")
    if not path.is_file():
        raise NotFound(f"scope {scope!r} has no {what} for {day}")
    data = path.read_bytes()
    return {"date": day, "content": _text(data), "sha256": _sha256(data)}


# ------------------------------------------------------------------ search
def search(services: Services, query: Mapping[str, str]) -> JSON:
    """What ``membridge memory search`` finds, with every score that went into the ranking;
    ``weak=1`` adds the weak neighbours that ``memory.min_score`` drops (``min_score`` 0)."""
    words = query.get("q", "").strip()
    if not words:
        raise BadRequest("q is required: the words to search for")
    scope = existing_scope(services, query.get("scope", ""))
    limit = parse_limit(query.get("limit"))
    weak = _parse_flag(query.get("weak"), "weak")
    results = services.memory.search(words, scope, limit=limit, min_score=0.0 if weak else None)
    return {"query": words, "scope": scope, "weak": weak, "weights": _weights(services),
            "results": [result.to_dict() for result in results]}


def _weights(services: Services) -> JSON:
    """The configured parts of a score, so the page can say "0.81 × 0.7" (README "How search ranks")."""
    settings = services.config.memory
    return {"hybrid": services.config.embedding.provider != "none", "vector": settings.vector_weight,
            "keyword": settings.keyword_weight, "coverage": settings.coverage_weight,
            "recency": settings.recency_weight, "min_score": settings.min_score}


def _parse_flag(raw: str | None, name: str) -> bool:
    if raw in (None, "", "0", "false"):
        return False
    if raw in ("1", "true"):
        return True
    raise BadRequest(f"{name} must be 1 or 0, got {raw!r}")


def parse_limit(raw: str | None) -> int | None:
    """A page's ``limit`` (None when not given); anything but 1..100 is a 400 saying so."""
    if raw is None or raw == "":
        return None
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_SEARCH_LIMIT:
        raise BadRequest(f"limit must be a whole number from 1 to {MAX_SEARCH_LIMIT}, got {raw!r}")
    return int(raw)


# --------------------------------------------------------------- knowledge
def knowledge_pages(services: Services) -> list[JSON]:
    return [_page_summary(page) for page in services.knowledge.list_pages()]


def _page_summary(page: KnowledgePage) -> JSON:
    return {"path": page.path, "category": page.category, "slug": page.slug, "title": page.title,
            "size": page.size, "modified": iso_time(page.modified)}


def knowledge_page(services: Services, path: str | None) -> JSON:
    """The page's markdown, and its safe HTML with page links resolved (see :mod:`.markdown`)."""
    from .markdown import render_page

    if not path:
        raise BadRequest("path is required, e.g. path=tech/deploy")
    content = services.knowledge.read(path)
    titles = {page.path: page.title for page in services.knowledge.list_pages()}
    html = render_page(content, services.knowledge.link_resolver(path), titles)
    return {"path": path, "content": content, "html": html}


def knowledge_graph(services: Services) -> JSON:
    return services.knowledge.build_graph().to_dict()


# -------------------------------------------------------------- line edits
EDIT_OPS = ("add", "edit", "delete")
MAX_LINE_CHARS = 4000
_DAILY_FILE_RE = re.compile(r"^memory/(\d{4}-\d{2}-\d{2})\.md$")
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class LineEdit:
    """One change to one line of MEMORY.md or a daily file, made over the bytes the editor saw."""

    file: str  # "MEMORY.md" or "memory/YYYY-MM-DD.md"
    base: str  # SHA-256 of the file as the editor read it
    op: str  # add (after line ``line``: 0 is the top, None the end) | edit | delete
    line: int | None
    text: str
    preview: bool  # only compute the diff, write nothing


def parse_line_edit(body: object) -> LineEdit:
    """The body of ``POST /api/scopes/{scope}/lines``; every mistake is a 400 that says what is expected."""
    if not isinstance(body, dict):
        raise BadRequest('the body must be a JSON object like {"file": "MEMORY.md", "base": "<sha256>", '
                         '"op": "edit", "line": 3, "text": "- likes tea"}')
    op, file, base = body.get("op"), body.get("file"), body.get("base")
    if op not in EDIT_OPS:
        raise BadRequest(f"op must be one of {', '.join(EDIT_OPS)}, got {op!r}")
    if file != "MEMORY.md" and not (isinstance(file, str) and _DAILY_FILE_RE.match(file)):
        raise BadRequest(f"file must be MEMORY.md or memory/YYYY-MM-DD.md, got {file!r}")
    if file != "MEMORY.md":
        parse_date(file.removeprefix("memory/").removesuffix(".md"))
    if not isinstance(base, str) or not _SHA256_RE.match(base):
        raise BadRequest("base must be the sha256 the file was served with (64 hex digits)")
    line = _parse_line_number(body.get("line"), op)
    text = body.get("text", "")
    if op != "delete" and (not isinstance(text, str) or not text.strip() or "\n" in text or "\r" in text
                           or len(text) > MAX_LINE_CHARS):
        raise BadRequest(f"text must be one non-empty line of at most {MAX_LINE_CHARS} characters")
    preview = body.get("preview", False)
    if not isinstance(preview, bool):
        raise BadRequest(f"preview must be true or false, got {preview!r}")
    return LineEdit(file, base, op, line, text if op != "delete" else "", preview)


def _parse_line_number(raw: object, op: str) -> int | None:
    """1 or more for edit and delete; for add, 0 or more (or null: at the end)."""
    if raw is None and op == "add":
        return None
    lowest = 0 if op == "add" else 1
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < lowest:
        raise BadRequest(f"line must be a whole number of {lowest} or more for {op}, got {raw!r}")
    return raw


def edit_lines(services: Services, scope: str, edit: LineEdit) -> JSON:
    """Apply ``edit`` if the file still has the bytes of ``edit.base`` (else 409), under the workspace
    lock. The file then gets a new version; the index follows (the scope is marked for re-sync)."""
    scope = existing_scope(services, scope)
    path = services.workspace.resolve_memory_path(scope, edit.file)
    if edit.file != "MEMORY.md" and not path.is_file():
        raise NotFound(f"scope {scope!r} has no daily memory {edit.file}")
    with services.memory.lock:
        before = path.read_bytes() if path.is_file() else b""
        if _sha256(before) != edit.base:
            raise Conflict(f"{edit.file} of scope {scope!r} has changed since you opened it (another edit, a dream "
                           "or the bot wrote to it); reload it to see the change, then make your edit again")
        after = _apply(before, edit)
        version = None if edit.preview else _save(services, scope, edit, after)
    return {"scope": scope, "file": edit.file, "preview": edit.preview, "version": version,
            "diff": unified_diff(_text(before), _text(after), edit.file),
            "changes": plain_changes(_text(before), _text(after)), "content": _text(after),
            "sha256": _sha256(after)}


def _apply(data: bytes, edit: LineEdit) -> bytes:
    lines = _text(data).splitlines(keepends=True)
    if edit.op == "add":
        at = len(lines) if edit.line is None else edit.line
        if at > len(lines):
            raise BadRequest(f"{edit.file} has {len(lines)} lines; cannot add after line {at}")
        if at == len(lines) and lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        lines.insert(at, edit.text + "\n")
    else:
        assert edit.line is not None
        if edit.line > len(lines):
            raise BadRequest(f"{edit.file} has {len(lines)} lines; there is no line {edit.line}")
        if edit.op == "delete":
            del lines[edit.line - 1]
        else:
            lines[edit.line - 1] = edit.text + ("\n" if lines[edit.line - 1].endswith("\n") else "")
    return "".join(lines).encode("utf-8")


def _save(services: Services, scope: str, edit: LineEdit, data: bytes) -> int:
    """Through the file's versions, so the edit is listed and can be reverted; returns the version."""
    where = "at the end" if edit.line is None else f"line {edit.line}"
    return services.dreamer.memory_file.write(scope, data, f"console: {edit.op} {where}", file=edit.file)
