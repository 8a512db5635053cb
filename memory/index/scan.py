"""Pass 1 of a sync: which indexable files are on disk, and what changed since they were indexed.

A scope's indexable files are its MEMORY.md and ``memory/**.md`` (dream diaries and dot-folders
left out); the knowledge base's are ``knowledge/**.md`` but its change log and generated table of
contents. A file whose size and mtime match its index record is not read again, unless it was
indexed within :data:`MTIME_TRUST_S` of its last write; a changed file is hashed and chunked. No
API call and no write happen here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..config import MemorySettings
from ..files.files import read_text
from ..files.scopes import DAILY_DIR, DREAMS_DIR, KNOWLEDGE_SCOPE, MEMORY_FILE, Workspace
from .chunker import Chunk, chunk_text, text_hash
from .storage import FileRecord

ProgressCallback = Callable[[str, int, int], None]
"""A sync's ``progress(stage, done, total)``: stages are ``scan`` (here), ``embed``, ``write`` and
``trigram`` (:class:`memory.index.indexer.Indexer`)."""

_KNOWLEDGE_SKIP = frozenset({"log.md", "index.md"})  # the change log and the generated table of contents
MTIME_TRUST_S = 2.0  # a file written this close to its indexing is re-hashed (coarse file-system clocks)

Indexed = dict[tuple[str, str], FileRecord]


@dataclass
class DiskFile:
    scope: str
    path: str  # as stored: relative to the scope dir, or "knowledge/..." for knowledge
    absolute: Path
    mtime: float
    size: int


@dataclass
class SyncPlan:
    """What a sync writes: files to chunk anew, files whose records only need their mtime, files gone."""

    changed: list[tuple[FileRecord, list[Chunk]]] = field(default_factory=list)
    touched: list[FileRecord] = field(default_factory=list)
    removed: list[tuple[str, str]] = field(default_factory=list)


def unchanged(record: FileRecord | None, item: DiskFile) -> bool:
    """Whether an indexed file is surely the same on disk, without reading it.

    Same mtime and size is not enough for a file written within ``MTIME_TRUST_S`` of its
    indexing: a coarse file-system clock can give a quick same-size rewrite the same mtime.
    """
    return (
        record is not None and record.mtime == item.mtime and record.size == item.size
        and record.indexed_at - item.mtime > MTIME_TRUST_S
    )


class DiskScanner:
    """Lists a workspace's indexable files and plans what a sync must write for them."""

    def __init__(self, workspace: Workspace, settings: MemorySettings) -> None:
        self.workspace = workspace
        self.settings = settings

    def files(self, scope: str | None) -> tuple[list[DiskFile], list[str]]:
        """Files on disk for ``scope`` (every scope when None; only knowledge for the knowledge
        scope) and knowledge, and the scopes they cover."""
        if scope == KNOWLEDGE_SCOPE:
            scopes: list[str] = []
        else:
            scopes = [scope] if scope is not None else self.workspace.list_scopes()
        files: list[DiskFile] = list(self._knowledge_files())
        for name in scopes:
            files.extend(self._scope_files(name))
        return files, [*scopes, KNOWLEDGE_SCOPE]

    def changed(self, disk: list[DiskFile], indexed: Indexed) -> bool:
        """Whether any of ``disk`` differs from its record in ``indexed`` (or a record has no file)."""
        if len(indexed) != len(disk):
            return True
        return not all(unchanged(indexed.get((item.scope, item.path)), item) for item in disk)

    def plan(self, disk: list[DiskFile], indexed: Indexed, progress: ProgressCallback | None) -> SyncPlan:
        """Hash what changed on disk and chunk it; ``indexed`` holds the records of the scopes scanned."""
        plan = SyncPlan()
        seen: set[tuple[str, str]] = set()
        for done, item in enumerate(disk, start=1):
            key = (item.scope, item.path)
            seen.add(key)
            previous = indexed.get(key)
            if unchanged(previous, item):
                continue
            content = read_text(item.absolute)
            record = FileRecord(item.scope, item.path, text_hash(content), item.mtime, item.size)
            if previous is not None and previous.hash == record.hash:
                plan.touched.append(record)
                continue
            chunks = chunk_text(
                content,
                scope=item.scope,
                path=item.path,
                max_chars=self.settings.chunk_max_chars,
                overlap_lines=self.settings.chunk_overlap_lines,
            )
            plan.changed.append((record, chunks))
            if progress and done % 50 == 0:
                progress("scan", done, len(disk))
        plan.removed = [key for key in indexed if key not in seen]
        if progress:
            progress("scan", len(disk), len(disk))
        return plan

    def _scope_files(self, scope: str) -> Iterator[DiskFile]:
        """A scope's indexable files: MEMORY.md and memory/**.md, minus dreams and dot-folders."""
        base = self.workspace.scope_dir(scope)
        memory_md = base / MEMORY_FILE
        if memory_md.is_file():
            yield _disk_file(scope, MEMORY_FILE, memory_md)
        yield from _walk(scope, base / DAILY_DIR, base, skip_dirs=frozenset({DREAMS_DIR}))

    def _knowledge_files(self) -> Iterator[DiskFile]:
        yield from _walk(KNOWLEDGE_SCOPE, self.workspace.knowledge_dir, self.workspace.root, skip_files=_KNOWLEDGE_SKIP)


def _walk(
    scope: str, top: Path, relative_to: Path, *, skip_dirs: frozenset[str] = frozenset(), skip_files: frozenset[str] = frozenset()
) -> Iterator[DiskFile]:
    if not top.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(top):
        at_top = Path(dirpath) == top
        dirnames[:] = sorted(
            d for d in dirnames if not d.startswith(".") and not (at_top and d in skip_dirs)
        )
        for name in sorted(filenames):
            if not name.endswith(".md") or name.startswith(".") or (at_top and name in skip_files):
                continue
            absolute = Path(dirpath) / name
            if absolute.is_symlink():
                continue
            yield _disk_file(scope, absolute.relative_to(relative_to).as_posix(), absolute)


def _disk_file(scope: str, path: str, absolute: Path) -> DiskFile:
    stat = absolute.stat()
    return DiskFile(scope, path, absolute, stat.st_mtime, stat.st_size)
