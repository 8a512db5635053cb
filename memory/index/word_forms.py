"""A word's regular English forms: "hike" is also "hikes", "hiked" and "hiking".

Each word gets the endings -s, -es, -ed, -ing, -e, -y, -ies and -ied on its Snowball stem (with a
final "e", "i" or "y" dropped, or a final consonant doubled, as English spelling does), and only
the forms whose own stem is the word's are kept. "painted" becomes ``painted OR paint OR paints OR
painting``; "move" gets "moving" but not "movie" (stem ``movi``). Only plain lowercase ASCII words
of :data:`MIN_LENGTH` or more letters are widened: shorter words and numbers stand for themselves,
and CJK text has no inflection. The index keeps words as written, so nothing is re-indexed.

Two users. A search with no vector side (``embedding.provider: none``, or the embedder failing)
asks the keyword index for every form, since the keyword index is all there is; most forms are
in no note ("paintes"), and the index leaves those out after one vocabulary lookup. With vectors
the similarity already bridges word forms and widening the keyword search only adds weak matches
(measured on LoCoMo and the bilingual set: see ``bench/README.md``), so there the search looks for
words as written. Either way, how much of the question a found note holds counts every form
(``memory.retrieval.querytext.coverage``).
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache

import Stemmer

#: Words shorter than this are taken as written ("art" must not turn into "arts").
MIN_LENGTH = 4
_PLAIN_WORD_RE = re.compile(r"^[a-z]+$")
#: A final consonant after a single vowel, which English doubles before -ed and -ing.
_DOUBLES_RE = re.compile(r"(?:^|[^aeiou])[aeiou][b-df-hj-np-tvz]$")
_ENDINGS = ("", "s", "es", "ed", "ing", "e", "y", "ies", "ied")
_stemmer = Stemmer.Stemmer("english")
_lock = threading.Lock()  # a PyStemmer object is not safe to share between threads


def stem(word: str) -> str:
    """The English Snowball stem of a lowercase word."""
    with _lock:
        return str(_stemmer.stemWord(word))


@lru_cache(maxsize=4096)
def forms(word: str) -> tuple[str, ...]:
    """``word`` first, then its other regular forms (same stem), for a plain word of
    :data:`MIN_LENGTH`+ letters; ``(word,)`` for anything else."""
    if len(word) < MIN_LENGTH or not _PLAIN_WORD_RE.match(word):
        return (word,)
    root = stem(word)
    bases = dict.fromkeys((root, root[:-1] if root[-1] in "eiy" else root))
    if _DOUBLES_RE.search(root):  # "submit" → "submitted", "run" → "running"
        bases[root + root[-1]] = None
    candidates = dict.fromkeys(base + ending for base in bases for ending in _ENDINGS)
    return (word, *(form for form in candidates if form != word and len(form) >= 3 and stem(form) == root))
