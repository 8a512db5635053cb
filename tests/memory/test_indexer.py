"""A sync's indexing passes end to end (memory/index/indexer.py): failures that write nothing, batched and
cached embedding, the trigram queue and its background fill, the stale-scope checks a search makes,
and the workspace lock a sync holds (and does not hold) — real SQLite with FTS5, real LanceDB, files
on disk."""

from __future__ import annotations

import math
import os
import time
from datetime import datetime

import pytest
from support.files import write

from memory import EmbeddingError, HashEmbedding, MemoryManager
from memory.index import scan
from memory.index.indexer import Indexer


def paths(results: list) -> list[tuple[str, int]]:
    return [(r.path, r.start_line) for r in results]


def test_failed_sync_writes_nothing_and_the_next_succeeds(workspace, make_manager) -> None:
    embedder = HashEmbedding()
    manager = make_manager(embedder=embedder)
    write(workspace, "alice", "MEMORY.md", "- first fact\n")
    manager.indexer.sync()
    before = manager.db.query("SELECT id, text FROM chunks ORDER BY id")
    write(workspace, "alice", "memory/2026-12-01.md", "- second fact about zebras\n")
    embedder.fail_with = EmbeddingError("HTTP 500")
    report = manager.indexer.sync()
    assert not report.ok and "nothing was written" in (report.error or "")
    assert manager.db.query("SELECT id, text FROM chunks ORDER BY id") == before
    assert ("alice", "memory/2026-12-01.md") not in manager.storage.files()
    embedder.fail_with = None
    report = manager.indexer.sync()
    assert report.ok and report.files_changed == 1
    assert paths(manager.search("zebras", "alice")) == [("memory/2026-12-01.md", 1)]


def test_a_sync_that_fails_half_way_keeps_what_was_embedded_for_the_retry(workspace, make_manager) -> None:
    class FailsOnThirdCall(HashEmbedding):
        def embed(self, texts):  # type: ignore[no-untyped-def]
            if self.calls == 2 and self.fail_with is None:
                self.fail_with = EmbeddingError("HTTP 503 on the third batch")
            return super().embed(texts)

    for day in range(1, 31):
        write(workspace, "alice", f"memory/2026-11-{day:02d}.md", f"- day {day}: " + " ".join(
            f"word{day}x{i}" for i in range(12)) + "\n")
    embedder = FailsOnThirdCall(batch_size=10)
    manager = make_manager(embedder=embedder)
    report = manager.indexer.sync()
    assert not report.ok and report.embed_calls == 2 and manager.storage.count_chunks() == 0  # the index: untouched
    embedder.fail_with = None
    report = manager.indexer.sync()
    assert report.ok and report.cache_hits == 20 and report.embed_calls == 1  # only the last 10 texts
    assert report.vectors_written == 30


def test_batched_embedding_calls_and_no_calls_on_resync(workspace, make_manager) -> None:
    embedder = HashEmbedding(batch_size=16)
    manager = make_manager(embedder=embedder)
    for i in range(100):
        write(workspace, "alice", f"memory/2026-10-{(i % 28) + 1:02d}-{i}.md", f"- note number {i} about topic {i * 7}\n")
    report = manager.indexer.sync()
    chunks = manager.storage.count_chunks()
    assert chunks == 100
    assert report.embed_calls == math.ceil(chunks / 16) == embedder.calls
    again = manager.indexer.sync()
    assert again.embed_calls == 0 and embedder.calls == math.ceil(chunks / 16)
    assert again.files_changed == 0


def test_changing_the_model_reembeds_from_stored_text(workspace, make_manager) -> None:
    write(workspace, "alice", "MEMORY.md", "- one\n- two\n")
    first = make_manager(embedder=HashEmbedding(model_id="hash:a"))
    first.indexer.sync()
    second = make_manager(embedder=HashEmbedding(model_id="hash:b"))
    report = second.indexer.sync()
    assert report.embed_calls == 1 and report.vectors_written == 2  # one chunk, two entries
    assert manager_vec_models(second) == {"hash:b"}


def manager_vec_models(manager) -> set[str]:
    return {row[0] for row in manager.db.query("SELECT vec_model FROM entries")}


def test_dreams_and_dot_folders_are_not_indexed(workspace, make_manager) -> None:
    write(workspace, "alice", "memory/dreams/2026-12-01.md", "- dreamt of unicorns\n")
    write(workspace, "alice", "memory/.history/MEMORY.1.md", "- unicorns in history\n")
    write(workspace, "alice", "memory/2026-12-01.md", "- real day\n")
    manager = make_manager(embedder=None)
    manager.indexer.sync()
    assert {p for _, p in manager.storage.files()} == {"memory/2026-12-01.md"}
    assert manager.search("unicorns", "alice") == []


