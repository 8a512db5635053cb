"""The in-memory vector search: blocks, budget, generations, and the manager that uses it."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.files import write

from memory import KNOWLEDGE_SCOPE, EmbeddingError, HashEmbedding
from memory.vectors.embed_cache import RowSink
from memory.vectors.embedding import normalise
from memory.vectors.scan import top
from memory.vectors.scope_block import ScopeBlock
from memory.vectors.vector_cache import VectorCache

DIM = 16


def unit_vectors(count: int, seed: int = 1) -> np.ndarray:
    return normalise(np.random.default_rng(seed).normal(size=(count, DIM)))


def assert_decoded(held: np.ndarray, vectors: np.ndarray) -> None:
    """Rows read back from a compact block are their vectors within half a code step (1/254 of
    each row's largest component)."""
    vectors = np.atleast_2d(vectors)
    step = np.abs(vectors).max(axis=1, keepdims=True) / 127
    assert held.shape == vectors.shape
    assert np.all(np.abs(held - vectors) <= step / 2 + 1e-7)


def brute_force(ids: list[str], vectors: np.ndarray, query: np.ndarray, limit: int) -> list[str]:
    order = np.argsort(-(vectors @ query), kind="stable")
    return [ids[i] for i in order[:limit]]


#: How far an int8 scan's similarity may be from the truth (for the 16-wide rows here, and the hash
#: embedder's): only rows this close can swap places.
SCAN_ERROR = 0.02


def assert_nearest(hits: list[tuple[str, float]] | None, ids: list[str], vectors: np.ndarray, query: np.ndarray,
                   limit: int) -> None:
    """``hits`` are the ``limit`` nearest rows, best first, up to near-ties: each similarity within
    :data:`SCAN_ERROR` of its truth, and every row left out no nearer than the last hit by more."""
    assert hits is not None and len(hits) == min(limit, len(ids))
    truth = dict(zip(ids, (vectors @ query).tolist(), strict=True))
    assert [score for _, score in hits] == sorted((score for _, score in hits), reverse=True)
    assert all(abs(score - truth[cid]) <= SCAN_ERROR for cid, score in hits)
    held = {cid for cid, _ in hits}
    weakest = min(truth[cid] for cid in held)
    assert all(score <= weakest + 2 * SCAN_ERROR for cid, score in truth.items() if cid not in held)


class Loader:
    """A scope loader over plain dicts that counts its calls."""

    def __init__(self) -> None:
        self.data: dict[str, tuple[int, list[str], np.ndarray]] = {}
        self.calls: list[str] = []

    def __call__(self, scope: str, sink: RowSink) -> None:
        self.calls.append(scope)
        generation, ids, vectors = self.data.get(scope, (0, [], np.zeros((0, 0), dtype=np.float32)))
        if ids:
            sink(generation, len(ids), [(cid,) for cid in ids], vectors)


def test_search_finds_the_nearest_across_scopes() -> None:
    vectors = unit_vectors(500)
    ids = [f"c{i}" for i in range(500)]
    loader = Loader()
    loader.data["a"] = (3, ids[:300], vectors[:300])
    loader.data["b"] = (1, ids[300:], vectors[300:])
    cache = VectorCache(10 * 2**20, loader)
    for q in unit_vectors(20, seed=2):
        assert_nearest(cache.search(q, ["a", "b"], 10, {"a": 3, "b": 1}), ids, vectors, q, 10)
    assert loader.calls == ["a", "b"]  # loaded once, then served from memory


def test_a_scope_changed_elsewhere_is_reloaded() -> None:
    vectors = unit_vectors(3)
    loader = Loader()
    loader.data["a"] = (1, ["x"], vectors[:1])
    cache = VectorCache(2**20, loader)
    assert [cid for cid, _ in cache.search(vectors[1], ["a"], 5, {"a": 1})] == ["x"]
    loader.data["a"] = (2, ["x", "y"], vectors[:2])
    hits = cache.search(vectors[1], ["a"], 5, {"a": 2})
    assert [cid for cid, _ in hits] == ["y", "x"]
    assert loader.calls == ["a", "a"]


def test_own_changes_are_applied_in_place_and_a_missed_generation_reloads() -> None:
    vectors = unit_vectors(4)
    loader = Loader()
    loader.data["a"] = (1, ["w", "x"], vectors[:2])
    cache = VectorCache(2**20, loader)
    cache.search(vectors[0], ["a"], 5, {"a": 1})
    cache.apply("a", 2, removed=["w"], ids=["y"], vectors=vectors[2:3])
    assert sorted(cid for cid, _ in cache.search(vectors[0], ["a"], 5, {"a": 2})) == ["x", "y"]
    assert loader.calls == ["a"]
    cache.apply("a", 4, ids=["z"], vectors=vectors[3:4])  # generation 3 was someone else's
    cache.search(vectors[0], ["a"], 5, {"a": 4})
    assert loader.calls == ["a", "a"]


def test_a_rewritten_vector_replaces_the_old_one() -> None:
    vectors = unit_vectors(2)
    block = ScopeBlock(1, ["x"], vectors[:1], DIM)
    block.upsert(["x"], vectors[1:2])
    assert len(block) == 1
    assert_decoded(block.rows(["x"])[1], vectors[1])


def test_rows_are_read_in_one_go_and_a_copy() -> None:
    vectors = unit_vectors(3)
    block = ScopeBlock(1, ["a", "b", "c"], vectors, DIM)
    block.remove(["b"])
    found, matrix = block.rows(["c", "b", "gone", "a"])
    assert found == ["c", "a"]
    assert_decoded(matrix, vectors[[2, 0]])
    matrix[0] = 0.0  # the caller's copy: the block keeps its row
    assert_decoded(block.rows(["c"])[1], vectors[2])


def test_blocks_grow_and_compact_without_losing_rows() -> None:
    vectors = unit_vectors(400)
    ids = [f"c{i}" for i in range(400)]
    block = ScopeBlock(1, [], np.zeros((0, DIM), dtype=np.float32), DIM)
    for start in range(0, 400, 7):  # many small appends: the capacity grows
        block.upsert(ids[start : start + 7], vectors[start : start + 7])
    block.remove(ids[:300])  # most rows gone: the block is compacted
    assert len(block) == 100
    snapshot = block.snapshot()
    assert snapshot.codes.shape[0] == 100 and snapshot.alive is None  # compacted: no dead rows
    for cid in ids[300:]:
        assert_decoded(block.rows([cid])[1], vectors[int(cid[1:])])
    assert block.rows(["c5"])[0] == []


def test_entries_of_one_text_share_a_row_until_one_is_written_again() -> None:
    """A load hands a vector once with every entry that has it (a line two overlapping chunks
    hold): one row is scanned, each entry is found at its score, and the row stays as long as one
    of them does."""
    vectors = unit_vectors(3)
    block = ScopeBlock(1, [], np.zeros((0, DIM), dtype=np.float32), DIM)
    block.extend([("a1", "a2", "a3"), ("b",)], vectors[:2])
    assert len(block) == 4 and block.snapshot().codes.shape[0] == 2
    hits = top([block.snapshot()], vectors[0], 10)
    assert [cid for cid, _ in hits] == ["a1", "a2", "a3", "b"] and len({score for _, score in hits[:3]}) == 1
    assert [cid for cid, _ in top([block.snapshot()], vectors[0], 2)] == ["a1", "a2"]  # the limit counts entries
    block.remove(["a1"])
    assert [cid for cid, _ in top([block.snapshot()], vectors[0], 10)] == ["a2", "a3", "b"]
    block.upsert(["a2"], vectors[2:3])  # a2's text changed: it leaves the shared row for one of its own
    assert_decoded(block.rows(["a2", "a3"])[1], vectors[[2, 0]])
    assert block.snapshot().codes.shape[0] == 3
    block.remove(["a3"])  # the last entry of the row: the row goes
    assert sorted(cid for cid, _ in top([block.snapshot()], vectors[0], 10)) == ["a2", "b"]
    assert len(block) == 2


def test_removed_rows_never_come_back_from_search() -> None:
    vectors = unit_vectors(10)
    ids = [f"c{i}" for i in range(10)]
    loader = Loader()
    loader.data["a"] = (1, ids, vectors)
    cache = VectorCache(2**20, loader)
    cache.search(vectors[0], ["a"], 3, {"a": 1})
    cache.apply("a", 2, removed=ids[:9])
    assert cache.search(vectors[0], ["a"], 3, {"a": 2}) == [("c9", pytest.approx(float(vectors[9] @ vectors[0]),
                                                                                abs=SCAN_ERROR))]


def test_budget_evicts_the_least_recently_used_scope_and_refuses_what_cannot_fit() -> None:
    vectors = unit_vectors(64)
    loader = Loader()
    for name in "abc":
        loader.data[name] = (1, [f"{name}{i}" for i in range(64)], vectors)
    one_block = ScopeBlock(1, loader.data["a"][1], vectors, DIM).nbytes
    cache = VectorCache(2 * one_block, loader)
    gens = {"a": 1, "b": 1, "c": 1}
    cache.search(vectors[0], ["a"], 1, gens)
    cache.search(vectors[0], ["b"], 1, gens)
    cache.search(vectors[0], ["a"], 1, gens)  # a is now the most recent
    cache.search(vectors[0], ["c"], 1, gens)  # evicts b
    cache.search(vectors[0], ["a"], 1, gens)
    assert loader.calls == ["a", "b", "c"]
    assert not cache.fits(3 * 64, DIM)
    small = VectorCache(one_block - 1, loader)
    assert small.search(vectors[0], ["a"], 1, gens) is None


def test_in_place_writes_never_hold_more_than_the_budget() -> None:
    """Growth by in-place writes evicts other blocks first; a block that alone outgrows the budget
    is dropped, and its scope's search returns None (the engine then asks LanceDB)."""
    dim, budget = 1024, 2**20  # a row costs 1029 bytes (codes, scale, live flag): 1019 fit
    rng = np.random.default_rng(4)
    truth: dict[str, dict[str, np.ndarray]] = {name: {} for name in "abc"}
    gens = dict.fromkeys("abc", 0)

    def load(scope: str, sink: RowSink) -> None:
        ids = list(truth[scope])
        if ids:
            sink(gens[scope], len(ids), [(cid,) for cid in ids],
                 np.array([truth[scope][cid] for cid in ids], dtype=np.float32))

    def vectors(count: int) -> np.ndarray:
        return normalise(rng.normal(size=(count, dim))).astype(np.float32)

    cache = VectorCache(budget, load)
    for name in "abc":
        truth[name]["seed-" + name] = vectors(1)[0]
        gens[name] = 1
        assert cache.preload(name, 1)
    fell_back = evicted = 0
    for step in range(150):
        scope = "abc"[step % 3]
        block = truth[scope]
        added = [f"{scope}{step}-{i}" for i in range(24 if scope == "a" else 4)]
        rewritten = list(block)[-2:]  # the same ids with new vectors
        removed = list(block)[:1] if step % 5 == 0 else []
        written = vectors(len(added) + len(rewritten))
        for cid in removed:
            del block[cid]
        block.update(zip(added + rewritten, written, strict=True))
        gens[scope] += 1
        loaded_before = set(cache._blocks)
        cache.apply(scope, gens[scope], removed=removed, ids=added + rewritten, vectors=written)
        assert cache.nbytes <= budget
        evicted += bool(loaded_before - set(cache._blocks) - {scope})
        for scopes in ([scope], ["b", "c"], ["a", "b"]):
            query = vectors(1)[0]
            hits = cache.search(query, scopes, 10, gens)
            assert cache.nbytes <= budget
            rows = {cid: vector for name in scopes for cid, vector in truth[name].items()}
            if hits is None:  # a scope that alone does not fit
                assert any(not cache.fits(len(truth[name]), dim) for name in scopes)
                fell_back += 1
                continue
            assert_nearest(hits, list(rows), np.array(list(rows.values())), query, 10)
    assert evicted and fell_back  # both paths ran: other blocks evicted, then "a" too big on its own
    assert not cache.fits(len(truth["a"]), dim) and "a" not in cache._blocks


def test_a_slow_load_does_not_block_searches_of_other_scopes() -> None:
    import threading

    vectors = unit_vectors(4)
    release = threading.Event()
    loader = Loader()
    loader.data["small"] = (1, ["s"], vectors[:1])
    loader.data["big"] = (1, ["b"], vectors[1:2])
    cache = VectorCache(2**20, lambda scope, sink: (scope != "big" or release.wait(10)) and loader(scope, sink))
    cache.search(vectors[0], ["small"], 1, {"small": 1})
    slow = threading.Thread(target=cache.search, args=(vectors[0], ["big"], 1, {"big": 1}))
    slow.start()
    try:
        assert [cid for cid, _ in cache.search(vectors[0], ["small"], 1, {"small": 1})] == ["s"]
        assert slow.is_alive()  # still loading
    finally:
        release.set()
        slow.join(10)
    assert [cid for cid, _ in cache.search(vectors[0], ["big"], 1, {"big": 1})] == ["b"]


# ------------------------------------------------------------------ through the manager
def test_manager_search_matches_lancedb_exact_scan(workspace, make_manager) -> None:
    lines = [f"- note {i}: {' '.join(f'word{(i * 7 + j) % 97}' for j in range(6))}" for i in range(120)]
    for day in range(1, 7):
        write(workspace, "alice", f"memory/2026-11-0{day}.md", "\n\n".join(lines[day * 20 - 20 : day * 20]) + "\n")
    write(workspace, "bob", "MEMORY.md", "- bob's private note word5\n")
    manager = make_manager(chunk_max_chars=64)
    manager.indexer.sync()
    assert manager.vectors is not None and manager.vector_cache is not None
    scopes = ["alice", KNOWLEDGE_SCOPE]
    for query in ("word5 word17", "note 33", "word90"):
        vector = manager.retriever._query_vector(query)
        from_ram = manager.vector_cache.search(vector, scopes, 20, manager.embed_cache.generations(scopes))
        from_lance = manager.vectors.search(vector, scopes, 20, exact=True)
        # the k-th similarity within the scan's error of the exact k-th; ids may swap only among near-ties
        assert [s for _, s in from_ram] == pytest.approx([s for _, s in from_lance], abs=SCAN_ERROR)
        lance_scores = dict(from_lance)
        cutoff = from_lance[-1][1] + 2 * SCAN_ERROR  # below it, near-equal scores may be cut either way
        above = [cid for cid, score in from_ram if score > cutoff]
        assert len(above) >= 5
        assert all(abs(dict(from_ram)[cid] - lance_scores[cid]) < SCAN_ERROR for cid in above)
        assert all(cid.startswith("alice") or "bob" not in cid for cid, _ in from_ram)


def test_a_line_two_chunks_share_is_one_row_and_found_in_both(workspace, make_manager) -> None:
    """Consecutive chunks share their boundary lines (``chunk_overlap_lines``): the block holds such
    a line's vector once, and a search returns it for both chunks, as LanceDB's exact scan does."""
    lines = [f"- day note {i}: {' '.join(f'term{(i * 11 + j) % 89}' for j in range(5))}" for i in range(40)]
    write(workspace, "alice", "memory/2026-11-01.md", "\n".join(lines) + "\n")
    manager = make_manager(chunk_max_chars=300)
    manager.indexer.sync()
    assert manager.vector_cache is not None and manager.vectors is not None
    entries = manager.storage.db.query("SELECT id, text_hash FROM entries WHERE scope = 'alice'")
    assert len({h for _, h in entries}) < len(entries)  # the chunks overlap
    query = manager.retriever._query_vector(lines[0][2:])
    assert manager.vector_cache.preload("alice", manager.embed_cache.generations(["alice"])["alice"])
    block = manager.vector_cache._blocks["alice"]
    assert len(block) == len(entries) and block.snapshot().codes.shape[0] == len({h for _, h in entries})
    from_ram = manager.vector_cache.search(query, ["alice"], len(entries), manager.embed_cache.generations(["alice"]))
    from_lance = manager.vectors.search(query, ["alice"], len(entries), exact=True)
    assert from_ram is not None and {cid for cid, _ in from_ram} == {cid for cid, _ in from_lance}
    lance_scores = dict(from_lance)
    assert all(abs(score - lance_scores[cid]) < SCAN_ERROR for cid, score in from_ram)


def test_a_sync_by_another_process_is_seen_by_the_next_search(workspace, make_manager) -> None:
    write(workspace, "alice", "MEMORY.md", "- likes green tea\n")
    bot = make_manager()
    assert [r.text for r in bot.search("green tea", "alice")] == ["- likes green tea"]
    cli = make_manager()  # its own SQLite connection and LanceDB handle, as `membridge memory sync` has
    write(workspace, "alice", "memory/2026-12-01.md", "- the launch code is 7781 for the rocket\n")
    cli.indexer.sync("alice")
    [hit] = [r for r in bot.search("launch code rocket", "alice", auto_sync=False) if r.path.startswith("memory/")]
    assert hit.vector_score is not None and hit.vector_score > 0.3


def test_many_own_writes_stay_within_a_one_mib_cache(workspace, make_manager) -> None:
    """Issue 15 #13: in-place updates held 5.8 MiB against 1 MiB. Now every write leaves the cache
    within its budget, and the answers stay those of a LanceDB exact scan."""
    budget = 2**20
    manager = make_manager(HashEmbedding(dim=4096, model_id="hash:4096"), vector_cache_mb=1, chunk_max_chars=64)
    write(workspace, "alice", "MEMORY.md", "- likes green tea\n")
    write(workspace, "bob", "MEMORY.md", "- likes black coffee\n")
    manager.indexer.sync()
    cache = manager.vector_cache
    assert cache is not None and manager.vectors is not None
    assert manager.warm(["alice", "bob"]) == 2  # the knowledge base is empty: nothing to hold
    scopes = ["alice", KNOWLEDGE_SCOPE]
    from_ram = 0
    for day in range(1, 31):  # 10 entries a day, 4,101 bytes each in RAM, so ~255 fit in 1 MiB
        notes = [f"- day {day} note {i}: word{(day * 7 + i) % 31} word{(day + i * 3) % 17}" for i in range(10)]
        write(workspace, "alice", f"memory/2026-11-{day:02d}.md", "\n\n".join(notes) + "\n")
        if day % 3 == 0:  # and a rewrite of MEMORY.md: old chunks removed, new ones added
            write(workspace, "alice", "MEMORY.md", f"- likes green tea\n\n- day {day}: word{day % 31}\n")
        manager.indexer.sync("alice")
        assert cache.nbytes <= budget
        vector = manager.retriever._query_vector(f"word{day % 31} note")
        ram = cache.search(vector, scopes, 10, manager.embed_cache.generations(scopes))
        assert cache.nbytes <= budget
        if ram is None:  # alice alone outgrew the budget: searches go to LanceDB
            assert not cache.fits(manager.retriever.vector_rows(["alice"]), 4096)
            continue
        from_ram += 1
        lance = manager.vectors.search(vector, scopes, 10, exact=True)
        assert [s for _, s in ram] == pytest.approx([s for _, s in lance], abs=SCAN_ERROR)
        exact = dict(manager.vectors.search(vector, scopes, 10_000, exact=True))  # hashed vectors tie often
        assert all(exact[cid] >= lance[-1][1] - SCAN_ERROR for cid, _ in ram)
    assert from_ram and "alice" not in cache._blocks  # first from RAM, then too big for it
    [hit] = [r for r in manager.search("day 30 note 4", "alice", auto_sync=False) if "note 4:" in r.text][:1]
    assert hit.vector_score is not None


def test_own_writes_update_the_loaded_block_without_a_reload(workspace, make_manager) -> None:
    write(workspace, "alice", "MEMORY.md", "- likes green tea\n")
    manager = make_manager()
    manager.search("tea", "alice")
    loads: list[str] = []
    original = manager._load_scope_vectors
    manager._load_scope_vectors = lambda scope, sink: loads.append(scope) or original(scope, sink)  # type: ignore[method-assign]
    manager.vector_cache._load = manager._load_scope_vectors  # type: ignore[union-attr]
    path = write(workspace, "alice", "MEMORY.md", "- likes black coffee\n")
    manager.indexer.sync("alice")
    [hit] = manager.search("black coffee", "alice", auto_sync=False)
    expected = float(np.dot(manager.retriever._query_vector("black coffee"), HashEmbedding().embed([hit.text])[0]))
    assert hit.vector_score == pytest.approx(max(0.0, expected), abs=1e-5)
    assert loads == []
    path.unlink()
    manager.indexer.sync("alice")
    assert manager.search("black coffee", "alice", auto_sync=False, min_score=0) == []
    assert loads == []


def test_vector_cache_off_uses_lancedb(workspace, make_manager) -> None:
    write(workspace, "alice", "MEMORY.md", "- likes green tea\n")
    manager = make_manager(vector_cache_mb=0)
    assert manager.vector_cache is None
    [hit] = manager.search("green tea", "alice")
    assert hit.vector_score is not None and hit.vector_score > 0.5


def test_warm_loads_the_active_scopes_and_knowledge_before_any_search(workspace, make_manager) -> None:
    write(workspace, "alice", "MEMORY.md", "- likes green tea\n")
    write(workspace, "bob", "MEMORY.md", "- likes black coffee\n")
    (workspace.knowledge_dir / "drinks").mkdir(parents=True)
    (workspace.knowledge_dir / "drinks" / "tea.md").write_text("# Tea\n\nGreen tea is unoxidised.\n")
    make_manager().indexer.sync()
    manager = make_manager()  # a fresh process: nothing in RAM yet
    assert manager.warm(["alice"]) == 2
    assert sorted(manager.vector_cache._blocks) == [KNOWLEDGE_SCOPE, "alice"]
    loads: list[str] = []
    original = manager.vector_cache._load
    manager.vector_cache._load = lambda scope, sink: loads.append(scope) or original(scope, sink)
    assert manager.search("green tea", "alice")[0].vector_score is not None
    assert loads == []


def test_warm_does_nothing_without_vectors(workspace, make_manager) -> None:
    write(workspace, "alice", "MEMORY.md", "- likes green tea\n")
    assert make_manager(embedder=None).warm(["alice"]) == 0
    assert make_manager().warm(["alice"]) == 0  # nothing embedded yet: no width known


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["upsert", "remove"]), st.lists(st.integers(0, 150), max_size=40)),
                max_size=25))
def test_any_sequence_of_changes_searches_like_brute_force(operations) -> None:
    """Upserts and removals in any order (growth, tombstones, compaction) after a load whose rows
    are shared by up to three entries each: the block stays exact."""
    pool = unit_vectors(151, seed=9)
    block = ScopeBlock(1, [], np.zeros((0, DIM), dtype=np.float32), DIM)
    groups = [tuple(f"c{n}" for n in range(first, min(first + 1 + first % 3, 151))) for first in range(100, 151, 3)]
    block.extend(groups, pool[100 : 100 + len(groups)])
    truth: dict[str, np.ndarray] = {cid: pool[100 + row] for row, group in enumerate(groups) for cid in group}
    for step, (kind, numbers) in enumerate(operations):
        ids = [f"c{n}" for n in dict.fromkeys(numbers)]
        if kind == "upsert":
            # a distinct vector per id and step: a re-upsert changes it, and no two rows tie
            vectors = np.vstack([unit_vectors(1, seed=int(cid[1:]) * 1000 + step + 10) for cid in ids]
                                or [np.zeros((0, DIM), dtype=np.float32)])
            block.upsert(ids, vectors)
            truth.update(zip(ids, vectors, strict=True))
        else:
            block.remove(ids)
            for cid in ids:
                truth.pop(cid, None)
    assert len(block) == len(truth)
    query = pool[0]
    got = dict(top([block.snapshot()], query, len(truth) + 5))  # every live row, none removed
    assert got.keys() == truth.keys()
    for cid, vector in truth.items():  # the compact scores and rows are the truth's within a code step
        assert got[cid] == pytest.approx(float(vector @ query), abs=0.02)
        assert_decoded(block.rows([cid])[1], vector)


class _ThreadsSeen(HashEmbedding):
    """Records the thread limit each question is embedded with."""

    def __init__(self) -> None:
        super().__init__(dim=DIM, model_id="hash:threads")
        self.asked: list[int | None] = []

    def embed_query(self, text: str, *, threads: int | None = None) -> np.ndarray:
        self.asked.append(threads)
        return super().embed_query(text)


def test_a_question_before_a_scan_on_both_cores_is_embedded_on_one_thread(workspace, make_manager,
                                                                         monkeypatch) -> None:
    """Threads a model wakes spin after the call: a scan that needs the second core gets it; a
    one-thread scan leaves the model both."""
    write(workspace, "alice", "memory/2026-11-01.md", "".join(f"- note {i} about topic {i % 7}\n" for i in range(60)))
    embedder = _ThreadsSeen()
    manager = make_manager(embedder=embedder)
    manager.indexer.sync()
    rows = manager.retriever.vector_rows(["alice", KNOWLEDGE_SCOPE])
    monkeypatch.setattr("memory.vectors.scan.SCAN_THREADS", 2)
    manager.search("topic three", "alice")
    monkeypatch.setattr("memory.vectors.scan.STRIPE_ROWS", max(1, rows // 2))  # the scope now fills two stripes
    manager.search("topic four", "alice")
    assert embedder.asked == [None, 1]


class _EmbedsOnceKeywordsRead(HashEmbedding):
    """Embeds a question only once the keyword index is being read: both at once, or never."""

    def __init__(self) -> None:
        super().__init__()
        self.keywords_read = threading.Event()

    def embed_query(self, text: str, *, threads: int | None = None) -> np.ndarray:
        assert self.keywords_read.wait(30)  # only a guard: one after the other, the keywords never come first
        return super().embed_query(text, threads=threads)


def test_the_keyword_side_runs_beside_a_question_embedded_for_a_two_thread_scan(workspace, make_manager,
                                                                              monkeypatch) -> None:
    """Before a scan on both cores the question is embedded on one: the keyword index is read on
    the other meanwhile. The search finds what it found one step after the other, and a question
    whose embedding fails still gets the keyword side of a keyword-only search (word forms widened)."""
    write(workspace, "alice", "memory/2026-11-01.md",
          "".join(f"- note {i} about topic {i % 7}\n" for i in range(60)) + "- went hiking in the Alps\n")
    monkeypatch.setattr("memory.vectors.scan.SCAN_THREADS", 2)
    first = make_manager()
    first.indexer.sync()
    rows = first.retriever.vector_rows(["alice", KNOWLEDGE_SCOPE])
    before = [(r.path, r.start_line, r.score) for r in first.search("topic three", "alice")]
    first.close()

    monkeypatch.setattr("memory.vectors.scan.STRIPE_ROWS", max(1, rows // 2))  # the scope now fills two stripes
    embedder = _EmbedsOnceKeywordsRead()
    again = make_manager(embedder=embedder)
    read_on: list[str] = []
    search = again.retriever.keywords.search

    def watched(*args: object, **kwargs: object) -> object:
        read_on.append(threading.current_thread().name)
        embedder.keywords_read.set()
        return search(*args, **kwargs)

    monkeypatch.setattr(again.retriever.keywords, "search", watched)
    assert [(r.path, r.start_line, r.score) for r in again.search("topic three", "alice")] == before
    assert len(read_on) == 1 and read_on[0].startswith("membridge-scan")
    embedder.fail_with = EmbeddingError("HTTP 500")
    [hit, *_] = again.search("hike", "alice")
    assert "hiking" in hit.text and hit.vector_score is None
