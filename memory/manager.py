"""The memory index's front door: sync files into the index, search it, read files back.

Sync has three passes (DESIGN.md §4). Pass 1 (:mod:`.scan`) finds changed files and chunks them; pass 2 embeds
every chunk text that has no vector for the current model, in as few batched calls as the provider
allows (the SQLite cache answers unchanged texts, and keeps each batch as it arrives); pass 3
writes. If embedding fails nothing is written to the index, so the next sync retries the same
files instead of leaving them stranded without vectors, and pays only for the texts not yet
embedded. The trigram (substring) index is filled after the sync by a background thread.

Search is :mod:`memory.retrieval`'s (candidates, fusion, recency, time windows, passages); the
manager syncs a stale scope first and hands the question over.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from .chunker import embedding_text
from .config import MemorySettings
from .database import Database
from .embedding import EmbeddingError, EmbeddingProvider
from .files import append_text, read_text
from .keyword_index import KeywordIndex
from .locks import WorkspaceLock
from .scan import DiskScanner, ProgressCallback, SyncPlan
from .scopes import KNOWLEDGE_SCOPE, MemoryPathError, Workspace, validate_scope
from .storage import FileRecord, IndexStorage

if TYPE_CHECKING:  # the search side (numpy, LanceDB) is imported when first used: see _search_side
    import numpy as np

    from .retrieval import Retriever, SearchResult
    from .vector_cache import VectorCache
    from .vectors import VectorBackend, VectorRow

log = logging.getLogger(__name__)

_DISK_CHECK_INTERVAL_S = 2.0
_AUTO_SYNC_WAIT_S = 2.0  # how long a search waits for another writer before it skips its sync
#: The most new texts a search embeds itself before it answers (a few seconds of the local model
#: on a busy machine); a bigger backlog is synced in the background.
_INLINE_EMBED_TEXTS = 64
#: Vectors written to the backend (and marked embedded) per transaction during a sync.
VECTOR_WRITE_BATCH = 10_000


@dataclass
class SyncReport:
    files_scanned: int = 0
    files_changed: int = 0
    files_removed: int = 0
    chunks_written: int = 0
    chunks_removed: int = 0
    vectors_written: int = 0
    embed_calls: int = 0
    cache_hits: int = 0
    error: str | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


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
    """Sync and search for one workspace. Thread-safe; every write holds the workspace lock."""

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
        self.storage = IndexStorage(self.db)
        self.keywords = KeywordIndex(self.storage)
        self.scanner = DiskScanner(workspace, settings)
        self.lock = lock or WorkspaceLock(workspace.root)
        self._given_vectors = vectors
        self._today = today
        self._search: _SearchSide | None = None
        self._search_lock = threading.Lock()
        self._dirty: set[str] = set()
        self._dirty_lock = threading.Lock()
        self._last_disk_check: dict[str, float] = {}
        self._filler: threading.Thread | None = None
        self._background_sync: threading.Thread | None = None
        self._filler_lock = threading.Lock()
        self._closing = threading.Event()

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
        from .retrieval import Retriever
        from .vector_cache import VectorCache

        vectors, embedder, settings = self._given_vectors, self.embedder, self.settings
        if embedder is None:
            vectors = None
        elif vectors is None:
            from .vectors import LanceDBBackend

            vectors = LanceDBBackend(settings.vectors.uri or self.workspace.vectors_dir, embedder.model_id,
                                     storage_options=settings.vectors.storage_options,
                                     ann_threshold=settings.ann_threshold, ram_bytes=settings.vector_cache_mb * 2**20)
        cache = (VectorCache(settings.vector_cache_mb * 2**20, self._load_scope_vectors)
                 if vectors is not None and settings.vector_cache_mb > 0 else None)
        retriever = Retriever(self.storage, self.keywords, settings, embedder=embedder, vectors=vectors, vector_cache=cache,
                              today=self._today)
        return _SearchSide(vectors, cache, retriever)

    @property
    def vectors(self) -> VectorBackend | None:
        """The vector backend (None without an embedder)."""
        return self._search_side().vectors

    @property
    def retriever(self) -> Retriever:
        return self._search_side().retriever

    @property
    def _vector_cache(self) -> VectorCache | None:
        return self._search_side().cache

    # ================================================================== files
    def mark_dirty(self, scope: str) -> None:
        """Note that ``scope``'s files changed, so the next search syncs first."""
        with self._dirty_lock:
            self._dirty.add(scope)

    # =================================================================== sync
    def sync(self, scope: str | None = None, *, progress: ProgressCallback | None = None) -> SyncReport:
        """Bring the index in step with the files of ``scope`` (every scope when None) and knowledge.

        ``scope=KNOWLEDGE_SCOPE`` syncs the knowledge base alone (what a knowledge edit needs).
        New texts are embedded without holding the workspace lock (the local model needs minutes
        for a large workspace, and the bot's writes must not wait even seconds); then, under the
        lock, the files are scanned again and written, the embedding cache answering all that was
        embedded meanwhile. A sync with nothing to embed scans once and writes in the same hold.
        """
        if scope is not None and scope != KNOWLEDGE_SCOPE:
            validate_scope(scope)
        started = time.perf_counter()
        report = SyncReport()
        with self.lock:
            needed, ahead = self._prepare(scope, report, progress)
        if ahead:
            self._embed(ahead, report, progress)
            if report.ok:
                with self.lock:
                    self._commit(scope, report, progress)
        self._finish(report, needed, ahead, started)
        return report

    def _prepare(
        self, scope: str | None, report: SyncReport, progress: ProgressCallback | None
    ) -> tuple[dict[str, str], dict[str, str]]:
        """Pass 1, under the lock: scan, and when every text that needs a vector has one cached,
        index at once. Returns (the texts needing vectors, those not cached); when some are not,
        nothing was written: they are embedded outside the lock, then :meth:`_commit` indexes."""
        plan, covered = self._scan(scope, report, progress)
        needed = self._texts_needing_vectors(plan)
        ahead = self._uncached(needed)
        if not ahead:
            self._index(plan, needed, covered, scope, report, progress)
        return needed, ahead

    def _commit(self, scope: str | None, report: SyncReport, progress: ProgressCallback | None) -> None:
        """Under the lock: scan again (another writer may have changed files since pass 1) and
        index; texts embedded ahead come from the cache, and only what changed meanwhile is
        embedded here."""
        plan, covered = self._scan(scope, report, None)
        self._index(plan, self._texts_needing_vectors(plan), covered, scope, report, progress)

    def _finish(self, report: SyncReport, needed: dict[str, str], ahead: dict[str, str], started: float) -> None:
        report.cache_hits = len(needed) - len(ahead)  # not the texts this sync embedded
        if report.ok and self.storage.trigram_queue():
            self._start_trigram_fill()
        report.seconds = time.perf_counter() - started

    def _scan(self, scope: str | None, report: SyncReport, progress: ProgressCallback | None) -> tuple[SyncPlan, list[str]]:
        """Pass 1 (:mod:`.scan`): what changed on disk, chunked; no API call, no write."""
        disk, covered = self.scanner.files(scope)
        report.files_scanned = len(disk)
        return self.scanner.plan(disk, self._indexed_files(None if scope is None else covered), progress), covered

    def _index(
        self,
        plan: SyncPlan,
        texts: dict[str, str],
        covered: list[str],
        scope: str | None,
        report: SyncReport,
        progress: ProgressCallback | None,
    ) -> None:
        """Passes 2 and 3 under the lock: vectors for the plan's ``texts``, then the writes."""
        vectors = self._embed_pass(texts, report, progress)
        if report.error is not None:
            return
        self._write_pass(plan, vectors, report, progress)
        with self._dirty_lock:
            self._dirty.difference_update(covered if scope is not None else self._dirty.copy())
        now = time.monotonic()
        for name in covered:
            self._last_disk_check[name] = now

    def finish_indexing(self, progress: ProgressCallback | None = None) -> int:
        """Add every chunk still queued for the trigram index now; returns how many.

        A sync leaves that to a background thread (see :meth:`IndexStorage.fill_trigram`); a
        command that exits right after a sync calls this so that the index it leaves is whole.
        """
        total, done = (self.storage.trigram_queue() if progress else 0), 0
        while not self._closing.is_set():
            with self.lock:
                added = self.storage.fill_trigram()
            if not added:
                break
            done += added
            if progress:
                progress("trigram", done, max(total, done))
        return done

    def _start_trigram_fill(self) -> None:
        with self._filler_lock:
            if self._filler is not None or self._closing.is_set():
                return
            self._filler = threading.Thread(target=self._fill_trigram_loop, name="membridge-trigram", daemon=True)
            self._filler.start()

    def _fill_trigram_loop(self) -> None:
        """The background filler: one batch per lock hold, until the queue is empty or we close."""
        try:
            while not self._closing.is_set():
                self.finish_indexing()
                with self._filler_lock:  # re-checked under the lock: a sync may have queued more
                    if self.storage.trigram_queue() == 0:
                        self._filler = None
                        return
        except Exception as exc:
            log.warning("filling the trigram index failed; the next sync retries: %s", exc)
        with self._filler_lock:
            self._filler = None

    def _embed_pass(
        self, texts: dict[str, str], report: SyncReport, progress: ProgressCallback | None
    ) -> dict[str, np.ndarray]:
        """Pass 2: a vector for every text (by hash) of :meth:`_texts_needing_vectors`.

        The embedding cache answers texts embedded before; the rest go out in batches of the
        provider's limit (see :meth:`_embed`).
        """
        if not texts or self.embedder is None:
            return {}
        vectors = self.storage.cached_vectors(self.embedder.model_id, list(texts))
        report.cache_hits = len(vectors)
        embedded = self._embed({h: text for h, text in texts.items() if h not in vectors}, report, progress)
        return {} if embedded is None else {**vectors, **embedded}

    def _texts_needing_vectors(self, plan: SyncPlan) -> dict[str, str]:
        """Text by hash of every chunk the plan writes, and of unchanged chunks still without a vector."""
        if self.embedder is None:
            return {}
        texts: dict[str, str] = {}
        for _record, chunks in plan.changed:
            for chunk in chunks:
                texts.setdefault(chunk.text_hash, chunk.text)
        changed_paths = {(r.scope, r.path) for r, _ in plan.changed} | set(plan.removed)
        for _cid, scope, path, text, hash_ in self.storage.chunks_needing_vectors(self.embedder.model_id):
            if (scope, path) not in changed_paths:
                texts.setdefault(hash_, text)
        return texts

    def _uncached(self, texts: dict[str, str]) -> dict[str, str]:
        """The texts the embedding cache has no vector for (for the current model)."""
        if not texts or self.embedder is None:
            return {}
        cached = self.storage.cached_hashes(self.embedder.model_id, list(texts))
        return {h: text for h, text in texts.items() if h not in cached}

    def _embed(self, texts: dict[str, str], report: SyncReport, progress: ProgressCallback | None) -> dict[str, np.ndarray] | None:
        """Embed ``texts`` (by hash) in batches, each saved to the embedding cache as it arrives.

        The cache is not the index: a sync that fails or is killed half-way writes nothing to the
        index, yet the next one only embeds what was not embedded yet. None (and
        ``report.error``) when the provider fails.
        """
        assert self.embedder is not None or not texts
        vectors: dict[str, np.ndarray] = {}
        # Similar lengths in one batch: a batch is padded to its longest text, so a mixed batch
        # spends most of the model's time on padding.
        hashes = sorted(texts, key=lambda h: len(texts[h]))
        batch = self.embedder.max_batch if self.embedder else 1
        try:
            for start in range(0, len(hashes), batch):
                assert self.embedder is not None
                if self._closing.is_set():
                    report.error = "stopped: the memory index is closing (the next sync resumes from the cache)"
                    return None
                part = hashes[start : start + batch]
                embedded = dict(zip(part, self.embedder.embed([embedding_text(texts[h]) for h in part]), strict=True))
                report.embed_calls += 1
                with self.lock, self.db.transaction() as conn:
                    self.storage.store_vectors(conn, self.embedder.model_id, embedded)
                vectors.update(embedded)
                if progress:
                    progress("embed", min(start + batch, len(hashes)), len(hashes))
        except EmbeddingError as exc:
            report.error = f"embedding failed, nothing was written; the next sync retries: {exc}"
            log.warning(report.error)
            return None
        return vectors

    def _write_pass(
        self,
        plan: SyncPlan,
        vectors: dict[str, np.ndarray],
        report: SyncReport,
        progress: ProgressCallback | None,
    ) -> None:
        """Pass 3: SQLite first (the truth), then the vector backend, then mark chunks embedded."""
        removed: dict[str, list[str]] = {}
        with self.storage.write() as conn:
            for scope, path in plan.removed:
                removed.setdefault(scope, []).extend(self.storage.remove_file(conn, scope, path))
            for done, (record, chunks) in enumerate(plan.changed, start=1):
                removed.setdefault(record.scope, []).extend(self.storage.replace_file(conn, record, chunks))
                report.chunks_written += len(chunks)
                if progress and done % 50 == 0:
                    progress("write", done, len(plan.changed))
            for record in plan.touched:
                self.storage.touch_file(conn, record)
            generations = self.storage.bump_generations(conn, removed)
        removed_ids = [cid for ids in removed.values() for cid in ids]
        report.files_changed = len(plan.changed)
        report.files_removed = len(plan.removed)
        report.chunks_removed = len(removed_ids)
        if progress:
            progress("write", len(plan.changed), len(plan.changed))
        if self.vectors is None or self.embedder is None:
            return
        for scope, generation in generations.items():
            self._cache_apply(scope, generation, removed=removed[scope])
        self.vectors.delete_ids(removed_ids)
        # nothing embedded or taken from the cache: no chunk can be waiting (skips a table scan)
        pending = self.storage.vector_targets(self.embedder.model_id) if vectors else []
        from .vectors import VectorRow

        ready = [VectorRow(cid, scope, path, vectors[h]) for cid, scope, path, h in pending if h in vectors]
        for start in range(0, len(ready), VECTOR_WRITE_BATCH):
            self._write_vectors(ready[start : start + VECTOR_WRITE_BATCH])
        report.vectors_written = len(ready)
        if ready or removed_ids:
            self._drop_orphans()
            self.vectors.maintain()

    def unindex(self, scope: str, paths: Iterable[str], *, erase: bool = False) -> list[str]:
        """Take ``paths`` of ``scope`` out of the index now: chunks, keyword entries, vectors (in
        the backend and in RAM); returns the text hashes of the chunks removed. The next sync indexes
        whatever is still on disk. ``erase`` also drops the scope's own vectors that SQLite does not
        know of and its generation row: nothing of the scope stays."""
        hashes: list[str] = []
        with self.lock:
            with self.storage.write() as conn:
                removed: list[str] = []
                for path in sorted(set(paths)):
                    hashes += [r[0] for r in conn.execute(
                        "SELECT text_hash FROM chunks WHERE scope = ? AND path = ?", (scope, path))]
                    removed += self.storage.remove_file(conn, scope, path)
                generation = self.storage.bump_generations(conn, [scope])[scope]
                if erase:
                    self.storage.forget_generation(conn, scope)
            self._cache_apply(scope, generation, removed=removed)
            if self.vectors is not None:
                self.vectors.delete_ids(removed)
                if erase:
                    self.vectors.delete_scope(scope)
        return hashes

    def _write_vectors(self, rows: list[VectorRow]) -> None:
        """One batch: the vector backend first, then the chunks marked embedded (in SQLite, the truth).

        A crash between the two leaves the chunks unmarked, so the next sync writes them again
        (an upsert by id: no duplicates). Batches bound the memory a 100k-chunk sync needs.
        """
        assert self.vectors is not None and self.embedder is not None
        self.vectors.upsert(rows)
        by_scope: dict[str, list[VectorRow]] = {}
        for row in rows:
            by_scope.setdefault(row.scope, []).append(row)
        with self.db.transaction() as conn:
            self.storage.mark_embedded(conn, [row.id for row in rows], self.embedder.model_id)
            generations = self.storage.bump_generations(conn, by_scope)
        import numpy as np

        for scope, generation in generations.items():
            mine = by_scope[scope]
            self._cache_apply(scope, generation, ids=[row.id for row in mine],
                              vectors=np.vstack([row.vector for row in mine]))

    def _cache_apply(self, scope: str, generation: int, **change: object) -> None:
        if self._vector_cache is not None:
            self._vector_cache.apply(scope, generation, **change)  # type: ignore[arg-type]

    def _load_scope_vectors(self, scope: str) -> tuple[int, list[str], np.ndarray]:
        assert self.embedder is not None
        return self.storage.scope_vectors(scope, self.embedder.model_id)

    def _drop_orphans(self) -> None:
        """Vectors whose chunk is gone from SQLite (a crash between the two writes) are removed."""
        assert self.vectors is not None and self.embedder is not None
        embedded = int(
            self.db.query("SELECT count(*) FROM chunks WHERE vec_model = ?", (self.embedder.model_id,))[0][0]
        )
        if self.vectors.count() == embedded:
            return
        orphans = self.vectors.ids() - self.storage.all_chunk_ids()
        if orphans:
            log.info("removing %d orphaned vectors", len(orphans))
            self.vectors.delete_ids(sorted(orphans))

    def _sync_if_stale(self, scope: str) -> None:
        """Sync ``scope`` when our own writes dirtied it or (at most every 2 s) files changed on disk.

        A search runs inside a chat turn, so it does only a small sync itself: the few new notes
        of a conversation, embedded outside the lock. More than :data:`_INLINE_EMBED_TEXTS` new
        texts (embeddings just switched on, a big import) are left to a background sync, and the
        search answers from the index as it is; so does a search that would wait over 2 s for
        another writer (another shell's `membridge memory sync`). The scope stays dirty, so nothing
        is forgotten: a later search syncs.
        """
        with self._dirty_lock:
            dirty = scope in self._dirty or KNOWLEDGE_SCOPE in self._dirty
        last = self._last_disk_check.get(scope, 0.0)
        if not dirty and time.monotonic() - last < _DISK_CHECK_INTERVAL_S:
            return
        if not dirty and not self._disk_changed(scope):
            self._last_disk_check[scope] = time.monotonic()
            return
        started = time.perf_counter()
        report = SyncReport()
        if not self._try_lock(scope):
            return
        try:
            needed, ahead = self._prepare(scope, report, None)
        finally:
            self.lock.release()
        if len(ahead) > _INLINE_EMBED_TEXTS:
            self._sync_in_background(scope, len(ahead))
            return
        if ahead:
            self._embed(ahead, report, None)
            if report.ok and self._try_lock(scope):
                try:
                    self._commit(scope, report, None)
                finally:
                    self.lock.release()
        self._finish(report, needed, ahead, started)
        if not report.ok:
            log.warning("search proceeds on the old index: %s", report.error)

    def _try_lock(self, scope: str) -> bool:
        """The workspace lock for a search's sync, if another writer lets go of it within 2 s."""
        if self.lock.try_acquire(_AUTO_SYNC_WAIT_S):
            return True
        log.info("another writer holds the workspace; searching %s on the index as it is", scope)
        return False

    def _sync_in_background(self, scope: str, texts: int) -> None:
        """One background sync at a time for the searches that found too much to embed inline."""
        with self._filler_lock:
            if self._background_sync is not None or self._closing.is_set():
                return
            log.info("%s has %d new texts to embed: syncing in the background; searches use the index as it is",
                     scope, texts)
            self._background_sync = threading.Thread(
                target=self._background_sync_run, args=(scope,), name="membridge-sync", daemon=True)
            self._background_sync.start()

    def _background_sync_run(self, scope: str) -> None:
        try:
            report = self.sync(scope)
            if not report.ok:
                log.warning("background sync of %s failed; a later search retries: %s", scope, report.error)
        except Exception:
            log.exception("background sync of %s failed; a later search retries", scope)
        finally:
            with self._filler_lock:
                self._background_sync = None

    def _indexed_files(self, scopes: Sequence[str] | None) -> dict[tuple[str, str], FileRecord]:
        """The index's file records of ``scopes`` (every scope when None)."""
        if scopes is None:
            return self.storage.files()
        indexed: dict[tuple[str, str], FileRecord] = {}
        for name in scopes:
            indexed.update(self.storage.files(name))
        return indexed

    def _disk_changed(self, scope: str) -> bool:
        disk, covered = self.scanner.files(scope)
        return self.scanner.changed(disk, self._indexed_files(covered))

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
            self._sync_if_stale(scope)
        return self.retriever.search(query, [scope, KNOWLEDGE_SCOPE], limit=limit, min_score=min_score)

    def warm(self, scopes: Sequence[str]) -> int:
        """Load the vectors of ``scopes`` and the knowledge base into RAM ahead of their first
        search (a scope of 80k vectors takes ~1 s); returns how many scopes were loaded.

        Meant for a background thread at start-up; stops early when the manager closes.
        """
        cache, model = self._vector_cache, self.embedder.model_id if self.embedder else None
        dim = self.storage.vector_dim(model) if cache is not None and model else None
        if cache is None or dim is None:
            return 0
        names = list(dict.fromkeys([KNOWLEDGE_SCOPE, *scopes]))
        generations = self.storage.generations(names)
        loaded = 0
        for name in names:
            if self._closing.is_set() or not cache.fits(self.retriever.vector_rows([KNOWLEDGE_SCOPE, name]), dim):
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

    def count_cached_vectors(self) -> int:
        """How many vectors the embedding cache holds (the nightly collection bounds it)."""
        return self.storage.count_cached_vectors()

    def collect_embed_cache(self, grace_days: float) -> tuple[int, int]:
        """Delete cached vectors no chunk uses, unused for ``grace_days``: (deleted, kept)."""
        return self.storage.collect_embed_cache(grace_days)

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

    def append_daily(self, scope: str, text: str, *, when: datetime | None = None) -> Path:
        """Append a block to the scope's daily file of ``when`` (default now); returns the file."""
        when = when or datetime.now()
        target = self.workspace.daily_file(scope, when.strftime("%Y-%m-%d"))
        with self.lock:
            append_text(target, text)
        self.mark_dirty(scope)
        return target

    def close(self) -> None:
        """Stop the background trigram filler and sync (their work resumes at the next start: the
        trigram queue and the embedding cache are in the database), then close."""
        self._closing.set()
        with self._filler_lock:
            workers = [thread for thread in (self._filler, self._background_sync) if thread is not None]
        for thread in workers:
            thread.join(timeout=30)
        self.db.close()
