"""How a memory's score is made: the ranking rules, stated once.

Every candidate chunk gets visible parts and one final score::

    relevance = vector_weight · v + keyword_weight · k + coverage_weight · c
                                                            (k alone when there is no vector side)
    recency   = 1 − recency_weight · (1 − 2^(−age_days / half_life_days))
    time      = 1 + time_weight   if the question names a time window and the chunk is dated in it
    update    > 1 only for a newer note raised above an older one about the same thing (see below)
    score     = relevance · recency · time · update

- ``v`` is the cosine similarity of the question and the chunk, rescaled by the embedder's
  similarity floor (the cosine that unrelated texts typically get: 0 for USE, ~0.7 for e5) so that
  0 means "unrelated" and 1 "the same" for every model; ``k`` is the keyword (BM25) score in
  (0, 1] for a chunk that holds the question's content words, times the share of those words
  (Chinese: bigrams) the chunk holds, each word weighted by its IDF; 0 otherwise. The share keeps a note that merely shares one
  word with the question (the best a note in the other language can do) from outranking the
  note that answers it by meaning.
- ``c`` is that share on its own, for every candidate (the coverage): a note the vector side
  found, which the keyword side's 40 did not reach, still gets credit for holding the question's
  words, and of two notes equally close in meaning the one holding more of them comes first. Its
  weight is small (0.05) because a note in the other language always has 0 here.
- **Relevance leads.** Age only tips near-ties: ``recency`` falls from 1 (today) towards
  ``1 − recency_weight`` (default 0.9) and never below it, so a note from two years ago that
  answers the question keeps at least 90% of its score and still beats yesterday's loose match.
  Half of that share is gone after ``half_life_days``. Only dated daily files age: MEMORY.md and
  knowledge are evergreen (recency 1). A question about the present ("now", "currently", "现在")
  uses ``now_recency_weight`` (default 0.4) instead: facts change, and the newest note wins.
- **Time windows.** "last week", "in May", "上个月" or a written date make the question's window
  (:mod:`.timewindow`); a chunk whose daily file's date, or a date written in its lines, falls in
  it is multiplied by ``1 + time_weight``. The time words themselves are left out of the keyword
  query, so notes that merely say "last week" are not preferred.
- **Updates.** For a question about the present, a newer note about the same thing as a
  better-ranked older one takes its place (:mod:`.updates`, ``update_boost``).
- ``min_score`` judges relevance (before recency and time): it weeds out weak vector neighbours.
  A keyword match and a chunk dated inside the question's window are always candidates.
  A result whose final score is 0 is never returned.
- **Passages.** The ranked chunks become the returned passages (:mod:`.passages`): overlapping
  chunks of one file join into one passage that keeps its best chunk's score, repeats are
  skipped, and all passages together hold at most ``limit × chunk_max_chars`` characters.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import date

from ..config import MemorySettings
from ..files.scopes import KNOWLEDGE_SCOPE, dated_file_date
from .timewindow import TimeWindow

_ISO_DATE_RE = re.compile(r"\b((?:19|20)\d\d)-(\d{1,2})-(\d{1,2})\b")
_ZH_DATE_RE = re.compile(r"((?:19|20)\d\d)\s*年\s*(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]")


@dataclass(frozen=True)
class ScoreParts:
    """The parts of one candidate's score (None: that side did not score it)."""

    vector: float | None
    keyword: float | None
    coverage: float
    relevance: float
    recency: float
    time: float

    @property
    def final(self) -> float:
        return self.relevance * self.recency * self.time


@functools.lru_cache(maxsize=8192)
def file_date(scope: str, path: str) -> date | None:
    """The date of a scope's daily memory file ``memory/YYYY-MM-DD.md``; None for other files.
    Kept for the files seen last: a search asks it of every candidate, ~100 a question."""
    if scope == KNOWLEDGE_SCOPE:
        return None
    parts = dated_file_date(path)
    if parts is None:
        return None
    try:
        return date(*parts)
    except ValueError:
        return None


def dates_in_text(text: str) -> list[date]:
    """Dates written inside lines (``2026-05-03``, ``2026年5月3日``): MEMORY.md entries carry them."""
    found: list[date] = []
    for regex in (_ISO_DATE_RE, _ZH_DATE_RE):
        for match in regex.finditer(text):
            try:
                found.append(date(int(match[1]), int(match[2]), int(match[3])))
            except ValueError:
                continue
    return found


def recency(settings: MemorySettings, dated: date | None, today: date, *, about_now: bool = False) -> float:
    """``1 − w·(1 − 2^(−age/half_life))`` for a dated note, 1.0 for an evergreen one; ``w`` is
    ``now_recency_weight`` for a question about the present, else ``recency_weight``."""
    if dated is None:
        return 1.0
    age = max(0, (today - dated).days)
    faded = 1.0 - 2.0 ** (-age / settings.half_life_days)
    weight = max(settings.recency_weight, settings.now_recency_weight) if about_now else settings.recency_weight
    return float(1.0 - weight * faded)


def in_window(window: TimeWindow | None, dated: date | None, text: str) -> bool:
    """Whether a chunk belongs to the question's window: by its file's date or a date in its lines."""
    if window is None:
        return False
    if dated is not None and window.contains(dated):
        return True
    return any(window.contains(day) for day in dates_in_text(text))


def relevance(settings: MemorySettings, vector: float | None, keyword: float | None, share: float, hybrid: bool) -> float:
    """The fused relevance of a chunk; a side that did not score it counts 0."""
    if not hybrid:
        return keyword or 0.0
    return (
        settings.vector_weight * (vector or 0.0)
        + settings.keyword_weight * (keyword or 0.0)
        + settings.coverage_weight * share
    )


def rescale_similarity(cosine: float, floor: float) -> float:
    """A model's cosine mapped so that its unrelated-text floor is 0 and identity is 1, in [0, 1]."""
    if floor >= 1.0:
        return max(0.0, min(1.0, cosine))
    return max(0.0, min(1.0, (cosine - floor) / (1.0 - floor)))
