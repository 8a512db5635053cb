"""Which lines of a result answer the question: its best entries, shown instead of its start.

A passage holds ~800 characters of a daily file: a dozen unrelated notes. Showing its first
lines (what chat replies did) hides the note that matched, and a cut at 300 characters may cut
off the very word asked for. The engine scores every entry of every candidate on its own (the
chunk's score is its best entry's); a returned passage's ``matches`` are its best entries: the
best one, and any other within :data:`CLOSE_TO_BEST` of it, at most :data:`MAX_MATCHES`. A
stretch of conversation is one entry of many turns: it is shown by its turn holding most of the
question's words (with none, by its first lines).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ..index.entries import EntryRow, turn_offsets
from ..index.storage import StoredChunk
from .result import Match, SearchResult

MAX_MATCHES = 3
CLOSE_TO_BEST = 0.75


@dataclass(frozen=True)
class EntryScore:
    """One entry of a candidate scored like a candidate (see :mod:`.scoring`)."""

    row: EntryRow
    text: str
    vector: float | None
    keyword: float | None
    share: float
    relevance: float


def add_matches(results: Sequence[SearchResult], scored: Iterable[tuple[StoredChunk, list[EntryScore]]],
                share: Callable[[str], float]) -> None:
    """Fill each result's ``matches`` in place from the scored entries of the candidates whose
    lines it holds (a passage may join several chunks; an entry two of them share counts once);
    ``share`` gives the share of the question's words a text holds."""
    by_file: dict[tuple[str, str], dict[tuple[int, int], EntryScore]] = {}
    for chunk, entries in scored:
        mine = by_file.setdefault((chunk.scope, chunk.path), {})
        for entry in entries:
            mine.setdefault((entry.row.start_line, entry.row.end_line), entry)
    for result in results:
        inside = [entry for (start, end), entry in by_file.get((result.scope, result.path), {}).items()
                  if result.start_line <= start and end <= result.end_line]
        inside.sort(key=lambda entry: (-entry.relevance, -entry.share, entry.row.start_line))
        best = (inside[0].relevance, inside[0].share) if inside else (0.0, 0.0)
        result.matches = [_match(e, share) for e in inside[:MAX_MATCHES] if _close(e, best)]


def _match(entry: EntryScore, share: Callable[[str], float]) -> Match:
    """The entry as a match; a stretch of conversation narrowed to its turn with most of the
    question's words (the first such turn), when one has any."""
    lines = entry.text.split("\n")
    shares = {offset: share(lines[offset]) for offset in turn_offsets(entry.text)}
    turn = max(shares, key=lambda offset: (shares[offset], -offset), default=None)
    if turn is None or shares[turn] <= 0:
        return Match(entry.row.start_line, entry.row.end_line, entry.text, round(entry.relevance, 6))
    return Match(entry.row.start_line + turn, entry.row.start_line + turn, lines[turn], round(entry.relevance, 6))


def _close(entry: EntryScore, best: tuple[float, float]) -> bool:
    """Within :data:`CLOSE_TO_BEST` of the best entry, by relevance, or by the share of the
    question's words when no entry has any relevance (a chunk found only for its date). With
    neither, nothing matched in particular: the result shows its passage."""
    if best[0] > 0:
        return entry.relevance >= CLOSE_TO_BEST * best[0]
    return best[1] > 0 and entry.share >= CLOSE_TO_BEST * best[1]
