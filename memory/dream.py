"""Deep Dream: distil recent daily memory into MEMORY.md, safely, with a way back.

One LLM call reads MEMORY.md and the last ``lookback_days`` daily files and answers with a
``[MEMORY]`` section (the new MEMORY.md) and a ``[DREAM]`` section (a diary). The output is refused,
leaving MEMORY.md as it was, when it has no ``[MEMORY]``, more than ``max_entries`` entries, or drops
more than ``max_loss`` of the old entries. Otherwise MEMORY.md is replaced atomically and every
state is kept as a version in SQLite, so ``revert`` restores the exact previous bytes. A daily file
replaced by hand (a console edit) is versioned the same way; the bot's own appends are not.

Dedupe hashes the daily content only (not MEMORY.md, which the dream itself rewrites) and is stored
in SQLite, so the same input is not dreamt twice, even across a restart.

The LLM answers long after MEMORY.md was read, so the dream's write is a compare-and-swap on the
bytes it read: when a ``/memory forget``, a revert or another dream changed the file meanwhile, the
dream is redone over the new file (once), then refused; it never overwrites what it did not see.
"""

from __future__ import annotations

import asyncio
import difflib
import hashlib
import logging
import re
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from .config import DreamSettings
from .files import append_text, atomic_write
from .manager import MemoryManager
from .offload import Offload
from .scopes import MEMORY_FILE

log = logging.getLogger(__name__)

Complete = Callable[[Sequence[dict[str, str]]], Awaitable[str]]
"""Sends chat messages to the LLM and returns its text answer."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS memory_versions (
    id INTEGER PRIMARY KEY AUTOINCREMENT, scope TEXT NOT NULL, created_at REAL NOT NULL,
    cause TEXT NOT NULL, entries INTEGER NOT NULL, sha256 TEXT NOT NULL, content BLOB NOT NULL,
    path TEXT NOT NULL DEFAULT 'MEMORY.md'
);
CREATE INDEX IF NOT EXISTS memory_versions_scope ON memory_versions (scope, id);
CREATE TABLE IF NOT EXISTS dream_state (
    scope TEXT PRIMARY KEY, input_hash TEXT NOT NULL, dreamed_at REAL NOT NULL
);
"""

DREAM_PROMPT = """You maintain a person's long-term memory file, MEMORY.md. You are given the current MEMORY.md and
recent daily notes (newest first). Produce an updated MEMORY.md:
- merge new durable facts from the daily notes; update entries the notes contradict (newer wins);
- drop items that are stale or no longer true; keep everything else, in substance, from the old file;
- keep absolute dates (YYYY-MM-DD), never "yesterday"; keep the language the person uses;
- invent nothing that is not in the inputs; one fact per "- " bullet; at most {max_entries} entries.
Then write a short diary paragraph about what you noticed.
Answer in exactly this form:
[MEMORY]
- entry
- entry
[DREAM]
diary text"""

_DREAM_ATTEMPTS = 2  # the first pass and one redo over a MEMORY.md that changed meanwhile

#: The files kept with versions, relative to the scope's folder: MEMORY.md and the daily files.
_VERSIONED_RE = re.compile(r"^(?:MEMORY\.md|memory/\d{4}-\d{2}-\d{2}\.md)$")
_ENTRY_RE = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\S")
_SECTION_RE = re.compile(r"^[#*\s]*\[(MEMORY|DREAM)\][*\s:]*$", re.IGNORECASE | re.MULTILINE)


def count_entries(text: str) -> int:
    return sum(1 for line in text.splitlines() if _ENTRY_RE.match(line))


@dataclass(frozen=True)
class DreamOutput:
    memory: str | None
    dream: str


def parse_dream_output(text: str) -> DreamOutput:
    """Find the ``[MEMORY]`` and ``[DREAM]`` sections in any order, ignoring fences and chatter."""
    cleaned = re.sub(r"^\s*```[\w-]*\s*$", "", text, flags=re.MULTILINE)
    marks = list(_SECTION_RE.finditer(cleaned))
    sections: dict[str, str] = {}
    for index, mark in enumerate(marks):
        end = marks[index + 1].start() if index + 1 < len(marks) else len(cleaned)
        sections.setdefault(mark.group(1).upper(), cleaned[mark.end():end].strip())
    memory = sections.get("MEMORY")
    return DreamOutput(memory=memory, dream=sections.get("DREAM", ""))


class MemoryChanged(RuntimeError):
    """MEMORY.md no longer holds the bytes its writer read: another writer came first."""


