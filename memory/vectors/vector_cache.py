"""Vector search from memory: one compact block per scope, kept in step with SQLite.

LanceDB pays ~6 ms per query before doing any work, scans an 80k-vector scope in ~170 ms, and its
IVF_PQ index trades recall for speed (recall@32 ≈ 0.8 at 100k). A contiguous block per scope
answers with one pass over its rows. Rows are held as int8 codes with a scale each
(:mod:`.compact`: a quarter of float32's bytes, so a scope of ~800k entry vectors fits the default
512 MiB), and the scan's similarities are the search's: within 0.002 of the exact ones, which moves
only near-ties (an exact re-score of the best rows from SQLite cost a fifth of a search and changed
3 of 1,520 LoCoMo ranks, each a tie within 0.0002: bench/README.md). The scopes a search needs are served from RAM while
they fit in ``memory.vector_cache_mb``; LanceDB stays the durable vector store and serves what does
not fit.

Blocks are loaded from SQLite (the truth: the embedding cache joined to the chunks embedded with
the current model). SQLite also holds a generation number per scope, bumped in the same
transaction as any change to that scope's chunks or vectors, by whichever process writes (all
writes hold the workspace lock). A search compares each block's generation with SQLite's and
reloads a block another process changed; this process's own writes are applied to loaded blocks
in place (:meth:`VectorCache.apply`), so a ``memory_write`` does not cost a reload.

The budget is hard: a block counts its allocated capacity (the codes, scales and live-row mask,
filled or not), a load or an in-place growth first evicts the least recently used other
blocks, and a block that alone would outgrow the budget is dropped, so its scope is searched in
LanceDB like any scope that does not fit.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from .embed_cache import RowSink
from .scan import top
from .scope_block import MIN_CAPACITY, ScopeBlock, bytes_per_row

ScopeLoader = Callable[[str, RowSink], None]
"""``load(scope, sink)``: the scope's vectors handed to ``sink`` in batches of one consistent
snapshot (:meth:`memory.vectors.embed_cache.EmbeddingCache.scope_vectors`)."""

class VectorCache:
    """Per-scope blocks under one memory budget, least recently used evicted first."""

    def __init__(self, budget_bytes: int, load: ScopeLoader) -> None:
        self.budget_bytes = budget_bytes
        self._load = load
        self._blocks: OrderedDict[str, ScopeBlock] = OrderedDict()
        self._loading: dict[str, threading.Event] = {}  # scope -> set when the load under way ends
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        """The bytes the blocks hold (allocated capacity); never more than ``budget_bytes``."""
        with self._lock:
            return self._used()

    def fits(self, rows: int, dim: int) -> bool:
        """Whether ``rows`` vectors of ``dim`` floats fit in the budget at all."""
        return rows * bytes_per_row(dim) <= self.budget_bytes

    def search(
        self, query: np.ndarray, scopes: Sequence[str], limit: int, generations: Mapping[str, int]
    ) -> list[tuple[str, float]] | None:
        """(entry id, cosine by the compact scan) best first over ``scopes``, or None when they do not
        fit in the budget."""
        query = np.asarray(query, dtype=np.float32)
        snapshots = []
        for scope in scopes:
            block = self._block(scope, generations.get(scope, 0), query.shape[0])
            if block is None:
                return None
            with self._lock:
                snapshots.append(block.snapshot())
        return top(snapshots, query, limit)

    def preload(self, scope: str, generation: int) -> bool:
        """Load ``scope``'s block now (if stale or absent), so that its first search is fast.

        False when there is nothing to hold (no vectors yet) or it does not fit.
        """
        return self._block(scope, generation, None) is not None

    def vectors(self, scope: str, ids: Sequence[str]) -> tuple[list[str], np.ndarray]:
        """The loaded vectors of ``ids`` in ``scope`` (for scoring a candidate's every entry without
        a SQLite read): the ids found, and their rows decoded from the compact block (within half a
        code step of the truth) as one float32 matrix, read under one lock."""
        with self._lock:
            block = self._blocks.get(scope)
            if block is None:
                return [], np.zeros((0, 0), dtype=np.float32)
            return block.rows(ids)

    def apply(
        self,
        scope: str,
        generation: int,
        *,
        removed: Sequence[str] = (),
        ids: Sequence[str] = (),
        vectors: np.ndarray | None = None,
    ) -> None:
        """This process's own change that moved ``scope`` to ``generation``, applied in place.

        A block that missed a generation in between (another process wrote) is dropped instead,
        so the next search reloads it. A growth first evicts the least recently used other blocks
        as far as the budget needs; a block that alone would outgrow it is dropped.
        """
        with self._lock:
            block = self._blocks.get(scope)
            if block is None:
                return
            if block.generation != generation - 1 or (vectors is not None and vectors.shape[1:] != (block.dim,)):
                del self._blocks[scope]
                return
            block.remove(removed)
            if ids and vectors is not None:
                capacity = block.growth_for(ids, self.budget_bytes // block.row_bytes)
                if capacity is None:
                    del self._blocks[scope]
                    return
                self._evict_for(capacity * block.row_bytes - block.nbytes, keep=scope)
                block.upsert(ids, vectors, capacity)
            block.generation = generation

    def _block(self, scope: str, generation: int, dim: int | None) -> ScopeBlock | None:
        """The scope's current block, loaded if stale; None if it does not fit or has another width.

        The load (~1 s for 80k vectors, ~6 s for 600k) runs outside the lock, so searches of other
        scopes go on meanwhile. One thread loads a scope at a time: the searches that need it while
        it loads wait for that load rather than each read it again (the chats of a group answered at
        once after another process's write would otherwise each hold a copy of its block).
        """
        while True:
            with self._lock:
                block = self._blocks.get(scope)
                if block is not None and block.generation == generation and dim in (None, block.dim):
                    self._blocks.move_to_end(scope)
                    return block
                under_way = self._loading.get(scope)
                if under_way is None:
                    self._loading[scope] = threading.Event()
                    break
            under_way.wait()
        try:
            return self._load_block(scope, generation, dim)
        finally:
            with self._lock:
                self._loading.pop(scope).set()

    def _load_block(self, scope: str, generation: int, dim: int | None) -> ScopeBlock | None:
        builder = _Builder(self.budget_bytes, dim, lambda nbytes: self._make_room(scope, nbytes))
        self._load(scope, builder.add)
        block = builder.block
        if block is None and not builder.refused and dim is not None:  # no vectors yet: an empty block
            block = ScopeBlock(generation, [], np.zeros((0, dim), dtype=np.float32), dim)
        if block is None or block.nbytes > self.budget_bytes:
            return None  # too big, nothing to hold yet (a preload), or vectors of another width
        heads_cost = block.heads_cost()
        if heads_cost and block.nbytes + heads_cost <= self.budget_bytes:
            self._make_room(scope, block.nbytes + heads_cost)
            block.fit_heads()
        with self._lock:
            current = self._blocks.get(scope)
            if current is not None and current.dim == block.dim and current.generation >= block.generation:
                return current
            self._blocks.pop(scope, None)
            self._evict_for(block.nbytes)
            self._blocks[scope] = block
            return block

    def _make_room(self, scope: str, nbytes: int) -> None:
        """Before a load of ``scope`` allocates ``nbytes``: its stale block goes (the searches that
        need it wait for this load) and the least recently used others as far as the budget needs,
        so the budget holds while the load runs too."""
        with self._lock:
            self._blocks.pop(scope, None)
            self._evict_for(nbytes)

    def _evict_for(self, extra: int, keep: str | None = None) -> None:
        """Evict least recently used blocks (never ``keep``) until ``extra`` more bytes fit."""
        for name in list(self._blocks):
            if self._used() + extra <= self.budget_bytes:
                return
            if name != keep:
                del self._blocks[name]

    def _used(self) -> int:
        return sum(block.nbytes for block in self._blocks.values())


class _Builder:
    """A block built from a loader's batches; refuses (stops the read) as soon as it knows that the
    scope does not fit the budget, or that its vectors are not ``dim`` wide."""

    def __init__(self, budget_bytes: int, dim: int | None, make_room: Callable[[int], None]) -> None:
        """``make_room(nbytes)``: called once the size is known, before the block is allocated."""
        self.budget_bytes = budget_bytes
        self.dim = dim
        self.make_room = make_room
        self.block: ScopeBlock | None = None
        self.refused = False

    def add(self, generation: int, count: int, owners: list[tuple[str, ...]], vectors: np.ndarray) -> bool:
        width = int(vectors.shape[1])
        if self.block is None:
            if (self.dim is not None and width != self.dim) or count * bytes_per_row(width) > self.budget_bytes:
                self.refused = True
                return False
            self.make_room(max(count, MIN_CAPACITY) * bytes_per_row(width))
            self.block = ScopeBlock(generation, [], np.zeros((0, width), dtype=np.float32), width, capacity=count)
        self.block.extend(owners, vectors)
        return True
