"""One search result, with every part of its score (see :mod:`.scoring`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass


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

    def to_dict(self) -> dict[str, object]:
        return asdict(self)
