"""The keyword side of the index: search through its two FTS5 indexes, and their upkeep.

``chunks_fts`` (unicode61 over the segmented text of :func:`memory.index.keyword.segment`, with a hashed
scope column so that the scope filter is an index lookup) and ``chunks_tri`` (trigram, external
content over ``chunks.text``) are written by :class:`memory.index.storage.IndexStorage` together with the
chunks. This module reads them, as one chain: the word index, then trigram for substrings of 3+
characters, then a bounded LIKE scan for 1-2 character pieces of words. It also keeps them whole:
an integrity check, a merge after a forget, a rebuild from ``chunks`` (the truth) when a search
meets a corrupt one, and at open, an index that would not open at all is made anew.
"""

from __future__ import annotations

import logging
import math
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from .database import rows_in
from .keyword import KeywordQuery, bm25_to_score, build_query, common_tokens, has_cjk, segment
from .storage import CHUNK_COLUMNS, CHUNK_WIDTH, KEYWORD_INDEXES, IndexStorage, StoredChunk, scope_tag, stored_chunk

log = logging.getLogger(__name__)

#: A query whose every term is in more chunks than this is ranked among its newest matches.
BROAD_MATCHES = 5000
#: Scopes holding at least this share of the chunks are searched without the scope clause.
UNSCOPED_SHARE = 0.5

#: FTS5's in-memory term buffer before it writes a segment (default 1 MiB): bulk writes of 10k
#: chunks are ~20% faster with 32 MiB (fewer, larger segments to merge); small writes never fill it.
FTS_HASHSIZE = 32 * 2**20

#: The two FTS5 indexes (the word index and the trigram index).
_FTS_TABLES = ("chunks_fts", "chunks_tri")
#: Every virtual table of the keyword side (the word index's vocabulary view included).
_KEYWORD_TABLES = ("chunks_fts", "chunks_fts_vocab", "chunks_tri")
#: The plain tables FTS5 keeps each index in (fts5vocab keeps none).
_FTS_SHADOW_TABLES = tuple(f"{table}_{part}" for table in _FTS_TABLES
                           for part in ("data", "idx", "content", "docsize", "config"))


@dataclass(frozen=True)
class KeywordHit:
    """A chunk the keyword chain found, with its keyword score in (0, 1]."""

    chunk: StoredChunk
    score: float


def _ranked(rows: Sequence[Sequence[object]]) -> list[KeywordHit]:
    """Hits from rows whose last column is a bm25() rank, ordered best first."""
    if not rows:
        return []
    best = min(float(row[CHUNK_WIDTH]) for row in rows)  # type: ignore[arg-type]
    return [KeywordHit(stored_chunk(row), bm25_to_score(float(row[CHUNK_WIDTH]), best)) for row in rows]  # type: ignore[arg-type]