@dataclass(frozen=True)
class Version:
    id: int
    scope: str
    created_at: float
    cause: str
    entries: int
    sha256: str


@dataclass
class DreamResult:
    status: str  # written | skipped | refused | failed
    reason: str
    diff: str = ""
    entries_before: int = 0
    entries_after: int = 0
    version: int | None = None

    @property
    def changed(self) -> bool:
        return self.status == "written"


def unified_diff(before: str, after: str, file: str = "MEMORY.md") -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), f"{file} (before)", f"{file} (after)"
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


_COLUMNS = "PRAGMA table_info(memory_versions)"


def versioned_file(file: str) -> str:
    """``file`` if it keeps versions (MEMORY.md, ``memory/YYYY-MM-DD.md``), else ValueError."""
    if not _VERSIONED_RE.match(file):
        raise ValueError(f"{file!r} has no versions: only MEMORY.md and memory/YYYY-MM-DD.md do")
    return file


def _lacks_path(columns: Sequence[Any]) -> bool:
    return "path" not in {column[1] for column in columns}


class MemoryFile:
    """MEMORY.md of each scope with its versions: every write is atomic and recorded.

    ``file`` (relative to the scope's folder) picks another versioned file, a daily file
    ``memory/YYYY-MM-DD.md``: its versions are its own, and revert works the same way.
    """

    def __init__(self, manager: MemoryManager) -> None:
        self.manager = manager
        manager.db.execute_script(SCHEMA)
        self._add_path_column()

    def _add_path_column(self) -> None:
        """Databases from before daily versions have no ``path``: their versions are MEMORY.md's.
        Checked again inside the write transaction, as another process may be adding it too."""
        if not _lacks_path(self.manager.db.query(_COLUMNS)):
            return
        with self.manager.db.transaction() as conn:
            if _lacks_path(conn.execute(_COLUMNS).fetchall()):
                conn.execute("ALTER TABLE memory_versions ADD COLUMN path TEXT NOT NULL DEFAULT 'MEMORY.md'")

    def _path(self, scope: str, file: str) -> Path:
        return self.manager.workspace.scope_dir(scope) / versioned_file(file)

    def read(self, scope: str, file: str = MEMORY_FILE) -> bytes:
        path = self._path(scope, file)
        return path.read_bytes() if path.is_file() else b""

    def versions(self, scope: str, file: str = MEMORY_FILE) -> list[Version]:
        rows = self.manager.db.query(
            "SELECT id, scope, created_at, cause, entries, sha256 FROM memory_versions WHERE scope = ? AND path = ?"
            " ORDER BY id DESC",
            (scope, file),
        )
        return [Version(*row) for row in rows]

    def content(self, scope: str, version: int, file: str = MEMORY_FILE) -> bytes:
        rows = self.manager.db.query(
            "SELECT content FROM memory_versions WHERE scope = ? AND path = ? AND id = ?", (scope, file, version))
        if not rows:
            known = ", ".join(str(v.id) for v in self.versions(scope, file)) or "none"
            raise KeyError(f"{file} of scope {scope!r} has no version {version} (versions: {known})")
        return bytes(rows[0][0])

    def _record(self, scope: str, data: bytes, cause: str, file: str) -> int:
        with self.manager.db.transaction() as conn:
            return _insert_version(conn, scope, time.time(), cause, data, file)

    def history(self, scope: str) -> Iterator[tuple[str, Version, bytes]]:
        """Every kept version of ``scope``'s files (MEMORY.md's and the daily files') as (file,
        version, bytes), oldest first: what an export carries."""
        rows = self.manager.db.query(
            "SELECT path, id, scope, created_at, cause, entries, sha256 FROM memory_versions WHERE scope = ? ORDER BY id",
            (scope,))
        for file, *version in rows:
            yield file, Version(*version), self.content(scope, version[0], file)

    @staticmethod
    def restore_versions(conn: sqlite3.Connection, scope: str,
                         versions: Iterable[tuple[str, float, str, bytes]]) -> int:
        """Record exported versions ``(file, created_at, cause, content)``, oldest first, in the
        caller's transaction (an import); returns how many. A file that keeps no versions is a
        ValueError."""
        count = 0
        for file, created_at, cause, data in versions:
            _insert_version(conn, scope, created_at, cause, data, versioned_file(file))
            count += 1
        return count

    def version_count(self, scope: str | None = None) -> int:
        """Versions kept of every file of ``scope`` (None: over every scope)."""
        if scope is None:
            return int(self.manager.db.query("SELECT count(*) FROM memory_versions")[0][0])
        return int(self.manager.db.query("SELECT count(*) FROM memory_versions WHERE scope = ?", (scope,))[0][0])

    def prune_versions(self, keep: int, max_days: float, now: float | None = None) -> int:
        """Delete each file's versions past its newest ``keep`` or older than ``max_days``; the newest
        version of a file (what it holds) is never deleted. Returns rows deleted."""
        if keep < 1:
            raise ValueError("keep must be 1 or more: the newest version always stays")
        cutoff = (time.time() if now is None else now) - max_days * 86400
        with self.manager.db.transaction() as conn:
            return int(conn.execute(
                "DELETE FROM memory_versions WHERE id IN (SELECT id FROM (SELECT id, created_at,"
                " row_number() OVER (PARTITION BY scope, path ORDER BY id DESC) AS rank FROM memory_versions)"
                " WHERE rank > 1 AND (rank > ? OR created_at < ?))",
                (keep, cutoff),
            ).rowcount)

    def _keep_current(self, scope: str, file: str) -> None:
        """Record the file on disk as a version if it is not the latest one (edited by hand, or a
        daily file the bot appended to since)."""
        current = self.read(scope, file)
        latest = self.versions(scope, file)
        if current and (not latest or latest[0].sha256 != hashlib.sha256(current).hexdigest()):
            self._record(scope, current, "as found on disk", file)

    def write(self, scope: str, data: bytes, cause: str, *, expected: bytes | None = None,
              file: str = MEMORY_FILE) -> int:
        """Replace the file atomically, keeping the old content as a version first. With ``expected``
        it is a compare-and-swap: if the file no longer holds those bytes, nothing is written and
        :class:`MemoryChanged` is raised."""
        target = self._path(scope, file)
        with self.manager.lock:
            if expected is not None and self.read(scope, file) != expected:
                raise MemoryChanged(f"{file} of scope {scope!r} changed since it was read")
            for stale in target.parent.glob(f".{target.name}.*.tmp"):  # left by a killed writer
                stale.unlink(missing_ok=True)
            self._keep_current(scope, file)
            atomic_write(target, data)
            version = self._record(scope, data, cause, file)
        self.manager.indexer.mark_dirty(scope)
        return version

    def revert(self, scope: str, version: int | None = None, file: str = MEMORY_FILE) -> tuple[int, str]:
        """Restore ``version`` (default: the one before the current); returns (new version, diff).
        When the file already holds those bytes nothing is written: (the current version, "")."""
        with self.manager.lock:
            self._keep_current(scope, file)
            versions = self.versions(scope, file)
            if version is None:
                if len(versions) < 2:
                    raise KeyError(f"{file} of scope {scope!r} has no earlier version to revert to")
                version = versions[1].id
            data = self.content(scope, version, file)
            before = self.read(scope, file)
            if data == before:
                return versions[0].id, ""
            new_version = self.write(scope, data, f"revert to version {version}", file=file)
        return new_version, unified_diff(before.decode("utf-8", "replace"), data.decode("utf-8", "replace"), file)

    def forget(self, scope: str, text: str) -> tuple[list[str], int | None]:
        """Remove the entries containing ``text`` (case-insensitive); returns (removed, new version)."""
        needle = text.strip().lower()
        if not needle:
            raise ValueError("say what to forget")
        with self.manager.lock:
            lines = self.read(scope).decode("utf-8", "replace").splitlines(keepends=True)
            removed = [line.strip() for line in lines if _ENTRY_RE.match(line) and needle in line.lower()]
            if not removed:
                return [], None
            kept = [line for line in lines if not (_ENTRY_RE.match(line) and needle in line.lower())]
            version = self.write(scope, "".join(kept).encode("utf-8"), "forget")  # the text itself is not kept
        return removed, version

    def find_in_versions(self, scope: str, matches: Callable[[str], bool]) -> list[tuple[str, int, int, str]]:
        """(file, version, line number, line) of every matching line of ``scope``'s kept versions
        (MEMORY.md's and the daily files')."""
        rows = self.manager.db.query("SELECT path, id, content FROM memory_versions WHERE scope = ? ORDER BY path, id",
                                     (scope,))
        return [(file, vid, number, line) for file, vid, content in rows
                for number, line in enumerate(bytes(content).decode("utf-8", "replace").splitlines(), 1) if matches(line)]

    def scrub_versions(self, scope: str, matches: Callable[[str], bool]) -> int:
        """Remove the matching lines from every kept version of ``scope`` (a revert must not bring a
        forgotten text back); returns versions changed. Their ids, times and causes stay."""
        changed = 0
        with self.manager.lock, self.manager.db.transaction() as conn:
            rows = conn.execute("SELECT id, content FROM memory_versions WHERE scope = ?", (scope,)).fetchall()
            for vid, content in rows:
                lines = bytes(content).decode("utf-8", "replace").splitlines(keepends=True)
                kept = "".join(line for line in lines if not matches(line))
                if len(kept) != sum(map(len, lines)):
                    data = kept.encode("utf-8")
                    conn.execute("UPDATE memory_versions SET content = ?, sha256 = ?, entries = ? WHERE id = ?",
                                 (data, hashlib.sha256(data).hexdigest(), count_entries(kept), vid))
                    changed += 1
        return changed

    def erase_history(self, scope: str, files: Sequence[str] | None = None) -> None:
        """Delete the versions of ``files`` of ``scope`` (None: every file's, and the dream dedupe state)."""
        with self.manager.db.transaction() as conn:
            if files is not None:
                conn.executemany("DELETE FROM memory_versions WHERE scope = ? AND path = ?", [(scope, f) for f in files])
                return
            conn.execute("DELETE FROM memory_versions WHERE scope = ?", (scope,))
            conn.execute("DELETE FROM dream_state WHERE scope = ?", (scope,))


