"""Time words in questions, resolved against a fixed today (Wednesday 2 December 2026)."""

from __future__ import annotations

from datetime import date

import pytest

from memory.retrieval.querytext import coverage, keyword_text, query_terms, share_of, terms_held
from memory.retrieval.timewindow import find_window

TODAY = date(2026, 12, 2)


@pytest.mark.parametrize(
    ("question", "start", "end"),
    [
        ("what did I eat yesterday?", "2026-12-01", "2026-12-01"),
        ("who did I meet last week", "2026-11-23", "2026-11-29"),
        ("what did I do this week", "2026-11-30", "2026-12-02"),
        ("what did we plan in May?", "2026-05-01", "2026-05-31"),
        ("what did I buy in May 2025", "2025-05-01", "2025-05-31"),
        ("where was I on Tuesday?", "2026-12-01", "2026-12-01"),
        ("what did I start two months ago", "2026-09-17", "2026-10-31"),  # the month, and 2 Oct ±15 d
        ("what did I buy about a month ago", "2026-10-18", "2026-11-30"),
        ("what happened 3 days ago", "2026-11-28", "2026-11-30"),
        ("what did I note on 2026-09-14?", "2026-09-14", "2026-09-14"),
        ("what did I do on September 14", "2026-09-14", "2026-09-14"),
        ("what did I do on 14 September 2025", "2025-09-14", "2025-09-14"),
        ("what did I read last month", "2026-11-01", "2026-11-30"),
        ("in December so far", "2026-12-01", "2026-12-02"),
        ("我昨天吃了什么", "2026-12-01", "2026-12-01"),
        ("上周我见了谁", "2026-11-23", "2026-11-29"),
        ("上个月读了哪本书", "2026-11-01", "2026-11-30"),
        ("5月份的计划是什么", "2026-05-01", "2026-05-31"),
        ("十二月三日我做了什么", "2025-12-03", "2025-12-03"),
        ("2026年9月14日的会议", "2026-09-14", "2026-09-14"),
        ("上周二去了哪里", "2026-11-24", "2026-11-24"),
        ("三个月前开始学什么", "2026-08-18", "2026-09-30"),
        ("去年的旅行", "2025-01-01", "2025-12-31"),
        ("大前天去了哪里", "2026-11-29", "2026-11-29"),
        ("what did I eat last night", "2026-12-01", "2026-12-01"),
        ("what did I buy half a year ago", "2026-05-18", "2026-06-30"),  # June, and 2 June ±15 d
        ("半年前买的相机", "2026-05-18", "2026-06-30"),
        ("who did I meet the week before last", "2026-11-16", "2026-11-22"),
        ("上上周去了哪", "2026-11-16", "2026-11-22"),
        ("上上个月的账单", "2026-10-01", "2026-10-31"),
        ("what did I pay the month before last", "2026-10-01", "2026-10-31"),
        ("what did we plan in early May", "2026-05-01", "2026-05-31"),
        ("the mid-June trip", "2026-06-01", "2026-06-30"),
        ("what did I buy in May last year", "2025-05-01", "2025-05-31"),
        ("去年5月我去了哪", "2025-05-01", "2025-05-31"),
        ("去年夏天去了哪里", "2025-01-01", "2025-12-31"),  # a season is a keyword, not a window
    ],
)
def test_a_time_phrase_resolves_to_its_window(question: str, start: str, end: str) -> None:
    window = find_window(question, TODAY)
    assert window is not None, question
    assert (window.start.isoformat(), window.end.isoformat()) == (start, end)


@pytest.mark.parametrize("question", ["what is my cat called", "May I ask about the deploy key?",
                                      "我的猫叫什么名字", "the 2030 plan", "remind me of 2027-01-05",
                                      "did I fall in the park", "where did we go last summer", "春节回家的车票"])
def test_no_time_phrase_no_window(question: str) -> None:
    assert find_window(question, TODAY) is None


