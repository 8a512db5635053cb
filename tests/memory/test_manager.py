"""The memory index end to end: real SQLite with FTS5, real LanceDB, files on disk."""

from __future__ import annotations

import math
import os
import sqlite3
import time
from datetime import datetime

import numpy as np
import pytest
from support.files import write

from memory import (
    KNOWLEDGE_SCOPE,
    EmbeddingError,
    HashEmbedding,
    IndexCheck,
    MemoryManager,
    MemoryPathError,
    ScopeError,
    scan,
)


def paths(results: list) -> list[tuple[str, int]]:
    return [(r.path, r.start_line) for r in results]


def test_search_result_has_the_contract_fields(workspace, make_manager) -> None:
    write(workspace, "alice", "MEMORY.md", "- Alice deploys the bot with Docker\n")
    manager = make_manager()
    [result] = manager.search("docker", "alice")
    data = result.to_dict()
    for key in ("path", "start_line", "end_line", "score", "text", "source", "scope"):
        assert key in data
    assert (data["path"], data["start_line"], data["end_line"], data["source"], data["scope"]) == (
        "MEMORY.md", 1, 1, "memory", "alice")
    assert data["text"] == "- Alice deploys the bot with Docker"


def test_resync_of_an_edited_file_leaves_no_stale_hits(workspace, make_manager) -> None:
    manager = make_manager()
    path = write(workspace, "alice", "MEMORY.md", "- favourite fruit: mango\n- city: Lisbon\n")
    write(workspace, "alice", "memory/2026-12-01.md", "- met Bob about the rocket launch\n")
    manager.sync()
    assert paths(manager.search("mango", "alice"))
    path.write_text("- favourite fruit: papaya\n- city: Lisbon\n", encoding="utf-8")
    manager.sync()
    assert manager.search("mango", "alice", min_score=0) == [] or all(
        "mango" not in r.text for r in manager.search("mango", "alice", min_score=0))
    assert [r.text for r in manager.search("papaya", "alice")] == ["- favourite fruit: papaya\n- city: Lisbon"]
    assert paths(manager.search("rocket", "alice")) == [("memory/2026-12-01.md", 1)]
    assert manager.keywords.check()


def test_a_5000_character_line_is_fully_findable(workspace, make_manager) -> None:
    words = [f"token{i:04d}" for i in range(500)]
    write(workspace, "alice", "memory/2026-12-01.md", "header\n" + " ".join(words) + "\n")
    manager = make_manager(embedder=None)
    manager.sync()
    for probe in ("token0000", "token0250", "token0499"):
        hits = manager.search(probe, "alice")
        assert hits and probe in hits[0].text and hits[0].start_line == 2
    ids = manager.db.query("SELECT id FROM chunks")
    assert len(ids) == len({row[0] for row in ids}) > 5


def test_a_deleted_file_disappears_from_results(workspace, make_manager) -> None:
    manager = make_manager()
    path = write(workspace, "alice", "memory/2026-11-30.md", "- the wifi password is hunter2\n")
    manager.sync()
    assert manager.search("hunter2", "alice")
    path.unlink()
    report = manager.sync()
    assert report.files_removed == 1
    assert manager.search("hunter2", "alice", min_score=0) == []
    assert manager.vectors is not None and manager.vectors.count() == 0


@pytest.mark.parametrize("query", ["教程", "部署机器人", "Python 教程", "猫"])
def test_chinese_mixed_and_single_character_queries(workspace, make_manager, query: str) -> None:
    write(workspace, "alice", "memory/2026-12-01.md", "# 笔记\n- 部署机器人的教程在 wiki 上\n- 我家的猫叫咪咪\n- Python 教程: https://example.org/py\n")
    write(workspace, "alice", "MEMORY.md", "- likes hiking\n")
    manager = make_manager(embedder=None)
    hits = manager.search(query, "alice")
    assert hits, query
    expected = {"教程": "教程", "部署机器人": "部署机器人", "Python 教程": "Python 教程", "猫": "猫"}[query]
    assert expected in hits[0].text


