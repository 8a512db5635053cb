"""Auto-recall: the notes a person's message calls to mind, put before the model by itself.

The model sees a memory only when it calls ``memory_search``, and many models (small local ones
above all) rarely call tools unprompted. So before each reply the person's message is searched in
their own scope (never another's, nor the shared knowledge: that stays a tool), and the best
matching entries (:mod:`.matches`) that MEMORY.md does not already hold are handed to the prompt,
best first, within ``memory.auto_recall.max_chars``. Each says where it came from, its date and
why it was chosen (its relevance and whether by meaning or by words), so the console can show it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..config import AutoRecallSettings
from .result import SearchResult


@dataclass(frozen=True)
class Recalled:
    """One entry put into the prompt: its lines, text, date and why it was chosen."""

    path: str
    start_line: int
    end_line: int
    text: str
    date: str | None
    relevance: float
    why: str  # "meaning", "words" or "meaning and words"

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def pick(results: list[SearchResult], settings: AutoRecallSettings, memory_md: str) -> list[Recalled]:
    """The entries of ``results`` (best first) worth recalling: relevant enough, not already in
    MEMORY.md (``memory_md``'s text), each once, within ``settings.max_chars`` in all."""
    held = " ".join(memory_md.lower().split())
    picked: list[Recalled] = []
    seen: set[str] = set()
    used = 0
    for result in results:
        if result.relevance < settings.min_relevance:
            continue
        for match in result.matches:
            text = match.text.strip()
            plain = " ".join(text.lstrip("-*+ ").lower().split())
            if not plain or plain in seen or plain in held:
                continue
            if used + len(text) > settings.max_chars:
                return picked
            seen.add(plain)
            used += len(text)
            picked.append(Recalled(result.path, match.start_line, match.end_line, text, result.date,
                                   round(result.relevance, 3), _why(result)))
    return picked


def _why(result: SearchResult) -> str:
    by_meaning = (result.vector_score or 0.0) > 0.0
    by_words = (result.keyword_score or 0.0) > 0.0
    if by_meaning and by_words:
        return "meaning and words"
    return "words" if by_words else "meaning"
