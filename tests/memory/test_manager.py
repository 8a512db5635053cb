"""The memory index end to end: real SQLite with FTS5, real LanceDB, files on disk."""

from __future__ import annotations

import os
import sqlite3

import numpy as np
import pytest
from support.files import write

from memory import (
    KNOWLEDGE_SCOPE,
    EmbeddingError,
    HashEmbedding,
    IndexCheck,
    MemoryPathError,
    ScopeError,
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
    manager.indexer.sync()
    assert paths(manager.search("mango", "alice"))
    path.write_text("- favourite fruit: papaya\n- city: Lisbon\n", encoding="utf-8")
    manager.indexer.sync()
    assert manager.search("mango", "alice", min_score=0) == [] or all(
        "mango" not in r.text for r in manager.search("mango", "alice", min_score=0))
    assert [r.text for r in manager.search("papaya", "alice")] == ["- favourite fruit: papaya\n- city: Lisbon"]
    assert paths(manager.search("rocket", "alice")) == [("memory/2026-12-01.md", 1)]
    assert manager.keywords.check()


def test_a_5000_character_line_is_fully_findable(workspace, make_manager) -> None:
    words = [f"token{i:04d}" for i in range(500)]
    write(workspace, "alice", "memory/2026-12-01.md", "header\n" + " ".join(words) + "\n")
    manager = make_manager(embedder=None)
    manager.indexer.sync()
    for probe in ("token0000", "token0250", "token0499"):
        hits = manager.search(probe, "alice")
        assert hits and probe in hits[0].text and hits[0].start_line == 2
    ids = manager.db.query("SELECT id FROM chunks")
    assert len(ids) == len({row[0] for row in ids}) > 5


def test_a_deleted_file_disappears_from_results(workspace, make_manager) -> None:
    manager = make_manager()
    path = write(workspace, "alice", "memory/2026-11-30.md", "- the wifi password is hunter2\n")
    manager.indexer.sync()
    assert manager.search("hunter2", "alice")
    path.unlink()
    report = manager.indexer.sync()
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
    assert old.keyword_score is None and old.vector_score == pytest.approx(1.0) and not old.weak
    # relevance 0.7 × 0.2 = 0.14 (within the int8 scan's 0.002) passes; its final score, aged, is lower
    [far] = manager.search("far", "alice", min_score=0.135)
    assert far.relevance == pytest.approx(0.14, abs=2e-3) and far.recency < 0.95 and far.score < 0.135 and far.weak


def test_below_min_score_only_the_best_loose_match_is_shown_labelled_weak(workspace, make_manager) -> None:
    write(workspace, "alice", "memory/2026-06-01.md", "- the observatory dome needs new paint\n")
    write(workspace, "alice", "memory/2026-05-01.md", "- a dome of glass\n")
    [only] = make_manager(embedder=CosineByQuery()).search("far", "alice", min_score=0.15)  # 0.14: not relevant
    assert only.path == "memory/2026-06-01.md" and only.weak and only.matches[0].text.endswith("new paint")


def test_scopes_never_leak(workspace, make_manager) -> None:
    write(workspace, "alice", "MEMORY.md", "- alice secret: blue-falcon-42\n")
    write(workspace, "bob", "MEMORY.md", "- bob likes the falcon too\n")
    (workspace.knowledge_dir / "birds").mkdir(parents=True)
    (workspace.knowledge_dir / "birds" / "falcon.md").write_text("# Falcon\nA falcon is a bird of prey.\n")
    manager = make_manager()
    manager.indexer.sync()
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
    manager.indexer.sync()
    embedder.fail_with = EmbeddingError("HTTP 500")
    hits = manager.search("Nautilus", "alice")
    assert [h.path for h in hits] == ["MEMORY.md"]
    assert hits[0].vector_score is None and hits[0].score == hits[0].keyword_score


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
    manager.indexer.sync()
    manager.indexer.finish_indexing()  # the substring queue, empty before the check (not by a background thread)
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
    manager.indexer.sync()
    assert [r.path for r in manager.search("lanterns", "alice")] == ["knowledge/misc/it's.md"]
    path.unlink()
    manager.indexer.sync()
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


TALK = ("## 10:00 conversation notes\n- [D1:1] Caroline: Hey Mel! Good to see you!\n"
        "- [D1:2] Melanie: Hi Caroline, how have you been?\n"
        "- [D1:3] Caroline: I went to an LGBTQ support group yesterday.\n- [D1:4] Melanie: Wow, that sounds powerful.\n")


def test_a_stretch_of_conversation_is_found_as_one_and_shown_by_its_matching_turn(workspace, make_manager) -> None:
    write(workspace, "alice", "memory/2026-06-01.md", TALK)
    manager = make_manager()
    [result] = manager.search("support group", "alice")
    assert (result.start_line, result.end_line) == (1, 5)
    assert [(m.start_line, m.end_line, m.text) for m in result.matches] == [
        (4, 4, "- [D1:3] Caroline: I went to an LGBTQ support group yesterday.")]
    assert [tuple(row) for row in manager.storage.db.query("SELECT start_line, end_line FROM entries")] == [(2, 5)]


def test_an_index_split_under_the_previous_rule_is_split_again_once(workspace, make_manager, caplog) -> None:
    """The talk's turns were one entry each under the old rule: split again as one stretch, embedded
    by the next sync; a note the new rule splits as before keeps its vector (no model call for it),
    and the lone turns' vectors are dropped."""
    write(workspace, "alice", "memory/2026-06-01.md", TALK)
    write(workspace, "alice", "MEMORY.md", "- likes green tea\n")
    embedder = HashEmbedding()
    manager = make_manager(embedder)
    manager.indexer.sync()
    db = manager.storage.db
    with db.transaction() as conn:  # what rule 4 left of the talk: one entry a turn
        conn.execute("UPDATE entries SET start_line = 2, end_line = 2, id = 'lone-turn' WHERE path LIKE 'memory/%'")
        conn.execute("UPDATE meta SET value = '4' WHERE key = 'entries_rule'")
    manager.close()
    with caplog.at_level("WARNING", logger="memory.index.storage"):
        again = make_manager(embedder)
    assert [record.getMessage().split(": ", 1)[1] for record in caplog.records] == [
        "splitting 2 chunks into entries again under rule 5 (once, after an upgrade); the next sync embeds the"
        " entries that changed"]
    rows = "SELECT path, start_line, end_line, vec_model IS NOT NULL FROM entries ORDER BY path"
    assert [tuple(row) for row in again.storage.db.query(rows)] == [("MEMORY.md", 1, 1, 1), ("memory/2026-06-01.md", 2, 5, 0)]
    calls = embedder.calls
    again.indexer.sync()
    assert embedder.calls == calls  # the stretch's text was embedded before (the cache has it), the note kept its vector
    assert [tuple(row) for row in again.storage.db.query("SELECT vec_model IS NOT NULL FROM entries")] == [(1,), (1,)]
    assert "lone-turn" not in again.vectors.ids()
    assert [m.start_line for m in again.search("support group", "alice")[0].matches] == [4]
