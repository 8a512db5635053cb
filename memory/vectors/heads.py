"""A big block's first pass: its rows on their leading principal axes, in a quarter of the bytes.

SimSIMD's int8 kernel takes ~40 ns a 512-d row on this project's 2-core machine, so a group scope
of 400k+ entry vectors costs ~13 ms a search on both cores, most of it. Sentence vectors hold most
of their energy on a few axes (the bundled USE model's: 87% on 128 of 512), and a row's
coordinates on those axes rank it nearly as the whole vector does. So a big block keeps, beside
its codes, each row's first :data:`HEAD_DIMS` principal coordinates as int8 (its "head"), on axes
fitted to the block's own rows when it loads. A scan reads the heads, then the full codes of the
:data:`PICK` best rows of each stripe, and returns those rows' full scores: the similarities of a
one-pass scan, so what it finds ranks exactly as before; what it could miss is a row whose head
ranks below :data:`PICK` others of its stripe. Measured on a 100k-chunk group scope of real
vectors (bench/README.md "Heads"): a stripe of 103k rows in 1.9 ms instead of 5.8, the same best
80 for 60 questions of 60.

Vectors whose leading axes hold less than :data:`MIN_ENERGY` of their energy (hashed or random
ones, whose energy is spread evenly) get no heads: their heads would not rank them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import compact

#: The fewest rows a block needs for heads (a stripe's worth, :mod:`.scan`): a smaller one takes ~2 ms in one pass.
HEAD_ROWS = 32_768
#: Principal coordinates a head holds.
HEAD_DIMS = 128
#: The share of the rows' energy (mean squared length) the head's axes must hold.
MIN_ENERGY = 0.8
#: Rows of a stripe read in full after the heads have ranked them.
PICK = 4096
#: Rows the axes are fitted on, spread over the block.
_SAMPLE = 16_384


def head_bytes() -> int:
    """What a head costs a row: its codes and its scale."""
    return HEAD_DIMS + 4


@dataclass(frozen=True)
class Axes:
    """The leading principal axes of a block's rows, as a ``(dim, HEAD_DIMS)`` projection."""

    matrix: np.ndarray
    energy: float  # the share of the sample's energy the axes hold

    @classmethod
    def fit(cls, codes: np.ndarray, scales: np.ndarray) -> Axes | None:
        """The axes of the rows (int8 codes and scales), from a sample spread over them; None when
        they hold less than :data:`MIN_ENERGY` of the energy (the rows are then scanned in one pass)."""
        step = max(1, len(codes) // _SAMPLE)
        sample = compact.decode(codes[::step], scales[::step])
        moments = sample.T @ sample  # uncentred: a dot product sees the mean too
        values, vectors = np.linalg.eigh(moments.astype(np.float64))
        order = np.argsort(values)[::-1][:HEAD_DIMS]
        energy = float(values[order].sum() / max(values.sum(), 1e-12))
        if energy < MIN_ENERGY:
            return None
        return cls(np.ascontiguousarray(vectors[:, order], dtype=np.float32), energy)

    def heads(self, codes: np.ndarray, scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The heads (int8 codes and scales) of rows given as codes and scales."""
        return compact.encode(compact.decode(codes, scales) @ self.matrix)

    def query(self, query: np.ndarray) -> tuple[np.ndarray, float]:
        """A query's head, encoded for the scan."""
        return compact.encode_query(np.asarray(query, dtype=np.float32) @ self.matrix)


@dataclass(frozen=True)
class Heads:
    """The heads of a block's filled rows (views), with the axes they were made on."""

    axes: Axes
    codes: np.ndarray
    scales: np.ndarray


def best(heads: Heads, first: int, last: int, codes: np.ndarray, scales: np.ndarray, alive: np.ndarray | None,
         query: tuple[np.ndarray, float], head_query: tuple[np.ndarray, float],
         limit: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`compact.best` of rows ``first:last`` (``codes``, ``scales``, ``alive``) in two passes:
    their heads pick the :data:`PICK` best, whose full codes give the ``limit`` best and their scores."""
    picked, _ = compact.best(heads.codes[first:last], heads.scales[first:last], alive, *head_query, max(PICK, limit))
    picked.sort()  # the full codes read in order
    rows, found = compact.best(codes[picked], scales[picked], None, *query, limit)
    return picked[rows], found
