"""Take a scope's memory away as one zip, and bring it back into an empty scope.

An export is everything that is the person's own: MEMORY.md, the whole ``memory/`` folder (daily
files, dream diaries), the recorded versions of MEMORY.md and of the daily files (console edits
are versioned too), and the conversation messages (through
:class:`~memory.conversations.scope_conversations.ScopeConversations`). The index, the vectors
and the embedding cache are derived from these, so an import rebuilds them with a sync instead of
carrying them. The zip's layout and the checks on a zip to import are in :mod:`memory.privacy.archive`.

Writes are all-or-nothing. The export streams into a hidden temp file beside the target, fsyncs
and renames it, so a crash never leaves a half zip under the target's name. The import verifies
each member as it reads it, unpacks the files into a hidden staging folder, then records versions,
sessions and messages in one transaction and moves the files into place before it commits: any
failure rolls the rows back and deletes the staging folder, and the scope stays empty.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import tempfile
import time
import uuid
import zipfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from ..conversations.conversations import ConversationStore
from ..conversations.scope_conversations import ScopeConversations
from ..files.files import atomic_file, fsync_dir, make_folders
from ..files.memory_file import MemoryFile
from ..files.scopes import MEMORY_FILE, validate_scope
from ..index.scan import ProgressCallback
from ..manager import MemoryManager
from .archive import (
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    MESSAGES,
    READ_CHUNK,
    SESSIONS,
    VERSIONS_INDEX,
    ArchiveError,
    CheckedArchive,
    json_line,
    version_member,
)
from .holdings import PERSON_KINDS, import_leftovers, import_staging_prefix, kind_of, outbox_name, scope_files

#: A chat's export left unsent this long (the process died mid-send) is deleted by the next one.
OUTBOX_MAX_AGE_S = 3600.0


class PortabilityError(ValueError):
    """An export or import that cannot be done as asked; the message says why and what to do."""


@dataclass
class TransferReport:
    """What an export wrote or an import restored."""

    scope: str
    path: Path
    counts: dict[str, int] = field(default_factory=dict)
    bytes: int = 0
    chunks_indexed: int = 0
    seconds: float = 0.0


class Portability:
    """Export and import of whole scopes for one workspace."""

    def __init__(self, manager: MemoryManager, conversations: ConversationStore, memory_file: MemoryFile,
                 *, app_version: str = "unknown") -> None:
        self.manager = manager
        self.workspace = manager.workspace
        self.conversations = conversations
        self.memory_file = memory_file
        self.app_version = app_version

    # ================================================================= export
    def export(self, scope: str, out: Path, *, progress: ProgressCallback | None = None) -> TransferReport:
        """Write ``scope``'s export to ``out`` atomically (an existing file is replaced whole)."""
        started = time.monotonic()
        self._require_known(scope)
        target = _writable(out)
        with self.manager.lock:
            for stale in target.parent.glob(f".{target.name}.*.tmp"):  # a killed export's (exports hold the lock)
                stale.unlink(missing_ok=True)
            with atomic_file(target) as handle:
                counts = self._write_zip(handle, scope, progress)
        return TransferReport(scope, target, counts, target.stat().st_size, seconds=time.monotonic() - started)

    def export_to_outbox(self, scope: str) -> TransferReport:
        """Export into the workspace's hidden outbox, for a chat to send and then delete; exports
        an earlier send left behind (a crash mid-send) are removed first."""
        outbox = self.workspace.exports_dir
        make_folders(outbox)
        cutoff = time.time() - OUTBOX_MAX_AGE_S
        for stale in outbox.iterdir():
            if stale.is_file() and stale.stat().st_mtime < cutoff:
                stale.unlink(missing_ok=True)
        return self.export(scope, outbox / outbox_name(scope, uuid.uuid4().hex[:12]))

    def _require_known(self, scope: str) -> None:
        validate_scope(scope)
        self.workspace.scope_dir(scope)  # refuses a second scope in global mode
        if not self.contents(scope):
            known = ", ".join(self.workspace.list_scopes()) or "none yet"
            raise PortabilityError(f"unknown scope {scope!r}: it has no files, versions or conversations "
                                   f"(known scopes: {known})")

    def _write_zip(self, handle: IO[bytes], scope: str, progress: ProgressCallback | None) -> dict[str, int]:
        conversations = ScopeConversations(self.conversations, scope)
        files = self._scope_files(scope)
        versions = self.memory_file.version_count(scope)
        sessions, messages = conversations.counts()
        writer = _ZipWriter(handle, progress, total=len(files) + versions + messages)
        with writer:
            for name, path in files:
                writer.copy_file(name, path)
            index = []
            for number, (file, version, data) in enumerate(self.memory_file.history(scope), 1):
                writer.write(version_member(number), data)
                index.append({"file": version_member(number), "path": file, "created_at": version.created_at,
                              "cause": version.cause, "entries": version.entries, "sha256": version.sha256})
            writer.write_lines(VERSIONS_INDEX, iter(index))
            writer.write_lines(SESSIONS, iter(conversations.sessions()))
            written = writer.write_lines(MESSAGES, conversations.messages(), step=True)
            counts = dict(Counter(kind_of(name) for name, _ in files))
            counts.update(versions=len(index), sessions=sessions, messages=written)
            writer.write_manifest({
                "format": FORMAT, "format_version": FORMAT_VERSION, "membridge_version": self.app_version,
                "scope": scope, "exported_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "counts": {kind: counts.get(kind, 0) for kind in _COUNT_ORDER},
            })
        return {kind: counts.get(kind, 0) for kind in _COUNT_ORDER}

    def _scope_files(self, scope: str) -> list[tuple[str, Path]]:
        """(name, path) of the person's files: MEMORY.md, everything under memory/ (dreams included)
        and the kept media (hidden temp files of a writer and symlinks are not their data)."""
        return [(file.name, file.path) for file in scope_files(self.workspace, scope) if file.kind in PERSON_KINDS]

    def contents(self, scope: str) -> list[str]:
        """What ``scope`` holds, in words ("MEMORY.md", "3 files under memory/", ...); empty: nothing."""
        kinds = Counter(kind_of(name) for name, _path in self._scope_files(scope))
        under_memory = kinds["daily_files"] + kinds["dream_diaries"] + kinds["other_files"]
        versions = self.memory_file.version_count(scope)
        sessions, messages = ScopeConversations(self.conversations, scope).counts()
        parts = ["MEMORY.md"] if kinds["memory_md"] else []
        parts += [f"{under_memory} file(s) under memory/"] if under_memory else []
        parts += [f"{kinds['media_files']} kept media file(s)"] if kinds["media_files"] else []
        parts += [f"{versions} file version(s)"] if versions else []
        parts += [f"{sessions} conversation(s) with {messages} message(s)"] if sessions else []
        return parts

    # ================================================================= import
    def import_(self, archive_path: Path, scope: str, *, progress: ProgressCallback | None = None) -> TransferReport:
        """Restore an export into ``scope``, which must be empty, then index it."""
        started = time.monotonic()
        validate_scope(scope)
        self.workspace.scope_dir(scope)
        try:
            with CheckedArchive(archive_path) as archive:
                self._refuse_unless_empty(scope)
                with self.manager.lock:
                    counts = self._restore(archive, scope, progress)
        except ArchiveError as exc:
            raise PortabilityError(str(exc)) from None
        self.manager.indexer.mark_dirty(scope)
        report = self.manager.indexer.sync(scope, progress=progress)
        self.manager.indexer.finish_indexing(progress)
        if not report.ok:
            raise PortabilityError(f"the files of scope {scope!r} were restored but indexing failed ({report.error}); "
                                   f"`membridge memory sync --scope {scope}` retries it")
        return TransferReport(scope, archive_path, counts, archive_path.stat().st_size,
                              chunks_indexed=self.manager.storage.count_chunks(scope),
                              seconds=time.monotonic() - started)

    def _refuse_unless_empty(self, scope: str) -> None:
        found = self.contents(scope)
        if found:
            raise PortabilityError(f"scope {scope!r} is not empty: it has {', '.join(found)}. An import only fills "
                                   "an empty scope; give a new --scope name, or erase this one first")

    def _restore(self, archive: CheckedArchive, scope: str, progress: ProgressCallback | None) -> dict[str, int]:
        for leftover in import_leftovers(self.workspace, scope):  # a killed import's (imports hold the lock)
            shutil.rmtree(leftover, ignore_errors=True)
        staging = Path(tempfile.mkdtemp(prefix=import_staging_prefix(scope), dir=self.workspace.root))
        try:
            names = archive.scope_files()
            for done, name in enumerate(names, 1):
                _unpack(archive, name, staging / name)
                if progress:
                    progress("unpack", done, len(names))
            conversations = ScopeConversations(self.conversations, scope)
            with self.manager.db.transaction() as conn:
                self._refuse_unless_empty(scope)
                versions = self.memory_file.restore_versions(conn, scope, _versions(archive))
                sessions, messages = conversations.restore(conn, list(archive.records(SESSIONS)),
                                                           _counted(archive.records(MESSAGES), progress))
                unread = archive.unread()
                if unread:
                    raise ArchiveError(f"{archive.path}: members no version line names: {', '.join(unread[:5])}")
                self._move_into_place(staging, scope)
        except (ArchiveError, PortabilityError):
            raise
        except (KeyError, TypeError, ValueError, sqlite3.IntegrityError) as exc:
            raise ArchiveError(f"{archive.path}: a record is malformed ({exc!r}); refusing to import it") from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        counts = dict(Counter(kind_of(name) for name in names))
        counts.update(versions=versions, sessions=sessions, messages=messages)
        return {kind: counts.get(kind, 0) for kind in _COUNT_ORDER}

    def _move_into_place(self, staging: Path, scope: str) -> None:
        """Rename the unpacked MEMORY.md, memory/ and media/ into the scope's folder (one rename each)."""
        base = self.workspace.scope_dir(scope)
        make_folders(base)
        for entry in sorted(staging.iterdir()):
            target = base / entry.name
            if target.is_dir() and not any(target.iterdir()):
                target.rmdir()
            os.rename(entry, target)
        fsync_dir(base)


