"""Keyword side of retrieval: text segmentation, safe FTS5 queries, BM25 scores.

SQLite's ``unicode61`` tokenizer sees a run of Chinese characters as one token, and its
``trigram`` tokenizer cannot match a query under three characters. So the word index is fed a
segmented copy of each chunk: ASCII words as they are, and every CJK run as its bigrams (in order,
so a longer query run becomes its bigrams and their phrase) followed by its single characters.
That makes ``猫`` and ``教程`` indexed lookups instead of a ``LIKE`` scan.

Queries are never passed to FTS5 raw: every term is rebuilt as a double-quoted string, so user
text such as ``NEAR(``, ``"``, ``*``, ``-`` or ``:`` cannot change the query's syntax.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .word_forms import forms

# CJK ideographs, kana and hangul: scripts written without spaces between words.
CJK_CHARS = (
    "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
    "\U00020000-\U0002ebef"
)
_CJK_RUN_RE = re.compile(f"[{CJK_CHARS}]+")
_WORD_RE = re.compile(rf"[^\W{CJK_CHARS}]+|[{CJK_CHARS}]+", re.UNICODE)
_CJK_CHAR_RE = re.compile(f"[{CJK_CHARS}]")


def has_cjk(text: str) -> bool:
    return _CJK_CHAR_RE.search(text) is not None


def count_cjk(text: str) -> int:
    """How many CJK characters ``text`` has (each is about one LLM token)."""
    return len(_CJK_CHAR_RE.findall(text))


def _cjk_tokens(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    bigrams = [run[i : i + 2] for i in range(len(run) - 1)]
    return bigrams + list(run)


def _segment_run(match: re.Match[str]) -> str:
    return " " + " ".join(_cjk_tokens(match.group(0))) + " "


def segment(text: str) -> str:
    """The text fed to the word index: CJK runs become bigrams + characters; the rest is left to
    the ``unicode61`` tokenizer (one regex pass over the CJK runs only, so ASCII text costs ~nothing)."""
    return _CJK_RUN_RE.sub(_segment_run, text)


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


_PLAIN_TOKEN_RE = re.compile(r"^[a-z0-9]+$")


@dataclass(frozen=True)
class WordTerm:
    """One OR-ed term of the word index query.

    ``token`` is the single indexed token the term stands for (a lowercase ASCII word or one CJK
    character) so that its document frequency can be looked up; None for phrases.
    """

    expr: str
    token: str | None


@dataclass(frozen=True)
class KeywordQuery:
    """The FTS5 expressions built from one user query."""

    word_terms: tuple[WordTerm, ...]  # for the segmented unicode61 index
    trigram: str | None  # for the trigram index (terms of 3+ characters)
    like_terms: tuple[str, ...]  # for the bounded LIKE fallback

    def words(self, drop: frozenset[str] = frozenset()) -> str | None:
        """The word-index expression without the terms whose token is in ``drop``."""
        kept = [t.expr for t in self.word_terms if t.token is None or t.token not in drop]
        return " OR ".join(kept) or None


def _word_terms(token: str, widen: bool) -> list[WordTerm]:
    """The terms for one query word. A CJK run of 3+ characters is unsegmented text ("我的猫叫什么
    名字"), not a word: it becomes its bigrams, each a term of its own so that a note sharing some
    of them matches, plus the whole run as a phrase so that a note holding all of it in order ranks
    higher. With ``widen``, a plain word becomes each of its forms (:func:`memory.index.word_forms.forms`),
    so "painted" finds "painting"."""
    if _CJK_RUN_RE.fullmatch(token):
        if len(token) <= 2:  # one character, or one bigram: a single indexed token
            return [WordTerm(_quote(token), token)]
        bigrams = [token[i : i + 2] for i in range(len(token) - 1)]
        return [WordTerm(_quote(" ".join(bigrams)), None), *(WordTerm(_quote(b), b) for b in bigrams)]
    lowered = token.lower()
    if not _PLAIN_TOKEN_RE.match(lowered):
        return [WordTerm(_quote(token), None)]
    others = forms(lowered)[1:] if widen else ()
    return [WordTerm(_quote(token), lowered), *(WordTerm(_quote(form), form) for form in others)]


def build_query(query: str, *, widen: bool = False) -> KeywordQuery:
    """Turn free user text into safe FTS5 expressions (terms OR-ed, BM25 ranks by overlap); with
    ``widen``, each plain word is searched in all the forms it gives."""
    tokens = list(dict.fromkeys(_WORD_RE.findall(query)))
    terms = tuple(dict.fromkeys(term for token in tokens for term in _word_terms(token, widen)))
    trigram = " OR ".join(dict.fromkeys(_quote(t) for t in tokens if len(t) >= 3)) or None
    return KeywordQuery(word_terms=terms, trigram=trigram, like_terms=tuple(tokens))


def common_tokens(
    frequencies: dict[str, int], total: int, *, other_terms: bool, share: float = 0.1
) -> frozenset[str]:
    """Tokens too common to be worth ranking (like stop words), measured, not listed.

    A term found in more than ``share`` of the chunks adds almost nothing to BM25 (its IDF is
    near zero) but makes FTS5 score every chunk it is in, which at 100k chunks costs ~100 ms.
    Such terms are dropped, except the rarest of them when the query would be left with nothing
    (``other_terms`` says whether terms without a frequency, such as CJK phrases, remain).
    """
    if total < 1000 or not frequencies:
        return frozenset()
    common = {token for token, docs in frequencies.items() if docs > share * total}
    if common and len(common) == len(frequencies) and not other_terms:
        common.discard(min(frequencies, key=lambda token: frequencies[token]))
    return frozenset(common)


def bm25_to_score(rank: float, best: float) -> float:
    """Map SQLite's bm25() (more negative = better) to (0, 1], keeping order.

    Half is absolute strength, ``|r|/(1+|r|)``; half is strength relative to the best hit of the
    query (``best``, the most negative rank). The relative half matters in small or repetitive
    corpora, where FTS5 floors the IDF of a common term at 1e-6 and every absolute score would
    round to the same value. There is no floor: a match on one common word is weak evidence, and
    must not outweigh a strong vector match in the fusion (a keyword match is kept as a candidate
    whatever its score, see ``memory.retrieval.scoring``).
    """
    magnitude = abs(rank)
    absolute = magnitude / (1.0 + magnitude)
    relative = magnitude / abs(best) if best else 1.0
    return 0.5 * absolute + 0.5 * relative
