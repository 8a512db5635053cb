"""MEMORY.md and the daily files of each scope, with versions: every write is atomic and recorded.

Each state of MEMORY.md is kept as a version in SQLite (``memory_versions``), so ``revert`` restores
the exact previous bytes. A daily file replaced by hand (a console edit) is versioned the same way;
the bot's own appends are not. A write may be a compare-and-swap on the bytes its writer read
(:class:`MemoryChanged` when another writer came first): Deep Dream (:mod:`memory.consolidation.dream`) writes
this way, as its model answers long after it read the file.

``dream_state`` (what each scope's last dream read) is created here with the versions because
erasing a scope's history forgets it too, in the same transaction.
"""

from __future__ import annotations

import difflib
import hashlib
import re
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..manager import MemoryManager
from .files import atomic_write
from .line_removal import Matcher, matching_lines, without_lines
from .scopes import MEMORY_FILE

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

#: The files kept with versions, relative to the scope's folder: MEMORY.md and the daily files.
_VERSIONED_RE = re.compile(r"^(?:MEMORY\.md|memory/\d{4}-\d{2}-\d{2}\.md)$")
_ENTRY_RE = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\S")


def count_entries(text: str) -> int:
    """List items are entries: what a version records and Deep Dream's limits count."""
    return sum(1 for line in text.splitlines() if _ENTRY_RE.match(line))


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

    def find_in_versions(self, scope: str, matches: Matcher) -> list[tuple[str, int, int, str]]:
        """(file, version, line number, line) of every matching line of ``scope``'s kept versions
        (MEMORY.md's and the daily files')."""
        rows = self.manager.db.query("SELECT path, id, content FROM memory_versions WHERE scope = ? ORDER BY path, id",
                                     (scope,))
        return [(file, vid, number, line) for file, vid, content in rows
                for number, line in matching_lines(bytes(content).decode("utf-8", "replace"), matches)]

    def scrub_versions(self, scope: str, matches: Matcher) -> int:
        """Remove the matching lines from every kept version of ``scope`` (a revert must not bring a
        forgotten text back); returns versions changed. Their ids, times and causes stay."""
        changed = 0
        with self.manager.lock, self.manager.db.transaction() as conn:
            rows = conn.execute("SELECT id, content FROM memory_versions WHERE scope = ?", (scope,)).fetchall()
            for vid, content in rows:
                kept = without_lines(bytes(content).decode("utf-8", "replace"), matches)
                if kept is not None:
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
