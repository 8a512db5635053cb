"""One search result, with every part of its score (see :mod:`.scoring`) and the lines that matched."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from itertools import pairwise

from ..index.chunker import embedding_text

#: What a person is shown of one result by default: enough for two or three notes.
SHOWN_CHARS = 600


@dataclass
class Match:
    """One entry of a result that answers the question (:mod:`memory.index.entries`), lines of the file."""

    start_line: int
    end_line: int
    text: str
    score: float


@dataclass
class SearchResult:
    path: str
    start_line: int
    end_line: int
    score: float
    text: str
    source: str  # "memory" or "knowledge"
    scope: str
    vector_score: float | None = None
    keyword_score: float | None = None
    coverage: float = 0.0
    relevance: float = 0.0
    recency: float = 1.0
    time_boost: float = 1.0
    update_boost: float = 1.0
    rerank_score: float | None = None  # the remote reranker's score (memory.rerank), when it ordered this result
    date: str | None = None  # the daily file's day, YYYY-MM-DD; None for MEMORY.md and knowledge
    weak: bool = False  # relevance below ``memory.weak_below``: shown, but labelled as a loose match
    matches: list[Match] = field(default_factory=list)  # the entries that match best, best first

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def excerpt(self, max_chars: int = SHOWN_CHARS) -> str:
        """What a person is shown: the matching entries in the file's order (``…`` between entries
        that are not adjacent), else the passage without flush markers and section headings;
        at most ``max_chars`` characters, cut at the end."""
        if self.matches:
            ordered = sorted(self.matches, key=lambda match: match.start_line)
            pieces = [ordered[0].text]
            for before, match in pairwise(ordered):
                pieces.append(match.text if match.start_line == before.end_line + 1 else f"…\n{match.text}")
            text = "\n".join(pieces)
        else:
            text = embedding_text(self.text)
        text = text.strip()
        return text if len(text) <= max_chars else text[: max_chars - 1].rstrip() + "…"

    @property
    def line(self) -> int:
        """The first line of the best match (the passage's first line without one)."""
        return self.matches[0].start_line if self.matches else self.start_line

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"