_COUNT_ORDER = ("memory_md", "daily_files", "dream_diaries", "other_files", "media_files", "versions", "sessions",
                "messages")


def _writable(out: Path) -> Path:
    """``out`` made absolute, or a clear error when its folder is missing or not writable."""
    target = out.expanduser().absolute()
    if target.is_dir():
        raise PortabilityError(f"{out} is a folder: give a file name, e.g. {out}/memory.zip")
    if not target.parent.is_dir():
        raise PortabilityError(f"cannot write {out}: the folder {target.parent} does not exist (create it first)")
    if not os.access(target.parent, os.W_OK | os.X_OK):
        raise PortabilityError(f"cannot write {out}: no permission to create files in {target.parent}")
    return target


def _unpack(archive: CheckedArchive, name: str, target: Path) -> None:
    make_folders(target.parent)
    with open(target, "xb") as handle:
        archive.copy(name, handle)
        handle.flush()
        os.fsync(handle.fileno())


def _versions(archive: CheckedArchive) -> Iterator[tuple[str, float, str, bytes]]:
    """(versioned file, time, cause, bytes) of each exported version; format 1 kept MEMORY.md's only."""
    for record in archive.records(VERSIONS_INDEX):
        yield (str(record.get("path", MEMORY_FILE)), float(record["created_at"]), str(record["cause"]),
               archive.read(str(record["file"])))


