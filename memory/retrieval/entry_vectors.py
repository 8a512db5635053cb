"""The vectors of a search's candidate entries, wherever the current model's are held.

The vector side returns only the entries nearest the question; scoring a candidate chunk needs
the similarity of its other entries too, and the update rule (:mod:`.updates`) compares entries of
two chunks. Both read vectors by entry: from the scopes' blocks in RAM where loaded, else from the
embedding cache by text hash.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..index.entries import EntryRow
from ..vectors.embed_cache import EmbeddingCache
from ..vectors.embedding import EmbeddingProvider
from ..vectors.vector_cache import VectorCache


class EntryVectors:
    """Reads entries' vectors; needs an embedder (a keyword-only search has no vectors to read)."""

    def __init__(self, embed_cache: EmbeddingCache, vector_cache: VectorCache | None,
                 embedder: EmbeddingProvider | None) -> None:
        self.embed_cache = embed_cache
        self.vector_cache = vector_cache
        self.embedder = embedder

    def by_id(self, rows: Sequence[EntryRow], scopes: dict[str, str]) -> dict[str, np.ndarray]:
        """The current model's vectors of entries by id (see :meth:`matrix`)."""
        ids, matrix = self.matrix(rows, scopes)
        return dict(zip(ids, matrix, strict=True))

    def matrix(self, rows: Sequence[EntryRow], scopes: dict[str, str], *,
               from_ram: bool = True) -> tuple[list[str], np.ndarray]:
        """The current model's vectors of entries, one row each, and their ids: from RAM where
        loaded (unless ``from_ram`` is False: the search did not validate the blocks), else from the
        embedding cache (by text hash); an entry with neither is left out. ``scopes``: entry id ->
        its scope."""
        assert self.embedder is not None
        parts: list[tuple[list[str], np.ndarray]] = []  # (ids, their rows)
        if from_ram and self.vector_cache is not None:
            by_scope: dict[str, list[str]] = {}
            for row in rows:
                by_scope.setdefault(scopes[row.id], []).append(row.id)
            parts += [self.vector_cache.vectors(scope, wanted) for scope, wanted in by_scope.items()]
        held = {eid for ids, _ in parts for eid in ids}
        by_hash: dict[str, list[str]] = {}
        for row in rows:
            if row.id not in held:
                by_hash.setdefault(row.text_hash, []).append(row.id)
        if by_hash:
            cached = self.embed_cache.cached_vectors(self.embedder.model_id, list(by_hash))
            parts += [(by_hash[hash_], np.tile(vector, (len(by_hash[hash_]), 1))) for hash_, vector in cached.items()]
        parts = [(ids, matrix) for ids, matrix in parts if ids]
        if not parts:
            return [], np.zeros((0, 0), dtype=np.float32)
        width = parts[0][1].shape[1]  # rows of another width (another model's) are left out
        kept = [(ids, matrix) for ids, matrix in parts if matrix.shape[1] == width]
        return [eid for ids, _ in kept for eid in ids], np.vstack([matrix for _, matrix in kept])
