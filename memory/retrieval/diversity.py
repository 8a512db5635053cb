"""Keep the top results from repeating each other.

Chunks of one file overlap by a few lines (so that a fact on a boundary is whole in one of them),
and the same note is sometimes written twice. Without care, two or three of five results can be
the same lines. :func:`diversify` walks the ranking best first and skips a result that repeats one
already taken: the same text, or mostly the same lines of the same file.
"""

from __future__ import annotations

from collections.abc import Iterable

from .result import SearchResult

#: A result sharing more than this share of its lines with a better one of the same file repeats it.
MAX_SHARED_LINES = 0.5


def _repeats(candidate: SearchResult, kept: SearchResult) -> bool:
    if candidate.text.strip() == kept.text.strip():
        return True
    if candidate.scope != kept.scope or candidate.path != kept.path:
        return False
    shared = min(candidate.end_line, kept.end_line) - max(candidate.start_line, kept.start_line) + 1
    lines = candidate.end_line - candidate.start_line + 1
    return shared > MAX_SHARED_LINES * lines


def diversify(ranked: Iterable[SearchResult], limit: int) -> list[SearchResult]:
    """The first ``limit`` results of ``ranked`` (best first) that repeat no better one."""
    kept: list[SearchResult] = []
    for result in ranked:
        if not any(_repeats(result, better) for better in kept):
            kept.append(result)
            if len(kept) == limit:
                break
    return kept
