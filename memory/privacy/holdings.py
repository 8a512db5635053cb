"""What a scope holds on disk: the one list that forget, erase, export, import, retention and the console ask.

A scope's files are MEMORY.md, everything under ``memory/`` (daily files, dream diaries, whatever
else lands there), the kept media under ``media/`` (``media.keep``), stray files (the hidden temp
files a killed writer leaves, anything else in the scope's folder), the staging folder of an import killed while it unpacked
(``<workspace>/.import-<scope>-<8 random characters>``), and the exports a chat's ``/memory export``
wrote to the outbox and a crash left unsent (``<workspace>/.exports/<scope>-<12 hex digits>.zip``, or
its temp file while written). Each comes as a :class:`ScopeFile` with its
kind, so every caller sees the same files and picks by kind (an export takes the person's data; a
forget reads them all): a new kind of file is added here, once, and nobody can miss it.

Symbolic links are never followed or listed: a link is not the person's data, and following one
could reach outside the scope.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from ..files.files import fsync_dir
from ..files.scopes import DAILY_DIR, DREAMS_DIR, MEDIA_DIR, MEMORY_FILE, Workspace, dated_file_date, validate_scope

#: The kinds of file a scope holds, in the order a count shows them.
KINDS = ("memory_md", "daily_files", "dream_diaries", "other_files", "media_files", "stray_files", "import_leftovers",
         "export_leftovers")
#: The kinds that are the person's data: what an export carries and an import restores.
PERSON_KINDS = frozenset({"memory_md", "daily_files", "dream_diaries", "other_files", "media_files"})
#: The kinds whose lines are text a forget removes line by line (a media file goes whole).
LINE_KINDS = frozenset({"memory_md", "daily_files", "dream_diaries", "other_files"})

_STAGING_RE = re.compile(r"^\.import-(?P<scope>.+)-[a-z0-9_]{8}$")  # tempfile.mkdtemp's 8 random characters
_OUTBOX_RE = re.compile(r"^\.?(?P<scope>.+)-[0-9a-f]{12}\.zip(?:\..+\.tmp)?$")  # the zip, or its temp file


@dataclass(frozen=True)
class ScopeFile:
    """One file of a scope: where it is, its name as an export and a listing show it, and its kind."""

    path: Path
    name: str  # relative to the scope's folder; an import leftover's, relative to the workspace root
    kind: str  # one of KINDS

    @property
    def day(self) -> date | None:
        """The date of a daily file or dream diary, else None."""
        return file_day(self.name)


def file_day(name: str) -> date | None:
    """The date of the daily file or dream diary named ``name`` (``memory/[dreams/]YYYY-MM-DD.md``
    relative to its scope's folder, as the index names it too), else None."""
    if kind_of(name) not in ("daily_files", "dream_diaries"):
        return None
    found = dated_file_date(name.replace(f"{DAILY_DIR}/{DREAMS_DIR}/", f"{DAILY_DIR}/", 1))
    return None if found is None or name.count("/") > 2 else date(*found)


def kind_of(name: str) -> str:
    """The kind of a file named ``name`` relative to its scope's folder (as in an export)."""
    parts = name.split("/")
    if name == MEMORY_FILE:
        return "memory_md"
    if any(part.startswith(".") for part in parts) or parts[0] not in (DAILY_DIR, MEDIA_DIR):
        return "stray_files"  # a killed writer's hidden temp file, or a file outside the layout
    if parts[0] == MEDIA_DIR:
        return "media_files"
    if name.startswith(f"{DAILY_DIR}/{DREAMS_DIR}/"):
        return "dream_diaries"
    if len(parts) == 2 and parts[0] == DAILY_DIR and dated_file_date(name):
        return "daily_files"
    return "other_files"


def import_staging_prefix(scope: str) -> str:
    """The name an import's staging folder for ``scope`` starts with (``tempfile.mkdtemp``'s prefix)."""
    return f".import-{validate_scope(scope)}-"


def scope_files(workspace: Workspace, scope: str) -> list[ScopeFile]:
    """Every regular file ``scope`` holds, sorted by name, import leftovers last."""
    base = workspace.scope_dir(scope)
    names = sorted((path.relative_to(base).as_posix(), path) for path in _own_files(workspace, base))
    files = [ScopeFile(path, name, kind_of(name)) for name, path in names]
    for folder in import_leftovers(workspace, scope):
        files += [ScopeFile(path, path.relative_to(workspace.root).as_posix(), "import_leftovers")
                  for path in sorted(_walk(folder))]
    files += [ScopeFile(path, path.relative_to(workspace.root).as_posix(), "export_leftovers")
              for path in export_leftovers(workspace, scope)]
    return files


def outbox_name(scope: str, unique: str) -> str:
    """The name of a chat's export of ``scope`` in the workspace's outbox (``unique``: 12 hex digits)."""
    return f"{validate_scope(scope)}-{unique}.zip"


def export_leftovers(workspace: Workspace, scope: str) -> list[Path]:
    """The exports of ``scope`` waiting in the outbox (a send under way, or one a crash cut short),
    and the temp file of one being written; the scope is read from the name as for an import's."""
    return _named_for(workspace.exports_dir, _OUTBOX_RE, scope, folders=False)


def import_leftovers(workspace: Workspace, scope: str) -> list[Path]:
    """The staging folders of ``scope``'s imports that were killed while they unpacked. The scope
    is read from the name (everything between ``.import-`` and the last ``-`` and 8 characters), so
    a scope whose name starts like another's is never confused with it."""
    return _named_for(workspace.root, _STAGING_RE, scope, folders=True)


def _named_for(folder: Path, pattern: re.Pattern[str], scope: str, *, folders: bool) -> list[Path]:
    """The entries of ``folder`` (sub-folders or regular files, never links) whose name ``pattern``
    matches with ``scope`` as its ``scope`` group."""
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return []
    return sorted(Path(entry.path) for entry in entries
                  if (entry.is_dir(follow_symlinks=False) if folders else entry.is_file(follow_symlinks=False))
                  and (match := pattern.match(entry.name)) and match.group("scope") == scope)


def delete_scope_files(workspace: Workspace, scope: str) -> None:
    """Delete everything ``scope`` holds on disk, import leftovers included; its folder goes too
    (in ``memory.scope: global`` the root stays, with the knowledge base and the index)."""
    base = workspace.scope_dir(scope)
    for folder in import_leftovers(workspace, scope):
        shutil.rmtree(folder, ignore_errors=True)
    for unsent in export_leftovers(workspace, scope):
        unsent.unlink(missing_ok=True)
        fsync_dir(unsent.parent)
    if base == workspace.root:
        for path in _own_files(workspace, base):
            if path.parent == base:
                path.unlink(missing_ok=True)
        for name in (DAILY_DIR, MEDIA_DIR):
            shutil.rmtree(base / name, ignore_errors=True)
    else:
        shutil.rmtree(base, ignore_errors=True)
    fsync_dir(base if base == workspace.root else base.parent)


def _own_files(workspace: Workspace, base: Path) -> Iterator[Path]:
    """The files under the scope's folder. In global mode that folder is the workspace root, so
    only MEMORY.md, its temp files, ``memory/`` and ``media/`` are the scope's."""
    if base != workspace.root:
        yield from _walk(base)
        return
    memory_md = base / MEMORY_FILE
    if memory_md.is_file() and not memory_md.is_symlink():
        yield memory_md
    yield from (path for path in base.glob(f".{MEMORY_FILE}.*.tmp") if not path.is_symlink())
    for folder in (DAILY_DIR, MEDIA_DIR):
        yield from _walk(base / folder)


def _walk(top: Path) -> Iterator[Path]:
    """Regular files under ``top``, hidden ones included, never through a symbolic link."""
    if not top.is_dir() or top.is_symlink():
        return
    for folder, dirs, names in os.walk(top):
        dirs[:] = [d for d in dirs if not Path(folder, d).is_symlink()]
        for name in names:
            path = Path(folder, name)
            if path.is_file() and not path.is_symlink():
                yield path
