"""Bounded garbage collection (issue 15 #12): the embedding cache, MEMORY.md versions and flush jobs
shrink, on real SQLite, with exact row counts and injected times (no sleeps)."""

from __future__ import annotations

import sqlite3
import time
from datetime import datetime

import numpy as np
import pytest

from memory import Database, DreamSettings, Turn
from memory.consolidation.dream import DeepDream
from memory.conversations.conversations import ConversationStore

DAY = 86400.0


def count(manager, sql: str) -> int:
    return int(manager.db.query(sql)[0][0])


def used_vectors_missing(manager) -> int:
    """Entries marked embedded whose vector is not in the cache (must always be 0)."""
    return count(manager, "SELECT count(*) FROM entries n WHERE n.vec_model IS NOT NULL AND NOT EXISTS"
                          " (SELECT 1 FROM embed_cache e WHERE e.model = n.vec_model AND e.text_hash = n.text_hash)")


def test_appends_to_one_daily_file_leave_only_the_chunks_vectors_after_the_grace(make_manager) -> None:
    """The issue's case: 100 appends to one daily file left 7 chunks but 100 cached vectors."""
    manager = make_manager(chunk_max_chars=400)
    for i in range(100):
        manager.append_daily("alice", f"note {i}: the kiosk at gate {i} was redeployed")
        manager.indexer.sync()
    chunks = count(manager, "SELECT count(*) FROM chunks")
    cached = count(manager, "SELECT count(*) FROM embed_cache")
    assert chunks < 20 and cached > 50  # the growth the issue reported
    now = time.time()
    assert manager.embed_cache.collect_embed_cache(7, now=now) == (0, cached)  # first seen unused: only marked
    assert manager.embed_cache.collect_embed_cache(7, now=now + 6.9 * DAY) == (0, cached)  # inside the grace
    assert manager.embed_cache.collect_embed_cache(7, now=now + 7 * DAY) == (cached - chunks, chunks)
    assert count(manager, "SELECT count(*) FROM embed_cache") == chunks
    assert count(manager, "SELECT count(*) FROM embed_cache_unused") == 0
    assert used_vectors_missing(manager) == 0
    assert manager.indexer.sync().embed_calls == 0  # nothing in use was lost: no re-embedding
    daily = {path.name for path in manager.workspace.root.glob("scopes/alice/memory/*.md")}
    assert len(daily) == 1 and [hit.path for hit in manager.search("kiosk gate 99", "alice")][:1] == [f"memory/{daily.pop()}"]


def test_a_vector_used_again_within_the_grace_is_kept_and_unmarked(make_manager) -> None:
    manager = make_manager()
    manager.append_daily("alice", "the kiosk was redeployed")
    manager.indexer.sync()
    model = manager.embedder.model_id
    with manager.db.transaction() as conn:  # what a running sync cached before writing its entries
        manager.embed_cache.store_vectors(conn, model, {"pending-hash": np.ones(4, dtype=np.float32)})
        manager.embed_cache.store_vectors(conn, "old-model", {"gone-hash": np.ones(4, dtype=np.float32)})
    now = 1_000_000.0
    assert manager.embed_cache.collect_embed_cache(7, now=now) == (0, 3)
    assert count(manager, "SELECT count(*) FROM embed_cache_unused") == 2
    # a sync writes an entry with that text but no vector yet: in use again, so unmarked; the text the
    # entry had before is unused from now on, and only marked
    [(original,)] = manager.db.query("SELECT text_hash FROM entries")
    with manager.db.transaction() as conn:
        conn.execute("UPDATE entries SET text_hash = 'pending-hash', vec_model = NULL")
    assert manager.embed_cache.collect_embed_cache(7, now=now + 30 * DAY) == (1, 2)  # the old model's goes
    assert sorted(tuple(row) for row in manager.db.query("SELECT model, text_hash, since FROM embed_cache_unused")) == [
        (model, original, now + 30 * DAY)]
    assert sorted(row[0] for row in manager.db.query("SELECT text_hash FROM embed_cache")) == sorted([original, "pending-hash"])
    # unused again: its grace starts anew from this pass, not from its first mark
    with manager.db.transaction() as conn:
        conn.execute("DELETE FROM entries")
    assert manager.embed_cache.collect_embed_cache(7, now=now + 31 * DAY) == (0, 2)
    assert manager.embed_cache.collect_embed_cache(7, now=now + 37 * DAY) == (1, 1)
    assert [row[0] for row in manager.db.query("SELECT text_hash FROM embed_cache")] == ["pending-hash"]
    assert manager.embed_cache.collect_embed_cache(7, now=now + 38 * DAY) == (1, 0)
    assert count(manager, "SELECT count(*) FROM embed_cache_unused") == 0