def test_keyword_scores_differ_and_keep_bm25_order(workspace, make_manager) -> None:
    for i in range(6):
        write(workspace, "alice", f"memory/2026-11-{10 + i}.md", "- apple " * (i + 1) + "\n- filler text about nothing\n")
    write(workspace, "alice", "memory/2026-11-20.md", "- nothing to see here\n")
    manager = make_manager(embedder=None, half_life_days=100000)
    scores = [r.keyword_score for r in manager.search("apple", "alice", limit=10)]
    assert len(scores) == 6 and len(set(scores)) == 6
    assert scores == sorted(scores, reverse=True)


def test_recency_orders_equal_hits_by_date_and_spares_memory_md(workspace, make_manager) -> None:
    write(workspace, "alice", "memory/2026-12-01.md", "- the deploy key lives in the vault (a)\n")
    write(workspace, "alice", "memory/2026-11-01.md", "- the deploy key lives in the vault (b)\n")
    write(workspace, "alice", "MEMORY.md", "- the deploy key lives in the vault (c)\n")
    manager = make_manager(embedder=None)
    hits = manager.search("vault", "alice", min_score=0)
    assert [h.path for h in hits] == ["MEMORY.md", "memory/2026-12-01.md", "memory/2026-11-01.md"]
    assert hits[0].recency == 1.0  # evergreen
    assert hits[1].recency == pytest.approx(1 - 0.1 * (1 - 2 ** (-1 / 90)), rel=1e-5)
    assert hits[2].recency == pytest.approx(1 - 0.1 * (1 - 2 ** (-31 / 90)), rel=1e-5)
    assert hits[2].score == pytest.approx(hits[0].score * hits[2].recency, rel=1e-4)


def test_age_takes_at_most_the_recency_weight_off_a_score(workspace, make_manager) -> None:
    write(workspace, "alice", "memory/2016-01-01.md", "- the deploy key lives in the vault (a)\n")  # eleven years old
    write(workspace, "alice", "MEMORY.md", "- the deploy key lives in the vault (b)\n")
    [evergreen, ancient] = make_manager(embedder=None).search("vault", "alice")
    assert ancient.path == "memory/2016-01-01.md" and ancient.recency == pytest.approx(0.9, abs=1e-6)
    assert ancient.score == pytest.approx(0.9 * evergreen.score, rel=1e-4) and ancient.score > 0


def test_the_same_note_is_shown_once(workspace, make_manager) -> None:
    text = "- the deploy key lives in the vault\n"
    write(workspace, "alice", "memory/2026-12-01.md", text)
    write(workspace, "alice", "memory/2026-11-01.md", text)
    write(workspace, "alice", "MEMORY.md", text)
    hits = make_manager(embedder=None).search("vault", "alice", min_score=0)
    assert [h.path for h in hits] == ["MEMORY.md"]


class QueryMissesEverything(HashEmbedding):
    """Queries and chunks land in orthogonal directions: every cosine is 0, as a short query's
    can be against a long chunk with a real model."""

    def embed(self, texts):  # type: ignore[no-untyped-def]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row, 0 if text.startswith("- ") else 1] = 1.0
        self.calls += 1
        return out


def test_a_keyword_match_is_kept_however_weak_its_vector_or_old_its_date(workspace, make_manager) -> None:
    write(workspace, "alice", "memory/2026-06-01.md", "- 我们讨论了部署机器人的教程\n")  # half a year old
    write(workspace, "alice", "memory/2026-12-01.md", "- bought a new kettle\n")
    manager = make_manager(embedder=QueryMissesEverything())
    [hit] = manager.search("部署", "alice")  # the kettle: no keyword match, cosine 0, dropped
    assert hit.path == "memory/2026-06-01.md" and hit.vector_score == 0.0
    assert hit.relevance < 0.25 and hit.score > 0  # far below min_score, and still returned
    keyword_only = make_manager(embedder=None)
    assert [h.path for h in keyword_only.search("部署", "alice")] == ["memory/2026-06-01.md"]


class CosineByQuery(HashEmbedding):
    """Chunks point along axis 0; the query "near" has cosine 1 with them, "far" cosine 0.2."""

    def embed(self, texts):  # type: ignore[no-untyped-def]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row, :2] = (0.2, 0.98) if text == "far" else (1.0, 0.0)
        self.calls += 1
        return out


