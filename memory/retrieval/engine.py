"""Hybrid search: gather candidates from every side, score them (:mod:`.scoring`), keep the best.

Candidates are chunks, from three places, each at most ``memory.candidates`` (or ``limit × 4``)
deep: the chunks holding the nearest entries (:mod:`memory.index.entries`: one vector per note, searched
exactly from RAM when the scopes fit the vector cache, else in LanceDB), the keyword index (BM25
over the question's content words, :mod:`.querytext`), and, when the question names a time window,
the chunks of the daily files dated inside it. Every candidate is then scored on both sides: its
vector score is its best entry's cosine, which a keyword-only hit gets from the blocks in RAM or
the embedding cache. An embedding failure never fails a search: it degrades to keywords.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date

import numpy as np

from ..config import MemorySettings
from ..files.scopes import DAILY_DIR, KNOWLEDGE_SCOPE
from ..index.chunker import embedding_text
from ..index.entries import EntryRow
from ..index.keyword_index import KeywordHit, KeywordIndex
from ..index.storage import IndexStorage, StoredChunk
from ..vectors.backend import VectorBackend
from ..vectors.embed_cache import EmbeddingCache
from ..vectors.embedding import EmbeddingError, EmbeddingProvider, QueryVectorCache
from ..vectors.scan import Beside, threads_for
from ..vectors.vector_cache import VectorCache
from . import scoring
from .entry_vectors import EntryVectors
from .matches import EntryScore, add_matches
from .passages import assemble
from .querytext import coverage, keyword_text, query_terms, share_of, terms_held
from .rerank import Reranker, reranked_order
from .result import SearchResult
from .timewindow import TimeWindow, asks_about_now, find_window
from .updates import DEPTH, promote_updates

log = logging.getLogger(__name__)

#: The most chunks of a question's time window that are considered (newest days first).
WINDOW_CANDIDATES = 200
#: Nearest entries fetched per candidate chunk wanted: a chunk's best entries often lie close
#: together, so more entries than chunks are needed to reach ``candidates`` chunks.
ENTRIES_PER_CANDIDATE = 2
#: Chunks whose entries are read at once while scoring, in the order of their bounds.
READ_AHEAD = 16
#: How many of a chunk's best entries the update rule compares with another chunk's.
UPDATE_ENTRIES = 3


@dataclass(frozen=True)
class _KeywordSide:
    weights: dict[str, float]  # the question's keyword terms → IDF (see querytext.coverage)
    hits: list[KeywordHit]


@dataclass(frozen=True)
class _Standing:
    """What of a candidate's score does not depend on which of its entries is best: its date's
    recency and time-window factors, and the share of the question's words the whole chunk holds."""

    share: float
    dated: date | None
    recency: float
    time: float

    @classmethod
    def of(cls, settings: MemorySettings, chunk: StoredChunk, share: float, window: TimeWindow | None, today: date,
           about_now: bool) -> _Standing:
        dated = scoring.file_date(chunk.scope, chunk.path)
        return cls(share, dated, scoring.recency(settings, dated, today, about_now=about_now),
                   1.0 + settings.time_weight if scoring.in_window(window, dated, chunk.text) else 1.0)


@dataclass
class _Candidates:
    chunks: dict[str, StoredChunk]
    bm25: dict[str, float]  # the keyword side's score in (0, 1], before the share of the question
    hybrid: bool
    weights: dict[str, float]  # the question's keyword terms → IDF (see querytext.coverage)
    query_vector: np.ndarray | None = None
    cosines: dict[str, float] = field(default_factory=dict)  # entry id -> raw cosine with the question
    entries: dict[str, list[EntryRow]] = field(default_factory=dict)  # chunk id -> its entries, read when needed
    scored: dict[str, list[EntryScore]] = field(default_factory=dict)  # chunk id -> its entries, best first
    nearest: dict[str, float] = field(default_factory=dict)  # chunk id -> its nearest entry's cosine (vector hits)
    held: dict[str, list[str]] = field(default_factory=dict)  # chunk id -> the question's terms its text holds
    from_ram: bool = False  # whether this search validated the RAM blocks (see Retriever._fill_cosines)


