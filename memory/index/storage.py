"""SQLite storage of the index: files, chunks and their writes into the two FTS5 indexes.

SQLite is the source of truth. ``chunks`` holds the text; as chunks are written, ``chunks_fts``
and ``chunks_tri`` are kept exact with FTS5's ``'delete'`` command, never a bare DELETE, and rows
keep their rowid because writes are UPSERTs. Searching those indexes and keeping them whole is
:mod:`memory.index.keyword_index`'s; the vectors of the chunks are :mod:`memory.vectors.embed_cache`'s.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from .chunker import Chunk
from .database import Database, rows_in
from .entries import ENTRY_RULE, Entry, EntryRow, EntryRowCache, delete_entries, entry_text, write_entries
from .entries import SCHEMA as ENTRIES_SCHEMA
from .keyword import segment

log = logging.getLogger(__name__)

#: The keyword indexes (FTS5 virtual tables), one statement each: ``KeywordIndex.rebuild``
#: (:mod:`memory.index.keyword_index`) may have to create them again inside a transaction, where a
#: script cannot run.
KEYWORD_INDEXES = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5 ("
    " scope_tag, seg, content='', tokenize='unicode61 remove_diacritics 2')",
    "CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts_vocab USING fts5vocab (chunks_fts, 'row')",
    "CREATE VIRTUAL TABLE IF NOT EXISTS chunks_tri USING fts5 ("
    " text, content='chunks', content_rowid='rowid', tokenize='trigram')",
)
#: ``chunks.vec_model`` is no longer written: entries carry the vectors (:mod:`memory.index.entries`); the
#: column stays so that an index made before them opens as it is.
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    scope TEXT NOT NULL, path TEXT NOT NULL, hash TEXT NOT NULL, mtime REAL NOT NULL,
    size INTEGER NOT NULL, indexed_at REAL NOT NULL, PRIMARY KEY (scope, path)
);
CREATE TABLE IF NOT EXISTS chunks (
    rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, scope TEXT NOT NULL, path TEXT NOT NULL,
    start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, part INTEGER NOT NULL DEFAULT 0,
    text TEXT NOT NULL, text_hash TEXT NOT NULL, vec_model TEXT, updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_scope_path ON chunks (scope, path);
CREATE TABLE IF NOT EXISTS tri_pending (rowid INTEGER PRIMARY KEY);
"""

SCOPE_COUNTS_TTL_S = 30.0
#: Chunks added to the trigram index per transaction by :meth:`IndexStorage.fill_trigram` (~0.1 s).
TRIGRAM_BATCH = 1000


