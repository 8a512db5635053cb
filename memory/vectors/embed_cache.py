"""The vectors SQLite keeps: the embedding cache, and each scope's vectors for the copies in RAM.

``embed_cache`` holds one vector per model and entry-text hash (:mod:`memory.index.entries`), so an unchanged text is never
embedded twice and a killed sync resumes from what it had already paid for. A scope's vectors are
read from it as one snapshot stamped with the scope's generation, a counter every change to the
scope's chunks or vectors bumps: a process that keeps vectors in RAM (:mod:`memory.vectors.vector_cache`)
compares generations to see another process's writes.

:class:`~memory.manager.MemoryManager` holds one (``embed_cache``) beside its
:class:`~memory.index.storage.IndexStorage` on the same database; the storage's entries table is read here
to tell which vectors are used and which belong to a scope.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from ..index.database import Database, rows_in

if TYPE_CHECKING:  # imported by the methods that read or write vectors: the rest of the index never needs it
    import numpy as np

SCHEMA = """
CREATE TABLE IF NOT EXISTS embed_cache (
    model TEXT NOT NULL, text_hash TEXT NOT NULL, dim INTEGER NOT NULL, vector BLOB NOT NULL,
    PRIMARY KEY (model, text_hash)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS vector_generations (
    scope TEXT PRIMARY KEY, generation INTEGER NOT NULL
) WITHOUT ROWID;
"""
_UNUSED_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS embed_cache_unused (model TEXT NOT NULL, text_hash TEXT NOT NULL,"
    " since REAL NOT NULL, PRIMARY KEY (model, text_hash)) WITHOUT ROWID"
)
_CACHED_VECTORS = "SELECT text_hash, vector FROM embed_cache WHERE model = ? AND text_hash IN ({marks})"

#: A scope with more vectors than this is loaded by scanning the embedding cache, not by lookups.
SCAN_VECTORS_OVER = 5000
#: Vectors handed to a :data:`RowSink` at once while a scope is loaded (32 MiB at 1,024 floats).
LOAD_BATCH = 8192

RowSink = Callable[[int, int, list[tuple[str, ...]], "np.ndarray"], bool]
"""``sink(generation, row count, owners, vectors)``, once a batch while a scope's vectors are read:
one vector a row, with the ids of the scope's entries that have it (entries of one text share its
vector: a line two overlapping chunks hold, a note written twice); False stops the read (they will
not fit)."""


class EmbeddingCache:
    """Cached vectors by model and text hash, and the generation-stamped vectors of each scope."""

    def __init__(self, db: Database) -> None:
        self.db = db
        db.execute_script(SCHEMA)

    # ------------------------------------------------------------ the cache
    def cached_vectors(self, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        import numpy as np

        return {h: np.frombuffer(blob, dtype=np.float32)
                for h, blob in rows_in(self.db.query, _CACHED_VECTORS, hashes, before=(model,))}

    def cached_hashes(self, model: str, hashes: Sequence[str]) -> set[str]:
        """Which of ``hashes`` have a cached vector for ``model`` (without reading the vectors)."""
        sql = "SELECT text_hash FROM embed_cache WHERE model = ? AND text_hash IN ({marks})"
        return {row[0] for row in rows_in(self.db.query, sql, hashes, before=(model,))}

    def vector_dim(self, model: str) -> int | None:
        """The width of ``model``'s cached vectors, None before any."""
        rows = self.db.query("SELECT dim FROM embed_cache WHERE model = ? LIMIT 1", (model,))
        return int(rows[0][0]) if rows else None

    def store_vectors(self, conn: sqlite3.Connection, model: str, vectors: dict[str, np.ndarray]) -> None:
        import numpy as np

        conn.executemany(
            "INSERT INTO embed_cache (model, text_hash, dim, vector) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (model, text_hash) DO NOTHING",
            ((model, h, int(v.shape[0]), np.asarray(v, dtype=np.float32).tobytes()) for h, v in vectors.items()),
        )

    def drop_cached_vectors(self, conn: sqlite3.Connection, hashes: Sequence[str]) -> int:
        """Delete the cached vectors of ``hashes`` that no entry uses any more (inside a write);
        returns rows deleted. A vector another scope's entry still uses stays: it is that entry's."""
        used = {row[0] for row in rows_in(conn.execute, "SELECT DISTINCT text_hash FROM entries WHERE text_hash IN ({marks})",
                                          hashes)}
        models = [row[0] for row in conn.execute("SELECT DISTINCT model FROM embed_cache")]
        doomed = [(model, h) for model in models for h in sorted(set(hashes) - used)]  # by primary key
        conn.execute(_UNUSED_SCHEMA)
        before = conn.total_changes
        conn.executemany("DELETE FROM embed_cache WHERE model = ? AND text_hash = ?", doomed)
        deleted = conn.total_changes - before
        conn.executemany("DELETE FROM embed_cache_unused WHERE model = ? AND text_hash = ?", doomed)
        return deleted

    def count_cached_vectors(self) -> int:
        """How many vectors the embedding cache holds, for every model."""
        return int(self.db.query("SELECT count(*) FROM embed_cache")[0][0])

    def collect_embed_cache(self, grace_days: float, now: float | None = None) -> tuple[int, int]:
        """Delete cached vectors that no entry uses and that have been unused for ``grace_days``;
        returns (rows deleted, rows left).

        A row is in use while an entry has its text and model, or has its text and no vector yet (a
        sync is on its way to it). A sync caches each batch before it writes the chunks, and a killed
        one resumes from the cache, so a row is not deleted when first seen unused: it is marked in
        ``embed_cache_unused`` with the time, unmarked when an entry uses it again, and deleted only on
        a later pass at least ``grace_days`` after the mark. Read and deleted in one transaction: what
        goes was unused when marked and is unused now.
        """
        now = time.time() if now is None else now
        cutoff = now - grace_days * 86400
        with self.db.transaction() as conn:
            conn.execute(_UNUSED_SCHEMA)
            used = set(conn.execute("SELECT DISTINCT text_hash, vec_model FROM entries"))
            cached = conn.execute("SELECT model, text_hash FROM embed_cache").fetchall()
            unused = {(m, h) for m, h in cached if (h, m) not in used and (h, None) not in used}
            marked = {(m, h): since for m, h, since in conn.execute("SELECT model, text_hash, since FROM embed_cache_unused")}
            conn.executemany(
                "DELETE FROM embed_cache_unused WHERE model = ? AND text_hash = ?", [key for key in marked if key not in unused]
            )
            conn.executemany(
                "INSERT INTO embed_cache_unused (model, text_hash, since) VALUES (?, ?, ?)",
                [(m, h, now) for m, h in sorted(unused - marked.keys())],
            )
            doomed = sorted(key for key in unused if key in marked and marked[key] <= cutoff)
            conn.executemany("DELETE FROM embed_cache WHERE model = ? AND text_hash = ?", doomed)
            conn.executemany("DELETE FROM embed_cache_unused WHERE model = ? AND text_hash = ?", doomed)
        return len(doomed), len(cached) - len(doomed)

    # ------------------------------------------------ a scope's vectors
    def bump_generations(self, conn: sqlite3.Connection, scopes: Iterable[str]) -> dict[str, int]:
        """Count a change to each scope's chunks or vectors (inside the writing transaction).

        Readers that keep vectors in memory compare generations to see another process's writes.
        """
        bumped: dict[str, int] = {}
        for scope in sorted(set(scopes)):
            row = conn.execute(
                "INSERT INTO vector_generations (scope, generation) VALUES (?, 1) ON CONFLICT (scope)"
                " DO UPDATE SET generation = generation + 1 RETURNING generation",
                (scope,),
            ).fetchone()
            bumped[scope] = int(row[0])
        return bumped

    def generations(self, scopes: Sequence[str]) -> dict[str, int]:
        rows = rows_in(self.db.query, "SELECT scope, generation FROM vector_generations WHERE scope IN ({marks})", scopes)
        return {scope: 0 for scope in scopes} | {row[0]: int(row[1]) for row in rows}

    def forget_generation(self, conn: sqlite3.Connection, scope: str) -> None:
        """Drop an erased scope's generation row (readers then see 0 and reload an empty scope)."""
        conn.execute("DELETE FROM vector_generations WHERE scope = ?", (scope,))

    def scope_vectors(self, scope: str, model: str, sink: RowSink) -> None:
        """Hand ``sink`` the vectors of a scope's entries embedded with ``model``, in batches of one
        snapshot, until it returns False; a scope with no vectors calls it never.

        Each vector once, with every entry that has it: a quarter of a scope's entries are lines
        two overlapping chunks share, so a block in RAM holds and scans a quarter fewer rows. In
        batches, so that loading a scope holds at most one batch of float32 vectors besides what
        ``sink`` keeps (the compact block): at 600k entries the whole float32 matrix is 1.2 GB.
        Each cached vector is a ~2 KiB blob on overflow pages: looking 70k of them up one by one
        takes ~1.5 s, reading all of the model's cache in order ~0.45 s. So a scope holding a good
        part of the cache is read with one scan, a small one by lookups.
        """
        with self.db.read() as conn:
            row = conn.execute("SELECT generation FROM vector_generations WHERE scope = ?", (scope,)).fetchone()
            generation = int(row[0]) if row else 0
            grouped: dict[str, list[str]] = {}  # text hash -> the scope's entries with that text
            for entry_id, hash_ in conn.execute(
                    "SELECT id, text_hash FROM entries WHERE scope = ? AND vec_model = ?", (scope, model)):
                grouped.setdefault(hash_, []).append(entry_id)
            owners: list[tuple[str, ...]] = []
            blobs: list[bytes] = []
            width = None
            for hash_, blob in self._vector_blobs(conn, model, grouped):
                width = width or len(blob)
                if len(blob) != width:
                    continue  # another width: not this model's space
                owners.append(tuple(grouped[hash_]))
                blobs.append(blob)
                if len(owners) >= LOAD_BATCH:
                    if not sink(generation, len(grouped), owners, _matrix(blobs)):
                        return
                    owners, blobs = [], []
            if owners:
                sink(generation, len(grouped), owners, _matrix(blobs))

    @staticmethod
    def _vector_blobs(conn: sqlite3.Connection, model: str, hashes: Mapping[str, object]) -> Iterator[tuple[str, bytes]]:
        """(text hash, vector blob) of ``hashes`` cached for ``model``, one at a time."""
        if len(hashes) > SCAN_VECTORS_OVER:
            rows = conn.execute("SELECT text_hash, vector FROM embed_cache WHERE model = ?", (model,))
            return ((h, blob) for h, blob in rows if h in hashes)
        return (tuple(row) for row in rows_in(conn.execute, _CACHED_VECTORS, sorted(hashes), before=(model,)))


def _matrix(blobs: Sequence[bytes]) -> np.ndarray:
    """Float32 rows from vector blobs of one width."""
    import numpy as np

    return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), -1)
