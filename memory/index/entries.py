"""Entries: the unit that carries meaning, one vector each.

A chunk (:mod:`.chunker`) is the keyword and display unit: ~800 characters of lines. But daily
memory is a list of short, unrelated facts, and one vector for a dozen of them is a blur: a question
sharing no word with its fact, or asked in the other language, is not found (measured: cosine of
"when is the user's birthday" to a day of 12 notes holding ``- 用户的生日是三月十二日。`` 0.08, to the
line alone 0.54). So each chunk is split into entries and every entry gets its own vector; a chunk
is scored by its best entries (:mod:`memory.retrieval`).

An entry is:

- a list item (``-``, ``*``, ``+`` or ``1.``) with its continuation lines (indented lines, a nested
  list included): a note of daily memory or MEMORY.md;
- a stretch of raw conversation: three or more turn lines in a row (``- Caroline: …``) by two or
  more speakers. A turn alone ("Cool! What did it look like?") carries none of its conversation's
  context, and as a question it is close to any question: scored turn by turn, LoCoMo's raw
  conversation lost 3.8 points of hit@5 (0.893 → 0.855); as one entry per stretch it is back
  (0.892), where a turn with its previous one reached 0.887 and the stretch beside its turns 0.874
  (bench/README, "Entries and auto-recall"). Notes stand alone and stay one entry each;
- a paragraph (consecutive non-blank lines that are not list items): a knowledge page's prose;
- never a heading: a heading only names what follows (``## 18:30 notes``, ``## Wi-Fi``), and as an
  entry of its own it would outrank the notes below it for any question that names its topic
  (the keyword side still finds its words);
- a chunk that is one piece of a long line (:func:`memory.index.chunker.chunk_text`) is one entry.

Entries are made from a chunk's text, so an entry never crosses a chunk's lines; chunks overlap by
a few lines, and an entry on them is in both chunks (its vector is embedded once: the embedding
cache is by text hash). Entries are not stored with their text: a chunk's text and the entry's
lines give it back (:func:`entry_text`), so forgetting a chunk forgets its entries.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .chunker import Chunk, embedding_text, text_hash
from .database import rows_in

_ITEM_RE = re.compile(r"^ {0,3}(?:[-*+]|\d{1,3}[.)])\s+\S")
_HEADING_RE = re.compile(r"^ {0,3}#{1,6}\s")
_COMMENT_ONLY_RE = re.compile(r"^\s*<!--.*-->\s*$")
#: A turn line: a list item that starts with a speaker's name (at most 3 words) and a colon,
#: after an optional ``[id]`` and time.
_TURN_RE = re.compile(r"^ {0,3}[-*+]\s+(?:\[[^\]\n]{1,40}\]\s+)?(?:\d{1,2}:\d{2}\s+)?([^\s:：\[][^:：\n]{0,23})[:：]\s")
#: The fewest turns in a row that make a stretch of conversation.
MIN_TURNS = 3
#: The version of how a chunk is split into entries, kept in the index (meta ``entries_rule``): an
#: index split under another is split again once when opened. What an entry's text embeds to is
#: :data:`memory.index.chunker.EMBEDDING_TEXT_RULE`'s, so an entry whose text did not change keeps
#: its vector and only new texts are embedded (5: two turns that are all their chunk holds are one).
ENTRY_RULE = 5

SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, chunk_id TEXT NOT NULL, scope TEXT NOT NULL,
    path TEXT NOT NULL, start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, text_hash TEXT NOT NULL,
    vec_model TEXT
);
CREATE INDEX IF NOT EXISTS entries_chunk ON entries (chunk_id);
CREATE INDEX IF NOT EXISTS entries_scope ON entries (scope, vec_model);
CREATE INDEX IF NOT EXISTS entries_vec_model ON entries (vec_model);
"""


@dataclass(frozen=True)
class Entry:
    """One entry of a chunk: its lines (1-based, inclusive, the file's numbering) and its text."""

    start_line: int
    end_line: int
    text: str

    @property
    def embedded_text(self) -> str:
        """What of the entry is embedded: its lines without HTML comments (flush markers)."""
        return embedding_text(self.text)

    @property
    def text_hash(self) -> str:
        return text_hash(self.embedded_text)


@dataclass(frozen=True)
class EntryRow:
    """An entry as the index knows it: which chunk holds it and its vector's text hash."""

    id: str
    chunk_id: str
    start_line: int
    end_line: int
    text_hash: str


