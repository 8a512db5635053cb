"""Removing the lines that hold a text: the one rule a forget applies to files, versions and summaries.

A text matches a line when the line holds it, case-insensitively, as typed (surrounding blanks
stripped); a matching line goes whole. Files, kept versions, session summaries and job errors are
all cut by :func:`without_lines`, so what a dry run lists is exactly what a forget removes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .files import atomic_write, fsync_dir, read_text

Matcher = Callable[[str], bool]


class NothingToForget(ValueError):
    """An empty or blank text: it would match everything."""


def text_matcher(text: str) -> Matcher:
    """A test for "this holds ``text``" (case-insensitive); a blank text is refused."""
    needle = text.strip().lower()
    if not needle:
        raise NothingToForget("say what to forget: the text is empty")
    return lambda haystack: needle in haystack.lower()


def matching_lines(text: str, matches: Matcher) -> list[tuple[int, str]]:
    """(line number from 1, line) of each line of ``text`` that ``matches``."""
    return [(number, line) for number, line in enumerate(text.splitlines(), 1) if matches(line)]


def without_lines(text: str, matches: Matcher, *, blank: bool = False) -> str | None:
    """``text`` without its matching lines (left empty when ``blank``, so the other lines keep
    their numbers); None when no line matched, so an untouched text is never rewritten."""
    lines = text.splitlines(keepends=True)
    kept = [("\n" if blank else "") if matches(line) else line for line in lines]
    return None if kept == lines else "".join(kept)


def rewrite_without(path: Path, matches: Matcher, *, blank: bool) -> bool:
    """Replace the file ``path`` atomically without its matching lines, or delete it when nothing
    but blanks would be left; returns whether it changed."""
    kept = without_lines(read_text(path), matches, blank=blank)
    if kept is None:
        return False
    if kept.strip():
        atomic_write(path, kept.encode("utf-8"))
    else:
        path.unlink(missing_ok=True)
        fsync_dir(path.parent)
    return True