def test_min_score_judges_relevance_before_recency(workspace, make_manager) -> None:
    write(workspace, "alice", "memory/2026-06-01.md", "- the observatory dome needs new paint\n")  # 184 days old
    manager = make_manager(embedder=CosineByQuery())
    [old] = manager.search("near", "alice")  # no keyword match: a vector neighbour alone
    assert old.keyword_score is None and old.vector_score == pytest.approx(1.0)
    assert manager.search("far", "alice", min_score=0.15) == []  # 0.7 × 0.2 = 0.14: not relevant, at any age
    [far] = manager.search("far", "alice", min_score=0.14)  # relevance 0.14 passes; its final score is lower
    assert far.relevance == pytest.approx(0.14) and far.recency < 0.95 and far.score < 0.14


def test_scopes_never_leak(workspace, make_manager) -> None:
    write(workspace, "alice", "MEMORY.md", "- alice secret: blue-falcon-42\n")
    write(workspace, "bob", "MEMORY.md", "- bob likes the falcon too\n")
    (workspace.knowledge_dir / "birds").mkdir(parents=True)
    (workspace.knowledge_dir / "birds" / "falcon.md").write_text("# Falcon\nA falcon is a bird of prey.\n")
    manager = make_manager()
    manager.sync()
    bob = manager.search("falcon", "bob", min_score=0, limit=20)
    assert {r.scope for r in bob} == {"bob", KNOWLEDGE_SCOPE}
    assert all("blue-falcon" not in r.text for r in bob)
    assert {r.source for r in bob} == {"memory", "knowledge"}
    with pytest.raises(ScopeError):
        manager.search("falcon", "../alice")


def test_embedding_failure_degrades_search_to_keywords(workspace, make_manager) -> None:
    write(workspace, "alice", "MEMORY.md", "- the boat is called Nautilus\n")
    embedder = HashEmbedding()
    manager = make_manager(embedder=embedder)
    manager.sync()
    embedder.fail_with = EmbeddingError("HTTP 500")
    hits = manager.search("Nautilus", "alice")
    assert [h.path for h in hits] == ["MEMORY.md"]
    assert hits[0].vector_score is None and hits[0].score == hits[0].keyword_score


def test_failed_sync_writes_nothing_and_the_next_succeeds(workspace, make_manager) -> None:
    embedder = HashEmbedding()
    manager = make_manager(embedder=embedder)
    write(workspace, "alice", "MEMORY.md", "- first fact\n")
    manager.sync()
    before = manager.db.query("SELECT id, text FROM chunks ORDER BY id")
    write(workspace, "alice", "memory/2026-12-01.md", "- second fact about zebras\n")
    embedder.fail_with = EmbeddingError("HTTP 500")
    report = manager.sync()
    assert not report.ok and "nothing was written" in (report.error or "")
    assert manager.db.query("SELECT id, text FROM chunks ORDER BY id") == before
    assert ("alice", "memory/2026-12-01.md") not in manager.storage.files()
    embedder.fail_with = None
    report = manager.sync()
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
    report = manager.sync()
    assert not report.ok and report.embed_calls == 2 and manager.storage.count_chunks() == 0  # the index: untouched
    embedder.fail_with = None
    report = manager.sync()
    assert report.ok and report.cache_hits == 20 and report.embed_calls == 1  # only the last 10 texts
    assert report.vectors_written == 30


def test_batched_embedding_calls_and_no_calls_on_resync(workspace, make_manager) -> None:
    embedder = HashEmbedding(batch_size=16)
    manager = make_manager(embedder=embedder)
    for i in range(100):
        write(workspace, "alice", f"memory/2026-10-{(i % 28) + 1:02d}-{i}.md", f"- note number {i} about topic {i * 7}\n")
    report = manager.sync()
    chunks = manager.storage.count_chunks()
    assert chunks == 100
    assert report.embed_calls == math.ceil(chunks / 16) == embedder.calls
    again = manager.sync()
    assert again.embed_calls == 0 and embedder.calls == math.ceil(chunks / 16)
    assert again.files_changed == 0


def test_changing_the_model_reembeds_from_stored_text(workspace, make_manager) -> None:
    write(workspace, "alice", "MEMORY.md", "- one\n- two\n")
    first = make_manager(embedder=HashEmbedding(model_id="hash:a"))
    first.sync()
    second = make_manager(embedder=HashEmbedding(model_id="hash:b"))
    report = second.sync()
    assert report.embed_calls == 1 and report.vectors_written == 1
    assert manager_vec_models(second) == {"hash:b"}