def test_the_keyword_query_keeps_only_content_words() -> None:
    window = find_window("What did Caroline paint last week?", TODAY)
    assert window is not None and window.phrases == ("last week",)
    assert keyword_text("What did Caroline paint last week?", window.phrases) == "Caroline paint"
    zh = find_window("我上个月去了哪里旅行？", TODAY)
    assert zh is not None
    assert keyword_text("我上个月去了哪里旅行？", zh.phrases) == "去 旅行"
    assert keyword_text("what is it?") == "what is it?"  # nothing but stop words: kept as asked


def test_accented_words_stay_whole_and_possessives_lose_their_s() -> None:
    assert keyword_text("What does my brother's fiancée do in Zürich?") == "brother fiancée Zürich"
    assert query_terms(keyword_text("What do Melanie’s kids like?")) == ["melanie", "kids"]
    assert keyword_text("Python教程在哪里?") == "Python 教程在"  # a CJK run stays apart from the word before it


def test_keyword_evidence_is_the_share_of_the_question_a_note_holds() -> None:
    assert query_terms("Caroline LGBTQ support group") == ["caroline", "lgbtq", "support", "group"]
    weights = {"caroline": 0.5, "lgbtq": 3.0, "support": 1.0, "group": 1.0}  # IDF: the name is everywhere
    assert coverage(weights, "- Caroline: I went to a LGBTQ support group") == 1.0
    assert coverage(weights, "- Caroline: hey Mel!") == pytest.approx(0.5 / 5.5)
    assert query_terms("西湖 晨跑团") == ["西湖", "晨跑", "跑团"]
    assert coverage({"西湖": 1.0, "晨跑": 1.0, "跑团": 1.0}, "每周六在西湖边跑步") == pytest.approx(1 / 3)
    assert coverage({}, "anything") == 1.0


def test_a_question_word_counts_in_its_other_forms() -> None:
    """"What has Caroline researched?" is answered by "Researching adoption agencies": the keyword
    index finds the note by the name, and the note holds the whole question."""
    assert coverage({"caroline": 0.5, "researched": 2.0}, "- Caroline: Researching adoption agencies") == 1.0
    assert coverage({"hike": 1.0, "studies": 1.0}, "Hiking, then a study break") == 1.0
    assert coverage({"move": 1.0, "city": 1.0}, "we watched a movie in the city") == 0.5  # "movie" is not "move"


def test_a_line_is_searched_only_for_the_terms_its_chunk_holds() -> None:
    """The engine finds a chunk's terms once (``terms_held``) and looks for those alone in each of
    its lines: the same shares, fewer searches."""
    weights = {"caroline": 0.5, "lgbtq": 3.0, "support": 1.0, "group": 1.0}
    chunk = "- Caroline: hey Mel!\n- I went to a support group"
    held = terms_held(weights, chunk)
    assert held == ["caroline", "support", "group"]
    assert share_of(weights, held) == coverage(weights, chunk) == pytest.approx(2.5 / 5.5)  # the chunk's own share
    for line in chunk.split("\n"):
        assert coverage(weights, line, held) == coverage(weights, line)
    assert coverage(weights, "- Caroline: hey", []) == 0.0  # its chunk holds none of the words
    assert coverage({}, "anything", []) == 1.0  # a question of no keyword terms: every line holds it all


@pytest.mark.parametrize(
    ("today", "question", "start", "end"),
    [
        (date(2026, 12, 6), "what did I do last weekend", "2026-11-28", "2026-11-29"),  # a Sunday: not this one
        (date(2026, 12, 6), "what did I cook this weekend", "2026-12-05", "2026-12-06"),
        (date(2026, 12, 5), "where was I last weekend", "2026-11-28", "2026-11-29"),
        (date(2026, 12, 7), "what did I do last weekend", "2026-12-05", "2026-12-06"),  # a Monday: the one just past
    ],
)
def test_last_weekend_is_the_latest_that_has_ended(today: date, question: str, start: str, end: str) -> None:
    window = find_window(question, today)
    assert window is not None and (window.start.isoformat(), window.end.isoformat()) == (start, end)