def test_search_syncs_files_changed_on_disk(workspace, make_manager) -> None:
    manager = make_manager(embedder=None)
    manager.indexer.sync()
    write(workspace, "alice", "MEMORY.md", "- likes kayaking\n")
    manager.indexer._last_disk_check.clear()
    assert paths(manager.search("kayaking", "alice")) == [("MEMORY.md", 1)]


def test_a_same_size_rewrite_with_the_same_mtime_is_found_by_the_next_search(workspace, make_manager) -> None:
    path = write(workspace, "alice", "MEMORY.md", "- likes kayaking\n")
    manager = make_manager(embedder=None)
    assert paths(manager.search("kayaking", "alice")) == [("MEMORY.md", 1)]
    stamp = path.stat().st_mtime_ns
    path.write_text("- likes climbing\n", encoding="utf-8")  # same size
    os.utime(path, ns=(stamp, stamp))  # a coarse clock: the same mtime as the indexed version
    manager.indexer._last_disk_check.clear()
    assert paths(manager.search("climbing", "alice")) == [("MEMORY.md", 1)]
    assert manager.search("kayaking", "alice") == []


def test_two_managers_on_one_workspace_do_not_duplicate_vectors(workspace, make_manager) -> None:
    import threading

    for i in range(30):
        write(workspace, "alice", f"memory/2026-09-{i + 1:02d}.md", f"- fact {i}\n")
    first, second = make_manager(), make_manager()
    threads = [threading.Thread(target=m.indexer.sync) for m in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert first.vectors is not None
    assert first.vectors.count() == 30 == len(first.vectors.ids())


# ---------------------------------------------------------------- the trigram queue
@pytest.fixture
def no_background_fill(monkeypatch):
    """Keep the trigram queue as a sync leaves it, so the queued path can be looked at."""
    monkeypatch.setattr(Indexer, "_start_trigram_fill", lambda self: None)


def test_substrings_are_found_while_queued_for_the_trigram_index(workspace, make_manager, no_background_fill) -> None:
    write(workspace, "alice", "MEMORY.md", "- redeployment of the kiosk\n- 我们正在部署机器人系统\n")
    manager = make_manager(embedder=None)
    manager.indexer.sync()
    assert manager.storage.trigram_queue() == 1
    in_trigram_index = "SELECT count(*) FROM chunks_tri WHERE chunks_tri MATCH '\"deploym\"'"
    assert manager.db.query(in_trigram_index)[0][0] == 0
    assert [r.path for r in manager.search("deploym", "alice")] == ["MEMORY.md"]  # from the queue
    assert [r.path for r in manager.search("部署机器", "alice")] == ["MEMORY.md"]  # the word index has it
    assert manager.indexer.finish_indexing() == 1 and manager.storage.trigram_queue() == 0
    assert manager.db.query(in_trigram_index)[0][0] == 1
    assert [r.path for r in manager.search("deploym", "alice")] == ["MEMORY.md"]
    assert manager.keywords.check()


def test_editing_and_deleting_queued_chunks_keeps_the_indexes_exact(workspace, make_manager, no_background_fill) -> None:
    memory_md = write(workspace, "alice", "MEMORY.md", "- the password is swordfish\n")
    daily = write(workspace, "alice", "memory/2026-12-01.md", "- bought marmalade\n")
    manager = make_manager(embedder=None)
    manager.indexer.sync()
    memory_md.write_text("- the password is albatross\n", encoding="utf-8")
    daily.unlink()
    manager.indexer.sync()  # both files changed while their chunks were still queued
    assert manager.search("ordfis", "alice", min_score=0) == []
    assert manager.search("armala", "alice", min_score=0) == []
    assert [r.text for r in manager.search("batros", "alice")] == ["- the password is albatross"]
    manager.indexer.finish_indexing()
    memory_md.write_text("- the password is pelican\n", encoding="utf-8")
    manager.indexer.sync()  # now an indexed chunk changes: its trigram entry is deleted with the old text
    assert manager.keywords.check()
    assert manager.search("batros", "alice", min_score=0) == []
    assert [r.text for r in manager.search("elica", "alice")] == ["- the password is pelican"]


def test_the_background_fill_empties_the_queue(workspace, make_manager) -> None:
    for day in range(1, 21):
        write(workspace, "alice", f"memory/2026-11-{day:02d}.md", f"- note {day} about the observatory\n" * 40)
    manager = make_manager(embedder=None, chunk_max_chars=64)
    manager.indexer.sync()
    wait_for_empty_queue(manager)
    assert manager.keywords.check()
    assert manager.search("bservato", "alice")


def test_a_queue_left_by_a_crash_is_filled_by_the_next_process(workspace, make_manager, monkeypatch) -> None:
    write(workspace, "alice", "MEMORY.md", "- redeployment of the kiosk\n")
    first = make_manager(embedder=None)
    monkeypatch.setattr(first.indexer, "_start_trigram_fill", lambda: None)
    first.indexer.sync()
    first.close()  # as if killed before the fill: the queue is in the database
    second = make_manager(embedder=None)
    assert second.storage.trigram_queue() == 1
    second.indexer.sync()  # nothing changed on disk, but the queue is not empty: the filler starts
    wait_for_empty_queue(second)
    assert second.keywords.check()


def wait_for_empty_queue(manager: MemoryManager) -> None:
    deadline = time.monotonic() + 20
    while manager.storage.trigram_queue() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert manager.storage.trigram_queue() == 0


def test_a_search_does_not_wait_for_a_long_sync_elsewhere(workspace, make_manager) -> None:
    write(workspace, "alice", "MEMORY.md", "- likes kayaking\n")
    bot = make_manager(embedder=None)
    bot.indexer.sync()
    other_shell = make_manager(embedder=None)  # its own file lock, as another process has
    other_shell.lock.acquire()
    try:
        write(workspace, "alice", "memory/2026-12-01.md", "- booked a climbing course\n")
        bot.indexer._last_disk_check.clear()
        started = time.monotonic()
        assert bot.search("climbing", "alice") == []  # the index as it is, without the new file
        assert 1.5 < time.monotonic() - started < 5
    finally:
        other_shell.lock.release()
    bot.indexer._last_disk_check.clear()
    assert paths(bot.search("climbing", "alice")) == [("memory/2026-12-01.md", 1)]


def test_a_long_embedding_does_not_hold_the_workspace_lock(workspace, make_manager) -> None:
    import threading

    class Slow(HashEmbedding):
        def embed(self, texts):  # type: ignore[no-untyped-def]
            time.sleep(0.3)
            return super().embed(texts)

    for day in range(1, 26):
        write(workspace, "alice", f"memory/2026-11-{day:02d}.md", f"- day {day} notes about topic{day}\n")
    embedder = Slow(batch_size=5)
    syncing = make_manager(embedder=embedder)
    result: list = []
    worker = threading.Thread(target=lambda: result.append(syncing.indexer.sync()))
    worker.start()
    time.sleep(0.4)  # the sync is embedding its 5 batches (1.5 s)
    bot = make_manager(embedder=None)  # another process's write
    started = time.monotonic()
    bot.append_daily("alice", "- a note written meanwhile", when=datetime(2026, 11, 30, 12, 0))
    waited = time.monotonic() - started
    worker.join(10)
    [report] = result
    assert waited < 0.5 and report.ok and report.cache_hits == 0
    # the rescan under the lock found the file written meanwhile: one more call, 26 vectors
    assert (report.embed_calls, report.files_changed, report.vectors_written) == (6, 26, 26)
    assert "written meanwhile" in " ".join(r.text for r in syncing.search("written meanwhile", "alice"))


def test_a_sync_with_nothing_to_embed_reads_the_disk_once(workspace, make_manager, monkeypatch) -> None:
    """A scan outside the lock, then a rescan under it, is only worth it when texts must be
    embedded in between; otherwise one scan under the lock does (a no-change sync of 1,000 files
    cost twice its time with two)."""
    write(workspace, "alice", "MEMORY.md", "- the parrot says hello\n")
    write(workspace, "alice", "memory/2026-11-30.md", "- the kiosk was redeployed\n")
    manager = make_manager()
    manager.indexer.sync()  # embeds both texts: scanned, embedded outside the lock, scanned again
    stats: list[str] = []
    read = scan._disk_file
    monkeypatch.setattr(scan, "_disk_file", lambda scope, path, absolute: (stats.append(path), read(scope, path, absolute))[1])
    write(workspace, "alice", "MEMORY.md", "- the parrot says hello\n- a new line\n")
    report = manager.indexer.sync()
    assert report.files_changed == 1 and report.embed_calls == 1 and sorted(stats) == [
        "MEMORY.md", "MEMORY.md", "memory/2026-11-30.md", "memory/2026-11-30.md"]
    stats.clear()
    assert manager.indexer.sync().files_changed == 0
    assert sorted(stats) == ["MEMORY.md", "memory/2026-11-30.md"]
    assert paths(manager.search("new line", "alice")) == [("MEMORY.md", 1)]
