"""IndexStorage on real SQLite: the unscoped word query for big scopes, generations and scope vectors
(of the EmbeddingCache beside it), reads beside a waiting write."""

from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import astuple

import numpy as np
import pytest
from fakes import HANG_GUARD_S
from support.sqlite_locker import write_lock_held

from memory import chunk_text
from memory.index import keyword_index
from memory.index.chunker import text_hash
from memory.index.database import Database
from memory.index.keyword import build_query
from memory.index.keyword_index import KeywordIndex
from memory.index.storage import CHUNK_COLUMNS, FileRecord, IndexStorage, StoredChunk, stored_chunk
from memory.vectors.embed_cache import EmbeddingCache

WORDS = [f"w{i}" for i in range(60)] + ["rare", "alicesecret"]


def fill(storage: IndexStorage, scope: str, files: int, lines: int, rng: random.Random, extra: str = "") -> None:
    with storage.write() as conn:
        for number in range(files):
            text = "\n".join(" ".join(rng.choices(WORDS[:60], k=5)) for _ in range(lines)) + extra + "\n"
            path = f"memory/2026-11-{number + 1:02d}.md"
            chunks = chunk_text(text, scope=scope, path=path, max_chars=60, overlap_lines=0)
            storage.replace_file(conn, FileRecord(scope, path, text_hash(text), 0.0, len(text)), chunks)


@pytest.fixture
def storage(tmp_path) -> IndexStorage:
    store = IndexStorage(Database(tmp_path / "index.db"))
    rng = random.Random(5)
    fill(store, "group", 20, 60, rng)  # ~1,200 chunks: most of the index
    fill(store, "alice", 4, 20, rng, extra="\nrare alicesecret")
    yield store
    store.db.close()


@pytest.fixture
def embed_cache(storage) -> EmbeddingCache:
    return EmbeddingCache(storage.db)


@pytest.fixture
def keywords(storage) -> KeywordIndex:
    return KeywordIndex(storage)


def ids(hits) -> list[tuple[str, float]]:
    return [(hit.chunk.id, round(hit.score, 9)) for hit in hits]


@pytest.mark.parametrize("newest_first", [False, True])
@pytest.mark.parametrize("query", ["w3", "w7 w12", "w59 w1 w2", "rare", "alicesecret w4", "nothing"])
@pytest.mark.parametrize("scopes", [["group", "@knowledge"], ["alice", "@knowledge"], ["group", "alice"]])
def test_unscoped_word_query_gives_the_scoped_answer(keywords, monkeypatch, query, scopes, newest_first) -> None:
    expr = build_query(query).words()
    assert expr
    fast = keywords._search_words(expr, scopes, 8, newest_first=newest_first)
    monkeypatch.setattr(keyword_index, "UNSCOPED_SHARE", 2.0)  # never unscoped
    scoped = keywords._search_words(expr, scopes, 8, newest_first=newest_first)
    assert ids(fast) == ids(scoped)
    assert all(hit.chunk.scope in scopes for hit in fast)


def test_a_big_scope_never_returns_another_scopes_rows(keywords) -> None:
    assert keywords.scope_share(["group"]) > 0.9
    hits = keywords.search("alicesecret", ["group", "@knowledge"], 8)
    assert hits == []  # found only in alice's scope: filtered, then the scoped query finds nothing
    assert [h.chunk.scope for h in keywords.search("alicesecret", ["alice"], 8)] == ["alice"] * 4


def test_scope_counts_are_refreshed_after_a_write(storage, keywords) -> None:
    before = keywords.scope_share(["alice"])
    fill(storage, "alice", 30, 60, random.Random(1))
    assert keywords.scope_share(["alice"]) > before + 0.3


def test_generations_count_changes_per_scope(embed_cache) -> None:
    assert embed_cache.generations(["alice", "bob"]) == {"alice": 0, "bob": 0}
    with embed_cache.db.transaction() as conn:
        assert embed_cache.bump_generations(conn, ["alice", "alice", "bob"]) == {"alice": 1, "bob": 1}
    with embed_cache.db.transaction() as conn:
        assert embed_cache.bump_generations(conn, ["alice"]) == {"alice": 2}
    assert embed_cache.generations(["alice", "bob"]) == {"alice": 2, "bob": 1}