def manager_vec_models(manager) -> set[str]:
    return {row[0] for row in manager.db.query("SELECT vec_model FROM chunks")}


def test_dreams_and_dot_folders_are_not_indexed(workspace, make_manager) -> None:
    write(workspace, "alice", "memory/dreams/2026-12-01.md", "- dreamt of unicorns\n")
    write(workspace, "alice", "memory/.history/MEMORY.1.md", "- unicorns in history\n")
    write(workspace, "alice", "memory/2026-12-01.md", "- real day\n")
    manager = make_manager(embedder=None)
    manager.sync()
    assert {p for _, p in manager.storage.files()} == {"memory/2026-12-01.md"}
    assert manager.search("unicorns", "alice") == []


def test_search_syncs_files_changed_on_disk(workspace, make_manager) -> None:
    manager = make_manager(embedder=None)
    manager.sync()
    write(workspace, "alice", "MEMORY.md", "- likes kayaking\n")
    manager._last_disk_check.clear()
    assert paths(manager.search("kayaking", "alice")) == [("MEMORY.md", 1)]


def test_a_same_size_rewrite_with_the_same_mtime_is_found_by_the_next_search(workspace, make_manager) -> None:
    path = write(workspace, "alice", "MEMORY.md", "- likes kayaking\n")
    manager = make_manager(embedder=None)
    assert paths(manager.search("kayaking", "alice")) == [("MEMORY.md", 1)]
    stamp = path.stat().st_mtime_ns
    path.write_text("- likes climbing\n", encoding="utf-8")  # same size
    os.utime(path, ns=(stamp, stamp))  # a coarse clock: the same mtime as the indexed version
    manager._last_disk_check.clear()
    assert paths(manager.search("climbing", "alice")) == [("MEMORY.md", 1)]
    assert manager.search("kayaking", "alice") == []


def test_appended_daily_memory_is_searchable_at_once(workspace, make_manager) -> None:
    manager = make_manager()
    manager.search("anything", "alice")
    manager.append_daily("alice", "- booked flights to Osaka")
    assert [r.path for r in manager.search("Osaka", "alice")][:1] == [manager_daily_name(manager)]


def manager_daily_name(manager) -> str:
    from datetime import datetime

    return f"memory/{datetime.now():%Y-%m-%d}.md"


def test_a_corrupt_fts_index_is_rebuilt_from_chunks(workspace, make_manager) -> None:
    write(workspace, "alice", "MEMORY.md", "- the parrot says hello\n")
    manager = make_manager(embedder=None)
    manager.sync()
    manager.finish_indexing()  # the substring queue, empty before the check (not by a background thread)
    with manager.db.lock:
        manager.db.conn.execute("DELETE FROM chunks_tri_data WHERE id > 1")
        manager.db.conn.execute("DELETE FROM chunks_fts_data WHERE id > 1")
    assert manager.check_index() == IndexCheck(chunks=1, caught_up=0, rebuilt=True)
    assert manager.check_index() == IndexCheck(chunks=1, caught_up=0, rebuilt=False)
    assert paths(manager.search("parrot", "alice")) == [("MEMORY.md", 1)]


def test_an_apostrophe_in_a_file_name_works_with_vectors(workspace, make_manager) -> None:
    (workspace.knowledge_dir / "misc").mkdir(parents=True)
    path = workspace.knowledge_dir / "misc" / "it's.md"
    path.write_text("# It's\nthe quoted file about lanterns\n")
    manager = make_manager()
    manager.sync()
    assert [r.path for r in manager.search("lanterns", "alice")] == ["knowledge/misc/it's.md"]
    path.unlink()
    manager.sync()
    assert manager.search("lanterns", "alice", min_score=0) == []


@pytest.mark.parametrize(
    "bad",
    ["../../etc/passwd", "/etc/passwd", "memory/../../bob/MEMORY.md", "index.db", "scopes/bob/MEMORY.md", "a\x00b.md", ""],
)
def test_read_lines_refuses_paths_outside_the_scope(workspace, make_manager, bad: str) -> None:
    write(workspace, "bob", "MEMORY.md", "- bob's secret\n")
    manager = make_manager(embedder=None)
    with pytest.raises(MemoryPathError):
        manager.read_lines("alice", bad)