class Retriever:
    """Search over an index; thread-safe (it only reads, apart from its caches)."""

    def __init__(
        self,
        storage: IndexStorage,
        embed_cache: EmbeddingCache,
        keywords: KeywordIndex,
        settings: MemorySettings,
        *,
        embedder: EmbeddingProvider | None,
        vectors: VectorBackend | None,
        vector_cache: VectorCache | None,
        today: Callable[[], date],
        reranker: Reranker | None = None,
    ) -> None:
        self.storage = storage
        self.embed_cache = embed_cache
        self.keywords = keywords
        self.settings = settings
        self.embedder = embedder
        self.vectors = vectors
        self.vector_cache = vector_cache
        self._today = today
        self.reranker = reranker
        self._query_cache = QueryVectorCache()
        self.entry_vectors = EntryVectors(embed_cache, vector_cache, embedder)

    def search(self, query: str, scopes: Sequence[str], *, limit: int, min_score: float) -> list[SearchResult]:
        """The ``limit`` best results for ``query`` in ``scopes``, best first (see :mod:`.scoring`),
        each with the entries that matched (:mod:`.matches`). When nothing reaches ``min_score``
        the best candidate is still returned, labelled weak: a loose match is shown, not hidden."""
        today = self._today()
        window = find_window(query, today)
        about_now = asks_about_now(query)
        found = self._gather(query, scopes, window, max(self.settings.candidates, limit * 4))
        results = self._results(found, window, today, about_now, keep=max(limit * 4, DEPTH))
        scored = [(cid, r) for cid, r in results if r.score > 0]
        kept = [(cid, r) for cid, r in scored if _wanted(r, min_score)]
        if not kept and scored:
            kept = [min(scored, key=_best_first)]
        self._order(kept, found, promote=about_now and found.hybrid)
        if self.reranker is not None:
            kept = self._rerank(query, kept)
        passages = assemble([r for _, r in kept], limit, limit * self.settings.chunk_max_chars)
        for passage in passages:
            passage.weak = passage.relevance < max(min_score, self.settings.weak_below)
        add_matches(passages, [(found.chunks[cid], scored) for cid, scored in found.scored.items()],
                    lambda text: coverage(found.weights, text))
        return passages

    def _rerank(self, query: str, ranked: list[tuple[str, SearchResult]]) -> list[tuple[str, SearchResult]]:
        """The best ``memory.rerank.top_n`` re-ordered by the remote reranker (``rerank_score``); on
        its failure (logged once by :mod:`memory.retrieval.rerank`) the order stays as it was."""
        assert self.reranker is not None
        head, tail = ranked[: self.settings.rerank.top_n], ranked[self.settings.rerank.top_n :]
        scores = self.reranker.rerank(query, [embedding_text(r.text) for _, r in head]) if head else None
        if scores is None:
            return ranked
        for (_, result), score in zip(head, scores, strict=True):
            result.rerank_score = None if score is None else round(score, 6)
        return [head[i] for i in reranked_order(scores)] + tail

    def _order(self, ranked: list[tuple[str, SearchResult]], found: _Candidates, *, promote: bool) -> None:
        """Sort ``ranked`` best first (ties by path and line, so the order is stable); with
        ``promote`` (a question about the present), newer notes on the same thing move up first."""
        ranked.sort(key=_best_first)
        if promote:
            self._promote_updates(ranked, found)
            ranked.sort(key=_best_first)

    def _promote_updates(self, ranked: list[tuple[str, SearchResult]], found: _Candidates) -> None:
        """See :mod:`.updates`: the newer note about the same thing takes the older one's place;
        two chunks are compared by the entries that matched the question best (their closest pair
        among each one's :data:`UPDATE_ENTRIES` best: the update may not be a chunk's very best)."""
        best = {cid: [entry.row for entry in found.scored[cid][:UPDATE_ENTRIES]]
                for cid, _ in ranked[:DEPTH] if found.scored.get(cid)}
        rows = [row for mine in best.values() for row in mine]
        by_entry = self.entry_vectors.by_id(rows, {row.id: found.chunks[row.chunk_id].scope for row in rows})
        top = [(cid, r) for cid, r in ranked[:DEPTH] if cid in best]
        vectors = {cid: np.vstack(held) for cid, _ in top
                   if (held := [by_entry[row.id] for row in best[cid] if row.id in by_entry])}
        floor = self.embedder.similarity_floor if self.embedder is not None else 0.0
        dated = [(cid, scoring.file_date(found.chunks[cid].scope, found.chunks[cid].path), r) for cid, r in top]
        promote_updates(dated, vectors, floor)

    # ------------------------------------------------------------ candidates
    def _gather(self, query: str, scopes: Sequence[str], window: TimeWindow | None, depth: int) -> _Candidates:
        rows = self.vector_rows(scopes) if self.vectors is not None else 0  # the vector scan's size, read once
        scan_threads = threads_for(rows)
        words = keyword_text(query, window.phrases if window else ())
        pending: Beside[_KeywordSide] | None = None
        if scan_threads > 1 and self._must_embed(query):  # the question on one thread: the keyword side on another
            pending = Beside(lambda: self._keyword_side(words, scopes, depth, widen=False))
        query_vector = self._query_vector(query, scan_threads)
        found = _Candidates({}, {}, hybrid=query_vector is not None, weights={}, query_vector=query_vector)
        from_ram = False
        if query_vector is not None:
            try:
                hits, from_ram = self._vector_hits(query_vector, scopes, depth * ENTRIES_PER_CANDIDATE, rows)
            except Exception as exc:
                log.warning("vector search failed, using keywords only: %s", exc)
                hits, query_vector, found.hybrid, found.query_vector = [], None, False, None
            owners = self.storage.chunks_of_entries([eid for eid, _ in hits], scopes)
            found.chunks.update((chunk.id, chunk) for chunk in owners.values())
            found.cosines = {eid: sim for eid, sim in hits if eid in owners}
            for eid, sim in found.cosines.items():  # the nearest entries: a chunk's others are farther
                owner = owners[eid].id
                found.nearest[owner] = max(sim, found.nearest.get(owner, sim))
            found.from_ram = from_ram
        keyword = pending.result() if pending is not None else None  # read beside the question and the scan
        if keyword is None or not found.hybrid:  # keywords alone: "hike" must find "hiking" (see memory.word_forms)
            keyword = self._keyword_side(words, scopes, depth, widen=not found.hybrid)
        found.weights = keyword.weights
        for hit in keyword.hits:
            found.bm25[hit.chunk.id] = hit.score
            found.chunks.setdefault(hit.chunk.id, hit.chunk)
        if window is not None:
            for chunk in self._window_chunks(window, scopes):
                found.chunks.setdefault(chunk.id, chunk)
        if found.hybrid:  # the others' nearest entry, for their bound (see _results)
            self._read_entries(found, [cid for cid in found.chunks if cid not in found.nearest])
        return found

    def _keyword_side(self, words: str, scopes: Sequence[str], depth: int, *, widen: bool) -> _KeywordSide:
        """The question's keyword terms with their weights, and the keyword index's best ``depth``."""
        weights = self.keywords.term_weights(query_terms(words))
        return _KeywordSide(weights, self.keywords.search(words, scopes, depth, widen=widen))

    def _read_entries(self, found: _Candidates, chunk_ids: Sequence[str]) -> None:
        """Read the entries of ``chunk_ids`` not read yet, with their similarity to the question."""
        new = [cid for cid in chunk_ids if cid not in found.entries]
        if not new:
            return
        for cid in new:
            found.entries[cid] = []
        for row in self.storage.entries_of([found.chunks[cid] for cid in new]):
            found.entries[row.chunk_id].append(row)
        if found.query_vector is not None:
            self._fill_cosines(found.query_vector, found, [row for cid in new for row in found.entries[cid]])

    def _window_chunks(self, window: TimeWindow, scopes: Sequence[str]) -> list[StoredChunk]:
        """The chunks of the daily files dated inside ``window`` (knowledge has no dates)."""
        own = [scope for scope in scopes if scope != KNOWLEDGE_SCOPE]
        if not own:
            return []
        first = f"{DAILY_DIR}/{window.start.isoformat()}.md"
        last = f"{DAILY_DIR}/{window.end.isoformat()}.md"
        return self.storage.dated_chunks(own, first, last, WINDOW_CANDIDATES)

    def vector_rows(self, scopes: Sequence[str]) -> int:
        """How many entry vectors the scopes hold (``IndexStorage.entry_counts``): few means an exact scan."""
        counts = self.storage.entry_counts()
        return sum(counts.get(scope, 0) for scope in set(scopes))

    def _vector_hits(
        self, query_vector: np.ndarray, scopes: Sequence[str], limit: int, rows: int
    ) -> tuple[list[tuple[str, float]], bool]:
        """(hits, whether from RAM): exact from RAM when the scopes (``rows`` vectors) fit the
        vector cache; else LanceDB (an exact scan when they are few, else its ANN index)."""
        assert self.vectors is not None
        cache = self.vector_cache
        if cache is not None and cache.fits(rows, int(query_vector.shape[0])):
            hits = cache.search(query_vector, scopes, limit, self.embed_cache.generations(scopes))
            if hits is not None:
                return hits, True
        return self.vectors.search(query_vector, scopes, limit, exact=rows <= self.settings.ann_threshold), False

    def _must_embed(self, query: str) -> bool:
        """Whether :meth:`_query_vector` would call the model (not when it has none, or the question is cached)."""
        return (self.embedder is not None and self.vectors is not None
                and self._query_cache.get(self.embedder.model_id, query) is None)

    def _query_vector(self, query: str, scan_threads: int = 1) -> np.ndarray | None:
        """The question's vector (None without one). ``scan_threads``: the threads the vector scan
        that follows will run on. Past one, the question is embedded on one thread: a model's BLAS
        threads spin for a while after a call and would hold the cores that scan needs (a 100k-chunk
        group scope: 32 instead of 40 ms, bench/README.md "A question on one thread"); a one-thread
        scan leaves the second core to the embedding (~2 ms faster in a turn)."""
        if self.embedder is None or self.vectors is None:
            return None
        cached = self._query_cache.get(self.embedder.model_id, query)
        if cached is not None:
            return cached
        try:
            vector = self.embedder.embed_query(query, threads=1 if scan_threads > 1 else None)
        except EmbeddingError as exc:
            log.warning("query embedding failed, using keywords only: %s", exc)
            return None
        self._query_cache.put(self.embedder.model_id, query, vector)
        return vector

    def _fill_cosines(self, query_vector: np.ndarray, found: _Candidates, rows: Sequence[EntryRow]) -> None:
        """Entries of ``rows`` get their true similarity (the vector side returned only the
        nearest), from the blocks in RAM (when this search just validated them: ``found.from_ram``)
        or the embedding cache."""
        missing = [row for row in rows if row.id not in found.cosines]
        if not missing:
            return
        scopes = {row.id: found.chunks[row.chunk_id].scope for row in missing}
        ids, matrix = self.entry_vectors.matrix(missing, scopes, from_ram=found.from_ram)
        if ids and matrix.shape[1] == query_vector.shape[0]:
            found.cosines.update(zip(ids, (matrix @ query_vector).tolist(), strict=True))

    # --------------------------------------------------------------- scoring
    def _results(self, found: _Candidates, window: TimeWindow | None, today: date, about_now: bool,
                 keep: int) -> list[tuple[str, SearchResult]]:
        """The candidates that can reach the best ``keep``, scored exactly, best bound first.

        A chunk's score is at most its bound: its best entry's similarity with the whole chunk's
        BM25 and share of the question's words (no entry of it holds more). So once ``keep`` exact
        scores beat the next bound, no chunk left can enter them, and they are not scored entry by
        entry (half of a search's time when every candidate was)."""
        floor = self.embedder.similarity_floor if self.embedder is not None else 0.0
        bounds, standing = [], {}
        for cid, chunk in found.chunks.items():
            found.held[cid] = held = terms_held(found.weights, chunk.text)
            share = share_of(found.weights, held)
            bm25 = found.bm25.get(cid)
            cosines = [found.cosines[row.id] for row in found.entries.get(cid, ()) if row.id in found.cosines]
            if cid in found.nearest:
                cosines.append(found.nearest[cid])
            vector = scoring.rescale_similarity(max(cosines), floor) if cosines else None
            relevance = scoring.relevance(self.settings, vector, None if bm25 is None else bm25 * share, share,
                                          found.hybrid)
            standing[cid] = own = _Standing.of(self.settings, chunk, share, window, today, about_now)
            bounds.append((relevance * own.time * own.recency, cid))
        bounds.sort(key=lambda bound: (-bound[0], bound[1]))
        best: list[float] = []  # the ``keep`` best exact scores so far, a min-heap
        results = []
        for index, (bound, cid) in enumerate(bounds):
            if len(best) >= keep and bound < best[0]:
                break
            if cid not in found.entries:  # read the next few chunks' entries in one go
                self._read_entries(found, [later for _bound, later in bounds[index : index + READ_AHEAD]])
            result = self._result(found.chunks[cid], standing[cid], found)
            results.append((cid, result))
            heapq.heappush(best, result.score)
            if len(best) > keep:
                heapq.heappop(best)
        return results

    def _result(self, chunk: StoredChunk, standing: _Standing, found: _Candidates) -> SearchResult:
        """A candidate chunk scored as its best entry (with vectors), or as a whole (keywords alone,
        or a chunk of headings only); its entries' scores are kept for the result's matches."""
        bm25 = found.bm25.get(chunk.id)
        scored = self._entry_scores(chunk, found, bm25)
        found.scored[chunk.id] = scored
        if found.hybrid and scored:
            best = scored[0]
            vector, keyword, share, relevance = best.vector, best.keyword, best.share, best.relevance
        else:
            share = standing.share
            vector, keyword = None, None if bm25 is None else bm25 * share
            relevance = scoring.relevance(self.settings, vector, keyword, share, found.hybrid)
        parts = scoring.ScoreParts(vector=vector, keyword=keyword, coverage=share, relevance=relevance,
                                   recency=standing.recency, time=standing.time)
        dated = standing.dated
        return SearchResult(
            path=chunk.path,
            start_line=chunk.start_line,
            end_line=chunk.end_line,
            score=round(parts.final, 6),
            text=chunk.text,
            source="knowledge" if chunk.scope == KNOWLEDGE_SCOPE else "memory",
            scope=chunk.scope,
            vector_score=None if vector is None else round(vector, 6),
            keyword_score=None if keyword is None else round(keyword, 6),
            coverage=round(share, 6),
            relevance=round(parts.relevance, 6),
            recency=round(parts.recency, 6),
            time_boost=round(parts.time, 6),
            date=None if dated is None else dated.isoformat(),
        )

    def _entry_scores(self, chunk: StoredChunk, found: _Candidates, bm25: float | None) -> list[EntryScore]:
        """Each entry of ``chunk`` scored on its own, best first: its similarity, the chunk's BM25
        times the share of the question's words the entry holds, and that share."""
        floor = self.embedder.similarity_floor if self.embedder is not None else 0.0
        lines = chunk.text.split("\n")
        held = found.held[chunk.id]  # an entry holds no term its chunk lacks
        scored = []
        for row in found.entries.get(chunk.id, []):
            text = "\n".join(lines[row.start_line - chunk.start_line : row.end_line - chunk.start_line + 1])
            share = coverage(found.weights, text, held)
            cosine = found.cosines.get(row.id)
            vector = None if cosine is None else scoring.rescale_similarity(cosine, floor)
            keyword = None if bm25 is None else bm25 * share
            relevance = scoring.relevance(self.settings, vector, keyword, share, found.hybrid)
            scored.append(EntryScore(row, text, vector, keyword, share, relevance))
        scored.sort(key=lambda entry: (-entry.relevance, entry.row.start_line))
        return scored


def _best_first(pair: tuple[str, SearchResult]) -> tuple[float, str, int]:
    return -pair[1].score, pair[1].path, pair[1].start_line


def _wanted(result: SearchResult, min_score: float) -> bool:
    """``min_score`` weeds out weak vector neighbours; a keyword match, or a chunk dated in the
    question's window, is always a candidate (it holds the words, or the time, asked for)."""
    if result.keyword_score is not None or result.time_boost > 1.0:
        return True
    return result.relevance >= min_score