@pytest.mark.parametrize("scan_over", [5000, 0])  # lookups, and one scan of the model's cache
def test_scope_vectors_are_the_embedded_entries_of_the_model(storage, embed_cache, monkeypatch, scan_over) -> None:
    monkeypatch.setattr("memory.vectors.embed_cache.SCAN_VECTORS_OVER", scan_over)
    rows = storage.db.query("SELECT id, text_hash FROM entries WHERE scope = 'alice' ORDER BY rowid")
    assert len(rows) >= 2
    vectors = {h: np.full(4, float(i), dtype=np.float32) for i, (_id, h) in enumerate(rows)}
    with storage.db.transaction() as conn:
        embed_cache.store_vectors(conn, "m1", vectors)
        embed_cache.store_vectors(conn, "m2", {h: np.zeros(4, dtype=np.float32) for h in vectors})  # another model
        storage.mark_embedded(conn, [r[0] for r in rows[:-1]], "m1")  # the last is not embedded yet
        embed_cache.bump_generations(conn, ["alice"])
    generation, count, entry_ids, matrix = scope_vectors(embed_cache, "alice", "m1")
    assert (generation, count) == (1, len({h for _id, h in rows[:-1]}))  # a vector a row
    assert sorted(entry_ids) == sorted(r[0] for r in rows[:-1])
    by_id = dict(zip(entry_ids, matrix, strict=True))
    for entry_id, hash_ in rows[:-1]:
        np.testing.assert_array_equal(by_id[entry_id], vectors[hash_])
    assert scope_vectors(embed_cache, "alice", "m2")[2] == []


def scope_vectors(embed_cache, scope: str, model: str) -> tuple[int, int, list[str], np.ndarray]:
    """What ``EmbeddingCache.scope_vectors`` hands its sink, batches joined."""
    batches: list[tuple[int, int, list[str], np.ndarray]] = []
    embed_cache.scope_vectors(scope, model, lambda *batch: batches.append(batch) or True)
    if not batches:
        return 0, 0, [], np.zeros((0, 0), dtype=np.float32)
    ids = [cid for b in batches for owners in b[2] for cid in owners]
    matrix = np.vstack([np.repeat(b[3], [len(owners) for owners in b[2]], axis=0) for b in batches])
    return batches[0][0], batches[0][1], ids, matrix


@pytest.mark.parametrize("scan_over", [5000, 0])
def test_a_scope_is_read_in_batches_and_a_refusing_sink_stops_the_read(storage, embed_cache, monkeypatch,
                                                                        scan_over) -> None:
    monkeypatch.setattr("memory.vectors.embed_cache.SCAN_VECTORS_OVER", scan_over)
    monkeypatch.setattr("memory.vectors.embed_cache.LOAD_BATCH", 1)
    rows = storage.db.query("SELECT id, text_hash FROM entries WHERE scope = 'alice' ORDER BY rowid")
    with storage.db.transaction() as conn:
        embed_cache.store_vectors(conn, "m1", {h: np.full(4, 1.0, dtype=np.float32) for _id, h in rows})
        storage.mark_embedded(conn, [r[0] for r in rows], "m1")
    batches: list[list[tuple[str, ...]]] = []
    embed_cache.scope_vectors("alice", "m1", lambda _g, _c, owners, _v: batches.append(owners) or True)
    by_text: dict[str, set[str]] = {}
    for entry_id, hash_ in rows:
        by_text.setdefault(hash_, set()).add(entry_id)
    assert [len(owners) for owners in batches] == [1] * len(by_text)  # a vector a batch of one
    assert sorted(sorted(owners[0]) for owners in batches) == sorted(sorted(ids) for ids in by_text.values())
    refused: list[int] = []
    embed_cache.scope_vectors("alice", "m1", lambda _g, count, _o, _v: refused.append(count) and False)
    assert refused == [len({h for _id, h in rows})]  # told the whole count with the first batch, and read no further
    with storage.db.transaction() as conn:  # the snapshot was closed: writes go on
        embed_cache.bump_generations(conn, ["alice"])


def test_a_trigram_search_sees_a_chunk_the_filler_moves_between_its_reads(storage, keywords, monkeypatch) -> None:
    """Issue 15 #14: a filler commit between the read of the trigram index and the read of its
    queue hid a chunk from both. Another connection (as another process's filler) commits right
    after the index read; the search still finds every chunk, from the queue it saw."""
    built = build_query("licesecre")  # a piece of a word: trigram's, not the word index's
    assert storage.trigram_queue() > 0  # alice's chunks wait for the trigram index
    filler = IndexStorage(Database(storage.db.path))
    query = storage.db.query
    filled: list[int] = []

    def index_read_then_fill(sql: str, params=()):
        rows = query(sql, params)
        if "chunks_tri MATCH" in sql and not filled:
            filled.append(sum(iter(filler.fill_trigram, 0)))  # the whole queue, committed
        return rows

    monkeypatch.setattr(storage.db, "query", index_read_then_fill)
    try:
        hits = keywords._search_trigram(built, ["alice"], 8)
    finally:
        filler.db.close()
    assert filled and filled[0] > 0 and storage.trigram_queue() == 0  # the fill ran between the reads
    assert len(hits) == 4 and {hit.chunk.scope for hit in hits} == {"alice"}
    assert {hit.chunk.id for hit in hits} == {hit.chunk.id for hit in keywords._search_trigram(built, ["alice"], 8)}


def segments(storage: IndexStorage, table: str) -> int:
    """How many segments an FTS5 index is made of (each has rows in its ``_idx`` table)."""
    return int(storage.db.query(f"SELECT count(DISTINCT segid) FROM {table}_idx")[0][0])


def test_a_change_across_many_files_adds_at_most_two_segments_to_each_keyword_index(storage, keywords) -> None:
    """A forget rewrites a line in many files at once. Written in file order, the FTS5 deletes go
    up and down in rowid, and FTS5 wrote one segment per step down: past 16 it merged the whole
    level, the bulk load's big segments with it (2 s of the forget's 2.5 s in a 100k-chunk index)."""
    while storage.fill_trigram():
        pass
    before = {table: segments(storage, table) for table in ("chunks_fts", "chunks_tri")}
    rows = storage.db.query("SELECT path, text FROM chunks WHERE scope = 'group' ORDER BY rowid")
    texts: dict[str, list[str]] = {}
    for path, text in rows:
        texts.setdefault(path, []).append(text)
    with storage.write() as conn:
        for path in sorted(texts, reverse=True)[:12]:  # the highest rowids first
            text = "\n".join(texts[path]).replace("w1 ", "forgotten ", 1) + "\n"
            chunks = chunk_text(text, scope="group", path=path, max_chars=60, overlap_lines=0)
            storage.replace_file(conn, FileRecord("group", path, text_hash(text), 0.0, len(text)), chunks)
    after = {table: segments(storage, table) for table in before}
    assert after["chunks_fts"] - before["chunks_fts"] <= 2 and after["chunks_tri"] - before["chunks_tri"] <= 1
    assert keywords.check()


def test_reads_go_on_while_a_write_waits_for_another_process(storage, keywords) -> None:
    """A write waiting (up to busy_timeout) for another process's lock holds this process's writer,
    not its readers: a search and a count answer from the last commit meanwhile."""
    entering = threading.Event()
    storage.db.conn.set_trace_callback(lambda sql: entering.set() if sql == "BEGIN IMMEDIATE" else None)
    text = "alicesecret again\n"
    record = FileRecord("alice", "memory/2026-12-01.md", text_hash(text), 0.0, len(text))
    before, hits_before = storage.count_chunks("alice"), len(keywords.search("alicesecret", ["alice"], 10))

    def add_a_file() -> None:
        with storage.write() as conn:
            storage.replace_file(conn, record, chunk_text(text, scope="alice", path=record.path))

    with write_lock_held(storage.db.path) as release, ThreadPoolExecutor(1) as pool:
        writing = pool.submit(add_a_file)
        assert entering.wait(HANG_GUARD_S)  # the writer holds its lock and waits for the other process's
        found = keywords.search("alicesecret", ["alice"], 10)
        assert storage.count_chunks("alice") == before and not writing.done()
        release()
        writing.result(HANG_GUARD_S)
    assert (len(found), hits_before) == (4, 4) and storage.count_chunks("alice") == before + 1
    assert len(keywords.search("alicesecret", ["alice"], 10)) == 5


def test_a_word_no_chunk_holds_is_left_out_and_neither_saves_nor_narrows_a_common_one(keywords, monkeypatch) -> None:
    """A typo, or a word form no note uses (a keyword-only search asks for many), matches nothing:
    it is not searched for, and "w3" must still be ranked, as it is alone, and on the fast path its
    frequency calls for."""
    monkeypatch.setattr(keyword_index, "BROAD_MATCHES", 50)
    assert keywords._term_statistics(build_query("w3")) == (frozenset(), True)
    assert keywords._term_statistics(build_query("w3 nosuchword")) == (frozenset({"nosuchword"}), True)
    hits = keywords.search("w3 nosuchword", ["group"], 8)
    assert len(hits) == 8 and all("w3" in hit.chunk.text.split() for hit in hits)


def test_a_word_is_found_as_soon_as_a_note_holds_it(storage, keywords) -> None:
    """A word no chunk held is left out of the search, so its zero must not be remembered."""
    assert "zanzibar" in keywords._term_statistics(build_query("zanzibar w3"))[0]
    text = "trip to zanzibar in june\n"
    with storage.write() as conn:
        storage.replace_file(conn, FileRecord("alice", "memory/2026-12-02.md", text_hash(text), 0.0, len(text)),
                             chunk_text(text, scope="alice", path="memory/2026-12-02.md"))
    assert "zanzibar" in keywords.search("zanzibar w3", ["alice"], 10)[0].chunk.text


