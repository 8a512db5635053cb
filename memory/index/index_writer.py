"""Writing a change to the index: SQLite first (the truth), then the vector backend and RAM cache.

One change of the index touches three stores that must agree: the chunks, their keyword rows and
their entries (:mod:`.entries`, one vector each) in SQLite, the vectors in the backend (LanceDB or an object store), and the vectors held in RAM for
exact search (:mod:`.vector_cache`, kept at each scope's generation). The order makes every crash
recoverable: SQLite is written first, a vector is marked embedded only after the backend holds it
(so a crash in between re-writes it: an upsert by id, no duplicates), and vectors whose entry is
gone are dropped as orphans. :class:`IndexWriter` knows how to write; the
:class:`~.indexer.Indexer` decides when, and holds the workspace lock around every call.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .scan import ProgressCallback, SyncPlan
from .storage import Removed

if TYPE_CHECKING:
    import numpy as np

    from ..vectors.backend import VectorRow
    from .parts import IndexParts
    from .report import SyncReport

log = logging.getLogger(__name__)

#: Vectors written to the backend (and marked embedded) per transaction during a sync.
VECTOR_WRITE_BATCH = 10_000


class IndexWriter:
    """Writes for one workspace's index; the caller holds the workspace lock."""

    def __init__(self, parts: IndexParts) -> None:
        self._parts = parts

    def write(
        self,
        plan: SyncPlan,
        vectors: dict[str, np.ndarray],
        report: SyncReport,
        progress: ProgressCallback | None,
    ) -> None:
        """Pass 3 of a sync: the plan's files and the ``vectors`` of their texts (by hash), into
        SQLite first, then the vector backend, then the entries marked embedded."""
        storage = self._parts.storage
        removed: dict[str, Removed] = {}
        with storage.write() as conn:
            for scope, path in plan.removed:
                removed.setdefault(scope, Removed()).add(storage.remove_file(conn, scope, path))
            for done, (record, chunks) in enumerate(plan.changed, start=1):
                removed.setdefault(record.scope, Removed()).add(storage.replace_file(conn, record, chunks))
                report.chunks_written += len(chunks)
                if progress and done % 50 == 0:
                    progress("write", done, len(plan.changed))
            for record in plan.touched:
                storage.touch_file(conn, record)
            generations = self._parts.embed_cache.bump_generations(conn, removed)
        removed_ids = [eid for gone in removed.values() for eid in gone.entries]
        report.files_changed = len(plan.changed)
        report.files_removed = len(plan.removed)
        report.chunks_removed = sum(len(gone.chunks) for gone in removed.values())
        if progress:
            progress("write", len(plan.changed), len(plan.changed))
        backend, embedder = self._parts.vectors, self._parts.embedder
        if backend is None or embedder is None:
            return
        for scope, generation in generations.items():
            self._cache_apply(scope, generation, removed=removed[scope].entries)
        backend.delete_ids(removed_ids)
        # nothing embedded or taken from the cache: no entry can be waiting (skips a table scan)
        pending = storage.vector_targets(embedder.model_id) if vectors else []
        from ..vectors.backend import VectorRow

        ready = [VectorRow(cid, scope, path, vectors[h]) for cid, scope, path, h in pending if h in vectors]
        for start in range(0, len(ready), VECTOR_WRITE_BATCH):
            self._write_vectors(ready[start : start + VECTOR_WRITE_BATCH])
        report.vectors_written = len(ready)
        if ready or removed_ids:
            self._drop_orphans()
            backend.maintain()

    def _write_vectors(self, rows: list[VectorRow]) -> None:
        """One batch: the vector backend first, then the entries marked embedded (in SQLite, the truth).

        A crash between the two leaves the entries unmarked, so the next sync writes them again
        (an upsert by id: no duplicates). Batches bound the memory a 100k-chunk sync needs.
        """
        parts = self._parts
        assert parts.vectors is not None and parts.embedder is not None
        parts.vectors.upsert(rows)
        by_scope: dict[str, list[VectorRow]] = {}
        for row in rows:
            by_scope.setdefault(row.scope, []).append(row)
        with parts.db.transaction() as conn:
            parts.storage.mark_embedded(conn, [row.id for row in rows], parts.embedder.model_id)
            generations = parts.embed_cache.bump_generations(conn, by_scope)
        import numpy as np

        for scope, generation in generations.items():
            mine = by_scope[scope]
            self._cache_apply(scope, generation, ids=[row.id for row in mine],
                              vectors=np.vstack([row.vector for row in mine]))

    def _cache_apply(self, scope: str, generation: int, **change: object) -> None:
        """Keep the RAM vector cache (when there is one) at the index's new generation of ``scope``."""
        cache = self._parts.vector_cache
        if cache is not None:
            cache.apply(scope, generation, **change)  # type: ignore[arg-type]

    def _drop_orphans(self) -> None:
        """Vectors whose entry is gone from SQLite (a crash between the two writes) are removed."""
        parts = self._parts
        assert parts.vectors is not None and parts.embedder is not None
        embedded = int(
            parts.db.query("SELECT count(*) FROM entries WHERE vec_model = ?", (parts.embedder.model_id,))[0][0]
        )
        if parts.vectors.count() == embedded:
            return
        orphans = parts.vectors.ids() - parts.storage.all_entry_ids()
        if orphans:
            log.info("removing %d orphaned vectors", len(orphans))
            parts.vectors.delete_ids(sorted(orphans))

    def remove(self, scope: str, paths: Iterable[str], *, erase: bool = False) -> list[str]:
        """Take ``paths`` of ``scope`` out of every store: chunks, keyword rows, entries, vectors (in
        the backend and in RAM); returns the text hashes of the chunks and entries removed (what the
        embedding cache may hold of them). ``erase`` also drops the scope's own vectors that SQLite
        does not know of and its generation row."""
        parts, storage, embed_cache = self._parts, self._parts.storage, self._parts.embed_cache
        hashes: list[str] = []
        with storage.write() as conn:
            removed = Removed()
            for path in sorted(set(paths)):
                for table in ("chunks", "entries"):
                    hashes += [r[0] for r in conn.execute(
                        f"SELECT text_hash FROM {table} WHERE scope = ? AND path = ?", (scope, path))]
                removed.add(storage.remove_file(conn, scope, path))
            generation = embed_cache.bump_generations(conn, [scope])[scope]
            if erase:
                embed_cache.forget_generation(conn, scope)
        self._cache_apply(scope, generation, removed=removed.entries)
        if parts.vectors is not None:
            parts.vectors.delete_ids(removed.entries)
            if erase:
                parts.vectors.delete_scope(scope)
        return hashes