def test_read_lines_refuses_a_symlink_out(workspace, make_manager, tmp_path) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("top secret\n")
    daily = workspace.daily_dir("alice")
    daily.mkdir(parents=True)
    os.symlink(secret, daily / "link.md")
    manager = make_manager(embedder=None)
    with pytest.raises(MemoryPathError):
        manager.read_lines("alice", "memory/link.md")


@pytest.mark.parametrize("path", ["knowledge/log.md", "knowledge/./log.md", "knowledge//log.md", "knowledge/ops/log-link.md"])
def test_read_lines_refuses_the_knowledge_change_log(workspace, make_manager, path: str) -> None:
    """knowledge/log.md names who changed what (admin ids): no scope reads it through memory_get."""
    knowledge = workspace.knowledge_dir
    (knowledge / "ops").mkdir(parents=True, exist_ok=True)
    (knowledge / "log.md").write_text("- 2026-12-03T10:00:00 slack-T1-U0ADMIN create ops/deploy.md\n")
    (knowledge / "ops" / "deploy.md").write_text("# Deploy\nship on Thursdays\n")
    os.symlink(knowledge / "log.md", knowledge / "ops" / "log-link.md")
    manager = make_manager(embedder=None)
    with pytest.raises(MemoryPathError, match=r"knowledge/log\.md is the knowledge change log"):
        manager.read_lines("alice", path)
    assert manager.read_lines("alice", "knowledge/ops/deploy.md") == "# Deploy\nship on Thursdays\n"


def test_read_lines_allows_the_knowledge_index(workspace, make_manager) -> None:
    """index.md lists only the pages' titles and paths, which every scope may read anyway."""
    (workspace.knowledge_dir / "index.md").write_text("# Knowledge index\n")
    assert make_manager(embedder=None).read_lines("alice", "knowledge/index.md") == "# Knowledge index\n"


def test_read_lines_returns_the_requested_lines(workspace, make_manager) -> None:
    write(workspace, "alice", "memory/2026-12-01.md", "one\ntwo\nthree\nfour\n")
    manager = make_manager(embedder=None)
    assert manager.read_lines("alice", "memory/2026-12-01.md", 2, 2) == "two\nthree"


