"""Markdown split into line-numbered chunks.

Chunks follow lines so that a search hit can be read back with ``memory_get(path, start, lines)``.
A single line longer than the bound is cut into parts; each part is its own chunk with its own id,
so a 5,000-character line is fully findable and ids never collide.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

#: The version of what is embedded (:func:`embedding_text`, since 3 one vector per entry:
#: :mod:`memory.index.entries`, since 4 a stretch of conversation one entry): part of every real
#: embedder's ``model_id``, so that a change of rule re-embeds the index once (vectors of two rules
#: never mix). How chunks split into entries has its own version since
#: (:data:`memory.index.entries.ENTRY_RULE`): a new split embeds only the entries it changed.
EMBEDDING_TEXT_RULE = 4
#: The titles of the sections membridge writes into daily files (``## HH:MM conversation notes``).
SECTION_TITLES = ("conversation notes", "daily summary")
_COMMENT_RE = re.compile(r"<!--.*?-->", re.DOTALL)
_SECTION_HEADING_RE = re.compile(
    r"^#{1,6}\s*(?:\d{1,2}:\d{2}\s*)?(?:" + "|".join(map(re.escape, SECTION_TITLES)) + r")\s*$", re.MULTILINE
)


@dataclass(frozen=True)
class Chunk:
    """One indexed piece of a file. Lines are 1-based and inclusive."""

    id: str
    scope: str
    path: str
    start_line: int
    end_line: int
    part: int
    text: str

    @property
    def text_hash(self) -> str:
        return text_hash(self.text)


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def embedding_text(text: str) -> str:
    """What of a chunk is embedded: the text a reader sees, without HTML comments (flush markers)
    and without the section headings membridge writes above every block of a daily file. Those
    are the same in every note, and in a note of one or two lines they are half of its words,
    pulling every vector towards the others (measured: Chinese↔English recall 0.71 → see
    bench/README.md). The chunk's stored text, and so what search shows, is unchanged."""
    cleaned = _SECTION_HEADING_RE.sub("", _COMMENT_RE.sub("", text)).strip()
    return cleaned or text


def chunk_id(scope: str, path: str, start_line: int, end_line: int, part: int) -> str:
    raw = f"{scope}\0{path}\0{start_line}\0{end_line}\0{part}".encode()
    return hashlib.sha1(raw).hexdigest()[:24]


def _split_long_line(line: str, max_chars: int) -> list[str]:
    """Cut a line at whitespace near the bound when possible, else hard at the bound."""
    parts: list[str] = []
    rest = line
    while len(rest) > max_chars:
        cut = rest.rfind(" ", max_chars // 2, max_chars)
        cut = cut if cut > 0 else max_chars
        parts.append(rest[:cut])
        rest = rest[cut:]
    if rest:
        parts.append(rest)
    return parts


def chunk_text(
    text: str,
    *,
    scope: str,
    path: str,
    max_chars: int = 800,
    overlap_lines: int = 2,
) -> list[Chunk]:
    """Split ``text`` into chunks of at most ``max_chars`` characters, by whole lines.

    Consecutive chunks share up to ``overlap_lines`` lines so that a fact spanning a boundary is
    still found whole in one of them. Blank-only chunks are dropped.
    """
    chunks: list[Chunk] = []
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()

    def emit(start: int, end: int, body: str, part: int = 0) -> None:
        if body.strip():
            chunks.append(Chunk(chunk_id(scope, path, start, end, part), scope, path, start, end, part, body))

    window: list[tuple[int, str]] = []  # (line number, line text)
    size = 0

    def flush_window() -> None:
        nonlocal window, size
        if not window:
            return
        emit(window[0][0], window[-1][0], "\n".join(line for _, line in window))
        keep = window[-overlap_lines:] if 0 < overlap_lines < len(window) else []
        window = list(keep)
        size = sum(len(line) + 1 for _, line in window)

    for number, line in enumerate(lines, start=1):
        if len(line) > max_chars:
            flush_window()
            window, size = [], 0
            for part, piece in enumerate(_split_long_line(line, max_chars)):
                emit(number, number, piece, part)
            continue
        if window and size + len(line) + 1 > max_chars:
            flush_window()
            while window and size + len(line) + 1 > max_chars:
                size -= len(window[0][1]) + 1
                window.pop(0)
        window.append((number, line))
        size += len(line) + 1
    if window and (not chunks or window[-1][0] > chunks[-1].end_line):
        emit(window[0][0], window[-1][0], "\n".join(line for _, line in window))
    return chunks