def scope_tag(scope: str) -> str:
    """One opaque token per scope, so FTS5 can filter by scope without tokenizer surprises."""
    return "s" + hashlib.sha1(scope.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class StoredChunk:
    rowid: int
    id: str
    scope: str
    path: str
    start_line: int
    end_line: int
    text: str
    text_hash: str  # of ``text``, read with it: what its entries are kept in RAM by


@dataclass
class Removed:
    """What a write took out of the index: chunk ids, and the entry ids (whose vectors must go)."""

    chunks: list[str] = field(default_factory=list)
    entries: list[str] = field(default_factory=list)

    def add(self, other: Removed) -> None:
        self.chunks += other.chunks
        self.entries += other.entries


@dataclass(frozen=True)
class FileRecord:
    scope: str
    path: str
    hash: str
    mtime: float
    size: int
    indexed_at: float = 0.0


#: A chunk row's columns in :class:`StoredChunk`'s order (the chunks table aliased ``c``).
CHUNK_COLUMNS = "c.rowid, c.id, c.scope, c.path, c.start_line, c.end_line, c.text, c.text_hash"
#: How many columns :data:`CHUNK_COLUMNS` are: a query's own columns come after them.
CHUNK_WIDTH = 8


def stored_chunk(row: Sequence[object]) -> StoredChunk:
    """The chunk of a row that starts with :data:`CHUNK_COLUMNS`."""
    return StoredChunk(*row[:CHUNK_WIDTH])  # type: ignore[arg-type]


#: The meta key holding the :data:`~memory.index.entries.ENTRY_RULE` the entries were split under.
_ENTRIES_RULE_KEY = "entries_rule"


class IndexStorage:
    """Reads and writes of the chunk index, always for an explicit set of scopes.

    Its chunks' vectors are the :class:`~memory.vectors.embed_cache.EmbeddingCache` that
    :class:`~memory.manager.MemoryManager` holds beside it (``embed_cache``) on the same database.
    """

    def __init__(self, db: Database) -> None:
        self.db = db
        db.execute_script(SCHEMA + ENTRIES_SCHEMA + "".join(f"{statement};\n" for statement in KEYWORD_INDEXES))
        if self.get_meta(_ENTRIES_RULE_KEY) != str(ENTRY_RULE):
            self._make_entries()
        self._stats_lock = threading.Lock()
        self._scope_counts: dict[str, tuple[float, dict[str, int]]] = {}  # table -> (when, counts)
        self.entry_rows = EntryRowCache(db.query)  # see entries_of
        # FTS5 changes buffered during write(); None outside it
        self._fts_deletes: list[tuple[int, str, str]] | None = None
        self._fts_inserts: list[tuple[int, str, str]] | None = None

    def _make_entries(self) -> None:
        """Split the chunks into entries again, once, when the index was made under another rule
        (:data:`~memory.index.entries.ENTRY_RULE`). An entry the new rule leaves as it was (same
        chunk, lines and text: the same id) keeps its vector; the next sync embeds the new ones and
        drops the vectors of those that are gone."""
        with self.db.transaction() as conn:
            if self.get_meta(_ENTRIES_RULE_KEY) == str(ENTRY_RULE):
                return  # another process split it while this one waited for the lock
            embedded = conn.execute("SELECT id, vec_model FROM entries WHERE vec_model IS NOT NULL").fetchall()
            conn.execute("DELETE FROM entries")
            rows = conn.execute("SELECT id, scope, path, start_line, end_line, part, text FROM chunks").fetchall()
            if rows:  # an upgrade: ~0.4 ms a chunk (36 s for 97k), so say why this start waits
                log.warning("%s: splitting %d chunks into entries again under rule %d (once, after an upgrade);"
                            " the next sync embeds the entries that changed", self.db.path, len(rows), ENTRY_RULE)
            write_entries(conn, [Chunk(*row) for row in rows])
            conn.executemany("UPDATE entries SET vec_model = ? WHERE id = ?", ((model, eid) for eid, model in embedded))
            self.set_meta(conn, _ENTRIES_RULE_KEY, str(ENTRY_RULE))

    # ----------------------------------------------------------------- files
    def files(self, scope: str | None = None) -> dict[tuple[str, str], FileRecord]:
        sql = "SELECT scope, path, hash, mtime, size, indexed_at FROM files"
        rows = self.db.query(sql + " WHERE scope = ?", (scope,)) if scope else self.db.query(sql)
        return {(r[0], r[1]): FileRecord(*r) for r in rows}

    def count_chunks(self, scope: str | None = None) -> int:
        if scope is None:
            return int(self.db.query("SELECT count(*) FROM chunks")[0][0])
        return int(self.db.query("SELECT count(*) FROM chunks WHERE scope = ?", (scope,))[0][0])

    # ---------------------------------------------------------------- writes
    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction whose FTS5 changes are applied in bulk just before the commit.

        FTS5 flushes its pending terms at every statement savepoint, so interleaving each chunk's
        UPSERT with its FTS rows writes one tiny index segment per chunk; buffering them and
        writing all deletes, then all inserts, with ``executemany`` is several times faster.
        """
        with self.db.transaction() as conn:
            self._fts_deletes, self._fts_inserts = [], []
            try:
                yield conn
                self._flush_fts(conn)
            finally:
                self._fts_deletes, self._fts_inserts = None, None
                with self._stats_lock:
                    self._scope_counts = {}
                self.entry_rows.clear()  # a forget leaves nothing of its lines in RAM, not even hashes

    def replace_file(self, conn: sqlite3.Connection, record: FileRecord, chunks: Sequence[Chunk]) -> Removed:
        """Make the index hold exactly ``chunks`` for ``record``'s file. Returns what was removed.

        Must run inside :meth:`write`. Unchanged chunks keep their row and entries; changed ones
        are UPSERTed (same rowid) with their FTS rows deleted and re-added and their entries made
        anew.
        """
        old = {
            row[1]: (row[0], row[2])
            for row in conn.execute(
                "SELECT rowid, id, text FROM chunks WHERE scope = ? AND path = ?", (record.scope, record.path)
            )
        }
        now = time.time()
        tag = scope_tag(record.scope)
        new_ids = {chunk.id for chunk in chunks}
        changed = [c for c in chunks if c.id not in old or old[c.id][1] != c.text]
        for chunk in changed:
            if chunk.id in old:
                self._fts_delete(old[chunk.id][0], tag, old[chunk.id][1])
        conn.executemany(
            "INSERT INTO chunks (id, scope, path, start_line, end_line, part, text, text_hash, vec_model,"
            " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?)"
            " ON CONFLICT (id) DO UPDATE SET text = excluded.text, text_hash = excluded.text_hash,"
            " vec_model = NULL, updated_at = excluded.updated_at",
            [(c.id, c.scope, c.path, c.start_line, c.end_line, c.part, c.text, c.text_hash, now) for c in changed],
        )
        if changed:
            rowids = dict(conn.execute(
                "SELECT id, rowid FROM chunks WHERE scope = ? AND path = ?", (record.scope, record.path)))
            for chunk in changed:
                self._fts_insert(rowids[chunk.id], tag, chunk.text)
        removed = [cid for cid in old if cid not in new_ids]
        for cid in removed:
            rowid, text = old[cid]
            self._fts_delete(rowid, tag, text)
            conn.execute("DELETE FROM chunks WHERE rowid = ?", (rowid,))
        gone = Removed(removed, delete_entries(conn, removed + [c.id for c in changed if c.id in old]))
        write_entries(conn, changed)
        conn.execute(
            "INSERT INTO files (scope, path, hash, mtime, size, indexed_at) VALUES (?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (scope, path) DO UPDATE SET hash = excluded.hash, mtime = excluded.mtime,"
            " size = excluded.size, indexed_at = excluded.indexed_at",
            (record.scope, record.path, record.hash, record.mtime, record.size, now),
        )
        return gone

    def remove_file(self, conn: sqlite3.Connection, scope: str, path: str) -> Removed:
        """Drop a file, its chunks and their entries from the index (inside :meth:`write`)."""
        tag = scope_tag(scope)
        rows = conn.execute("SELECT rowid, id, text FROM chunks WHERE scope = ? AND path = ?", (scope, path)).fetchall()
        for rowid, _cid, text in rows:
            self._fts_delete(rowid, tag, text)
        conn.execute("DELETE FROM chunks WHERE scope = ? AND path = ?", (scope, path))
        conn.execute("DELETE FROM files WHERE scope = ? AND path = ?", (scope, path))
        ids = [row[1] for row in rows]
        return Removed(ids, delete_entries(conn, ids))

    def touch_file(self, conn: sqlite3.Connection, record: FileRecord) -> None:
        """Record a new mtime for a file whose content hash did not change."""
        conn.execute(
            "UPDATE files SET mtime = ?, size = ?, indexed_at = ? WHERE scope = ? AND path = ?",
            (record.mtime, record.size, time.time(), record.scope, record.path),
        )

    def mark_embedded(self, conn: sqlite3.Connection, entry_ids: Iterable[str], model: str) -> None:
        """Record that the backend holds these entries' vectors for ``model``."""
        conn.executemany("UPDATE entries SET vec_model = ? WHERE id = ?", ((model, eid) for eid in entry_ids))

    def _fts_insert(self, rowid: int, tag: str, text: str) -> None:
        if self._fts_inserts is None:
            raise RuntimeError("index writes must run inside IndexStorage.write()")
        self._fts_inserts.append((rowid, tag, text))

    def _fts_delete(self, rowid: int, tag: str, text: str) -> None:
        if self._fts_deletes is None:
            raise RuntimeError("index writes must run inside IndexStorage.write()")
        self._fts_deletes.append((rowid, tag, text))

    def _flush_fts(self, conn: sqlite3.Connection) -> None:
        """Deletes first (with the old text, as FTS5 requires), then inserts, each in bulk and in
        rowid order: FTS5 writes its pending terms out as a new segment whenever a rowid is not
        above the last one, so a forget's deletes in file order (rowids up and down) wrote one
        segment per step, and past 16 segments FTS5 merged the whole level, the bulk load's big
        segments included: seconds for a 20-chunk change in a 100k-chunk index.

        The word index is written here; trigram entries are only queued (``tri_pending``, in the
        same transaction) and added by :meth:`fill_trigram`, because filling the trigram index is
        more than half of a full sync. A queued chunk has no trigram entry yet, so deleting it
        only takes it off the queue.
        """
        deletes, inserts = sorted(self._fts_deletes or []), sorted(self._fts_inserts or [])
        conn.executemany(
            "INSERT INTO chunks_fts (chunks_fts, rowid, scope_tag, seg) VALUES ('delete', ?, ?, ?)",
            ((rowid, tag, segment(text)) for rowid, tag, text in deletes),
        )
        queued = self._queued_among(conn, [rowid for rowid, _tag, _text in deletes])
        conn.executemany("DELETE FROM tri_pending WHERE rowid = ?", ((rowid,) for rowid in queued))
        conn.executemany(
            "INSERT INTO chunks_tri (chunks_tri, rowid, text) VALUES ('delete', ?, ?)",
            ((rowid, text) for rowid, _tag, text in deletes if rowid not in queued),
        )
        conn.executemany(
            "INSERT INTO chunks_fts (rowid, scope_tag, seg) VALUES (?, ?, ?)",
            ((rowid, tag, segment(text)) for rowid, tag, text in inserts),
        )
        conn.executemany("INSERT OR IGNORE INTO tri_pending (rowid) VALUES (?)", ((r,) for r, _g, _t in inserts))

    @staticmethod
    def _queued_among(conn: sqlite3.Connection, rowids: Sequence[int]) -> set[int]:
        return {r[0] for r in rows_in(conn.execute, "SELECT rowid FROM tri_pending WHERE rowid IN ({marks})", rowids)}

    def fill_trigram(self, batch: int = TRIGRAM_BATCH) -> int:
        """Add up to ``batch`` queued chunks to the trigram index; returns how many were added.

        Each call is one short transaction, so searches and syncs of other threads and
        processes wait at most one batch. A crash loses nothing: the queue is in the database.
        """
        with self.db.transaction() as conn:
            rows = conn.execute(
                "SELECT p.rowid, c.text FROM tri_pending p JOIN chunks c ON c.rowid = p.rowid"
                " ORDER BY p.rowid LIMIT ?", (batch,)).fetchall()
            conn.executemany("INSERT INTO chunks_tri (rowid, text) VALUES (?, ?)", rows)
            conn.executemany("DELETE FROM tri_pending WHERE rowid = ?", ((r[0],) for r in rows))
            if not rows:  # only entries whose chunk is gone could be left: clear them
                conn.execute("DELETE FROM tri_pending WHERE rowid NOT IN (SELECT rowid FROM chunks)")
        return len(rows)

    def trigram_queue(self) -> int:
        """How many chunks wait for the trigram index."""
        return int(self.db.query("SELECT count(*) FROM tri_pending")[0][0])

    # ------------------------------------------------------------ chunk reads
    def entries_needing_vectors(self, model: str) -> list[tuple[str, str, Entry]]:
        """(scope, path, entry) of the entries with no vector for ``model`` (what a sync must embed
        besides the files it changes: a new model, or a sync that stopped half-way)."""
        sql = ("SELECT e.scope, e.path, e.start_line, e.end_line, c.text, c.start_line FROM entries e"
               " JOIN chunks c ON c.id = e.chunk_id"
               " WHERE (e.vec_model IS NULL OR e.vec_model < ? OR e.vec_model > ?)")  # "!=", but on the index
        return [(scope, path, Entry(start, end, entry_text(text, chunk_start, start, end)))
                for scope, path, start, end, text, chunk_start in self.db.query(sql, (model, model))]

    def scope_entries(self, scope: str) -> list[Entry]:
        """Every entry of ``scope``'s chunks, with its text (what a forget must find the vectors of)."""
        sql = ("SELECT e.start_line, e.end_line, c.text, c.start_line FROM entries e"
               " JOIN chunks c ON c.id = e.chunk_id WHERE e.scope = ?")
        return [Entry(start, end, entry_text(text, chunk_start, start, end))
                for start, end, text, chunk_start in self.db.query(sql, (scope,))]

    def vector_targets(self, model: str) -> list[tuple[str, str, str, str]]:
        """(entry id, scope, path, text_hash) of entries with no vector for ``model``: what a write needs."""
        sql = ("SELECT id, scope, path, text_hash FROM entries"
               " WHERE (vec_model IS NULL OR vec_model < ? OR vec_model > ?)")
        return [(r[0], r[1], r[2], r[3]) for r in self.db.query(sql, (model, model))]

    def entries_of(self, chunks: Sequence[StoredChunk]) -> list[EntryRow]:
        """The entries of ``chunks``, from RAM for a chunk read before with the same text
        (:class:`~memory.index.entries.EntryRowCache`; this process's writes empty it)."""
        return self.entry_rows.rows([(chunk.id, chunk.text_hash) for chunk in chunks])

    def chunks_of_entries(self, entry_ids: Sequence[str], scopes: Sequence[str]) -> dict[str, StoredChunk]:
        """Entry id -> the chunk that holds it, in one read; entries gone meanwhile, or whose chunk
        is outside ``scopes`` (a vector hit of another scope), are left out."""
        sql = (f"SELECT {CHUNK_COLUMNS}, e.id FROM entries e JOIN chunks c ON c.id = e.chunk_id"
               f" WHERE e.id IN ({{marks}}) AND +c.scope IN ({','.join('?' * len(scopes))})")
        held: dict[str, StoredChunk] = {}
        owners: dict[str, StoredChunk] = {}
        for row in rows_in(self.db.query, sql, entry_ids, after=scopes):
            chunk = held.setdefault(str(row[1]), stored_chunk(row))  # one object a chunk
            owners[str(row[CHUNK_WIDTH])] = chunk
        return owners

    def dated_chunks(self, scopes: Sequence[str], first_path: str, last_path: str, limit: int) -> list[StoredChunk]:
        """Chunks of files whose path sorts between ``first_path`` and ``last_path`` (daily files
        ``memory/YYYY-MM-DD.md`` of a date range sort by date), newest first, at most ``limit``."""
        sql = (f"SELECT {CHUNK_COLUMNS} FROM chunks c WHERE c.scope IN ({','.join('?' * len(scopes))})"
               " AND c.path BETWEEN ? AND ? ORDER BY c.path DESC, c.start_line LIMIT ?")
        return [stored_chunk(row) for row in self.db.query(sql, (*scopes, first_path, last_path, limit))]

    def scope_chunks(self, scope: str) -> list[tuple[str, int, int, str, str]]:
        """(path, start_line, end_line, text, text_hash) of every chunk of ``scope``."""
        rows = self.db.query("SELECT path, start_line, end_line, text, text_hash FROM chunks WHERE scope = ?"
                             " ORDER BY path, start_line", (scope,))
        return [(row[0], row[1], row[2], row[3], row[4]) for row in rows]

    def all_entry_ids(self) -> set[str]:
        return {r[0] for r in self.db.query("SELECT id FROM entries")}

    def scope_counts(self) -> dict[str, int]:
        """Chunks per scope, at most 30 s old (exact after this process's own writes).

        For planning only (which query form): never for an answer.
        """
        return self._counts("chunks")

    def entry_counts(self) -> dict[str, int]:
        """Entries (vectors) per scope, as :meth:`scope_counts`: which vector search to run."""
        return self._counts("entries")

    def _counts(self, table: str) -> dict[str, int]:
        with self._stats_lock:
            stamp, counts = self._scope_counts.get(table, (float("-inf"), {}))
        if time.monotonic() - stamp > SCOPE_COUNTS_TTL_S:
            rows = self.db.query(f"SELECT scope, count(*) FROM {table} GROUP BY scope")
            counts = {row[0]: int(row[1]) for row in rows}
            with self._stats_lock:
                self._scope_counts[table] = (time.monotonic(), counts)
        return counts

    # ------------------------------------------------------------------ meta
    def get_meta(self, key: str) -> str | None:
        rows = self.db.query("SELECT value FROM meta WHERE key = ?", (key,))
        return rows[0][0] if rows else None

    def set_meta(self, conn: sqlite3.Connection, key: str, value: str) -> None:
        conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )
