"""Vectors held in RAM in a quarter of the bytes: one signed byte a dimension and one scale a row.

With a vector for every entry (:mod:`memory.index.entries`) a scope of 80k chunks holds ~800k
vectors: 1.6 GiB as float32, beyond the default 512 MiB of ``memory.vector_cache_mb``, so its
searches went to LanceDB's IVF_PQ index (recall@32 ≈ 0.8, 70 ms and more). Stored as int8 with a
float32 scale per row (``v ≈ scale · code``, the row's largest component mapped to ±127), the same
scope takes ~420 MiB and fits.

Why int8 and nothing coarser: the engine asks for the 64 nearest entries, and for real (USE)
vectors the 64th is a weak neighbour, a hair above thousands of others. Measured on 18,805 USE entry
vectors and 100 questions (bench/README.md "Entry vectors in a quarter of the bytes"), the rank in
a scan's order that holds all of the exact top 64 is, at the 99th percentile: 67 for these int8
codes, 106 for 4-bit, 1,407 for 64-byte product codes and 7,594 for sign bits; an IVF partition
probing 30% of its lists still misses 8% of them. So every row is scanned, and what makes the scan
fast is the kernel: numpy has no int8 product (it converts to float32 first: slower than a float32
scan), SimSIMD's int8 dot product (AVX-512 VNNI where the CPU has it) reads 4× fewer bytes.

The scores are approximations (at most 0.0019 from the truth on those vectors), and they are the
search's similarities (:class:`memory.vectors.vector_cache.VectorCache`): they swap only near-ties.
"""

from __future__ import annotations

import numpy as np
import simsimd

#: The largest code: a row's largest component (by magnitude) maps to ±127.
_LEVELS = 127.0
#: Rows whose peak one comparison stands for when the best rows of a scan are picked.
_GROUP = 64


def row_bytes(dim: int) -> int:
    """What one row costs in RAM: its codes and its scale (the live-row flag is the block's)."""
    return dim + 4


def encode(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, scales)`` of float rows: int8 codes and the float32 scale that turns them back."""
    vectors = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
    peak = np.abs(vectors).max(axis=1) if vectors.size else np.zeros(len(vectors), dtype=np.float32)
    scales = np.where(peak > 0, peak / _LEVELS, 1.0).astype(np.float32)
    codes = np.rint(vectors / scales[:, None]).astype(np.int8)
    return codes, scales


def decode(codes: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Float32 rows back from their codes (within half a step of the originals)."""
    rows: np.ndarray = codes.astype(np.float32) * scales[:, None]
    return rows


def encode_query(query: np.ndarray) -> tuple[np.ndarray, float]:
    """A query's codes (one row) and scale, encoded once for every stripe a scan reads."""
    codes, scales = encode(query.reshape(1, -1))
    return codes, float(scales[0])


def scores(codes: np.ndarray, scales: np.ndarray, query: np.ndarray) -> np.ndarray:
    """The dot product of every row with ``query``, approximately, as float64 (one pass over the codes)."""
    return _dots(codes, scales, *encode_query(query))


def best(codes: np.ndarray, scales: np.ndarray, alive: np.ndarray | None, query_codes: np.ndarray,
         query_scale: float, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, scores)``: the ``limit`` live rows with the highest approximate dot product with
    the encoded query (:func:`encode_query`), in no particular order. ``alive``: None when every
    row is live."""
    if not len(codes) or limit < 1:
        return np.zeros(0, dtype=np.intp), np.zeros(0)
    dots = _dots(codes, scales, query_codes, query_scale)
    if alive is not None:
        dots[~alive] = -np.inf
    rows = _best_rows(dots, min(limit, len(dots)))
    rows = rows[dots[rows] > -np.inf]
    return rows, dots[rows]


def _best_rows(dots: np.ndarray, take: int) -> np.ndarray:
    """The rows of the ``take`` largest ``dots``, in no particular order.

    Each group of :data:`_GROUP` rows' peak comes first: at least ``take`` rows reach the
    ``take``-th best peak, so only the few at or above it are partitioned (less than half the time
    of partitioning every row). Partitioned negated: introselect is ~20x slower near the top end on
    real (tied) scores."""
    groups = len(dots) // _GROUP
    if groups < 4 * take:
        return np.argpartition(-dots, take - 1)[:take]
    peaks = dots[: groups * _GROUP].reshape(groups, _GROUP).max(axis=1)
    near = np.flatnonzero(dots >= -np.partition(-peaks, take - 1)[take - 1])
    return near[np.argpartition(-dots[near], take - 1)[:take]]


def _dots(codes: np.ndarray, scales: np.ndarray, query_codes: np.ndarray, query_scale: float) -> np.ndarray:
    if not len(codes):
        return np.zeros(0)
    dots: np.ndarray = np.asarray(simsimd.cdist(query_codes, codes, metric="dot"))[0]  # float64: SimSIMD's fastest output
    dots *= scales
    dots *= query_scale
    return dots