class KeywordIndex:
    """Keyword search over an index's chunks, and the upkeep of its FTS5 indexes. Thread-safe."""

    def __init__(self, storage: IndexStorage) -> None:
        self.storage = storage
        self.db = storage.db
        self._df_cache: dict[str, int] = {}
        self._df_total = 0
        self._stats_lock = threading.Lock()
        #: Whether opening found an index that would not open, and rebuilt it (doctor says so).
        self.rebuilt_on_open = False
        self._open()
        self._configure()

    def _open(self) -> None:
        """Make sure both keyword indexes open. One whose structure record or config row is lost
        opens for nothing (every sync, search and write fails on it), so it is made anew from the
        chunks here, where every process starts; the probe costs microseconds."""
        try:
            with self.db.read() as conn:
                for table in _FTS_TABLES:
                    conn.execute(f"SELECT rowid FROM {table} WHERE rowid = 0").fetchall()
        except sqlite3.DatabaseError as exc:
            log.warning("keyword index cannot be opened (%s); rebuilding it from the chunks", exc)
            self.rebuild()
            self.rebuilt_on_open = True

    def _configure(self) -> None:
        """Give both indexes :data:`FTS_HASHSIZE` (kept in the index's own config, so once is enough)."""
        for table in _FTS_TABLES:
            try:
                with self.db.lock:
                    row = self.db.conn.execute(f"SELECT v FROM {table}_config WHERE k = 'hashsize'").fetchone()
                    if row is None or int(row[0]) != FTS_HASHSIZE:
                        self.db.conn.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('hashsize', ?)", (FTS_HASHSIZE,))
            except sqlite3.DatabaseError as exc:  # an SQLite without the option: only slower
                log.debug("FTS5 hashsize not set on %s: %s", table, exc)

    # ---------------------------------------------------------------- search
    def search(self, query: str, scopes: Sequence[str], limit: int, *, widen: bool = False) -> list[KeywordHit]:
        """The keyword chain: word index, then trigram, then a bounded LIKE scan.

        ASCII and CJK queries alike go to the segmented word index first (bigrams make 1-2
        character CJK queries an index lookup). When that finds nothing, trigram catches
        substrings of 3+ characters; LIKE catches 1-2 character pieces of words. With ``widen``
        the word index is asked for each English word's regular forms too (:mod:`.word_forms`).
        """
        built = build_query(query, widen=widen)
        try:
            hits = self._search_chain(built, scopes, limit)
        except sqlite3.DatabaseError as exc:
            code = getattr(exc, "sqlite_errorcode", None)
            primary = code & 0xFF if isinstance(code, int) else None
            if primary in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                # Another writer held the file for all of busy_timeout: nothing is damaged, so
                # nothing is rebuilt (that would want the same lock); this search goes without keywords.
                log.warning("keyword search skipped, the index is busy (%s); the next search retries", exc)
                return []
            if primary != sqlite3.SQLITE_CORRUPT:
                raise
            log.warning("keyword index failed (%s); rebuilding it from the chunks table", exc)
            self.rebuild()
            hits = self._search_chain(built, scopes, limit)
        return hits

    def _search_chain(self, built: KeywordQuery, scopes: Sequence[str], limit: int) -> list[KeywordHit]:
        drop, broad = self._term_statistics(built)
        words = built.words(drop)
        if words:
            hits = self._search_words(words, scopes, limit, newest_first=broad)
            if hits:
                return hits
        if built.trigram:
            hits = self._search_trigram(built, scopes, limit)
            if hits:
                return hits
        # Every CJK character and bigram is in the word index, and trigram takes 3+ characters:
        # what is left for a LIKE scan is a 1-2 character piece of an ASCII word.
        short = [term for term in built.like_terms if len(term) < 3 and not has_cjk(term)]
        return self._search_like(short, scopes, limit)

    def _term_statistics(self, built: KeywordQuery) -> tuple[frozenset[str], bool]:
        """(tokens to leave out of the expression, whether what is left is still broad), from fts5vocab.

        Left out are the tokens too common to rank (:func:`common_tokens`) and those no chunk
        holds: a typo, or one of the word forms a keyword-only search asks for that no note uses.
        A term that matches nothing adds nothing to any chunk's BM25, but FTS5 still looks it up
        in every index segment, and a widened query has several such terms per word. Such tokens
        neither save a common word nor keep a query narrow. "Broad" means every remaining token is
        in more than ``BROAD_MATCHES`` chunks: ranking all of them by BM25 costs ~50-100 ms at 100k
        chunks.
        """
        tokens = [t.token for t in built.word_terms if t.token is not None]
        if not tokens:
            return frozenset(), False
        total = self._chunk_total()
        frequencies = self._document_frequencies(tokens, total)
        held = {token: docs for token, docs in frequencies.items() if docs > 0}
        phrases = any(t.token is None for t in built.word_terms)
        common = common_tokens(held, total, other_terms=phrases) if len(built.word_terms) > 1 else frozenset()
        kept = [docs for token, docs in held.items() if token not in common]
        broad = not phrases and bool(kept) and min(kept) > BROAD_MATCHES
        return common | (frequencies.keys() - held.keys()), broad

    def term_weights(self, tokens: Sequence[str]) -> dict[str, float]:
        """BM25's inverse document frequency of each word-index token, over the whole index: how
        much finding that token in a chunk says (a speaker's name in every line says little)."""
        total = self._chunk_total()
        frequencies = self._document_frequencies(tokens, total)
        return {token: math.log(1.0 + (total - docs + 0.5) / (docs + 0.5)) for token, docs in frequencies.items()}

    def _chunk_total(self) -> int:
        """How many chunks the index holds (at least 1), for planning and IDF: the cached per-scope
        counts, since ``count(*)`` walks every chunk (~1.4 ms a search at 100k chunks)."""
        return max(1, sum(self.storage.scope_counts().values()))

    def _document_frequencies(self, tokens: Sequence[str], total: int) -> dict[str, int]:
        """How many chunks hold each token, cached while the index size stays within 10%.

        fts5vocab counts a term by walking its whole document list (~6 ms for a term in every one
        of 100k chunks), so the same common words must not be counted on every search. A
        frequency a little stale is fine for deciding what is common. A zero is not cached: it
        leaves the token out of the search (:meth:`_term_statistics`), so a word must be found as
        soon as a note holds it, and looking up a word no chunk has is cheap.
        """
        with self._stats_lock:
            if abs(total - self._df_total) > 0.1 * max(self._df_total, 1):
                self._df_cache.clear()
                self._df_total = total
            known = {token: self._df_cache[token] for token in tokens if token in self._df_cache}
        missing = [token for token in dict.fromkeys(tokens) if token not in known]
        if missing:  # one lookup for all: a widened query has several forms per word
            rows = rows_in(self.db.query, "SELECT term, doc FROM chunks_fts_vocab WHERE term IN ({marks})", missing)
            counted = {str(term): int(docs) for term, docs in rows}
            with self._stats_lock:
                if len(self._df_cache) > 50_000:
                    self._df_cache.clear()
                self._df_cache.update(counted)
            known.update({token: counted.get(token, 0) for token in missing})
        return known

    def _search_words(self, expr: str, scopes: Sequence[str], limit: int, *, newest_first: bool = False) -> list[KeywordHit]:
        """BM25-ranked hits; for a broad query, the newest ``limit × 4`` matches ranked by BM25.

        FTS5 walks matches in rowid order and computes bm25() only for the rows it returns, so the
        newest-first form costs a few milliseconds however many chunks match. Newer chunks are
        the likelier memory anyway (and dated daily files decay with age).

        When the scopes hold most of the index, the scope clause costs more than it saves (it
        walks a posting list as long as the table): the query runs unscoped for a few more rows
        than needed and keeps the in-scope ones. That is exact whenever enough of them remain
        (the scope column has BM25 weight 0, so ranks are the same); otherwise the scoped form runs.
        """
        wanted = limit * 4 if newest_first else limit
        share = self.scope_share(scopes)
        if share >= UNSCOPED_SHARE:
            rows = self._word_rows(f"seg : ({expr})", scopes, int(wanted / share * 1.5) + 8, newest_first)
            if len(rows) >= wanted:
                if newest_first:  # the same newest ``wanted`` in-scope rows the scoped form ranks
                    newest = sorted(rows, key=lambda row: -row[0])[:wanted]
                    rows = sorted(newest, key=lambda row: row[CHUNK_WIDTH])
                return _ranked(rows[:limit])
        tags = " OR ".join(f'"{scope_tag(s)}"' for s in scopes)
        rows = self._word_rows(f"scope_tag : ({tags}) AND seg : ({expr})", scopes, wanted, newest_first)
        return _ranked(rows[:limit])

    def _word_rows(self, match: str, scopes: Sequence[str], fetch: int, newest_first: bool) -> list[sqlite3.Row]:
        """The first ``fetch`` FTS matches (best or newest), joined to their in-scope chunks, by rank."""
        inner = (
            "SELECT rowid, bm25(chunks_fts, 0.0, 1.0) AS rank FROM chunks_fts WHERE chunks_fts MATCH ?"
            + (" ORDER BY rowid DESC LIMIT ?" if newest_first else " ORDER BY rank LIMIT ?")
        )
        return self.db.query(
            f"SELECT {CHUNK_COLUMNS}, f.rank FROM ({inner}) f JOIN chunks c ON c.rowid = f.rowid"
            f" WHERE +c.scope IN ({','.join('?' * len(scopes))}) ORDER BY f.rank",
            (match, fetch, *scopes),
        )

    def scope_share(self, scopes: Sequence[str]) -> float:
        """The share of all chunks that ``scopes`` hold (see :meth:`_search_words`)."""
        counts = self.storage.scope_counts()
        total = sum(counts.values())
        return sum(counts.get(scope, 0) for scope in set(scopes)) / total if total else 0.0

    def _search_trigram(self, built: KeywordQuery, scopes: Sequence[str], limit: int) -> list[KeywordHit]:
        """BM25 over the trigram index, plus a scan of the chunks still queued for it (if any).

        The scan gives the same matches the index will (trigram is case-insensitive, so is
        ``instr(lower())``), scored like the LIKE fallback, below BM25 hits.

        The index and the queue are read in one snapshot: a filler commit between two separate
        reads would move a chunk from the queue into the index unseen by either.
        """
        scope_marks = ",".join("?" * len(scopes))
        with self.db.read():
            rows = self.db.query(
                f"SELECT {CHUNK_COLUMNS}, bm25(chunks_tri) AS rank FROM chunks_tri JOIN chunks c"
                f" ON c.rowid = chunks_tri.rowid WHERE chunks_tri MATCH ? AND c.scope IN ({scope_marks})"
                " ORDER BY rank LIMIT ?",
                (built.trigram, *scopes, limit),
            )
            hits = _ranked(rows)
            if self.db.query("SELECT EXISTS (SELECT 1 FROM tri_pending)")[0][0]:
                terms = [term for term in built.like_terms if len(term) >= 3]
                seen = {hit.chunk.id for hit in hits}
                queued = self._search_like(terms, scopes, limit, queued_only=True)
                hits = sorted(hits + [hit for hit in queued if hit.chunk.id not in seen], key=lambda h: -h.score)[:limit]
        return hits

    def _search_like(
        self, terms: Sequence[str], scopes: Sequence[str], limit: int, *, queued_only: bool = False
    ) -> list[KeywordHit]:
        """Ranked by the share of terms found; scores stay in (0, 0.5], below a full BM25 match."""
        if not terms:
            return []
        scope_marks = ",".join("?" * len(scopes))
        hit_sum = " + ".join("(instr(lower(c.text), lower(?)) > 0)" for _ in terms)
        any_hit = " OR ".join("instr(lower(c.text), lower(?)) > 0" for _ in terms)
        queued = " AND c.rowid IN (SELECT rowid FROM tri_pending)" if queued_only else ""
        rows = self.db.query(
            f"SELECT {CHUNK_COLUMNS}, ({hit_sum}) AS matched FROM chunks c"
            f" WHERE c.scope IN ({scope_marks}) AND ({any_hit}){queued} ORDER BY matched DESC, c.rowid LIMIT ?",
            (*terms, *scopes, *terms, limit),
        )
        return [KeywordHit(stored_chunk(row), 0.5 * row[CHUNK_WIDTH] / len(terms)) for row in rows]

    # ---------------------------------------------------------------- upkeep
    def check(self) -> bool:
        """True when both FTS indexes agree with themselves and the chunks table.

        The trigram queue is emptied first: the check compares the index with every chunk.
        """
        try:
            while self.storage.fill_trigram():
                pass
            with self.db.lock:
                self.db.conn.execute("INSERT INTO chunks_tri (chunks_tri, rank) VALUES ('integrity-check', 1)")
                self.db.conn.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('integrity-check')")
                fts_rows = self.db.conn.execute("SELECT count(*) FROM chunks_fts_docsize").fetchone()[0]
                chunk_rows = self.db.conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
            return bool(fts_rows == chunk_rows)
        except sqlite3.DatabaseError as exc:
            log.warning("FTS integrity check failed: %s", exc)
            return False

    def merge(self) -> None:
        """Merge each FTS5 index into one segment: a deleted chunk's terms stay in the old segments
        (under a delete marker) until a merge drops them, so forgetting is not done before this."""
        with self.db.transaction() as conn:
            for table in _FTS_TABLES:
                conn.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")

    def rebuild(self) -> None:
        """Rebuild both keyword indexes from ``chunks`` (the truth), keeping the database.

        An index that cannot even be opened (its structure record or config row lost: "vtable
        constructor failed", "invalid fts5 file format") can be neither rebuilt nor dropped
        through FTS5, so its tables are made anew (:meth:`_recreate_keyword_indexes`).
        """
        try:
            with self.db.transaction() as conn:
                self._refill_keyword_indexes(conn)
        except sqlite3.DatabaseError as exc:
            log.warning("keyword index cannot be opened (%s); making its tables anew from the chunks", exc)
            with self.db.transaction() as conn:
                self._recreate_keyword_indexes(conn)
                self._refill_keyword_indexes(conn)
            self._configure()

    @staticmethod
    def _recreate_keyword_indexes(conn: sqlite3.Connection) -> None:
        """Drop the keyword indexes without opening them, and create them empty, in the caller's
        transaction (a crash leaves the damaged index, which the next rebuild repairs).

        DROP TABLE on a virtual table runs its constructor, which is what fails. So the shadow
        tables are dropped as the plain tables they are, the virtual tables' rows leave the schema
        through ``writable_schema``, and the schema is reloaded. The DROPs change the schema
        cookie: every reader connection reloads the schema before its next statement.
        """
        conn.execute("PRAGMA writable_schema = ON")
        try:
            for name in _FTS_SHADOW_TABLES:
                conn.execute(f"DROP TABLE IF EXISTS {name}")
            conn.execute(f"DELETE FROM sqlite_master WHERE type = 'table' AND name IN ({', '.join('?' * len(_KEYWORD_TABLES))})",
                         _KEYWORD_TABLES)
        finally:
            conn.execute("PRAGMA writable_schema = RESET")
        for statement in KEYWORD_INDEXES:
            conn.execute(statement)

    def _refill_keyword_indexes(self, conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO chunks_tri (chunks_tri) VALUES ('rebuild')")
        conn.execute("DELETE FROM tri_pending")
        conn.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('delete-all')")
        rows = conn.execute("SELECT rowid, scope, text FROM chunks").fetchall()
        conn.executemany(
            "INSERT INTO chunks_fts (rowid, scope_tag, seg) VALUES (?, ?, ?)",
            ((rowid, scope_tag(scope), segment(text)) for rowid, scope, text in rows),
        )
