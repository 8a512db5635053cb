"""Entry vectors in RAM as int8 codes: what they cost, what they give back, and how near the scan is."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from types import SimpleNamespace

import numpy as np
import pytest

from memory.vectors import compact, scan, vector_cache
from memory.vectors.embed_cache import RowSink
from memory.vectors.embedding import normalise
from memory.vectors.scan import top
from memory.vectors.scope_block import ScopeBlock
from memory.vectors.vector_cache import VectorCache

DIM = 512  # the local model's width


def unit_vectors(count: int, seed: int) -> np.ndarray:
    return normalise(np.random.default_rng(seed).normal(size=(count, DIM)))


class Scopes:
    """Scopes of entry vectors, loaded and read back exactly as SQLite would; counts the loads."""

    def __init__(self, **scopes: np.ndarray) -> None:
        self.vectors = {name: {f"{name}{i}": v for i, v in enumerate(rows)} for name, rows in scopes.items()}
        self.loads: list[str] = []

    def load(self, scope: str, sink: RowSink) -> None:
        """In batches of 150 rows, as SQLite hands them (``LOAD_BATCH``)."""
        self.loads.append(scope)
        ids, vectors = list(self.vectors[scope]), np.array(list(self.vectors[scope].values()), dtype=np.float32)
        for start in range(0, len(ids), 150):
            if not sink(1, len(ids), [(cid,) for cid in ids[start : start + 150]], vectors[start : start + 150]):
                return

    def brute_force(self, query: np.ndarray, scopes: Sequence[str], limit: int) -> list[tuple[str, float]]:
        scored = [(cid, float(v @ query)) for name in scopes for cid, v in self.vectors[name].items()]
        return sorted(scored, key=lambda hit: -hit[1])[:limit]


#: The most an int8 scan's similarity is off for these 512-wide unit rows (measured: 0.0019 on real ones).
SCAN_ERROR = 0.002


def assert_nearest(hits: list[tuple[str, float]] | None, truth: dict[str, float], limit: int) -> None:
    """``hits`` are the ``limit`` nearest of ``truth`` (every row's exact similarity) up to near-ties:
    best first, each within :data:`SCAN_ERROR` of its truth, none left out nearer by more than that."""
    assert hits is not None and len(hits) == min(limit, len(truth))
    assert [score for _, score in hits] == sorted((score for _, score in hits), reverse=True)
    assert max(abs(score - truth[cid]) for cid, score in hits) < SCAN_ERROR
    weakest = min(truth[cid] for cid, _ in hits)
    assert all(score < weakest + 2 * SCAN_ERROR for cid, score in truth.items() if cid not in dict(hits))


def test_a_row_costs_a_quarter_of_float32_and_comes_back_within_half_a_step() -> None:
    vectors = unit_vectors(200, seed=1)
    codes, scales = compact.encode(vectors)
    assert codes.dtype == np.int8 and codes.shape == (200, DIM) and scales.dtype == np.float32
    assert compact.row_bytes(DIM) == DIM + 4  # against 4 × 512 = 2,048 bytes as float32
    assert np.abs(codes).max(axis=1).tolist() == [127] * 200  # each row's largest component is ±127
    step = np.abs(vectors).max(axis=1, keepdims=True) / 127
    assert np.all(np.abs(compact.decode(codes, scales) - vectors) <= step / 2 + 1e-7)
    zero_codes, zero_scales = compact.encode(np.zeros((1, DIM), dtype=np.float32))  # no division by zero
    assert not zero_codes.any() and not compact.decode(zero_codes, zero_scales).any()


def test_the_scan_is_within_a_hundredth_of_the_true_similarity() -> None:
    vectors, query = unit_vectors(1000, seed=2), unit_vectors(1, seed=3)[0]
    codes, scales = compact.scores(*compact.encode(vectors), query), None
    assert scales is None and codes.shape == (1000,)
    assert np.abs(codes - vectors @ query).max() < 0.01
    assert compact.scores(np.zeros((0, DIM), dtype=np.int8), np.zeros(0, dtype=np.float32), query).shape == (0,)


def test_the_scan_swaps_only_near_ties() -> None:
    """Rows a hair apart around the query may come in another order than the exact one, but every
    hit's similarity is within 0.002 of its truth (the search's figure: no SQLite read), and no row
    left out is nearer than the last hit by more than that."""
    rng = np.random.default_rng(4)
    base = unit_vectors(1, seed=5)[0]
    near = normalise(base + rng.normal(scale=0.02, size=(300, DIM)))
    scopes = Scopes(a=near, b=unit_vectors(300, seed=6))
    cache = VectorCache(10 * 2**20, scopes.load)
    swapped = 0
    for query in normalise(base + rng.normal(scale=0.05, size=(10, DIM))):
        hits = cache.search(query, ["a", "b"], 8, {"a": 1, "b": 1})
        truth = dict(scopes.brute_force(query, ["a", "b"], 600))
        assert_nearest(hits, truth, 8)
        assert hits is not None and max(abs(score - truth[cid]) for cid, score in hits) > 1e-5  # an approximation
        swapped += [cid for cid, _ in hits] != [cid for cid, _ in scopes.brute_force(query, ["a", "b"], 8)]
    assert swapped  # these near-ties are where int8 and float32 part


def test_compact_bytes_are_what_the_budget_counts() -> None:
    """1,000 vectors of 512 floats: 2 MB as float32, 517 kB compact; a 600 KiB cache holds them."""
    scopes = Scopes(a=unit_vectors(1000, seed=9))
    budget = 600 * 1024
    cache = VectorCache(budget, scopes.load)
    assert cache.fits(1000, DIM) and not cache.fits(1000 * 2048 // (DIM + 5), DIM)
    query = unit_vectors(1, seed=10)[0]
    assert cache.search(query, ["a"], 5, {"a": 1}) is not None
    assert cache.nbytes == 1000 * (DIM + 4 + 1)  # int8 codes, a float32 scale and a live flag a row
    assert cache.nbytes <= budget
    block = ScopeBlock(1, [], np.zeros((0, DIM), dtype=np.float32), DIM)
    assert block.nbytes == 64 * (DIM + 5)  # an empty block's capacity counts too


def test_a_scope_evicted_for_another_is_reloaded_with_the_same_answers() -> None:
    scopes = Scopes(a=unit_vectors(400, seed=11), b=unit_vectors(400, seed=12))
    budget = 400 * (DIM + 5)  # one scope at a time
    cache = VectorCache(budget, scopes.load)
    gens = {"a": 1, "b": 1}
    query = unit_vectors(1, seed=13)[0]
    first = cache.search(query, ["a"], 10, gens)
    assert_nearest(first, dict(scopes.brute_force(query, ["a"], 400)), 10)
    assert_nearest(cache.search(query, ["b"], 10, gens), dict(scopes.brute_force(query, ["b"], 400)), 10)
    assert list(cache._blocks) == ["b"] and cache.nbytes <= budget  # a went to make room
    assert cache.search(query, ["a"], 10, gens) == first
    assert scopes.loads == ["a", "b", "a"]
    assert not cache.fits(800, DIM)  # both at once do not fit: the engine asks LanceDB for them


def test_removed_rows_are_never_scanned() -> None:
    vectors = unit_vectors(100, seed=14)
    block = ScopeBlock(1, [f"c{i}" for i in range(100)], vectors, DIM)
    block.remove([f"c{i}" for i in range(0, 100, 3)])
    hits = top([block.snapshot()], vectors[3], 100)
    assert len(hits) == 66 and "c3" not in dict(hits)


def test_big_blocks_are_scanned_in_stripes_with_the_same_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cut into stripes that three threads take from one queue, two blocks answer exactly as one
    pass over each does: the same rows, scores and order, removed rows left out in every stripe,
    and a ``limit`` larger than a stripe filled from the others."""
    vectors = unit_vectors(1000, seed=15)
    big = ScopeBlock(1, [f"c{i}" for i in range(1000)], vectors, DIM)
    big.remove([f"c{i}" for i in range(0, 1000, 7)])
    small = ScopeBlock(1, [f"k{i}" for i in range(200)], unit_vectors(200, seed=16), DIM)
    snapshots = [big.snapshot(), small.snapshot()]
    query = vectors[500] + vectors[10]
    whole = {limit: top(snapshots, query, limit) for limit in (5, 400, 1100)}
    monkeypatch.setattr(scan, "STRIPE_ROWS", 150)
    monkeypatch.setattr(scan, "SCAN_THREADS", 3)
    stripes = [(s.snapshot.ids[0], s.first, s.last) for s in scan._stripes(snapshots)]  # ~2 a thread: 200 rows
    assert stripes == [("c0", 0, 200), ("c0", 200, 400), ("c0", 400, 600), ("c0", 600, 800), ("c0", 800, 1000),
                       ("k0", 0, 200)]  # removed rows stay in place (masked) until the block is compacted
    for limit, expected in whole.items():
        assert top(snapshots, query, limit) == expected
    assert len(whole[1100]) == 1000 - 143 + 200 and "c7" not in dict(whole[1100])
    assert {cid for cid, _ in whole[5][:2]} == {"c10", "c500"}  # the two rows the query is made of