def split_entries(text: str, start_line: int, *, part: int = 0) -> list[Entry]:
    """The entries of a chunk's ``text`` whose first line is ``start_line`` (see the module doc).

    ``part`` > 0, or a chunk of one line, is a single entry: a piece of a long line is cut anywhere.
    """
    lines = text.split("\n")
    if part > 0 or len(lines) == 1:
        return [Entry(start_line, start_line + len(lines) - 1, text)] if _meaningful(text) else []
    entries: list[Entry] = []
    current: list[tuple[int, str]] = []

    def close() -> None:
        if current and any(_meaningful(line) for _, line in current):
            entries.append(Entry(current[0][0], current[-1][0], "\n".join(line for _, line in current)))
        current.clear()

    for number, line in enumerate(lines, start=start_line):
        if not line.strip() or _COMMENT_ONLY_RE.match(line) or _HEADING_RE.match(line):
            close()
        elif _ITEM_RE.match(line):
            close()
            current.append((number, line))
        else:  # a continuation (indented) or a paragraph's next line
            current.append((number, line))
    close()
    return _transcripts(entries, lines, start_line)


def _transcripts(entries: list[Entry], lines: list[str], start_line: int) -> list[Entry]:
    """``entries`` with each stretch of raw conversation (:func:`_is_conversation`) joined into one
    entry: a turn ("Cool! What did it look like?") means little without the turns around it (see
    the module doc)."""
    joined: list[Entry] = []
    run: list[Entry] = []

    def close() -> None:
        if _is_conversation([_speaker(entry.text) for entry in run], whole=len(run) == len(entries)):
            first, last = run[0], run[-1]
            text = "\n".join(lines[first.start_line - start_line : last.end_line - start_line + 1])
            joined.append(Entry(first.start_line, last.end_line, text))
        else:
            joined.extend(run)
        run.clear()

    for entry in entries:
        adjacent = bool(run) and all(not line.strip() for line in lines[run[-1].end_line - start_line + 1 : entry.start_line - start_line])
        if run and not adjacent:
            close()
        if _speaker(entry.text) is None:
            close()
            joined.append(entry)
        else:
            run.append(entry)
    close()
    return joined


def turn_offsets(text: str) -> list[int]:
    """The offsets of the turn lines of an entry's ``text`` when it is a stretch of conversation
    (see the module doc), else ``[]``: such an entry is shown by its turn that matches, not whole."""
    lines = text.split("\n")
    turns = [(i, speaker) for i, line in enumerate(lines) if (speaker := _speaker(line)) is not None]
    whole = len(turns) == len(lines)  # an entry of turns alone is all that its chunk held of them
    return [i for i, _ in turns] if _is_conversation([speaker for _, speaker in turns], whole=whole) else []


def _is_conversation(speakers: Sequence[str | None], *, whole: bool) -> bool:
    """Whether turns by ``speakers`` in a row are a stretch of conversation: at least
    :data:`MIN_TURNS` turns, by two or more speakers, one of them speaking twice; or, when they are
    ``whole`` (every entry of their chunk), two turns by two speakers. A chunk that holds only two
    turns (a file's last lines, or two long turns) would otherwise score each turn alone, the blur
    the stretch is there to avoid: on LoCoMo's raw conversation such a lone turn outranked the
    stretch holding the answer (hit@5 0.892 → 0.893 original, 0.868 → 0.870 recent). The cost: a
    chunk of exactly two labelled notes ("- Wi-Fi: …", "- Router: …") is one entry too."""
    named = set(speakers)
    if None in named or len(named) < 2:
        return False
    return (len(speakers) >= MIN_TURNS and len(named) < len(speakers)) or (whole and len(speakers) == 2)


def _speaker(line: str) -> str | None:
    """Who says a turn line (``- Caroline: …``, ``- [D1:3] Caroline: …``, ``- 14:02 user: …``), else None."""
    match = _TURN_RE.match(line)
    if match is None or len(match[1].split()) > 3:
        return None
    return match[1].strip().casefold()


def _meaningful(text: str) -> bool:
    return bool(embedding_text(text).strip()) and not _HEADING_RE.match(text)


def entry_text(chunk_text: str, chunk_start: int, start_line: int, end_line: int) -> str:
    """The lines ``start_line``..``end_line`` of a chunk whose first line is ``chunk_start``."""
    lines = chunk_text.split("\n")
    return "\n".join(lines[start_line - chunk_start : end_line - chunk_start + 1])