def test_two_managers_on_one_workspace_do_not_duplicate_vectors(workspace, make_manager) -> None:
    import threading

    for i in range(30):
        write(workspace, "alice", f"memory/2026-09-{i + 1:02d}.md", f"- fact {i}\n")
    first, second = make_manager(), make_manager()
    threads = [threading.Thread(target=m.sync) for m in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert first.vectors is not None
    assert first.vectors.count() == 30 == len(first.vectors.ids())


def test_database_is_sqlite_wal(workspace, make_manager) -> None:
    manager = make_manager(embedder=None)
    conn = sqlite3.connect(workspace.db_path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    assert manager.keywords.check()


def test_global_mode_uses_the_workspace_root_as_the_one_scope(tmp_path) -> None:
    from memory import GLOBAL_SCOPE, MemoryManager, MemorySettings, Workspace

    workspace = Workspace(tmp_path / "ws", mode="global")
    manager = MemoryManager(workspace, MemorySettings(scope="global"), embedder=None)
    (workspace.root / "MEMORY.md").write_text("- the seed's layout: MEMORY.md at the root\n")
    manager.append_daily(GLOBAL_SCOPE, "- a shared note about kiwis")
    assert workspace.list_scopes() == [GLOBAL_SCOPE]
    assert {h.path for h in manager.search("kiwis layout", GLOBAL_SCOPE, min_score=0)} >= {"MEMORY.md"}
    assert next(h.path for h in manager.search("kiwis", GLOBAL_SCOPE)).startswith("memory/")
    with pytest.raises(ScopeError):
        manager.search("kiwis", "telegram-1")
    manager.close()


# ---------------------------------------------------------------- the trigram queue
@pytest.fixture
def no_background_fill(monkeypatch):
    """Keep the trigram queue as a sync leaves it, so the queued path can be looked at."""
    monkeypatch.setattr(MemoryManager, "_start_trigram_fill", lambda self: None)


def test_substrings_are_found_while_queued_for_the_trigram_index(workspace, make_manager, no_background_fill) -> None:
    write(workspace, "alice", "MEMORY.md", "- redeployment of the kiosk\n- 我们正在部署机器人系统\n")
    manager = make_manager(embedder=None)
    manager.sync()
    assert manager.storage.trigram_queue() == 1
    in_trigram_index = "SELECT count(*) FROM chunks_tri WHERE chunks_tri MATCH '\"deploym\"'"
    assert manager.db.query(in_trigram_index)[0][0] == 0
    assert [r.path for r in manager.search("deploym", "alice")] == ["MEMORY.md"]  # from the queue
    assert [r.path for r in manager.search("部署机器", "alice")] == ["MEMORY.md"]  # the word index has it
    assert manager.finish_indexing() == 1 and manager.storage.trigram_queue() == 0
    assert manager.db.query(in_trigram_index)[0][0] == 1
    assert [r.path for r in manager.search("deploym", "alice")] == ["MEMORY.md"]
    assert manager.keywords.check()


def test_editing_and_deleting_queued_chunks_keeps_the_indexes_exact(workspace, make_manager, no_background_fill) -> None:
    memory_md = write(workspace, "alice", "MEMORY.md", "- the password is swordfish\n")
    daily = write(workspace, "alice", "memory/2026-12-01.md", "- bought marmalade\n")
    manager = make_manager(embedder=None)
    manager.sync()
    memory_md.write_text("- the password is albatross\n", encoding="utf-8")
    daily.unlink()
    manager.sync()  # both files changed while their chunks were still queued
    assert manager.search("ordfis", "alice", min_score=0) == []
    assert manager.search("armala", "alice", min_score=0) == []
    assert [r.text for r in manager.search("batros", "alice")] == ["- the password is albatross"]
    manager.finish_indexing()
    memory_md.write_text("- the password is pelican\n", encoding="utf-8")
    manager.sync()  # now an indexed chunk changes: its trigram entry is deleted with the old text
    assert manager.keywords.check()
    assert manager.search("batros", "alice", min_score=0) == []
    assert [r.text for r in manager.search("elica", "alice")] == ["- the password is pelican"]


def test_the_background_fill_empties_the_queue(workspace, make_manager) -> None:
    for day in range(1, 21):
        write(workspace, "alice", f"memory/2026-11-{day:02d}.md", f"- note {day} about the observatory\n" * 40)
    manager = make_manager(embedder=None, chunk_max_chars=64)
    manager.sync()
    wait_for_empty_queue(manager)
    assert manager.keywords.check()
    assert manager.search("bservato", "alice")


def test_a_queue_left_by_a_crash_is_filled_by_the_next_process(workspace, make_manager, monkeypatch) -> None:
    write(workspace, "alice", "MEMORY.md", "- redeployment of the kiosk\n")
    first = make_manager(embedder=None)
    monkeypatch.setattr(first, "_start_trigram_fill", lambda: None)
    first.sync()
    first.close()  # as if killed before the fill: the queue is in the database
    second = make_manager(embedder=None)
    assert second.storage.trigram_queue() == 1
    second.sync()  # nothing changed on disk, but the queue is not empty: the filler starts
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
    bot.sync()
    other_shell = make_manager(embedder=None)  # its own file lock, as another process has
    other_shell.lock.acquire()
    try:
        write(workspace, "alice", "memory/2026-12-01.md", "- booked a climbing course\n")
        bot._last_disk_check.clear()
        started = time.monotonic()
        assert bot.search("climbing", "alice") == []  # the index as it is, without the new file
        assert 1.5 < time.monotonic() - started < 5
    finally:
        other_shell.lock.release()
    bot._last_disk_check.clear()
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
    worker = threading.Thread(target=lambda: result.append(syncing.sync()))
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
    manager.sync()  # embeds both texts: scanned, embedded outside the lock, scanned again
    stats: list[str] = []
    read = scan._disk_file
    monkeypatch.setattr(scan, "_disk_file", lambda scope, path, absolute: (stats.append(path), read(scope, path, absolute))[1])
    write(workspace, "alice", "MEMORY.md", "- the parrot says hello\n- a new line\n")
    report = manager.sync()
    assert report.files_changed == 1 and report.embed_calls == 1 and sorted(stats) == [
        "MEMORY.md", "MEMORY.md", "memory/2026-11-30.md", "memory/2026-11-30.md"]
    stats.clear()
    assert manager.sync().files_changed == 0
    assert sorted(stats) == ["MEMORY.md", "memory/2026-11-30.md"]
    assert paths(manager.search("new line", "alice")) == [("MEMORY.md", 1)]
