"""MEMORY.md and the daily files with versions: writes, revert, forget, pruning, old databases."""

from __future__ import annotations

import re

import pytest
from support.files import write

from memory.files.memory_file import MemoryFile


@pytest.fixture
def memory_file(make_manager) -> MemoryFile:
    return MemoryFile(make_manager(embedder=None))


def test_a_daily_file_has_versions_of_its_own(workspace, memory_file) -> None:
    daily = write(workspace, "alice", "memory/2026-12-02.md", "- booked Osaka\n")
    write(workspace, "alice", "MEMORY.md", "- likes tea\n")
    version = memory_file.write("alice", b"- booked Kyoto\n", "console: edit line 1", file="memory/2026-12-02.md")
    assert daily.read_bytes() == b"- booked Kyoto\n"
    assert [(v.id, v.cause) for v in memory_file.versions("alice", "memory/2026-12-02.md")] == [
        (version, "console: edit line 1"), (version - 1, "as found on disk")]
    assert memory_file.versions("alice") == []  # MEMORY.md was not written
    assert memory_file.revert("alice", file="memory/2026-12-02.md")[0] == version + 1
    assert daily.read_bytes() == b"- booked Osaka\n"
    with pytest.raises(ValueError, match=re.escape("'memory/dreams/2026-12-02.md' has no versions")):
        memory_file.write("alice", b"x", "no", file="memory/dreams/2026-12-02.md")


def test_pruning_keeps_the_newest_version_of_every_file(workspace, memory_file) -> None:
    for i in range(3):
        memory_file.write("alice", f"- fact {i}\n".encode(), f"edit {i}")
        memory_file.write("alice", f"- note {i}\n".encode(), f"edit {i}", file="memory/2026-12-02.md")
    assert memory_file.prune_versions(keep=1, max_days=365) == 4
    assert [v.cause for v in memory_file.versions("alice")] == ["edit 2"]
    assert [v.cause for v in memory_file.versions("alice", "memory/2026-12-02.md")] == ["edit 2"]


def test_versions_from_before_daily_versions_are_memory_md_s(workspace, make_manager) -> None:
    """A database made before the ``path`` column: its versions stay MEMORY.md's and stay revertible."""
    import sqlite3

    workspace.ensure()
    with sqlite3.connect(workspace.db_path) as db:
        db.execute("CREATE TABLE memory_versions (id INTEGER PRIMARY KEY AUTOINCREMENT, scope TEXT NOT NULL,"
                   " created_at REAL NOT NULL, cause TEXT NOT NULL, entries INTEGER NOT NULL, sha256 TEXT NOT NULL,"
                   " content BLOB NOT NULL)")
        db.execute("INSERT INTO memory_versions (scope, created_at, cause, entries, sha256, content)"
                   " VALUES ('alice', 1.0, 'deep dream', 1, 'x', X'2d206f6c640a')")
    write(workspace, "alice", "MEMORY.md", "- new\n")
    memory_file = MemoryFile(make_manager(embedder=None))
    assert [(v.id, v.cause) for v in memory_file.versions("alice")] == [(1, "deep dream")]
    memory_file.revert("alice", 1)
    assert (workspace.memory_file("alice")).read_bytes() == b"- old\n"