def _chunks_of(storage: IndexStorage, scope: str) -> list[StoredChunk]:
    return [stored_chunk(row) for row in storage.db.query(
        f"SELECT {CHUNK_COLUMNS} FROM chunks c WHERE c.scope = ? ORDER BY c.id", (scope,))]


def _sql_entries(storage: IndexStorage, chunk_ids: list[str]) -> set[tuple[str, str, int, int, str]]:
    marks = ",".join("?" * len(chunk_ids))
    return {tuple(row) for row in storage.db.query(  # type: ignore[misc]
        f"SELECT id, chunk_id, start_line, end_line, text_hash FROM entries WHERE chunk_id IN ({marks})", chunk_ids)}


def test_entries_are_read_once_then_served_from_ram(storage, monkeypatch) -> None:
    chunks = _chunks_of(storage, "alice")
    reads: list[int] = []
    original = storage.entry_rows._read
    monkeypatch.setattr(storage.entry_rows, "_read", lambda ids: reads.append(len(ids)) or original(ids))
    first = storage.entries_of(chunks)
    assert {astuple(row) for row in first} == _sql_entries(storage, [c.id for c in chunks])
    assert storage.entries_of(chunks[:3]) == [row for row in first if row.chunk_id in {c.id for c in chunks[:3]}]
    assert reads == [len(chunks)]  # the second call read nothing


def test_a_chunk_whose_text_changed_elsewhere_gets_its_new_entries(storage, tmp_path) -> None:
    """Another process rewrites a file: the chunk keeps its id, but its text (and hash) changed, so
    the entries kept in RAM for the old text are not used for it."""
    [chunk] = [c for c in _chunks_of(storage, "alice") if (c.path, c.start_line) == ("memory/2026-11-01.md", 1)]
    old = storage.entries_of([chunk])
    assert [(row.start_line, row.end_line) for row in old] == [(1, 3)]  # one paragraph
    other = IndexStorage(Database(tmp_path / "index.db"))  # another process's connection
    text = "- one note\n- two notes\n- three\n"  # lines 1-3 again: the same chunk id
    path = chunk.path
    with other.write() as conn:
        new_chunks = chunk_text(text, scope="alice", path=path, max_chars=60, overlap_lines=0)
        other.replace_file(conn, FileRecord("alice", path, text_hash(text), 1.0, len(text)), new_chunks)
    other.db.close()
    [fresh] = [c for c in _chunks_of(storage, "alice") if c.path == path]
    assert fresh.id == chunk.id and fresh.text_hash != chunk.text_hash
    rows = storage.entries_of([fresh])
    assert [(row.start_line, row.end_line) for row in rows] == [(1, 1), (2, 2), (3, 3)]
    assert {astuple(row) for row in rows} == _sql_entries(storage, [fresh.id]) and rows != old


def test_this_process_writes_empty_the_entries_kept_in_ram(storage) -> None:
    chunks = _chunks_of(storage, "alice")
    storage.entries_of(chunks)
    assert len(storage.entry_rows) == len(chunks)
    with storage.write() as conn:
        storage.remove_file(conn, "alice", chunks[0].path)  # a forget of the whole file
    assert len(storage.entry_rows) == 0  # not even the forgotten lines' hashes stay


def test_a_read_that_a_write_overtook_keeps_nothing(storage, monkeypatch) -> None:
    """A search read the entries before a forget committed; the forget emptied the cache meanwhile:
    what the search read is used once, never kept."""
    chunks = _chunks_of(storage, "alice")
    original = storage.entry_rows._read

    def read_then_forget(ids):  # type: ignore[no-untyped-def]
        rows = original(ids)
        with storage.write() as conn:
            storage.remove_file(conn, "alice", chunks[-1].path)
        return rows

    monkeypatch.setattr(storage.entry_rows, "_read", read_then_forget)
    assert storage.entries_of(chunks)  # this search still gets what it read
    assert len(storage.entry_rows) == 0


def test_a_re_split_another_process_finished_first_is_not_done_again(storage, caplog) -> None:
    """Two processes open an index of an older entry rule at once: the second waits for the write
    lock, then finds the rule current and leaves the entries (and their rowids) as they are."""
    before = [tuple(row) for row in storage.db.query("SELECT rowid, id, vec_model FROM entries ORDER BY rowid")]
    with caplog.at_level("WARNING", logger="memory.index.storage"):
        storage._make_entries()  # what the second process runs once it holds the lock
    assert [tuple(row) for row in storage.db.query("SELECT rowid, id, vec_model FROM entries ORDER BY rowid")] == before
    assert caplog.records == []
