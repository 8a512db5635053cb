"""Turn the ranked chunks into the passages a search returns, within a budget of characters.

Chunks of one file overlap by a few lines, so that a fact on a boundary is whole in one of them;
and an answer often runs over two of them (a question in one chunk, its reply in the next). Five
chunks shown one by one would repeat lines and cut such an answer in half, or fill the results
with near-copies. :func:`assemble` walks the ranking best first and, for each chunk:

- skips it when a passage already taken has the same text (a note written twice);
- joins it to the passages it overlaps in the same file, when their shared lines read the same:
  the passage then spans the union of their lines, with the text of those lines in order, and
  keeps the rank and score parts of its best chunk (pieces of one long line never join: their
  shared line reads differently in each);
- skips it when more than half of its lines repeat lines of a passage it could not join;
- otherwise takes it as a new passage.

A join or a new passage is taken only while all passages together stay within ``budget``
characters, so the reader is handed the same amount of text whether the answer lies in one long
passage or in five short ones; the best passage is always returned, whatever its length.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from .result import SearchResult

#: A chunk sharing more than this share of its lines with a passage it cannot join repeats it.
MAX_SHARED_LINES = 0.5


def assemble(ranked: Iterable[SearchResult], limit: int, budget: int) -> list[SearchResult]:
    """At most ``limit`` passages built from ``ranked`` (best first), ``budget`` characters in all."""
    kept: list[SearchResult] = []
    for result in ranked:
        if any(result.text.strip() == passage.text.strip() for passage in kept):
            continue
        if _join(kept, result, budget):
            continue
        if any(_repeats(result, passage) for passage in kept):
            continue
        if kept and _size(kept) + len(result.text) > budget:
            continue
        kept.append(result)
        if len(kept) == limit:
            break
    return kept


def _join(kept: list[SearchResult], result: SearchResult, budget: int) -> bool:
    """Join ``result`` and every passage it overlaps into the best of them, if the total stays
    within ``budget``; whether it was joined."""
    touched = [i for i, passage in enumerate(kept) if _joinable(passage, result)]
    if not touched:
        return False
    lines = _lines(result)
    for i in touched:
        lines.update(_lines(kept[i]))
    first, last = min(lines), max(lines)
    joined = replace(kept[touched[0]], start_line=first, end_line=last, text="\n".join(lines[n] for n in range(first, last + 1)))
    rest = [passage for i, passage in enumerate(kept) if i not in touched[1:]]
    rest[touched[0]] = joined
    if _size(rest) > max(budget, _size(kept)):
        return False
    kept[:] = rest
    return True


def _joinable(passage: SearchResult, result: SearchResult) -> bool:
    """Whether two results of one file overlap and read the same on every line they share."""
    if passage.scope != result.scope or passage.path != result.path:
        return False
    mine, theirs = _lines(passage), _lines(result)
    shared = mine.keys() & theirs.keys()
    return bool(shared) and all(mine[n] == theirs[n] for n in shared)


def _repeats(candidate: SearchResult, kept: SearchResult) -> bool:
    """Whether more than half of ``candidate``'s lines are lines of ``kept`` that read the same."""
    if candidate.scope != kept.scope or candidate.path != kept.path:
        return False
    mine, theirs = _lines(candidate), _lines(kept)
    same = sum(1 for n, line in mine.items() if theirs.get(n) == line)
    return same > MAX_SHARED_LINES * len(mine)


def _lines(result: SearchResult) -> dict[int, str]:
    """The result's text by line number (a chunk's text is its span's lines; a piece of a long
    line is one line, so two pieces of one line read differently on it)."""
    return dict(enumerate(result.text.split("\n"), start=result.start_line))


def _size(passages: list[SearchResult]) -> int:
    return sum(len(passage.text) for passage in passages)
