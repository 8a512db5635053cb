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

from . import compact
from .embed_cache import RowSink
from .heads import HEAD_ROWS, Axes, Heads, head_bytes
from .scan import Snapshot, top

ScopeLoader = Callable[[str, RowSink], None]
"""``load(scope, sink)``: the scope's vectors handed to ``sink`` in batches of one consistent
snapshot (:meth:`memory.vectors.embed_cache.EmbeddingCache.scope_vectors`)."""

_MIN_CAPACITY = 64
#: Rows turned into heads at once when a block gets them (32 MiB of float32 at 512 wide).
_HEAD_BATCH = 16_384


def _row_bytes(dim: int) -> int:
    """What one row of capacity costs: its codes, its scale and its live-row flag."""
    return compact.row_bytes(dim) + 1


class ScopeBlock:
    """The vectors of one scope, compact (:mod:`.compact`): rows appended in place, removals marked,
    compacted when sparse.

    A row is one vector, held once for every entry that has it (:data:`RowSink`): a search scans
    each vector once and returns each of its entries. Rows written in place (this process's own
    writes) hold one entry each; a reload shares them again."""

    def __init__(self, generation: int, ids: Sequence[str], vectors: np.ndarray, dim: int, *,
                 capacity: int = 0) -> None:
        """``capacity``: rows to allocate at once (a load knows how many are coming)."""
        self.generation = generation
        self.dim = dim
        self._axes: Axes | None = None  # set by fit_heads on a big block: then every row has a head
        self._fill_codes(ids, *compact.encode(vectors.reshape(len(ids), dim)), capacity=capacity)

    def _fill_codes(self, ids: Sequence[str], codes: np.ndarray, scales: np.ndarray, *, capacity: int = 0,
                    shared: Mapping[int, tuple[str, ...]] | None = None) -> None:
        count = len(ids)
        self._codes = np.zeros((max(_MIN_CAPACITY, count, capacity), self.dim), dtype=np.int8)
        self._scales = np.ones(self._codes.shape[0], dtype=np.float32)
        self._codes[:count], self._scales[:count] = codes, scales
        self._alive = np.zeros(self._codes.shape[0], dtype=bool)
        self._alive[:count] = True
        self._live = count
        self._ids: list[str] = list(ids)  # row -> its (first) entry; a removed row keeps it as a tombstone
        self._shared: dict[int, tuple[str, ...]] = dict(shared or {})  # row -> its entries, when more than one
        self._row: dict[str, int] = {cid: i for i, cid in enumerate(self._ids)}
        self._row.update((cid, row) for row, owners in self._shared.items() for cid in owners)
        self._fill_heads()

    def _fill_heads(self) -> None:
        """Every filled row's head, in arrays of the block's capacity; none (empty arrays) without
        axes. In batches: a float32 copy of 400k rows would be 800 MB."""
        if self._axes is None:
            self._head_codes, self._head_scales = np.zeros((0, 0), dtype=np.int8), np.zeros(0, dtype=np.float32)
            return
        capacity, used = self._codes.shape[0], len(self._ids)
        self._head_codes = np.zeros((capacity, self._axes.matrix.shape[1]), dtype=np.int8)
        self._head_scales = np.ones(capacity, dtype=np.float32)
        for start in range(0, used, _HEAD_BATCH):
            self._write_heads(slice(start, min(used, start + _HEAD_BATCH)))

    def _write_heads(self, rows: slice) -> None:
        """The heads of ``rows`` from their codes (when the block has axes)."""
        if self._axes is not None:
            self._head_codes[rows], self._head_scales[rows] = self._axes.heads(self._codes[rows], self._scales[rows])

    @property
    def nbytes(self) -> int:
        """Allocated bytes (capacity, not filled rows): the codes, the scales, the live-row mask and
        the heads."""
        return int(self._codes.nbytes + self._scales.nbytes + self._alive.nbytes + self._head_codes.nbytes
                   + self._head_scales.nbytes)

    @property
    def row_bytes(self) -> int:
        """What a row of capacity costs, its head included."""
        return _row_bytes(self.dim) + (head_bytes() if self._axes is not None else 0)

    def heads_cost(self) -> int:
        """The bytes :meth:`fit_heads` would add: 0 for a block too small for heads or that has them."""
        if self._axes is not None or len(self._ids) < HEAD_ROWS:
            return 0
        return self._codes.shape[0] * head_bytes()

    def fit_heads(self) -> None:
        """Give a big block heads (:mod:`.heads`), fitted to its rows, unless they hold too little
        of its energy."""
        if self.heads_cost():
            used = len(self._ids)
            self._axes = Axes.fit(self._codes[:used], self._scales[:used])
            self._fill_heads()

    def growth_for(self, ids: Sequence[str], max_rows: int) -> int | None:
        """The capacity :meth:`upsert` of ``ids`` needs, at most ``max_rows`` (growth by a quarter
        is cut to it); the current capacity if they fit already, None if not even ``max_rows`` do.

        Removed rows still count until the block is compacted (a reload drops them), and an entry
        that shares its row takes a row of its own when written again.
        """
        capacity = self._codes.shape[0]
        rows = len(self._ids) + sum(1 for cid in set(ids) if cid not in self._row or self._row[cid] in self._shared)
        if rows <= capacity:
            return capacity
        if rows > max_rows:
            return None
        return max(rows, min(max_rows, max(capacity + _MIN_CAPACITY, capacity * 5 // 4)))

    def __len__(self) -> int:
        """Entries held (a shared row counts each of its entries)."""
        return len(self._row)

    def extend(self, owners: Sequence[tuple[str, ...]], vectors: np.ndarray) -> None:
        """Append rows of entries not held yet, each row's vector shared by its ``owners`` (a load)."""
        first = len(self._ids)
        self._append([group[0] for group in owners], vectors)
        for row, group in enumerate(owners, start=first):
            if len(group) > 1:
                self._shared[row] = tuple(group)
                self._row.update(dict.fromkeys(group[1:], row))

    def upsert(self, ids: Sequence[str], vectors: np.ndarray, capacity: int | None = None) -> None:
        """Write rows in place; ``capacity`` (from :meth:`growth_for`) sets the size of a growth."""
        if capacity is not None and capacity > self._codes.shape[0]:
            self._grow(capacity)
        if self._row.keys().isdisjoint(ids) and len(set(ids)) == len(ids):
            self._append(ids, vectors)  # all new (a sync's new entries): one write
            return
        self.remove([cid for cid in ids if self._row.get(cid, -1) in self._shared])  # written again: its own row
        codes, scales = compact.encode(vectors.reshape(len(ids), self.dim))
        for cid, code, scale in zip(ids, codes, scales, strict=True):
            row = self._row.get(cid)
            if row is None:
                row = len(self._ids)
                if row == self._codes.shape[0]:
                    self._grow()
                self._ids.append(cid)
                self._row[cid] = row
                self._live += 1
            self._codes[row], self._scales[row] = code, scale
            self._write_heads(slice(row, row + 1))
            self._alive[row] = True

    def _append(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """New rows of one entry each, after the filled ones, growing once if they need room."""
        first = len(self._ids)
        if first + len(ids) > self._codes.shape[0]:
            self._grow(max(first + len(ids), self._codes.shape[0] * 5 // 4))
        rows = slice(first, first + len(ids))
        self._codes[rows], self._scales[rows] = compact.encode(vectors.reshape(len(ids), self.dim))
        self._write_heads(rows)
        self._alive[rows] = True
        self._live += len(ids)
        self._ids.extend(ids)
        self._row.update(zip(ids, range(first, first + len(ids)), strict=True))

    def remove(self, ids: Sequence[str]) -> None:
        """Take entries out; a row goes (is masked) with the last of its entries."""
        for cid in ids:
            row = self._row.pop(cid, None)
            if row is None:
                continue
            owners = self._shared.get(row)
            if owners is None:
                self._alive[row] = False
                self._live -= 1
                continue
            rest = tuple(owner for owner in owners if owner != cid)
            self._ids[row] = rest[0]  # the row stays with its other entries
            if len(rest) > 1:
                self._shared[row] = rest
            else:
                del self._shared[row]
        if len(self._ids) > _MIN_CAPACITY and self._live < len(self._ids) // 2:
            self._compact()

    def rows(self, ids: Sequence[str]) -> tuple[list[str], np.ndarray]:
        """The ids of ``ids`` held here and their rows decoded to float32 (within half a code step
        of the originals), in one indexed read."""
        found = [(cid, row) for cid in ids if (row := self._row.get(cid)) is not None]
        rows = [row for _, row in found]
        return [cid for cid, _ in found], compact.decode(self._codes[rows], self._scales[rows])

    def snapshot(self) -> Snapshot:
        """Views of the filled rows; later in-place writes never move them (growth reallocates)."""
        used = len(self._ids)
        alive = None if self._live == used else self._alive[:used].copy()
        heads = None if self._axes is None else Heads(self._axes, self._head_codes[:used], self._head_scales[:used])
        return Snapshot(self._codes[:used], self._scales[:used], self._ids, alive, self._shared, heads)

    def _grow(self, rows: int | None = None) -> None:
        """``rows`` rows, by default a quarter more: a big scope's block must not double in memory
        for one new note."""
        capacity = self._codes.shape[0]
        rows = rows if rows is not None else max(capacity + _MIN_CAPACITY, capacity * 5 // 4)
        self._codes, self._scales = _enlarged(self._codes, rows, 0), _enlarged(self._scales, rows, 1)
        self._alive = _enlarged(self._alive, rows, False)
        if self._axes is not None:
            self._head_codes, self._head_scales = _enlarged(self._head_codes, rows, 0), _enlarged(self._head_scales, rows, 1)

    def _compact(self) -> None:
        keep = np.flatnonzero(self._alive[: len(self._ids)])
        shared = {new: self._shared[old] for new, old in enumerate(keep.tolist()) if old in self._shared}
        self._fill_codes([self._ids[row] for row in keep], self._codes[keep], self._scales[keep], shared=shared)


def _enlarged(array: np.ndarray, rows: int, fill: float) -> np.ndarray:
    """A copy of ``array`` with ``rows`` rows: its own first, ``fill`` after them."""
    bigger = np.full((rows, *array.shape[1:]), fill, dtype=array.dtype)
    bigger[: array.shape[0]] = array
    return bigger


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
        return rows * _row_bytes(dim) <= self.budget_bytes

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
            if (self.dim is not None and width != self.dim) or count * _row_bytes(width) > self.budget_bytes:
                self.refused = True
                return False
            self.make_room(max(count, _MIN_CAPACITY) * _row_bytes(width))
            self.block = ScopeBlock(generation, [], np.zeros((0, width), dtype=np.float32), width, capacity=count)
        self.block.extend(owners, vectors)
        return True
