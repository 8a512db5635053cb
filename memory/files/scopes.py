"""Scopes and the workspace layout: whose memory lives where.

A scope is whose memory a turn may read and write. Every function that touches memory takes a
scope explicitly; there is no "all scopes" default. Knowledge is the one shared area and is stored
under the reserved scope id ``@knowledge``, which no user scope can spell.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from pathlib import Path

from .files import atomic_write, make_folders

KNOWLEDGE_SCOPE = "@knowledge"
GLOBAL_SCOPE = "global"
MEMORY_FILE = "MEMORY.md"
DAILY_DIR = "memory"
DREAMS_DIR = "dreams"
KNOWLEDGE_DIR = "knowledge"
MEDIA_DIR = "media"  # bytes of photos and files kept with media.keep (never indexed)

_SCOPE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_DATED_RE = re.compile(r"(?:^|/)memory/(\d{4})-(\d{2})-(\d{2})\.md$")


class MemoryPathError(ValueError):
    """A path that is not a memory file of the caller's scope (or knowledge)."""


class ScopeError(ValueError):
    """A scope id that cannot name a directory safely."""


def validate_scope(scope: str) -> str:
    """Return ``scope`` if it is a safe directory name, else raise :class:`ScopeError`."""
    if not isinstance(scope, str) or not _SCOPE_RE.match(scope) or ".." in scope:
        raise ScopeError(
            f"invalid scope {scope!r}: use 1-128 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return scope


def dated_file_date(path: str) -> tuple[int, int, int] | None:
    """The (year, month, day) of a daily memory file ``memory/YYYY-MM-DD.md``, else None."""
    match = _DATED_RE.search(path.replace("\\", "/"))
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3))


@dataclass(frozen=True)
class Workspace:
    """Where each scope's files live.

    ``mode="user"`` keeps each scope in ``scopes/<scope>/``; ``mode="global"`` uses the workspace
    root itself for the single scope ``global`` (the seed's layout).
    """

    root: Path
    mode: str = "user"

    @property
    def db_path(self) -> Path:
        return self.root / "index.db"

    @property
    def vectors_dir(self) -> Path:
        return self.root / "vectors"

    @property
    def cache_dir(self) -> Path:
        """What can be rebuilt at any time (the local model's parsed tokenizer): safe to delete."""
        return self.root / "cache"

    @property
    def knowledge_dir(self) -> Path:
        return self.root / KNOWLEDGE_DIR

    @property
    def exports_dir(self) -> Path:
        """Hidden: a chat's export waits here until it is sent, then it is deleted."""
        return self.root / ".exports"

    @property
    def scopes_dir(self) -> Path:
        return self.root / "scopes"

    def scope_dir(self, scope: str) -> Path:
        """The directory holding ``scope``'s MEMORY.md and daily files."""
        if scope == KNOWLEDGE_SCOPE:
            return self.root
        validate_scope(scope)
        if self.mode == "global":
            if scope != GLOBAL_SCOPE:
                raise ScopeError(f"memory.scope is 'global': the only scope is 'global', not {scope!r}")
            return self.root
        return self.scopes_dir / scope

    def memory_file(self, scope: str) -> Path:
        return self.scope_dir(scope) / MEMORY_FILE

    def daily_dir(self, scope: str) -> Path:
        return self.scope_dir(scope) / DAILY_DIR

    def daily_file(self, scope: str, day: str) -> Path:
        return self.daily_dir(scope) / f"{day}.md"

    def dreams_dir(self, scope: str) -> Path:
        return self.daily_dir(scope) / DREAMS_DIR

    def media_dir(self, scope: str) -> Path:
        """Where the bytes of a scope's photos and files are kept (``media.keep``); erase removes it."""
        return self.scope_dir(scope) / MEDIA_DIR

    def keep_media(self, scope: str, data: bytes, suffix: str) -> Path:
        """Write ``data`` (atomically) as a new file of the scope's media folder, named
        ``<random hex><suffix>``: a name from a message never becomes a path. Returns the file."""
        if not re.fullmatch(r"\.[a-z0-9]{1,8}", suffix):
            raise ValueError(f"media suffix {suffix!r} must be a dot and 1-8 lowercase letters or digits")
        folder = self.media_dir(scope)
        make_folders(folder)
        target = folder / f"{uuid.uuid4().hex}{suffix}"
        atomic_write(target, data)
        return target

    def list_scopes(self) -> list[str]:
        """Scopes that have a directory on disk, sorted."""
        if self.mode == "global":
            return [GLOBAL_SCOPE]
        if not self.scopes_dir.is_dir():
            return []
        return sorted(p.name for p in self.scopes_dir.iterdir() if p.is_dir() and _SCOPE_RE.match(p.name))

    def ensure(self) -> None:
        """Create the workspace's top-level directories."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.knowledge_dir.mkdir(exist_ok=True)
        if self.mode == "user":
            self.scopes_dir.mkdir(exist_ok=True)

    def resolve_memory_path(self, scope: str, path: str) -> Path:
        """The file behind a memory path, or :class:`MemoryPathError` if it is not ``scope``'s.

        Allowed: ``MEMORY.md``, ``memory/**.md`` of the scope, and ``knowledge/**.md`` except
        ``knowledge/log.md`` (who changed what: people's ids). Absolute paths, ``..``, NUL bytes and
        symlinks that lead out are refused.
        """
        validate_scope(scope)
        if not path or "\x00" in path:
            raise MemoryPathError("path is empty or contains a NUL byte")
        clean = path.replace("\\", "/").strip()
        if clean.startswith("/") or (len(clean) > 1 and clean[1] == ":"):
            raise MemoryPathError(f"{path!r} is absolute; use a path like MEMORY.md or memory/2026-01-31.md")
        parts = [p for p in clean.split("/") if p not in ("", ".")]
        if ".." in parts:
            raise MemoryPathError(f"{path!r} leaves the memory folder ('..' is not allowed)")
        if not parts or not parts[-1].endswith(".md"):
            raise MemoryPathError(f"{path!r} is not a markdown memory file")
        if parts[0] == KNOWLEDGE_DIR:
            root = self.knowledge_dir
            target = root.joinpath(*parts[1:])
        elif parts == [MEMORY_FILE] or parts[0] == DAILY_DIR:
            root = self.scope_dir(scope)
            target = root.joinpath(*parts)
        else:
            raise MemoryPathError(f"{path!r} is not a memory file: use MEMORY.md, memory/... or knowledge/...")
        real_root = root.resolve()
        allowed = real_root if parts[0] == KNOWLEDGE_DIR else real_root / parts[0]
        resolved = target.resolve()
        if resolved != allowed and allowed not in resolved.parents:
            raise MemoryPathError(f"{path!r} points outside the memory folder")
        change_log = real_root / "log.md"
        if parts[0] == KNOWLEDGE_DIR and (
            resolved == change_log or (resolved.exists() and change_log.exists() and resolved.samefile(change_log))
        ):
            raise MemoryPathError(
                f"{path!r}: knowledge/log.md is the knowledge change log (who changed what) and is not readable "
                "here; read the pages themselves, e.g. knowledge/index.md lists them"
            )
        return resolved
