"""Hybrid search: gather candidates from every side, score them (:mod:`.scoring`), keep the best.

Candidates come from three places, each at most ``memory.candidates`` (or ``limit × 4``) deep:
the nearest vectors (exact, from RAM when the scopes fit the vector cache; else LanceDB), the
keyword index (BM25 over the question's content words, :mod:`.querytext`), and, when the
question names a time window, the chunks of the daily files dated inside it. Every candidate is
then scored on both sides: a keyword-only hit gets its true cosine from the blocks in RAM or from
the embedding cache. An embedding failure never fails a search: it degrades to keywords.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date

import numpy as np

from ..chunker import text_hash
from ..config import MemorySettings
from ..embed_cache import EmbeddingCache
from ..embedding import EmbeddingError, EmbeddingProvider, QueryVectorCache
from ..keyword_index import KeywordIndex
from ..scopes import DAILY_DIR, KNOWLEDGE_SCOPE
from ..storage import IndexStorage, StoredChunk
from ..vector_cache import VectorCache
from ..vectors import VectorBackend
from . import scoring
from .passages import assemble
from .querytext import coverage, keyword_text, query_terms
from .result import SearchResult
from .timewindow import TimeWindow, asks_about_now, find_window
from .updates import DEPTH, promote_updates

log = logging.getLogger(__name__)

#: The most chunks of a question's time window that are considered (newest days first).
WINDOW_CANDIDATES = 200


@dataclass
class _Candidates:
    chunks: dict[str, StoredChunk]
    vector: dict[str, float]  # raw cosine
    bm25: dict[str, float]  # the keyword side's score in (0, 1], before the share of the question
    hybrid: bool
    weights: dict[str, float]  # the question's keyword terms → IDF (see querytext.coverage)


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
    ) -> None:
        self.storage = storage
        self.embed_cache = embed_cache
        self.keywords = keywords
        self.settings = settings
        self.embedder = embedder
        self.vectors = vectors
        self.vector_cache = vector_cache
        self._today = today
        self._query_cache = QueryVectorCache()

    def search(self, query: str, scopes: Sequence[str], *, limit: int, min_score: float) -> list[SearchResult]:
        """The ``limit`` best results for ``query`` in ``scopes``, best first (see :mod:`.scoring`)."""
        today = self._today()
        window = find_window(query, today)
        about_now = asks_about_now(query)
        found = self._gather(query, scopes, window, max(self.settings.candidates, limit * 4))
        results = [(cid, self._result(chunk, found, window, today, about_now)) for cid, chunk in found.chunks.items()]
        kept = [(cid, r) for cid, r in results if r.score > 0 and _wanted(r, min_score)]
        self._order(kept, found.chunks, promote=about_now and found.hybrid)
        return assemble([r for _, r in kept], limit, limit * self.settings.chunk_max_chars)

    def _order(self, ranked: list[tuple[str, SearchResult]], chunks: dict[str, StoredChunk], *, promote: bool) -> None:
        """Sort ``ranked`` best first (ties by path and line, so the order is stable); with
        ``promote`` (a question about the present), newer notes on the same thing move up first."""
        ranked.sort(key=_best_first)
        if promote:
            self._promote_updates(ranked, chunks)
            ranked.sort(key=_best_first)

    def _promote_updates(self, ranked: list[tuple[str, SearchResult]], chunks: dict[str, StoredChunk]) -> None:
        """See :mod:`.updates`: the newer note about the same thing takes the older one's place."""
        top = ranked[:DEPTH]
        vectors = self._vectors_of({cid: chunks[cid] for cid, _ in top})
        floor = self.embedder.similarity_floor if self.embedder is not None else 0.0
        dated = [(cid, scoring.file_date(chunks[cid].scope, chunks[cid].path), r) for cid, r in top]
        promote_updates(dated, vectors, floor)

    # ------------------------------------------------------------ candidates
    def _gather(self, query: str, scopes: Sequence[str], window: TimeWindow | None, depth: int) -> _Candidates:
        query_vector = self._query_vector(query)
        found = _Candidates({}, {}, {}, hybrid=query_vector is not None, weights={})
        from_ram = False
        if query_vector is not None:
            try:
                hits, from_ram = self._vector_hits(query_vector, scopes, depth)
            except Exception as exc:
                log.warning("vector search failed, using keywords only: %s", exc)
                hits, query_vector, found.hybrid = [], None, False
            found.chunks.update(self.storage.chunks_by_ids([cid for cid, _ in hits], scopes))
            found.vector = {cid: sim for cid, sim in hits if cid in found.chunks}
        words = keyword_text(query, window.phrases if window else ())
        found.weights = self.keywords.term_weights(query_terms(words))
        widen = not found.hybrid  # keywords alone: "hike" must find "hiking" (see memory.word_forms)
        for hit in self.keywords.search(words, scopes, depth, widen=widen):
            found.bm25[hit.chunk.id] = hit.score
            found.chunks.setdefault(hit.chunk.id, hit.chunk)
        if window is not None:
            for chunk in self._window_chunks(window, scopes):
                found.chunks.setdefault(chunk.id, chunk)
        if query_vector is not None:
            self._fill_vector_scores(query_vector, found, from_ram=from_ram)
        return found

    def _window_chunks(self, window: TimeWindow, scopes: Sequence[str]) -> list[StoredChunk]:
        """The chunks of the daily files dated inside ``window`` (knowledge has no dates)."""
        own = [scope for scope in scopes if scope != KNOWLEDGE_SCOPE]
        if not own:
            return []
        first = f"{DAILY_DIR}/{window.start.isoformat()}.md"
        last = f"{DAILY_DIR}/{window.end.isoformat()}.md"
        return self.storage.dated_chunks(own, first, last, WINDOW_CANDIDATES)

    def vector_rows(self, scopes: Sequence[str]) -> int:
        """How many chunks the scopes hold (``IndexStorage.scope_counts``): few means an exact scan."""
        counts = self.storage.scope_counts()
        return sum(counts.get(scope, 0) for scope in set(scopes))

    def _vector_hits(
        self, query_vector: np.ndarray, scopes: Sequence[str], limit: int
    ) -> tuple[list[tuple[str, float]], bool]:
        """(hits, whether from RAM): exact from RAM when the scopes fit the vector cache; else
        LanceDB (an exact scan when they are few, else its ANN index)."""
        assert self.vectors is not None
        rows = self.vector_rows(scopes)
        cache = self.vector_cache
        if cache is not None and cache.fits(rows, int(query_vector.shape[0])):
            hits = cache.search(query_vector, scopes, limit, self.embed_cache.generations(scopes))
            if hits is not None:
                return hits, True
        return self.vectors.search(query_vector, scopes, limit, exact=rows <= self.settings.ann_threshold), False

    def _query_vector(self, query: str) -> np.ndarray | None:
        if self.embedder is None or self.vectors is None:
            return None
        cached = self._query_cache.get(self.embedder.model_id, query)
        if cached is not None:
            return cached
        try:
            vector = self.embedder.embed_query(query)
        except EmbeddingError as exc:
            log.warning("query embedding failed, using keywords only: %s", exc)
            return None
        self._query_cache.put(self.embedder.model_id, query, vector)
        return vector

    def _fill_vector_scores(self, query_vector: np.ndarray, found: _Candidates, *, from_ram: bool) -> None:
        """Candidates the vector side did not return get their true similarity, from the blocks
        in RAM (when this search just validated them: ``from_ram``) or the embedding cache."""
        missing = {cid: chunk for cid, chunk in found.chunks.items() if cid not in found.vector}
        for cid, vector in self._vectors_of(missing, from_ram=from_ram).items():
            if vector.shape == query_vector.shape:
                found.vector[cid] = float(np.dot(query_vector, vector))

    def _vectors_of(self, chunks: dict[str, StoredChunk], *, from_ram: bool = True) -> dict[str, np.ndarray]:
        """The current model's vectors of ``chunks`` by id: from RAM where loaded, else from the
        embedding cache (by text hash); a chunk with neither is left out."""
        assert self.embedder is not None
        vectors: dict[str, np.ndarray] = {}
        if from_ram and self.vector_cache is not None:
            for cid, chunk in chunks.items():
                vector = self.vector_cache.vector(chunk.scope, cid)
                if vector is not None:
                    vectors[cid] = vector
        by_hash: dict[str, list[str]] = {}
        for cid in chunks.keys() - vectors.keys():
            by_hash.setdefault(text_hash(chunks[cid].text), []).append(cid)
        if by_hash:
            for hash_, vector in self.embed_cache.cached_vectors(self.embedder.model_id, list(by_hash)).items():
                for cid in by_hash[hash_]:
                    vectors[cid] = vector
        return vectors

    # --------------------------------------------------------------- scoring
    def _result(
        self, chunk: StoredChunk, found: _Candidates, window: TimeWindow | None, today: date, about_now: bool
    ) -> SearchResult:
        cosine = found.vector.get(chunk.id)
        floor = self.embedder.similarity_floor if self.embedder is not None else 0.0
        vector = None if cosine is None else scoring.rescale_similarity(cosine, floor)
        share = coverage(found.weights, chunk.text)
        bm25 = found.bm25.get(chunk.id)
        keyword = None if bm25 is None else bm25 * share
        dated = scoring.file_date(chunk.scope, chunk.path)
        parts = scoring.ScoreParts(
            vector=vector,
            keyword=keyword,
            coverage=share,
            relevance=scoring.relevance(self.settings, vector, keyword, share, found.hybrid),
            recency=scoring.recency(self.settings, dated, today, about_now=about_now),
            time=1.0 + self.settings.time_weight if scoring.in_window(window, dated, chunk.text) else 1.0,
        )
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
        )


def _best_first(pair: tuple[str, SearchResult]) -> tuple[float, str, int]:
    return -pair[1].score, pair[1].path, pair[1].start_line


def _wanted(result: SearchResult, min_score: float) -> bool:
    """``min_score`` weeds out weak vector neighbours; a keyword match, or a chunk dated in the
    question's window, is always a candidate (it holds the words, or the time, asked for)."""
    if result.keyword_score is not None or result.time_boost > 1.0:
        return True
    return result.relevance >= min_score
