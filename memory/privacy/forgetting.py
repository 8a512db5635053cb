"""Forget a text in one scope, erase a whole scope, or age out old daily files: for real.

A text lives in many places: the scope's files (MEMORY.md, daily files, dream diaries), the
versions of MEMORY.md, the conversation store (messages, session summaries), the index (chunks,
both FTS5 indexes, cached vectors, LanceDB rows and their old versions, the RAM vector cache), and
the free pages and WAL of ``index.db``. Each forget, erase or expiry is a recorded job, run in two
phases, each safe to run again from the start:

1. ``remove`` (under the workspace lock, so no sync or flush interleaves): the index first (a search
   stops finding the text at once), then the files and versions, then the conversation store;
   then the job forgets the text it was given (phase ``wipe``, text NULL), in one transaction.
2. ``wipe``: the rewritten files are indexed again, the keyword indexes merged (FTS5 keeps a deleted
   term in its old segments until then), LanceDB compacted with every older version removed, and
   the database vacuumed and its WAL truncated. Then the job row goes.

A SIGKILL anywhere leaves the job recorded; :meth:`Forgetter.resume` (run when the memory is
opened) finishes it before anything reads. Matching is case-insensitive on the text as typed; a
line (of a file or a version), a conversation turn or a summary line that holds it goes whole.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date

from ..conversations.conversations import ConversationStore
from ..conversations.scope_conversations import ScopeConversations
from ..files.files import fsync_dir, read_text
from ..files.line_removal import Matcher, NothingToForget, matching_lines, rewrite_without, text_matcher
from ..files.memory_file import MemoryFile
from ..files.scopes import validate_scope
from ..manager import MemoryManager
from .holdings import LINE_KINDS, ScopeFile, delete_scope_files, file_day, import_leftovers, scope_files

log = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS forget_jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, scope TEXT NOT NULL, needle TEXT,
    phase TEXT NOT NULL DEFAULT 'remove', created_at REAL NOT NULL
);
"""

#: The places a match is counted in, in the order a listing shows them.
PLACES = ("memory files", "dream diaries", "media files", "import leftovers", "file versions", "messages",
          "session summaries", "index")
#: Where each kind of scope file (:mod:`memory.privacy.holdings`) is counted.
_FILE_PLACES = {"dream_diaries": "dream diaries", "media_files": "media files", "import_leftovers": "import leftovers",
                "export_leftovers": "export leftovers"}
#: What the dry run says of an export waiting in the outbox: a zip's text is deflated, so it is not read.
_UNSENT_EXPORT = "an export of this scope not sent (or still being sent): removed whole"

__all__ = ["PLACES", "Findings", "ForgetDeferred", "ForgetElsewhere", "Forgetter", "Match", "NothingToForget", "pending_forget_jobs"]


@dataclass(frozen=True)
class Match:
    place: str  # one of PLACES
    where: str  # file:line, "MEMORY.md v3:2", "session#seq", a chunk's path:start-end
    text: str


@dataclass
class Findings:
    """What a forget would remove (a dry run), or did remove."""

    scope: str
    matches: list[Match] = field(default_factory=list)
    done: bool = False

    def counts(self) -> dict[str, int]:
        counted = Counter(match.place for match in self.matches)
        return {place: counted[place] for place in PLACES if counted[place]}

    def listing(self, limit: int = 50, width: int = 100) -> str:
        """Counts per place, then each match as ``place  where  text`` (the first ``limit``)."""
        if not self.matches:
            return "nothing matches"
        lines = ["; ".join(f"{place}: {count}" for place, count in self.counts().items())]
        for match in self.matches[:limit]:
            text = " ".join(match.text.split())  # a chunk's lines on one line
            text = text if len(text) <= width else text[: width - 1] + "…"
            lines.append(f"  {match.place}  {match.where}  {text}")
        if len(self.matches) > limit:
            lines.append(f"  … and {len(self.matches) - limit} more")
        return "\n".join(lines)


#: A store outside the workspace that holds a scope's text (a cluster shard's Redis stream), called
#: in a forget's or erase's remove phase with the scope and what to remove (None: all of the scope).
#: What it raises leaves the job recorded, so it runs again; it must therefore be idempotent.
ForgetElsewhere = Callable[[str, Matcher | None], None]


class ForgetDeferred(RuntimeError):
    """A store outside the workspace (a :data:`ForgetElsewhere`) cannot be reached now: the job stays
    recorded and is finished at the next start. ``str(exc)`` says which store and why."""