def _insert_version(conn: sqlite3.Connection, scope: str, created_at: float, cause: str, data: bytes, file: str) -> int:
    cursor = conn.execute(
        "INSERT INTO memory_versions (scope, path, created_at, cause, entries, sha256, content) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (scope, file, created_at, cause, count_entries(data.decode("utf-8", "replace")), hashlib.sha256(data).hexdigest(),
         data),
    )
    return int(cursor.lastrowid or 0)


def _only_grew(seen: list[tuple[str, str | None]], now: list[tuple[str, str | None]]) -> bool:
    """Each day of ``now`` still starts with the lines ``seen`` of it: nothing read was removed or changed."""
    def lines(text: str | None) -> list[str]:
        return (text or "").splitlines()

    return all(lines(text)[:len(lines(old))] == lines(old) for (_day, old), (_same, text) in zip(seen, now, strict=True))


def _window_hash(window: list[tuple[str, str | None]]) -> str:
    return hashlib.sha256(repr(window).encode("utf-8")).hexdigest()


class DeepDream:
    def __init__(self, manager: MemoryManager, settings: DreamSettings, *, clock: Callable[[], datetime] = datetime.now,
                 offload: Offload = asyncio.to_thread) -> None:
        self.manager = manager
        self.settings = settings
        self.memory_file = MemoryFile(manager)
        self._clock = clock
        self._offload = offload

    def daily_window(self, scope: str, day: date, lookback_days: int) -> list[tuple[str, str | None]]:
        """(date, content or None when missing) for the window ending at ``day``, newest first."""
        window = []
        for offset in range(lookback_days):
            current = (day - timedelta(days=offset)).isoformat()
            path = self.manager.workspace.daily_file(scope, current)
            text = path.read_text(encoding="utf-8", errors="replace").strip() if path.is_file() else ""
            window.append((current, text or None))
        return window

    def has_daily_content(self, scope: str, day: date, lookback_days: int) -> bool:
        return any(text for _, text in self.daily_window(scope, day, lookback_days))

    async def dream(
        self, scope: str, complete: Complete, *, lookback_days: int | None = None, force: bool = False, day: date | None = None
    ) -> DreamResult:
        lookback = lookback_days or self.settings.lookback_days
        day = day or self._clock().date()
        window = await self._offload(self.daily_window, scope, day, lookback)
        if not any(text for _, text in window):
            return DreamResult("skipped", f"no daily memory in the last {lookback} day(s); MEMORY.md left as it is")
        input_hash = _window_hash(window)
        if not force and await self._offload(self._already_dreamt, scope, input_hash):
            return DreamResult("skipped", "already dreamt over exactly this daily memory")
        for attempt in range(_DREAM_ATTEMPTS):
            if attempt:  # the input changed under the first answer: read it again (a forget may have emptied lines)
                window = await self._offload(self.daily_window, scope, day, lookback)
                input_hash = _window_hash(window)
            result = await self._dream_once(scope, complete, window, input_hash, day)
            if result is not None:
                return result
        log.warning("deep dream for %s refused: its input kept changing while the model answered", scope)
        return DreamResult("refused", "MEMORY.md or the daily memory kept changing while the model was answering; "
                                      "MEMORY.md left as it is (the next dream starts from it)")

    async def _dream_once(
        self, scope: str, complete: Complete, window: list[tuple[str, str | None]], input_hash: str, day: date
    ) -> DreamResult | None:
        """One pass over MEMORY.md as it is now; None when it changed before the answer could land."""
        before = await self._offload(self.memory_file.read, scope)
        try:
            answer = await complete(self._prompt(before.decode("utf-8", "replace"), window))
        except Exception as exc:
            log.warning("deep dream for %s failed: %s", scope, exc)
            return DreamResult("failed", f"the LLM call failed: {exc}; MEMORY.md left as it is")
        try:
            return await self._offload(self._apply, scope, before, answer, (input_hash, window), day)
        except MemoryChanged:
            log.info("deep dream for %s: its input changed while the model answered; dreaming over the new one", scope)
            return None

    def _prompt(self, memory: str, window: list[tuple[str, str | None]]) -> list[dict[str, str]]:
        days = "\n\n".join(f"### {d}\n{text if text else '(no notes this day)'}" for d, text in window)
        user = f"## Current MEMORY.md\n{memory.strip() or '(empty)'}\n\n## Daily notes, newest first\n{days}"
        return [{"role": "system", "content": DREAM_PROMPT.format(max_entries=self.settings.max_entries)},
                {"role": "user", "content": user}]

    def _already_dreamt(self, scope: str, input_hash: str) -> bool:
        rows = self.manager.db.query("SELECT input_hash FROM dream_state WHERE scope = ?", (scope,))
        return bool(rows) and rows[0][0] == input_hash

    def _apply(self, scope: str, read: bytes, answer: str, window: tuple[str, list[tuple[str, str | None]]],
               day: date) -> DreamResult:
        """Write the answer when it passes the checks and its input is still what the model read:
        MEMORY.md (compare-and-swap) and the daily window, which may only have grown (notes appended
        meanwhile are the next dream's; a forget that emptied lines of it makes the answer stale)."""
        input_hash, seen = window
        before = read.decode("utf-8", "replace")
        parsed = parse_dream_output(answer)
        old_entries = count_entries(before)
        refusal = self._refusal(parsed, old_entries)
        if refusal:
            log.warning("deep dream for %s refused: %s", scope, refusal)
            return DreamResult("refused", refusal + "; MEMORY.md left as it is", entries_before=old_entries)
        assert parsed.memory is not None
        after = parsed.memory.strip() + "\n"
        diff = unified_diff(before, after)
        version = None
        if after != before:  # a dream that changed nothing writes no diary either
            with self.manager.lock:  # MEMORY.md and the diary together: a forget comes before both or after both
                if not _only_grew(seen, self.daily_window(scope, day, len(seen))):
                    raise MemoryChanged(f"daily memory of scope {scope!r} changed since it was read")
                version = self.memory_file.write(scope, after.encode("utf-8"), "deep dream", expected=read)
                if parsed.dream:
                    self._write_diary(scope, day, parsed.dream)
        with self.manager.db.transaction() as conn:
            conn.execute(
                "INSERT INTO dream_state (scope, input_hash, dreamed_at) VALUES (?, ?, ?) ON CONFLICT (scope)"
                " DO UPDATE SET input_hash = excluded.input_hash, dreamed_at = excluded.dreamed_at",
                (scope, input_hash, time.time()),
            )
        new_entries = count_entries(after)
        reason = f"MEMORY.md updated: {old_entries} → {new_entries} entries" if diff else (
            "MEMORY.md already up to date: no new version, no diary entry")
        return DreamResult("written" if diff else "skipped", reason, diff, old_entries, new_entries, version)

    def _refusal(self, parsed: DreamOutput, old_entries: int) -> str | None:
        if parsed.memory is None:
            return "the model's answer has no [MEMORY] section"
        new_entries = count_entries(parsed.memory)
        if new_entries > self.settings.max_entries:
            return f"the new MEMORY.md has {new_entries} entries, over the limit of {self.settings.max_entries}"
        if old_entries and (old_entries - new_entries) / old_entries > self.settings.max_loss:
            return (f"the new MEMORY.md drops {old_entries - new_entries} of {old_entries} entries, more than "
                    f"memory.dream.max_loss ({self.settings.max_loss:.0%}) allows")
        return None

    def _write_diary(self, scope: str, day: date, text: str) -> None:
        """Append to the day's diary; the caller holds the workspace lock."""
        path = self.manager.workspace.dreams_dir(scope) / f"{day.isoformat()}.md"
        append_text(path, f"## {self._clock():%H:%M}\n{text.strip()}\n")
