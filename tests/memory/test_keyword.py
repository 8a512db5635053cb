from __future__ import annotations

import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st

from memory.index.keyword import bm25_to_score, build_query, common_tokens, segment


def test_segment_keeps_words_and_makes_cjk_bigrams_then_characters() -> None:
    assert segment("Python 教程!").split() == ["Python", "教程", "教", "程", "!"]
    assert segment("猫").split() == ["猫"]
    assert segment("部署机器人").split() == ["部署", "署机", "机器", "器人", "部", "署", "机", "器", "人"]


def test_query_terms_are_quoted_and_cjk_becomes_bigrams_and_their_phrase() -> None:
    built = build_query('部署机器人 "NEAR(x" *')
    bigrams = '"部署" OR "署机" OR "机器" OR "器人"'
    assert built.words() == f'"部署 署机 机器 器人" OR {bigrams} OR "NEAR" OR "x"'
    assert built.words(frozenset({"near", "署机"})) == '"部署 署机 机器 器人" OR "部署" OR "机器" OR "器人" OR "x"'
    assert built.trigram == '"部署机器人" OR "NEAR"'


def test_a_widened_query_asks_for_each_form_of_a_plain_word() -> None:
    widened = build_query("painted 猫 Wi-Fi", widen=True).words() or ""
    assert widened.startswith('"painted" OR ') and widened.endswith(' OR "猫" OR "Wi" OR "Fi"')
    assert {'"paint"', '"paints"', '"painting"'} <= set(widened.split(" OR "))
    assert build_query("painted 猫 Wi-Fi").words() == '"painted" OR "猫" OR "Wi" OR "Fi"'


def test_common_tokens_are_dropped_but_never_all() -> None:
    freq = {"the": 900, "with": 800, "docker": 3}
    assert common_tokens(freq, 2000, other_terms=False) == {"the", "with"}
    assert common_tokens({"the": 900, "with": 800}, 2000, other_terms=False) == {"the"}
    assert common_tokens({"the": 900}, 2000, other_terms=True) == {"the"}
    assert common_tokens(freq, 500, other_terms=False) == frozenset()  # small corpora: rank everything


def test_bm25_score_keeps_order_within_zero_and_one() -> None:
    ranks = [-12.0, -3.0, -1.0, -0.1, -1e-6]
    scores = [bm25_to_score(r, best=-12.0) for r in ranks]
    assert scores == sorted(scores, reverse=True)
    assert len(set(scores)) == len(scores)
    assert all(0.0 < s <= 1.0 for s in scores) and scores[0] == bm25_to_score(-12.0, best=-12.0) > 0.95
    tiny = [bm25_to_score(r, best=-3e-6) for r in (-3e-6, -2e-6, -1e-6)]
    assert round(tiny[0], 3) > round(tiny[1], 3) > round(tiny[2], 3)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_any_user_text_is_a_safe_fts_query(text: str) -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(seg, tokenize='unicode61 remove_diacritics 2')")
    conn.execute("CREATE VIRTUAL TABLE tri USING fts5(x, tokenize='trigram')")
    conn.execute("INSERT INTO t VALUES (?)", (segment("hello 世界 NEAR("),))
    conn.execute("INSERT INTO tri VALUES ('hello world')")
    built = build_query(text)
    if built.words():
        conn.execute("SELECT * FROM t WHERE t MATCH ?", (built.words(),)).fetchall()
    if built.trigram:
        conn.execute("SELECT * FROM tri WHERE tri MATCH ?", (built.trigram,)).fetchall()