def test_a_search_never_waits_for_a_busy_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every scan helper is held by other work (another search's stripes, say): the searching
    thread scans every stripe itself and answers, rather than wait for a helper to start."""
    vectors = unit_vectors(600, seed=17)
    snapshots = [ScopeBlock(1, [f"c{i}" for i in range(600)], vectors, DIM).snapshot()]
    expected = top(snapshots, vectors[0], 10)
    monkeypatch.setattr(scan, "STRIPE_ROWS", 100)
    pool, release = scan._pool(), threading.Event()
    held = [pool.submit(release.wait) for _ in range(pool._max_workers)]
    try:
        answered: list[list[tuple[str, float]]] = []
        searcher = threading.Thread(target=lambda: answered.append(top(snapshots, vectors[0], 10)))
        searcher.start()
        searcher.join(timeout=30)  # only a guard: a search that waits on the pool never returns
        assert answered == [expected]
    finally:
        release.set()
    for future in held:
        future.result()


def test_a_stripe_that_fails_fails_the_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whichever thread scans the stripe that fails, the searching thread raises its error (and
    waits for no stripe that will never finish)."""
    vectors = unit_vectors(600, seed=18)
    snapshots = [ScopeBlock(1, [f"c{i}" for i in range(600)], vectors, DIM).snapshot()]
    monkeypatch.setattr(scan, "STRIPE_ROWS", 100)
    monkeypatch.setattr(scan, "SCAN_THREADS", 2)
    real_best = compact.best

    def best(codes: np.ndarray, *args: object) -> tuple[np.ndarray, np.ndarray]:
        if codes.ctypes.data != snapshots[0].codes.ctypes.data:  # every stripe but the first
            raise MemoryError("stripe lost")
        return real_best(codes, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(compact, "best", best)
    with pytest.raises(MemoryError, match="stripe lost"):
        top(snapshots, vectors[0], 10)


def test_searches_of_a_scope_being_loaded_wait_for_that_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three searches need a scope at once (a group's chats after another process's write): one
    reads it from SQLite, the others wait for that block instead of each loading a copy."""
    scopes = Scopes(a=unit_vectors(300, seed=19))
    state = threading.Condition()
    loading, waiting = [], []
    release = threading.Event()

    def slow_load(scope: str, sink: RowSink) -> None:
        with state:
            loading.append(scope)
            state.notify_all()
        release.wait()
        scopes.load(scope, sink)

    class SeenWaiting(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            with state:
                waiting.append(self)
                state.notify_all()
            return super().wait(timeout)

    monkeypatch.setattr(vector_cache, "threading", SimpleNamespace(Event=SeenWaiting, Lock=threading.Lock))
    cache = VectorCache(10 * 2**20, slow_load)
    query = unit_vectors(1, seed=20)[0]
    answers: list[list[tuple[str, float]] | None] = []
    searches = [threading.Thread(target=lambda: answers.append(cache.search(query, ["a"], 5, {"a": 1})))
                for _ in range(3)]
    for search in searches:
        search.start()
    with state:  # every search is in: one loading, two waiting (or, before the fix, three loading)
        assert state.wait_for(lambda: len(loading) + len(waiting) == 3, timeout=30)
    release.set()
    for search in searches:
        search.join(timeout=30)
    assert loading == ["a"] and scopes.loads == ["a"]
    assert len(answers) == 3 and answers[0] == answers[1] == answers[2]
    assert_nearest(answers[0], dict(scopes.brute_force(query, ["a"], 300)), 5)


def test_a_load_makes_room_before_it_allocates() -> None:
    """The budget holds while a scope loads: the least recently used blocks go before the new block
    is allocated, not once it is full (a 309 MiB block beside a full cache would be twice the budget)."""
    scopes = Scopes(a=unit_vectors(400, seed=21), b=unit_vectors(400, seed=22))
    seen: list[tuple[str, list[str], int]] = []

    def load(scope: str, sink: RowSink) -> None:
        def watched(generation: int, count: int, owners: list[tuple[str, ...]], vectors: np.ndarray) -> bool:
            kept = sink(generation, count, owners, vectors)
            seen.append((scope, list(cache._blocks), cache.nbytes))
            return kept

        scopes.load(scope, watched)

    cache = VectorCache(400 * (DIM + 5), load)  # one scope at a time
    query = unit_vectors(1, seed=23)[0]
    cache.search(query, ["a"], 5, {"a": 1})
    cache.search(query, ["b"], 5, {"b": 1})
    assert [entry for entry in seen if entry[0] == "b"] == [("b", [], 0)] * 3  # a went before b's first batch
    assert list(cache._blocks) == ["b"] and cache.nbytes == 400 * (DIM + 5)


def test_beside_runs_the_helper_on_a_pool_thread_while_the_caller_goes_on() -> None:
    """The caller waits until the helper has started: that can only happen when they run at once."""
    started = threading.Event()

    def helper() -> str:
        started.set()
        return threading.current_thread().name

    pending = scan.Beside(helper)
    assert started.wait(30)  # only a guard: run one after the other, the helper never starts
    assert pending.result().startswith("membridge-scan")


def test_beside_runs_the_helper_itself_when_the_pool_is_busy_and_raises_its_error() -> None:
    pool, release = scan._pool(), threading.Event()
    held = [pool.submit(release.wait) for _ in range(pool._max_workers)]
    try:
        assert scan.Beside(lambda: threading.current_thread().name).result() == threading.current_thread().name

        def broken() -> None:
            raise MemoryError("keyword side lost")

        with pytest.raises(MemoryError, match="keyword side lost"):
            scan.Beside(broken).result()
    finally:
        release.set()
    for future in held:
        future.result()


def test_a_scan_started_while_a_helper_holds_the_pool_thread_finishes_without_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The keyword side read beside a question holds the pool's thread; the scan that follows
    runs its stripes on the calling thread (its pool work queues behind the helper), so it never
    waits for a thread that is not free. The helper is released only once the scan is done."""
    monkeypatch.setattr(scan, "STRIPE_ROWS", 64)  # three stripes, two threads wanted
    started, release = threading.Event(), threading.Event()

    def helper() -> bool:
        started.set()
        return release.wait(30)  # False only if the scan waited for this thread

    pending = scan.Beside(helper)
    assert started.wait(30)
    vectors = unit_vectors(192, seed=31)
    hits = top([ScopeBlock(1, [f"c{i}" for i in range(192)], vectors, DIM).snapshot()], vectors[7], 3)
    release.set()
    assert hits[0][0] == "c7" and pending.result() is True
