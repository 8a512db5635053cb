"""Does a question share a key word with its answer? The promise of a paraphrase or crosslingual question.

A paraphrase (same language, other words) or crosslingual question (the other language) measures
whether search finds a note by meaning; if it shares a key word with its answer, the keyword side
finds the note and the question measures nothing of the kind. :func:`problems` holds a data set to
that promise before it is evaluated, and to its opposite for ``exact`` questions (they must share
a key word); it checks each question's language against its answers' (same for a paraphrase,
different for a crosslingual question), and that no other note of an answer's day shares a key
word with the question (a result shows a day's notes together, so that note would find it).

Key words: English words lowercased and reduced to their Snowball stem (PyStemmer, as
``memory/index/word_forms.py`` uses), less a small list of words that say nothing about a note
(:data:`STOP_WORDS`, with "user", which every flushed note begins with); Chinese text as its
2-character sequences (a word is usually two characters, and a shared pair is a shared word or
most of one), with :data:`STOP_TERMS` taken out first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import Stemmer

_STOP_TEXT = """
a about after am an and any are as at be been being but by can could did do does for from had has have he
her him his how i if in into is it its me mine my no not of on or our she should so some than that the
their them then there these they this those to us was we were what when where which who whom why will
with would you your user users
"""
#: English words that say nothing about a note; "user" begins every flushed note.
STOP_WORDS = frozenset(_STOP_TEXT.split())
#: Chinese words taken out before the pairs are made: "用户" (the user) begins every flushed note.
STOP_TERMS = ("用户",)
CHECKED_KINDS = ("paraphrase", "crosslingual")
_WORD = re.compile(r"[a-z0-9]+")
_CJK_RUN = re.compile(r"[\u3400-\u9fff]+")
_stemmer = Stemmer.Stemmer("english")


def key_words(text: str) -> set[str]:
    """The stems of ``text``'s English content words and its Chinese 2-character sequences."""
    words = [w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS and (len(w) > 1 or w.isdigit())]
    for term in STOP_TERMS:
        text = text.replace(term, " ")
    pairs = {run[i:i + 2] for run in _CJK_RUN.findall(text) for i in range(len(run) - 1)}
    return set(_stemmer.stemWords(words)) | pairs


def language(text: str) -> str:
    """``zh`` when Chinese characters outweigh Latin letters (a character holds about two letters' worth), else ``en``."""
    cjk = sum(len(run) for run in _CJK_RUN.findall(text))
    return "zh" if 2 * cjk >= sum(c.isascii() and c.isalpha() for c in text) else "en"


def _one(question: dict[str, Any], notes: dict[str, str]) -> Iterable[str]:
    text, kind = question["q"], question["kind"]
    said = f"{question['id']} ({kind}) {text!r}"
    asked = key_words(text)
    shared = {a: asked & key_words(notes[a]) for a in question["answers"]}
    if kind == "exact" and not any(shared.values()):
        yield f"{said} shares no key word with its answers {question['answers']}: not an exact question"
    if kind in CHECKED_KINDS:
        yield from (f"{said} shares {sorted(words)} with its answer {a}: {notes[a]!r}"
                    for a, words in shared.items() if words)
        crossing = kind == "crosslingual"
        yield from (f"{said} is in {language(text)}, its answer {a} in {language(notes[a])}: "
                    f"{'a crosslingual question must be in the other language' if crossing else 'a paraphrase must be in the same'}"
                    for a in question["answers"] if (language(text) != language(notes[a])) != crossing)


def _day_lures(question: dict[str, Any], days: list[dict[str, Any]]) -> Iterable[str]:
    """A checked question whose words lead to another note of its answer's day: search returns a
    day's notes together (a chunk, or an entry with its neighbours), so that note would find the
    answer by the keyword side and the question would not measure meaning."""
    if question["kind"] not in CHECKED_KINDS:
        return
    asked = key_words(question["q"])
    answer_days = {b["day"] for b in days for n in b["notes"] if n["id"] in question["answers"]}
    for note in (n for b in days if b["day"] in answer_days for n in b["notes"]):
        shared = asked & key_words(note["text"])
        if shared and note["id"] not in question["answers"]:
            yield (f"{question['id']} ({question['kind']}) {question['q']!r} shares {sorted(shared)} with "
                   f"{note['id']}, on its answer's day: {note['text']!r}")


def note_texts(data: dict[str, Any]) -> dict[str, str]:
    """Every note's text by id: MEMORY.md lines and daily notes."""
    notes = {m["id"]: m["text"] for m in data["memory_md"]}
    notes.update({n["id"]: n["text"] for day in data["days"] for n in day["notes"]})
    return notes


def problems(data: dict[str, Any]) -> list[str]:
    """One line per broken promise (see the module's docstring); empty when the set keeps them all."""
    notes = note_texts(data)
    return [line for q in data["questions"] for line in (*_one(q, notes), *_day_lures(q, data["days"]))]


def distractor_share(data: dict[str, Any]) -> tuple[int, int]:
    """(questions with another note sharing a key word, questions checked): how often a checked
    question's words lead the keyword side to a note that does not answer it, as in real memory."""
    notes = note_texts(data)
    checked = [q for q in data["questions"] if q["kind"] in CHECKED_KINDS]
    lured = sum(any(key_words(q["q"]) & key_words(text) for i, text in notes.items() if i not in q["answers"])
                for q in checked)
    return lured, len(checked)