def entry_id(chunk_id: str, entry: Entry) -> str:
    raw = f"{chunk_id}\0{entry.start_line}\0{entry.end_line}\0{entry.text_hash}".encode()
    return hashlib.sha1(raw).hexdigest()[:24]


def chunk_entries(chunk: Chunk) -> list[Entry]:
    return split_entries(chunk.text, chunk.start_line, part=chunk.part)


# ------------------------------------------------------------------ the rows
#: Chunks whose entries a process keeps in RAM (a few hundred bytes each): auto-recall searches the
#: same person's memory on every turn, and reading the candidates' entries from SQLite was a sixth
#: of a search (bench/README.md, "Auto-recall under 10 ms").
ENTRY_CACHE_CHUNKS = 4096

Query = Callable[[str, Sequence[object]], Iterable[Sequence[Any]]]


class EntryRowCache:
    """The entries of the :data:`ENTRY_CACHE_CHUNKS` chunks read most recently, by chunk id and
    text hash. A chunk's entries follow from its text, so a kept one is never stale; each chunk's
    are read from SQLite together with the text hash it had then (one statement: one snapshot), so
    a chunk rewritten meanwhile is kept under its new hash, never under the old one."""

    def __init__(self, query: Query, capacity: int = ENTRY_CACHE_CHUNKS) -> None:
        """``query``: :meth:`memory.index.database.Database.query`."""
        self._query = query
        self._capacity = capacity
        self._lock = threading.Lock()
        self._rows: OrderedDict[tuple[str, str], tuple[EntryRow, ...]] = OrderedDict()
        self._clears = 0  # a read that a clear overtook keeps nothing (it may hold what a forget removed)

    def rows(self, chunks: Sequence[tuple[str, str]]) -> list[EntryRow]:
        """The entries of ``chunks``, given as (id, text hash), those read before from RAM."""
        found: list[EntryRow] = []
        missing: list[str] = []
        with self._lock:
            clears = self._clears
            for key in chunks:
                held = self._rows.get(key)
                if held is None:
                    missing.append(key[0])
                else:
                    self._rows.move_to_end(key)
                    found.extend(held)
        if missing:
            read = self._read(missing)
            with self._lock:
                if clears == self._clears:
                    self._rows.update(read)
                while len(self._rows) > self._capacity:
                    self._rows.popitem(last=False)
            found.extend(row for rows in read.values() for row in rows)
        return found

    def clear(self) -> None:
        """Forget every chunk's entries (this process wrote the index)."""
        with self._lock:
            self._rows.clear()
            self._clears += 1

    def __len__(self) -> int:
        return len(self._rows)

    def _read(self, chunk_ids: Sequence[str]) -> dict[tuple[str, str], tuple[EntryRow, ...]]:
        """(chunk id, its text hash) -> its entries, for the chunks of ``chunk_ids`` still there."""
        sql = ("SELECT c.id, c.text_hash, e.id, e.start_line, e.end_line, e.text_hash FROM chunks c"
               " LEFT JOIN entries e ON e.chunk_id = c.id WHERE c.id IN ({marks})")
        read: dict[tuple[str, str], list[EntryRow]] = {}
        for chunk_id, chunk_hash, entry_id, start, end, entry_hash in rows_in(self._query, sql, chunk_ids):
            rows = read.setdefault((chunk_id, chunk_hash), [])
            if entry_id is not None:
                rows.append(EntryRow(entry_id, chunk_id, start, end, entry_hash))
        return {key: tuple(rows) for key, rows in read.items()}


def write_entries(conn: sqlite3.Connection, chunks: Iterable[Chunk]) -> None:
    """Insert the entries of ``chunks`` (whose old entries the caller removed), not yet embedded."""
    conn.executemany(
        "INSERT OR IGNORE INTO entries (id, chunk_id, scope, path, start_line, end_line, text_hash, vec_model)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, NULL)",
        [(entry_id(c.id, e), c.id, c.scope, c.path, e.start_line, e.end_line, e.text_hash)
         for c in chunks for e in chunk_entries(c)],
    )


def delete_entries(conn: sqlite3.Connection, chunk_ids: Sequence[str]) -> list[str]:
    """Delete the entries of ``chunk_ids``; returns their ids (their vectors must go too)."""
    if not chunk_ids:
        return []
    ids = [row[0] for row in rows_in(conn.execute, "SELECT id FROM entries WHERE chunk_id IN ({marks})", chunk_ids)]
    conn.executemany("DELETE FROM entries WHERE id = ?", ((i,) for i in ids))
    return ids

