"""The memory index's front door: search it, read files back, keep a few values for the app.

Syncing the index with the files is :mod:`.indexer`'s: the manager's ``indexer``. The manager owns
what the two share (the database, the index storage and its embedding cache, the workspace lock,
the embedder, the vector backend and its RAM cache), so that there is one of each; the indexer
reads them here at each use.

Search is :mod:`memory.retrieval`'s (candidates, fusion, recency, time windows, passages); the
manager syncs a stale scope first and hands the question over.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from .config import MemorySettings
from .files.files import append_once, append_text, read_text
from .files.locks import WorkspaceLock, WriteGuard, check_guard
from .files.scopes import KNOWLEDGE_SCOPE, MemoryPathError, Workspace, validate_scope
from .index.database import Database
from .index.indexer import Indexer
from .index.keyword_index import KeywordIndex
from .index.storage import IndexStorage
from .retrieval.recall_log import RecallLog
from .vectors.embed_cache import EmbeddingCache, RowSink
from .vectors.embedding import EmbeddingProvider

if TYPE_CHECKING:  # the search side (numpy, LanceDB) is imported when first used: see _search_side

    from .retrieval.engine import Retriever
    from .retrieval.recall import Recalled
    from .retrieval.result import SearchResult
    from .vectors.backend import VectorBackend
    from .vectors.vector_cache import VectorCache


#: How much of a message auto-recall searches for (a pasted document is not a question).
RECALL_QUERY_CHARS = 1000


@dataclass(frozen=True)
class IndexCheck:
    """What :meth:`MemoryManager.check_index` found."""

    chunks: int  # chunks indexed, all scopes
    caught_up: int  # chunks the substring index was still missing and took in before the check
    rebuilt: bool  # the keyword indexes were damaged (or would not open) and were rebuilt from the chunks


@dataclass(frozen=True)
class _SearchSide:
    vectors: VectorBackend | None
    cache: VectorCache | None
    retriever: Retriever


class MemoryManager:
    """Search and file access for one workspace, and the owner of what its :class:`Indexer` shares.
    Thread-safe; every write holds the workspace lock (``lock``: tests may swap it, and the indexer
    reads it here at each use)."""

    def __init__(
        self,
        workspace: Workspace,
        settings: MemorySettings,
        *,
        embedder: EmbeddingProvider | None,
        vectors: VectorBackend | None = None,
        db: Database | None = None,
        lock: WorkspaceLock | None = None,
        today: Callable[[], date] = date.today,
    ) -> None:
        self.workspace = workspace
        self.settings = settings
        self.embedder = embedder
        workspace.ensure()
        self.db = db or Database(workspace.db_path)
        self.embed_cache = EmbeddingCache(self.db)
        self.storage = IndexStorage(self.db)
        self.keywords = KeywordIndex(self.storage)
        self.recalls = RecallLog(self.db)
        self.lock = lock or WorkspaceLock(workspace.root)
        self._given_vectors = vectors
        self._today = today
        self._search: _SearchSide | None = None
        self._search_lock = threading.Lock()
        #: Set by :meth:`close`: the warm-up, the embedding loop and the indexer's threads stop.
        self.closing = threading.Event()
        self.indexer = Indexer(self)

    # ============================================================ search side
    def _search_side(self) -> _SearchSide:
        """The vector backend, the RAM vector cache and the retriever, built on first use.

        They import numpy and LanceDB (a few hundred ms), which reading files, their versions
        and the knowledge list never need: ``membridge memory history`` starts without them.
        """
        with self._search_lock:
            if self._search is None:
                self._search = self._build_search_side()
            return self._search

    def _build_search_side(self) -> _SearchSide:
        from .retrieval.engine import Retriever
        from .vectors.vector_cache import VectorCache

        vectors, embedder, settings = self._given_vectors, self.embedder, self.settings
        if embedder is None:
            vectors = None
        elif vectors is None:
            from .vectors.backend import LanceDBBackend

            vectors = LanceDBBackend(settings.vectors.uri or self.workspace.vectors_dir, embedder.model_id,
                                     storage_options=settings.vectors.storage_options,
                                     ann_threshold=settings.ann_threshold, ram_bytes=settings.vector_cache_mb * 2**20)
        cache = (VectorCache(settings.vector_cache_mb * 2**20, self._load_scope_vectors)
                 if vectors is not None and settings.vector_cache_mb > 0 else None)
        from .retrieval.rerank import make_reranker

        retriever = Retriever(self.storage, self.embed_cache, self.keywords, settings, embedder=embedder,
                              vectors=vectors, vector_cache=cache, today=self._today,
                              reranker=make_reranker(settings.rerank))
        return _SearchSide(vectors, cache, retriever)

    @property
    def vectors(self) -> VectorBackend | None:
        """The vector backend (None without an embedder)."""
        return self._search_side().vectors

    @property
    def retriever(self) -> Retriever:
        return self._search_side().retriever

    @property
    def vector_cache(self) -> VectorCache | None:
        """The vectors of recently searched scopes in RAM (None without vectors or with the cache off)."""
        return self._search_side().cache

    def _load_scope_vectors(self, scope: str, sink: RowSink) -> None:
        """The vector cache's loader: a scope's entry vectors from SQLite, in batches to ``sink``."""
        assert self.embedder is not None
        self.embed_cache.scope_vectors(scope, self.embedder.model_id, sink)

    # ================================================================= search
    def search(
        self,
        query: str,
        scope: str,
        *,
        limit: int | None = None,
        min_score: float | None = None,
        auto_sync: bool = True,
    ) -> list[SearchResult]:
        """Hybrid search over ``scope``'s memory and the shared knowledge, best first.

        The ranking rules are :mod:`memory.retrieval.scoring`'s.
        """
        validate_scope(scope)
        limit = limit or self.settings.max_results
        min_score = self.settings.min_score if min_score is None else min_score
        if not query.strip():
            return []
        if auto_sync:
            self.indexer.sync_if_stale(scope)
        return self.retriever.search(query, [scope, KNOWLEDGE_SCOPE], limit=limit, min_score=min_score)

    def recall(self, text: str, scope: str) -> list[Recalled]:
        """The entries of ``scope``'s own memory that ``text`` (a person's message) calls to mind and
        MEMORY.md does not hold, for the prompt (:mod:`memory.retrieval.recall`); [] when
        ``memory.auto_recall`` is off."""
        settings = self.settings.auto_recall
        if not settings.enabled or not text.strip():
            return []
        validate_scope(scope)
        from .retrieval.recall import pick

        self.indexer.sync_if_stale(scope)
        results = self.retriever.search(text[:RECALL_QUERY_CHARS], [scope], limit=settings.max_results,
                                        min_score=settings.min_relevance)
        memory_md = self.workspace.memory_file(scope)
        return pick(results, settings, read_text(memory_md) if memory_md.is_file() else "")

    def warm(self, scopes: Sequence[str]) -> int:
        """Load the vectors of ``scopes`` and the knowledge base into RAM ahead of their first
        search (a scope of 80k vectors takes ~1 s); returns how many scopes were loaded.

        Meant for a background thread at start-up; stops early when the manager closes.
        """
        cache, model = self.vector_cache, self.embedder.model_id if self.embedder else None
        dim = self.embed_cache.vector_dim(model) if cache is not None and model else None
        if cache is None or dim is None:
            return 0
        names = list(dict.fromkeys([KNOWLEDGE_SCOPE, *scopes]))
        generations = self.embed_cache.generations(names)
        loaded = 0
        for name in names:
            if self.closing.is_set() or not cache.fits(self.retriever.vector_rows([KNOWLEDGE_SCOPE, name]), dim):
                continue
            loaded += cache.preload(name, generations[name])
        return loaded

    # ========================================================= for the app
    def get_meta(self, key: str) -> str | None:
        """A small value the application keeps in the index (the nightly timer's last run)."""
        return self.storage.get_meta(key)

    def set_meta(self, key: str, value: str) -> None:
        """Store ``key`` = ``value`` in a transaction of its own."""
        with self.db.transaction() as conn:
            self.storage.set_meta(conn, key, value)

    def check_index(self) -> IndexCheck:
        """Check both keyword indexes against the chunks (the truth) and rebuild them from the
        chunks if they disagree (``rebuilt`` also says so when opening the index had to). The substring index takes in its queue first: the check compares
        every chunk."""
        caught_up = self.storage.trigram_queue()
        rebuilt = not self.keywords.check()
        if rebuilt:
            self.keywords.rebuild()
        return IndexCheck(self.storage.count_chunks(), caught_up, rebuilt or self.keywords.rebuilt_on_open)

    def index_counts(self) -> dict[str, tuple[int, int]]:
        """(chunks, chunks with a vector) per scope: what the index holds, for an operator's metrics."""
        rows = self.db.query("SELECT scope, count(*), count(vec_model) FROM chunks GROUP BY scope")
        return {str(row[0]): (int(row[1]), int(row[2])) for row in rows}

    def count_cached_vectors(self) -> int:
        """How many vectors the embedding cache holds (the nightly collection bounds it)."""
        return self.embed_cache.count_cached_vectors()

    def collect_embed_cache(self, grace_days: float) -> tuple[int, int]:
        """Delete cached vectors no chunk uses, unused for ``grace_days``: (deleted, kept)."""
        return self.embed_cache.collect_embed_cache(grace_days)

    # =========================================================== file access
    def read_lines(self, scope: str, path: str, start_line: int = 1, num_lines: int | None = None) -> str:
        """Lines ``start_line``.. of a memory file (1-based), for ``memory_get``."""
        target = self.workspace.resolve_memory_path(scope, path)
        if not target.is_file():
            raise MemoryPathError(f"{path!r} does not exist")
        if start_line < 1:
            raise MemoryPathError("start_line must be 1 or more")
        lines = read_text(target).split("\n")
        end = len(lines) if num_lines is None else start_line - 1 + max(0, num_lines)
        return "\n".join(lines[start_line - 1 : end])

    def append_daily(self, scope: str, text: str, *, when: datetime | None = None,
                     only_if: WriteGuard | None = None, once: str | None = None) -> Path:
        """Append a block to the scope's daily file of ``when`` (default now); returns the file.
        ``only_if`` is checked under the workspace lock (:class:`~memory.files.locks.WriteWithdrawn`).
        ``once``: a marker the block holds; a block with that marker already in the file, or in the
        day before's (a redelivery may come after midnight), is not written again."""
        when = when or datetime.now()
        target = self.workspace.daily_file(scope, when.strftime("%Y-%m-%d"))
        with self.lock:
            check_guard(only_if, "the daily memory note")
            if once is None:
                append_text(target, text)
            else:
                day_before = self.workspace.daily_file(scope, f"{when - timedelta(days=1):%Y-%m-%d}")
                append_once(target, text, once, also_in=[day_before])
        self.indexer.mark_dirty(scope)
        return target

    def close(self) -> None:
        """Stop the background trigram filler and sync (their work resumes at the next start: the
        trigram queue and the embedding cache are in the database), then close."""
        self.closing.set()
        self.indexer.join_workers()
        if self._search is not None and self._search.retriever.reranker is not None:
            self._search.retriever.reranker.close()
        self.db.close()
