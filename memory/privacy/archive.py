"""The export zip's format, and reading one without trusting it.

An export is one zip::

    manifest.json                   format, versions, scope, time, counts, size and SHA-256 per member
    MEMORY.md, memory/..., media/...  the scope's files (media: kept with media.keep), byte for byte as on disk
    versions/versions.jsonl         one line per kept version (MEMORY.md's, a daily file's), oldest first
    versions/NNNNNN.md              that version's bytes
    conversations/sessions.jsonl    one line per conversation (chat, channel, context boundaries)
    conversations/messages.jsonl    one line per message, session by session in order

A zip to import may come from anywhere, so :class:`CheckedArchive` refuses, before a byte is
written: members with absolute paths, ``..``, backslashes or drive letters, symlinks, encrypted or
duplicate members, names outside the layout above, more than :data:`MAX_MEMBERS` members, a member
over :data:`MAX_MEMBER_BYTES`, more than :data:`MAX_TOTAL_BYTES` in all, or a member that inflates
more than :data:`MAX_RATIO` times (a zip bomb). Sizes come from the central directory, and the zip
reader never returns more than the declared size; every byte read is then checked against the
manifest's SHA-256, so a damaged or edited member fails the import.
"""

from __future__ import annotations

import hashlib
import json
import re
import stat
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from ..files.scopes import DAILY_DIR, MEDIA_DIR, MEMORY_FILE

FORMAT = "membridge-memory-export"
#: 4: kept media under ``media/``; 3: a message is a turn (``text``, ``meta``); 2: a version line names its file (``path``); 1 held
#: MEMORY.md versions only. Formats 1 and 2 (messages as the chat API's JSON under ``message``) are still read.
FORMAT_VERSION = 4
MANIFEST = "manifest.json"
VERSIONS_INDEX = "versions/versions.jsonl"
SESSIONS = "conversations/sessions.jsonl"
MESSAGES = "conversations/messages.jsonl"

MAX_MEMBERS = 100_000
MAX_MEMBER_BYTES = 1 << 30  # 1 GiB
MAX_TOTAL_BYTES = 2 << 30  # 2 GiB
MAX_RATIO = 1000  # uncompressed / compressed, for members over 1 MiB
MAX_MANIFEST_BYTES = 64 << 20
_RATIO_FLOOR = 1 << 20
READ_CHUNK = 1 << 20
MAX_LINE_BYTES = 16 << 20  # a JSONL record: the largest, a knowledge_write call of 1M characters, is a few MiB

_VERSION_RE = re.compile(r"^versions/\d{6}\.md$")
_DRIVE_RE = re.compile(r"^[A-Za-z]:")
_METADATA = frozenset({MANIFEST, VERSIONS_INDEX, SESSIONS, MESSAGES})


class ArchiveError(ValueError):
    """A zip that cannot be imported; the message names the zip, the member and what to do."""


def version_member(index: int) -> str:
    """The member holding the ``index``-th version (1 = oldest)."""
    return f"versions/{index:06d}.md"


def is_scope_file(name: str) -> bool:
    """A member restored as a file of the scope: MEMORY.md, anything under memory/ or media/."""
    return name == MEMORY_FILE or name.startswith((f"{DAILY_DIR}/", f"{MEDIA_DIR}/"))