def _counted(records: Iterator[dict[str, Any]], progress: ProgressCallback | None) -> Iterator[dict[str, Any]]:
    for done, record in enumerate(records, 1):
        if progress and done % 1000 == 0:
            progress("restore", done, 0)
        yield record


class _ZipWriter:
    """Members into a zip, each hashed as it is written, the manifest last."""

    def __init__(self, handle: IO[bytes], progress: ProgressCallback | None, *, total: int) -> None:
        self._zip = zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_DEFLATED)
        self._files: dict[str, dict[str, Any]] = {}
        self._progress = progress
        self._total = total
        self._done = 0

    def __enter__(self) -> _ZipWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._zip.close()

    def _step(self, count: int = 1) -> None:
        self._done += count
        if self._progress:
            self._progress("export", self._done, self._total)

    def _member(self, name: str, pieces: Iterator[bytes], mtime: float | None = None) -> None:
        info = zipfile.ZipInfo(name, time.localtime(mtime)[:6])
        info.compress_type = zipfile.ZIP_DEFLATED
        info.external_attr = 0o100644 << 16  # a regular file, rw-r--r--
        digest, size = hashlib.sha256(), 0
        with self._zip.open(info, "w") as member:
            for piece in pieces:
                member.write(piece)
                digest.update(piece)
                size += len(piece)
        self._files[name] = {"size": size, "sha256": digest.hexdigest()}

    def copy_file(self, name: str, path: Path) -> None:
        with open(path, "rb") as source:
            self._member(name, iter(lambda: source.read(READ_CHUNK), b""), path.stat().st_mtime)
        self._step()

    def write(self, name: str, data: bytes) -> None:
        self._member(name, iter([data]))
        self._step()

    def write_lines(self, name: str, records: Iterator[dict[str, Any]], *, step: bool = False) -> int:
        """A JSONL member; ``step`` counts each line as a unit of progress (messages)."""
        written = 0

        def lines() -> Iterator[bytes]:
            nonlocal written
            for record in records:
                written += 1
                if step:
                    self._step()
                yield json_line(record)

        self._member(name, lines())
        return written

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        manifest["files"] = dict(sorted(self._files.items()))
        text = json.dumps(manifest, ensure_ascii=False, indent=2, sort_keys=True) + "\n"
        self._zip.writestr(MANIFEST, text.encode("utf-8"), compress_type=zipfile.ZIP_DEFLATED)
