"""What of a question the keyword side should look for.

A question is mostly words that every note has ("what", "did", "I", "的", "什么") and time words
that name a window rather than a topic. BM25 gives common words a small weight, but not none,
and in a small memory (a few hundred notes) "what" or "我" is as rare as a real topic word. So the
keyword query keeps only content words: question words, function words and the time phrases found
by :mod:`.timewindow` are removed, in English and Chinese. With no dictionary to cut Chinese into
words, only multi-character function words, particles and pronouns are cut out of a Chinese run
(removing a character such as 会 would also break 开会, "meeting"). When nothing is left (a question made
only of such words) the original words are used, so a keyword search is never emptied by this.
The vector side always sees the question as asked.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from ..index.keyword import CJK_CHARS, has_cjk
from ..index.word_forms import forms

_STOP_EN = frozenset(
    ["a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are", "aren't", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "can't", "could", "couldn't", "did", "didn't", "do", "does", "doesn't", "doing", "don't", "down", "during", "each", "else", "ever", "few", "for", "from", "further", "get", "got", "had", "hadn't", "has", "hasn't", "have", "haven't", "having", "he", "he'd", "he'll", "he's", "her", "here", "here's", "hers", "herself", "him", "himself", "his", "how", "how's", "i", "i'd", "i'll", "i'm", "i've", "if", "in", "into", "is", "isn't", "it", "it's", "its", "itself", "just", "know", "let's", "like", "me", "might", "more", "most", "much", "must", "mustn't", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "ought", "our", "ours", "ourselves", "out", "over", "own", "please", "really", "remember", "remind", "same", "say", "said", "shan't", "she", "she'd", "she'll", "she's", "should", "shouldn't", "so", "some", "such", "tell", "than", "that", "that's", "the", "their", "theirs", "them", "themselves", "then", "there", "there's", "these", "they", "they'd", "they'll", "they're", "they've", "thing", "things", "this", "those", "through", "to", "too", "told", "under", "until", "up", "us", "very", "was", "wasn't", "we", "we'd", "we'll", "we're", "we've", "were", "weren't", "what", "what's", "when", "when's", "where", "where's", "whether", "which", "while", "who", "who's", "whom", "whose", "why", "why's", "will", "with", "won't", "would", "wouldn't", "yet", "you", "you'd", "you'll", "you're", "you've", "your", "yours", "yourself", "yourselves", "recall", "mentioned", "mention", "kind", "sort"]
)

#: Chinese function words and question words (longest first, so 什么时候 goes before 什么).
_STOP_ZH = sorted(
    ["什么时候", "为什么", "怎么样", "是不是", "有没有", "什么", "怎么", "哪里", "哪儿", "哪个", "哪些", "多少", "几个", "还记得", "记得", "告诉", "知道", "我们", "你们", "他们", "她们", "它们", "自己", "一下", "一个", "这个", "那个", "这些", "那些", "还是", "或者", "但是", "因为", "所以", "如果", "就是", "已经", "曾经", "之前", "以前", "时候", "的是", "了吗", "没有", "请问", "吗", "呢", "吧", "啊", "呀", "的", "了", "么", "我", "你", "他", "她", "它", "谁", "哪"],
    key=len,
    reverse=True,
)
_ZH_STOP_RE = re.compile("|".join(map(re.escape, _STOP_ZH)))
_WORD_RE = re.compile(r"\w+")
#: A word of any alphabet (accents included: "fiancée", "Zürich"), a CJK run, or a run of other marks.
_TOKEN_RE = re.compile(rf"[^\W_{CJK_CHARS}](?:[^\W{CJK_CHARS}]|['’-])*|[{CJK_CHARS}]+|[^\s\w]+")
#: An English possessive: "Melanie's kids" is about Melanie (a lone "s" would be a query term).
_POSSESSIVE_RE = re.compile(r"['’]s$", re.IGNORECASE)


def _content_words(text: str) -> list[str]:
    words: list[str] = []
    for token in _TOKEN_RE.findall(text):
        if has_cjk(token):
            words.extend(word for part in _ZH_STOP_RE.split(token) for word in _WORD_RE.findall(part))
        elif token[0].isalnum() and token.lower().replace("’", "'") not in _STOP_EN:
            words.append(_POSSESSIVE_RE.sub("", token))
    return words


def keyword_text(question: str, time_phrases: tuple[str, ...] = ()) -> str:
    """The words of ``question`` worth a keyword search, without time phrases and stop words."""
    text = question
    for phrase in time_phrases:
        text = text.replace(phrase, " ")
    words = _content_words(text)
    if not words:
        return question
    return " ".join(words)


def query_terms(words: str) -> list[str]:
    """The pieces of a keyword query whose presence in a note is counted by :func:`coverage`:
    each word (lowercase), and each bigram of a Chinese run (a run has no word boundaries)."""
    terms: list[str] = []
    for word in _WORD_RE.findall(words.lower()):
        if has_cjk(word) and len(word) > 2:
            terms.extend(word[i : i + 2] for i in range(len(word) - 1))
        else:
            terms.append(word)
    return list(dict.fromkeys(terms))


def coverage(weights: dict[str, float], text: str, among: Sequence[str] | None = None) -> float:
    """The share of the question's terms that ``text`` holds, each term weighted by how rare it is
    (``weights``: term → IDF); 1.0 when there are none. A term counts in any of its regular forms
    ("research" in "Researching adoption agencies"), with vectors too: the note was found by the
    word as written or by its meaning, and this only says how much of the question it answers.
    ``among``: only these terms are looked for (those of the chunk around ``text``: a term its
    chunk lacks, none of the chunk's lines holds)."""
    if among is not None and not among:  # the chunk around ``text`` holds none of the terms
        return share_of(weights, ())
    return share_of(weights, terms_held(weights, text, among))


def share_of(weights: dict[str, float], held: Sequence[str]) -> float:
    """The IDF-weighted share of the question's terms (``weights``) that ``held`` are; 1.0 when
    there are none (see :func:`coverage`)."""
    total = sum(weights.values())
    if total <= 0:
        return 1.0
    return sum(weights[term] for term in held) / total


def terms_held(weights: dict[str, float], text: str, among: Sequence[str] | None = None) -> list[str]:
    """The terms of ``weights`` (or of ``among``) that ``text`` holds, in any of their forms."""
    lowered = text.lower()
    held = []
    for term in weights if among is None else among:
        for form in _needles(term):  # a plain loop: a generator a term was a tenth of a search
            if form in lowered:
                held.append(term)
                break
    return held


@lru_cache(maxsize=4096)
def _needles(term: str) -> tuple[str, ...]:
    """The forms of ``term`` that a text must be searched for: a form holding a shorter one
    ("studies" holds "studi") is found whenever that one is, so it is left out."""
    every = forms(term)
    return tuple(form for form in every if not any(other != form and other in form for other in every))
