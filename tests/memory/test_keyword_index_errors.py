"""A keyword search that meets a database error: only corruption rebuilds the indexes."""

from __future__ import annotations

import sqlite3

import pytest

from memory import chunk_text
from memory.index.chunker import text_hash
from memory.index.database import Database
from memory.index.keyword_index import KeywordIndex
from memory.index.storage import FileRecord, IndexStorage


@pytest.fixture
def keywords(tmp_path) -> KeywordIndex:
    store = IndexStorage(Database(tmp_path / "index.db"))
    text = "- the parrot says hello\n"
    with store.write() as conn:
        chunks = chunk_text(text, scope="alice", path="MEMORY.md", max_chars=400, overlap_lines=0)
        store.replace_file(conn, FileRecord("alice", "MEMORY.md", text_hash(text), 0.0, len(text)), chunks)
    yield KeywordIndex(store)
    store.db.close()


def _locked_error(tmp_path) -> sqlite3.OperationalError:
    """The error SQLite really raises when another process holds the file past busy_timeout."""
    path = tmp_path / "held.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    waiter = sqlite3.connect(path, timeout=0)
    try:
        waiter.execute("SELECT * FROM t")
    except sqlite3.OperationalError as exc:
        return exc
    finally:
        waiter.close()
        holder.close()
    raise AssertionError("the file was not locked")


def test_a_locked_database_degrades_the_keyword_search_and_rebuilds_nothing(
    keywords, monkeypatch, caplog, tmp_path
) -> None:
    locked = _locked_error(tmp_path)
    assert str(locked) == "database is locked"
    rebuilds: list[None] = []
    monkeypatch.setattr(keywords, "rebuild", lambda: rebuilds.append(None))
    search_chain = keywords._search_chain

    def held_once(*args: object) -> object:
        monkeypatch.setattr(keywords, "_search_chain", search_chain)
        raise locked

    monkeypatch.setattr(keywords, "_search_chain", held_once)
    caplog.set_level("WARNING")
    assert keywords.search("parrot", ["alice"], 5) == []
    assert rebuilds == [] and "database is locked" in caplog.text
    assert [hit.chunk.path for hit in keywords.search("parrot", ["alice"], 5)] == ["MEMORY.md"]


def test_a_corrupt_keyword_index_is_rebuilt_during_the_search(keywords) -> None:
    with keywords.db.lock:
        keywords.db.conn.execute("DELETE FROM chunks_fts_data WHERE id > 1")
        keywords.db.conn.execute("DELETE FROM chunks_tri_data WHERE id > 1")
    assert [hit.chunk.path for hit in keywords.search("parrot", ["alice"], 5)] == ["MEMORY.md"]
    assert keywords.check()


def test_another_database_error_is_raised_and_rebuilds_nothing(keywords, monkeypatch) -> None:
    rebuilds: list[None] = []
    monkeypatch.setattr(keywords, "rebuild", lambda: rebuilds.append(None))

    def broken(*args: object) -> None:
        raise sqlite3.OperationalError("no such column: nope")

    monkeypatch.setattr(keywords, "_search_chain", broken)
    with pytest.raises(sqlite3.OperationalError, match="no such column"):
        keywords.search("parrot", ["alice"], 5)
    assert rebuilds == []