class Forgetter:
    """Runs forget, erase and expiry jobs on one workspace; thread-safe through the workspace lock."""

    def __init__(self, memory: MemoryManager, conversations: ConversationStore, memory_file: MemoryFile,
                 elsewhere: Sequence[ForgetElsewhere] = ()) -> None:
        self.memory = memory
        self.conversations = conversations
        self.memory_file = memory_file
        self.elsewhere = tuple(elsewhere)
        memory.db.execute_script(SCHEMA)

    # ------------------------------------------------------------ the front
    def find(self, scope: str, text: str) -> Findings:
        """Every place ``text`` lives in ``scope``, with file:line: the dry run."""
        validate_scope(scope)
        matches = text_matcher(text)
        found = Findings(scope)
        for file in scope_files(self.memory.workspace, scope):
            place = _FILE_PLACES.get(file.kind, "memory files")
            if file.kind == "export_leftovers":
                found.matches.append(Match(place, file.name, _UNSENT_EXPORT))
                continue
            try:
                lines = matching_lines(read_text(file.path), matches)
            except FileNotFoundError:  # the dry run holds no lock: a writer's temp file was renamed since
                continue
            if file.kind in LINE_KINDS:
                found.matches += [Match(place, f"{file.name}:{number}", line.strip()) for number, line in lines]
            elif lines:  # a kept photo or document, a killed writer's or import's file: it goes whole
                found.matches.append(Match(place, file.name, lines[0][1].strip()))
        for versioned, version, number, line in self.memory_file.find_in_versions(scope, matches):
            found.matches.append(Match("file versions", f"{versioned} v{version}:{number}", line.strip()))
        for kind, where, line in self.conversations.find_text(scope, matches):
            found.matches.append(Match("messages" if kind == "message" else "session summaries", where, line.strip()))
        for indexed, start, end, chunk, _hash in self.memory.storage.scope_chunks(scope):
            if matches(chunk):
                found.matches.append(Match("index", f"{indexed}:{start}-{end}", chunk.strip()))
        return found

    def forget(self, scope: str, text: str) -> Findings:
        """Remove ``text`` from every place in ``scope``; returns what was found (and is now gone)."""
        found = self.find(scope, text)
        self._run(self._record("forget", scope, text.strip()))
        found.done = True
        return found

    def holdings(self, scope: str) -> dict[str, int]:
        """What an erase of ``scope`` would remove, counted: files, index chunks, file versions,
        sessions and messages (all 0: nothing is stored for it)."""
        validate_scope(scope)
        files = len(scope_files(self.memory.workspace, scope))
        sessions, messages = ScopeConversations(self.conversations, scope).counts()
        return {"files": files, "chunks": self.memory.storage.count_chunks(scope),
                "versions": self.memory_file.version_count(scope), "sessions": sessions, "messages": messages}

    def known_scopes(self) -> list[str]:
        """Scopes that have a folder or conversations (a chat whose memory has no file yet), sorted."""
        return sorted({*self.memory.workspace.list_scopes(), *self.conversations.scopes()})

    def erase(self, scope: str) -> None:
        """Remove ``scope`` whole: files, index rows, vectors, cached vectors, versions, sessions,
        messages and jobs. Other scopes are not touched."""
        validate_scope(scope)
        self._run(self._record("erase", scope, None))

    def expire(self, scope: str, before: date) -> bool:
        """Remove the daily files of ``scope`` dated before ``before``, their dream diaries and
        everything indexed from them (``memory.retention.daily_days``); False when none was there."""
        validate_scope(scope)
        if not any(self._old_days(scope, before)):
            return False
        self._run(self._record("expire", scope, before.isoformat()))
        return True

    def resume(self) -> int:
        """Finish every job a crash left; returns how many."""
        rows = self.memory.db.query("SELECT id FROM forget_jobs ORDER BY id")
        for row in rows:
            log.info("finishing forget job %d, left unfinished by an earlier run", row[0])
            self._run(int(row[0]))
        return len(rows)

    # ---------------------------------------------------------------- jobs
    def _record(self, kind: str, scope: str, needle: str | None) -> int:
        with self.memory.db.transaction() as conn:
            cursor = conn.execute("INSERT INTO forget_jobs (kind, scope, needle, created_at) VALUES (?, ?, ?, ?)",
                                  (kind, scope, needle, time.time()))
            return int(cursor.lastrowid or 0)

    def _run(self, job_id: int) -> None:
        rows = self.memory.db.query("SELECT kind, scope, needle, phase FROM forget_jobs WHERE id = ?", (job_id,))
        if not rows:
            return
        kind, scope, needle, phase = rows[0]
        if phase == "remove":
            with self.memory.lock:
                self._remove(kind, scope, needle)
                with self.memory.db.transaction() as conn:  # the text goes from the job row too
                    conn.execute("UPDATE forget_jobs SET phase = 'wipe', needle = NULL WHERE id = ?", (job_id,))
        self._wipe(scope)
        with self.memory.db.transaction() as conn:  # secure_delete zeroes the row; the WAL is emptied next
            conn.execute("DELETE FROM forget_jobs WHERE id = ?", (job_id,))
        self.memory.db.scrub(vacuum=False)

    def _remove(self, kind: str, scope: str, needle: str | None) -> None:
        if kind == "forget":
            assert needle is not None
            self._remove_text(scope, text_matcher(needle))
        elif kind == "erase":
            self._remove_scope(scope)
        else:
            self._remove_days(scope, date.fromisoformat(needle or ""))
        if kind != "expire":
            for forget_elsewhere in self.elsewhere:
                forget_elsewhere(scope, text_matcher(needle) if needle else None)

    def _remove_text(self, scope: str, matches: Matcher) -> None:
        """Files and versions first, then the index follows them by an ordinary sync (only the
        chunks whose text changed are rewritten, in place); a chunk that still holds the text
        after it (the sync failed, or a file was edited since it was indexed) takes its file out of
        the index until the next sync."""
        doomed = sorted({text_hash for _p, _s, _e, text, text_hash in self.memory.storage.scope_chunks(scope)
                         if matches(text)}
                        | {entry.text_hash for entry in self.memory.storage.scope_entries(scope) if matches(entry.text)})
        for file in scope_files(self.memory.workspace, scope):
            _remove_from_file(file, matches)
        for folder in import_leftovers(self.memory.workspace, scope):  # imports unpack under the lock held here
            shutil.rmtree(folder, ignore_errors=True)
        self.memory_file.scrub_versions(scope, matches)
        self.conversations.forget_text(scope, matches)
        self.memory.recalls.erase_scope(scope)
        report = self.memory.indexer.sync(scope)
        if not report.ok:
            log.warning("re-indexing %s during a forget failed (%s); its files leave the index until the next sync",
                        scope, report.error)
        stale = {path for path, _s, _e, text, _h in self.memory.storage.scope_chunks(scope) if matches(text)}
        if stale:
            self.memory.indexer.unindex(scope, stale)
        with self.memory.storage.write() as conn:
            self.memory.embed_cache.drop_cached_vectors(conn, doomed)

    def _remove_scope(self, scope: str) -> None:
        indexed = [path for (_scope, path) in self.memory.storage.files(scope)]
        indexed += [path for path, *_rest in self.memory.storage.scope_chunks(scope)]
        hashes = self.memory.indexer.unindex(scope, indexed, erase=True)
        with self.memory.storage.write() as conn:
            self.memory.embed_cache.drop_cached_vectors(conn, hashes)
        self.memory_file.erase_history(scope)
        self.conversations.erase_scope(scope)
        self.memory.recalls.erase_scope(scope)
        delete_scope_files(self.memory.workspace, scope)

    def _old_days(self, scope: str, before: date) -> tuple[list[ScopeFile], list[str]]:
        """The daily files and dream diaries dated before ``before`` on disk, and those in the index."""
        old = [file for file in scope_files(self.memory.workspace, scope) if _before(file.day, before)]
        return old, [path for (_scope, path) in self.memory.storage.files(scope) if _before(file_day(path), before)]

    def _remove_days(self, scope: str, before: date) -> None:
        old, indexed = self._old_days(scope, before)
        hashes = self.memory.indexer.unindex(scope, indexed + [file.name for file in old])
        with self.memory.storage.write() as conn:
            self.memory.embed_cache.drop_cached_vectors(conn, hashes)
        for file in old:
            file.path.unlink(missing_ok=True)
            fsync_dir(file.path.parent)
        self.memory_file.erase_history(scope, [file.name for file in old])

    def _wipe(self, scope: str) -> None:
        """Make every deletion physical."""
        self.memory.indexer.finish_indexing()
        self.memory.keywords.merge()
        if self.memory.vectors is not None:
            with self.memory.lock:
                self.memory.vectors.purge()
        self.memory.db.scrub()  # busy: the job stays recorded, and the next start retries


def _before(day: date | None, before: date) -> bool:
    return day is not None and day < before


def _remove_from_file(file: ScopeFile, matches: Matcher) -> None:
    """A memory file loses its matching lines (emptied, except in MEMORY.md, so the other lines
    keep their numbers and their chunks their ids); any other file that holds the text (a kept
    photo or document, a killed writer's temp file) goes whole: cutting lines out of its bytes
    would leave a broken file, and a temp file is nobody's data. An export left in the outbox goes
    whole whatever it holds (its text is deflated; a new export makes a fresh one). Import leftovers
    go whole after."""
    if file.kind in LINE_KINDS:
        rewrite_without(file.path, matches, blank=file.kind != "memory_md")
    elif file.kind == "export_leftovers" or (file.kind != "import_leftovers" and matches(read_text(file.path))):
        file.path.unlink(missing_ok=True)
        fsync_dir(file.path.parent)


def pending_forget_jobs(memory: MemoryManager) -> int:
    """How many forget jobs are recorded and unfinished (0 before the first forget ever)."""
    if not memory.db.query("SELECT 1 FROM sqlite_master WHERE name = 'forget_jobs'"):
        return 0
    return int(memory.db.query("SELECT count(*) FROM forget_jobs")[0][0])