def versions_of(dreamer: DeepDream, scope: str) -> list[int]:
    return [v.id for v in dreamer.memory_file.versions(scope)]


def test_versions_past_keep_or_max_days_go_but_never_the_newest(make_manager) -> None:
    manager = make_manager(embedder=None)
    dreamer = DeepDream(manager, DreamSettings(), clock=lambda: datetime(2026, 12, 2, 23, 51))
    files = dreamer.memory_file
    for i in range(6):
        files.write("alice", f"- fact {i}\n".encode(), f"edit {i}")
    files.write("bob", b"- only fact\n", "edit")
    alice = versions_of(dreamer, "alice")
    assert len(alice) == 6 and files.version_count() == 7
    now = time.time()
    assert files.prune_versions(keep=4, max_days=365, now=now) == 2
    assert versions_of(dreamer, "alice") == alice[:4] and versions_of(dreamer, "bob") != []
    assert files.prune_versions(keep=4, max_days=365, now=now) == 0  # idempotent
    # a year later every version is past max_days: each scope keeps its newest only
    assert files.prune_versions(keep=4, max_days=365, now=now + 366 * DAY) == 3
    assert versions_of(dreamer, "alice") == alice[:1] and len(versions_of(dreamer, "bob")) == 1
    assert files.content("alice", alice[0]) == b"- fact 5\n" == files.read("alice")
    assert files.version_count() == 2
    with pytest.raises(ValueError):
        files.prune_versions(keep=0, max_days=1)


def test_done_jobs_past_retention_are_deleted_pending_and_failing_ones_stay(tmp_path) -> None:
    store = ConversationStore(Database(tmp_path / "index.db"))
    store.ensure_session("s1", "alice")
    for status in ("done", "failing", "pending"):
        store.append_messages("s1", [Turn("user", status)])
        [job] = store.record_daily_jobs(time.time() + 1, "2026-12-02")
        if status == "done":
            store.finish_job(job.id)
        elif status == "failing":
            store.fail_job_attempt(job.id, "boom")
    assert store.job_counts() == {"done": 1, "pending": 2} and len(store.failing_jobs()) == 1
    assert store.cleanup(max_age_days=90, now=time.time() + 89 * DAY) == 0
    assert store.job_counts() == {"done": 1, "pending": 2}
    store.cleanup(max_age_days=90, now=time.time() + 91 * DAY)
    assert store.job_counts() == {"pending": 2}


def test_a_job_an_older_version_gave_up_on_is_retried_after_the_upgrade(tmp_path) -> None:
    """Before #34 a job failing 5 times was marked failed and never run again: it is pending again."""
    with sqlite3.connect(tmp_path / "index.db") as db:
        db.executescript(
            "CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, session_id TEXT NOT NULL,"
            " scope TEXT NOT NULL, seq_from INTEGER NOT NULL, seq_to INTEGER NOT NULL, reason TEXT NOT NULL,"
            " day TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'pending', attempts INTEGER NOT NULL DEFAULT 0,"
            " error TEXT, created_at REAL NOT NULL, done_at REAL);"
            "INSERT INTO jobs (kind, session_id, scope, seq_from, seq_to, reason, day, status, attempts, error,"
            " created_at, done_at) VALUES ('flush', 's1', 'alice', 1, 2, 'trim', '2026-12-02', 'failed', 5, 'disk full',"
            " 0, 1);")
    store = ConversationStore(Database(tmp_path / "index.db"))
    [job] = store.pending_jobs(due_at=time.time())
    assert (job.id, job.attempts) == (1, 5) and store.job_counts() == {"pending": 1}