def json_line(record: dict[str, Any]) -> bytes:
    """One JSONL line, the same bytes for the same record every time (a round trip compares bytes)."""
    return (json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")


class CheckedArchive:
    """An export zip opened for import: structure checked on open, every read checked on the way."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._zip = zipfile.ZipFile(path)
        except FileNotFoundError:
            raise ArchiveError(f"{path} does not exist") from None
        except IsADirectoryError:
            raise ArchiveError(f"{path} is a folder, not an export zip") from None
        except zipfile.BadZipFile:
            raise ArchiveError(f"{path} is not a zip file (or it is damaged): give a file made by "
                               "`membridge memory export`") from None
        try:
            self.members = self._check_members()
            self.manifest = self._read_manifest()
        except BaseException:
            self._zip.close()
            raise
        self._verified: set[str] = set()

    def close(self) -> None:
        self._zip.close()

    def __enter__(self) -> CheckedArchive:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------ structure
    def _refuse(self, reason: str) -> ArchiveError:
        return ArchiveError(f"{self.path}: {reason}; refusing to import it")

    def _check_members(self) -> dict[str, zipfile.ZipInfo]:
        infos = self._zip.infolist()
        if len(infos) > MAX_MEMBERS:
            raise self._refuse(f"it has {len(infos):,} members, more than the {MAX_MEMBERS:,} an export can have")
        members: dict[str, zipfile.ZipInfo] = {}
        total = 0
        for info in infos:
            self._check_member(info)
            if info.is_dir():
                continue
            if info.filename in members:
                raise self._refuse(f"member {info.filename!r} appears twice")
            members[info.filename] = info
            total += info.file_size
        if total > MAX_TOTAL_BYTES:
            raise self._refuse(f"it unpacks to {total:,} bytes, more than the limit of {MAX_TOTAL_BYTES:,}")
        if MANIFEST not in members:
            raise self._refuse(f"it has no {MANIFEST}, so it was not made by `membridge memory export`")
        return members

    def _check_member(self, info: zipfile.ZipInfo) -> None:
        name = info.filename
        parts = name.rstrip("/").split("/")
        if name.startswith("/") or _DRIVE_RE.match(name) or "\\" in name or "\x00" in name:
            raise self._refuse(f"member {name!r} has an absolute or non-portable path")
        if ".." in parts or "" in parts or "." in parts:
            raise self._refuse(f"member {name!r} has a '..', '.' or empty path part")
        if stat.S_ISLNK(info.external_attr >> 16):
            raise self._refuse(f"member {name!r} is a symbolic link")
        if info.flag_bits & 0x1:
            raise self._refuse(f"member {name!r} is encrypted")
        if info.is_dir():
            return
        if name not in _METADATA and not _VERSION_RE.match(name) and not is_scope_file(name):
            raise self._refuse(f"member {name!r} is not part of a memory export")
        if any(part.startswith(".") for part in parts):
            raise self._refuse(f"member {name!r} is a hidden file")
        if info.file_size > MAX_MEMBER_BYTES:
            raise self._refuse(f"member {name!r} unpacks to {info.file_size:,} bytes, over {MAX_MEMBER_BYTES:,}")
        if info.file_size > _RATIO_FLOOR and info.file_size > MAX_RATIO * max(info.compress_size, 1):
            raise self._refuse(f"member {name!r} inflates {info.file_size // max(info.compress_size, 1):,} times "
                               f"(a zip bomb?); an export never exceeds {MAX_RATIO} times")

    def _read_manifest(self) -> dict[str, Any]:
        if self.members[MANIFEST].file_size > MAX_MANIFEST_BYTES:
            raise self._refuse(f"{MANIFEST} is larger than {MAX_MANIFEST_BYTES:,} bytes")
        try:
            manifest = json.loads(self._zip.read(MANIFEST))
        except (ValueError, zipfile.BadZipFile) as exc:
            raise self._refuse(f"{MANIFEST} is not valid JSON ({exc})") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise self._refuse(f"{MANIFEST} does not describe a membridge memory export")
        version = manifest.get("format_version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise self._refuse(f"it is in export format {version!r}, newer than this membridge reads "
                               f"({FORMAT_VERSION}); upgrade membridge")
        files = manifest.get("files")
        if not isinstance(files, dict) or not all(isinstance(v, dict) for v in files.values()):
            raise self._refuse(f"{MANIFEST} has no valid 'files' table")
        listed, present = set(files), set(self.members) - {MANIFEST}
        if listed != present:
            extra, missing = sorted(present - listed), sorted(listed - present)
            detail = f"not in {MANIFEST}: {', '.join(extra[:5])}" if extra else f"missing: {', '.join(missing[:5])}"
            raise self._refuse(f"its members do not match {MANIFEST} ({detail})")
        return manifest

    # --------------------------------------------------------------- reading
    def scope_files(self) -> list[str]:
        return sorted(name for name in self.members if is_scope_file(name))

    def chunks(self, name: str) -> Iterator[bytes]:
        """The bytes of member ``name`` in pieces; the last piece comes only after its size and
        SHA-256 matched the manifest (a mismatch raises :class:`ArchiveError` instead)."""
        if name not in self.members:
            raise self._refuse(f"member {name!r} is referenced but not in the zip")
        expected = self.manifest["files"][name]
        digest = hashlib.sha256()
        size = 0
        try:
            with self._zip.open(name) as handle:
                pending = handle.read(READ_CHUNK)
                while pending:
                    piece, pending = pending, handle.read(READ_CHUNK)
                    digest.update(piece)
                    size += len(piece)
                    if pending:
                        yield piece
                    else:
                        self._verify(name, expected, size, digest.hexdigest())
                        yield piece
        except zipfile.BadZipFile as exc:
            raise self._refuse(f"member {name!r} is damaged ({exc})") from None
        if size == 0:
            self._verify(name, expected, size, digest.hexdigest())
        self._verified.add(name)

    def _verify(self, name: str, expected: dict[str, Any], size: int, sha256: str) -> None:
        if expected.get("size") != size or expected.get("sha256") != sha256:
            raise self._refuse(f"member {name!r} does not match its size and SHA-256 in {MANIFEST} "
                               "(the file is damaged or was changed after the export)")

    def read(self, name: str) -> bytes:
        return b"".join(self.chunks(name))

    def copy(self, name: str, handle: IO[bytes]) -> int:
        size = 0
        for piece in self.chunks(name):
            handle.write(piece)
            size += len(piece)
        return size

    def records(self, name: str) -> Iterator[dict[str, Any]]:
        """The JSON objects of a JSONL member, one per line. A member that fails its SHA-256 raises
        before its last line, so a caller writing inside a transaction rolls it all back. Each byte
        is copied once (a line spanning many pieces costs its length, not its length squared), and a
        line over :data:`MAX_LINE_BYTES` is refused as soon as it gets there."""
        line = bytearray()
        number = 0
        for piece in self.chunks(name):
            start = 0
            while (end := piece.find(b"\n", start)) != -1:
                self._grow(line, piece[start:end], name, number + 1)
                number += 1
                yield self._record(name, number, bytes(line))
                line.clear()
                start = end + 1
            self._grow(line, piece[start:], name, number + 1)
        if line.strip():
            yield self._record(name, number + 1, bytes(line))

    def _grow(self, line: bytearray, more: bytes, name: str, number: int) -> None:
        if len(line) + len(more) > MAX_LINE_BYTES:
            raise self._refuse(f"line {number} of {name} is longer than {MAX_LINE_BYTES:,} bytes, more than an "
                               "export writes")
        line += more

    def _record(self, name: str, number: int, line: bytes) -> dict[str, Any]:
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise self._refuse(f"line {number} of {name} is not JSON ({exc})") from None
        if not isinstance(record, dict):
            raise self._refuse(f"line {number} of {name} is not a JSON object")
        return record

    def unread(self) -> list[str]:
        """Members listed in the manifest that no step read (and so never verified)."""
        return sorted(set(self.members) - self._verified - {MANIFEST})
