"""A sync's indexing passes: bring the index of one workspace in step with its files.

Sync has three passes (docs/design.md §4). Pass 1 (:mod:`.scan`) finds changed files and chunks
them; pass 2 embeds every entry text (:mod:`.entries`) that has no vector for the current model, in as few batched
calls as the provider allows (the SQLite cache answers unchanged texts, and keeps each batch as it
arrives); pass 3 writes (:mod:`.index_writer`). If embedding fails nothing is written to the index, so the next sync
retries the same files instead of leaving them stranded without vectors, and pays only for the
texts not yet embedded. The trigram (substring) index is filled after the sync by a thread.

The :class:`Indexer` owns what only indexing needs: the disk scanner, which scopes are dirty, when
each was last checked on disk, and the background threads. What searching shares with it (the
database, the workspace lock, the embedder, the vector backend and its RAM cache) stays its
owner's (the manager's), read through :class:`~.parts.IndexParts` at each use: a lock swapped after
construction (a test does) is the one every pass takes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ..files.scopes import KNOWLEDGE_SCOPE, validate_scope
from ..vectors.embedding import EmbeddingError
from .entries import chunk_entries
from .index_writer import IndexWriter
from .report import SyncReport
from .scan import DiskScanner, ProgressCallback, SyncPlan
from .storage import FileRecord

if TYPE_CHECKING:
    import numpy as np

    from .parts import IndexParts

log = logging.getLogger(__name__)

_DISK_CHECK_INTERVAL_S = 2.0
_AUTO_SYNC_WAIT_S = 2.0  # how long a search waits for another writer before it skips its sync
#: The most new texts a search embeds itself before it answers (a few seconds of the local model
#: on a busy machine); a bigger backlog is synced in the background.
_INLINE_EMBED_TEXTS = 64


class Indexer:
    """Sync, unindex and the background trigram fill for one workspace. Thread-safe;
    every write holds the workspace lock."""

    def __init__(self, parts: IndexParts) -> None:
        self._parts = parts
        self.scanner = DiskScanner(parts.workspace, parts.settings)
        self._writer = IndexWriter(parts)
        self._dirty: set[str] = set()
        self._dirty_lock = threading.Lock()
        self._last_disk_check: dict[str, float] = {}
        self._filler: threading.Thread | None = None
        self._background_sync: threading.Thread | None = None
        self._workers_lock = threading.Lock()

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
        with self._parts.lock:
            needed, ahead = self._prepare(scope, report, progress)
        if ahead:
            self._embed(ahead, report, progress)
            if report.ok:
                with self._parts.lock:
                    self._commit(scope, report, progress)
        self._finish(report, needed, ahead, started)
        return report

    def sync_if_stale(self, scope: str) -> None:
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
            self._parts.lock.release()
        if len(ahead) > _INLINE_EMBED_TEXTS:
            self._sync_in_background(scope, len(ahead))
            return
        if ahead:
            self._embed(ahead, report, None)
            if report.ok and self._try_lock(scope):
                try:
                    self._commit(scope, report, None)
                finally:
                    self._parts.lock.release()
        self._finish(report, needed, ahead, started)
        if not report.ok:
            log.warning("search proceeds on the old index: %s", report.error)

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
        if report.ok and self._parts.storage.trigram_queue():
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
        self._writer.write(plan, vectors, report, progress)
        with self._dirty_lock:
            self._dirty.difference_update(covered if scope is not None else self._dirty.copy())
        now = time.monotonic()
        for name in covered:
            self._last_disk_check[name] = now

    # ========================================================= pass 2: embed
    def _embed_pass(
        self, texts: dict[str, str], report: SyncReport, progress: ProgressCallback | None
    ) -> dict[str, np.ndarray]:
        """Pass 2: a vector for every text (by hash) of :meth:`_texts_needing_vectors`.

        The embedding cache answers texts embedded before; the rest go out in batches of the
        provider's limit (see :meth:`_embed`).
        """
        embedder = self._parts.embedder
        if not texts or embedder is None:
            return {}
        vectors = self._parts.embed_cache.cached_vectors(embedder.model_id, list(texts))
        report.cache_hits = len(vectors)
        embedded = self._embed({h: text for h, text in texts.items() if h not in vectors}, report, progress)
        return {} if embedded is None else {**vectors, **embedded}

    def _texts_needing_vectors(self, plan: SyncPlan) -> dict[str, str]:
        """Embedded text by hash of every entry of the chunks the plan writes, and of the entries
        already indexed without a vector for the current model. An entry on the lines two chunks
        share, or a note written twice, is one text."""
        embedder = self._parts.embedder
        if embedder is None:
            return {}
        texts: dict[str, str] = {}
        for _record, chunks in plan.changed:
            for chunk in chunks:
                for entry in chunk_entries(chunk):
                    texts.setdefault(entry.text_hash, entry.embedded_text)
        changed_paths = {(r.scope, r.path) for r, _ in plan.changed} | set(plan.removed)
        for scope, path, entry in self._parts.storage.entries_needing_vectors(embedder.model_id):
            if (scope, path) not in changed_paths:
                texts.setdefault(entry.text_hash, entry.embedded_text)
        return texts

    def _uncached(self, texts: dict[str, str]) -> dict[str, str]:
        """The texts the embedding cache has no vector for (for the current model)."""
        embedder = self._parts.embedder
        if not texts or embedder is None:
            return {}
        cached = self._parts.embed_cache.cached_hashes(embedder.model_id, list(texts))
        return {h: text for h, text in texts.items() if h not in cached}

    def _embed(self, texts: dict[str, str], report: SyncReport, progress: ProgressCallback | None) -> dict[str, np.ndarray] | None:
        """Embed ``texts`` (by hash) in batches, each saved to the embedding cache as it arrives.

        The cache is not the index: a sync that fails or is killed half-way writes nothing to the
        index, yet the next one only embeds what was not embedded yet. None (and
        ``report.error``) when the provider fails.
        """
        parts, embedder = self._parts, self._parts.embedder
        assert embedder is not None or not texts
        vectors: dict[str, np.ndarray] = {}
        # Similar lengths in one batch: a batch is padded to its longest text, so a mixed batch
        # spends most of the model's time on padding.
        hashes = sorted(texts, key=lambda h: len(texts[h]))
        batch = embedder.max_batch if embedder else 1
        try:
            for start in range(0, len(hashes), batch):
                assert embedder is not None
                if parts.closing.is_set():
                    report.error = "stopped: the memory index is closing (the next sync resumes from the cache)"
                    return None
                part = hashes[start : start + batch]
                embedded = dict(zip(part, embedder.embed([texts[h] for h in part]), strict=True))
                report.embed_calls += 1
                with parts.lock, parts.db.transaction() as conn:
                    parts.embed_cache.store_vectors(conn, embedder.model_id, embedded)
                vectors.update(embedded)
                if progress:
                    progress("embed", min(start + batch, len(hashes)), len(hashes))
        except EmbeddingError as exc:
            report.error = f"embedding failed, nothing was written; the next sync retries: {exc}"
            log.warning(report.error)
            return None
        return vectors

    def unindex(self, scope: str, paths: Iterable[str], *, erase: bool = False) -> list[str]:
        """Take ``paths`` of ``scope`` out of the index now, under the workspace lock (see
        :meth:`IndexWriter.remove`); the next sync indexes whatever is still on disk."""
        with self._parts.lock:
            return self._writer.remove(scope, paths, erase=erase)

    # ======================================================= the trigram fill
    def finish_indexing(self, progress: ProgressCallback | None = None) -> int:
        """Add every chunk still queued for the trigram index now; returns how many.

        A sync leaves that to a background thread (see :meth:`IndexStorage.fill_trigram`); a
        command that exits right after a sync calls this so that the index it leaves is whole.
        """
        parts = self._parts
        total, done = (parts.storage.trigram_queue() if progress else 0), 0
        while not parts.closing.is_set():
            with parts.lock:
                added = parts.storage.fill_trigram()
            if not added:
                break
            done += added
            if progress:
                progress("trigram", done, max(total, done))
        return done

    def _start_trigram_fill(self) -> None:
        with self._workers_lock:
            if self._filler is not None or self._parts.closing.is_set():
                return
            self._filler = threading.Thread(target=self._fill_trigram_loop, name="membridge-trigram", daemon=True)
            self._filler.start()

    def _fill_trigram_loop(self) -> None:
        """The background filler: one batch per lock hold, until the queue is empty or we close."""
        try:
            while not self._parts.closing.is_set():
                self.finish_indexing()
                with self._workers_lock:  # re-checked under the lock: a sync may have queued more
                    if self._parts.storage.trigram_queue() == 0:
                        self._filler = None
                        return
        except Exception as exc:
            log.warning("filling the trigram index failed; the next sync retries: %s", exc)
        with self._workers_lock:
            self._filler = None

    # =========================================== a search's sync, its helpers
    def _try_lock(self, scope: str) -> bool:
        """The workspace lock for a search's sync, if another writer lets go of it within 2 s."""
        if self._parts.lock.try_acquire(_AUTO_SYNC_WAIT_S):
            return True
        log.info("another writer holds the workspace; searching %s on the index as it is", scope)
        return False

    def _sync_in_background(self, scope: str, texts: int) -> None:
        """One background sync at a time for the searches that found too much to embed inline."""
        with self._workers_lock:
            if self._background_sync is not None or self._parts.closing.is_set():
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
            with self._workers_lock:
                self._background_sync = None

    def _indexed_files(self, scopes: Sequence[str] | None) -> dict[tuple[str, str], FileRecord]:
        """The index's file records of ``scopes`` (every scope when None)."""
        storage = self._parts.storage
        if scopes is None:
            return storage.files()
        indexed: dict[tuple[str, str], FileRecord] = {}
        for name in scopes:
            indexed.update(storage.files(name))
        return indexed

    def _disk_changed(self, scope: str) -> bool:
        disk, covered = self.scanner.files(scope)
        return self.scanner.changed(disk, self._indexed_files(covered))

    def join_workers(self) -> None:
        """Wait for the background trigram fill and sync, which the owner's ``closing`` stops; their
        work resumes at the next start (the trigram queue and the embedding cache are in the database)."""
        with self._workers_lock:
            workers = [thread for thread in (self._filler, self._background_sync) if thread is not None]
        for thread in workers:
            thread.join(timeout=30)
