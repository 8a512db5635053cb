"""One scope's vectors in RAM: compact rows appended in place, removals marked, heads on a big block.

A :class:`ScopeBlock` is what :class:`memory.vectors.vector_cache.VectorCache` holds per scope
under its budget: the rows as int8 codes and a scale each (:mod:`.compact`), a live-row mask, and
on a big block each row's head (:mod:`.heads`). A search reads a :meth:`ScopeBlock.snapshot` (views
that later in-place writes never move) and scans it without the cache's lock (:mod:`.scan`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from . import compact
from .heads import HEAD_ROWS, Axes, Heads, head_bytes
from .scan import Snapshot

#: The fewest rows a block allocates.
MIN_CAPACITY = 64
#: Rows turned into heads at once when a block gets them (32 MiB of float32 at 512 wide).
_HEAD_BATCH = 16_384


def bytes_per_row(dim: int) -> int:
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
                    shared: Mapping[int, tuple[str, ...]] | None = None,
                    heads: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        count = len(ids)
        self._codes = np.zeros((max(MIN_CAPACITY, count, capacity), self.dim), dtype=np.int8)
        self._scales = np.ones(self._codes.shape[0], dtype=np.float32)
        self._codes[:count], self._scales[:count] = codes, scales
        self._alive = np.zeros(self._codes.shape[0], dtype=bool)
        self._alive[:count] = True
        self._live = count
        self._ids: list[str] = list(ids)  # row -> its (first) entry; a removed row keeps it as a tombstone
        self._shared: dict[int, tuple[str, ...]] = dict(shared or {})  # row -> its entries, when more than one
        self._row: dict[str, int] = {cid: i for i, cid in enumerate(self._ids)}
        self._row.update((cid, row) for row, owners in self._shared.items() for cid in owners)
        self._fill_heads(heads)

    def _fill_heads(self, kept: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """Every filled row's head, in arrays of the block's capacity: ``kept`` (the filled rows'
        heads, codes and scales, which a compaction keeps), else made from the codes, in batches (a
        float32 copy of 400k rows would be 800 MB); none (empty arrays) without axes."""
        if self._axes is None:
            self._head_codes, self._head_scales = np.zeros((0, 0), dtype=np.int8), np.zeros(0, dtype=np.float32)
            return
        capacity, used = self._codes.shape[0], len(self._ids)
        self._head_codes = np.zeros((capacity, self._axes.matrix.shape[1]), dtype=np.int8)
        self._head_scales = np.ones(capacity, dtype=np.float32)
        if kept is not None:
            self._head_codes[:used], self._head_scales[:used] = kept
            return
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
        return bytes_per_row(self.dim) + (head_bytes() if self._axes is not None else 0)

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
        return max(rows, min(max_rows, max(capacity + MIN_CAPACITY, capacity * 5 // 4)))

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
        if len(self._ids) > MIN_CAPACITY and self._live < len(self._ids) // 2:
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
        rows = rows if rows is not None else max(capacity + MIN_CAPACITY, capacity * 5 // 4)
        self._codes, self._scales = _enlarged(self._codes, rows, 0), _enlarged(self._scales, rows, 1)
        self._alive = _enlarged(self._alive, rows, False)
        if self._axes is not None:
            self._head_codes, self._head_scales = _enlarged(self._head_codes, rows, 0), _enlarged(self._head_scales, rows, 1)

    def _compact(self) -> None:
        keep = np.flatnonzero(self._alive[: len(self._ids)])
        shared = {new: self._shared[old] for new, old in enumerate(keep.tolist()) if old in self._shared}
        heads = None if self._axes is None else (self._head_codes[keep], self._head_scales[keep])
        self._fill_codes([self._ids[row] for row in keep], self._codes[keep], self._scales[keep], shared=shared,
                         heads=heads)


def _enlarged(array: np.ndarray, rows: int, fill: float) -> np.ndarray:
    """A copy of ``array`` with ``rows`` rows: its own first, ``fill`` after them."""
    bigger = np.full((rows, *array.shape[1:]), fill, dtype=array.dtype)
    bigger[: array.shape[0]] = array
    return bigger
