"""Passages: overlapping chunks of a file join, repeats are skipped, the characters stay in budget."""

from __future__ import annotations

from support.files import write

from memory.retrieval.passages import assemble
from memory.retrieval.result import SearchResult

FILE = [f"line {n}" for n in range(1, 21)]  # "line 1" .. "line 20", 6-7 characters each


def chunk(start: int, end: int, score: float, path: str = "memory/2026-11-02.md", text: str | None = None) -> SearchResult:
    body = "\n".join(FILE[start - 1 : end]) if text is None else text
    return SearchResult(path, start, end, score, body, "memory", "alice", vector_score=score, relevance=score)


def test_overlapping_chunks_of_a_file_join_into_one_passage_with_the_best_ones_score() -> None:
    [passage] = assemble([chunk(4, 7, 0.9), chunk(6, 9, 0.5)], limit=5, budget=1000)
    assert (passage.start_line, passage.end_line, passage.score, passage.vector_score) == (4, 9, 0.9, 0.9)
    assert passage.text == "line 4\nline 5\nline 6\nline 7\nline 8\nline 9"


def test_a_chunk_bridging_two_passages_merges_them_at_the_better_ones_place() -> None:
    other = chunk(1, 2, 0.7, path="memory/2026-01-05.md")
    passages = assemble([chunk(1, 3, 0.9), other, chunk(6, 8, 0.6), chunk(3, 6, 0.4)], limit=5, budget=1000)
    assert [(p.path, p.start_line, p.end_line, p.score) for p in passages] == [
        ("memory/2026-11-02.md", 1, 8, 0.9),
        ("memory/2026-01-05.md", 1, 2, 0.7),
    ]
    assert passages[0].text == "\n".join(FILE[:8])


def test_chunks_that_only_touch_or_belong_to_another_file_stay_apart() -> None:
    elsewhere = chunk(1, 3, 0.7, path="MEMORY.md", text="- a\n- b\n- c")
    passages = assemble([chunk(1, 3, 0.9), chunk(4, 6, 0.8), elsewhere], limit=5, budget=1000)
    assert [(p.path, p.start_line, p.end_line) for p in passages] == [
        ("memory/2026-11-02.md", 1, 3),
        ("memory/2026-11-02.md", 4, 6),
        ("MEMORY.md", 1, 3),
    ]


def test_pieces_of_one_long_line_do_not_join_and_the_same_text_twice_is_shown_once() -> None:
    first, second = chunk(5, 5, 0.9, text="x" * 40), chunk(5, 5, 0.8, text="y" * 40)
    copy = chunk(2, 2, 0.7, path="memory/2026-01-05.md", text="x" * 40)
    passages = assemble([first, second, copy], limit=5, budget=1000)
    assert [p.text for p in passages] == ["x" * 40, "y" * 40]


def test_a_chunk_mostly_repeating_a_passage_it_cannot_join_is_skipped() -> None:
    stale = chunk(2, 4, 0.8, text="line 2\nline 3 (edited)\nline 4")  # lines 2-4 read differently
    passages = assemble([chunk(1, 4, 0.9), stale, chunk(10, 11, 0.5)], limit=5, budget=1000)
    assert [(p.start_line, p.end_line) for p in passages] == [(1, 4), (10, 11)]


def test_the_characters_stay_within_the_budget_but_the_best_passage_is_whole() -> None:
    long_best = chunk(1, 1, 0.9, path="MEMORY.md", text="a" * 50)
    short = [chunk(n, n, 0.8 - n / 100) for n in (3, 6, 9)]  # 6 characters each
    passages = assemble([long_best, *short], limit=5, budget=40)
    assert [len(p.text) for p in passages] == [50]  # over the budget alone, nothing more fits
    passages = assemble([chunk(3, 3, 0.9), chunk(10, 14, 0.8), *short[1:]], limit=5, budget=20)
    assert [(p.start_line, p.end_line) for p in passages] == [(3, 3), (6, 6), (9, 9)]  # 34 chars skipped
    assert sum(len(p.text) for p in passages) == 18


def test_a_join_that_would_break_the_budget_is_not_made_and_the_chunk_is_a_repeat() -> None:
    passages = assemble([chunk(1, 4, 0.9), chunk(3, 8, 0.8), chunk(15, 15, 0.7)], limit=5, budget=40)
    assert [(p.start_line, p.end_line) for p in passages] == [(1, 4), (15, 15)]


def test_no_more_than_limit_passages() -> None:
    passages = assemble([chunk(n, n, 1 - n / 100) for n in range(1, 20, 2)], limit=3, budget=1000)
    assert [p.start_line for p in passages] == [1, 3, 5]


def test_search_returns_an_answer_split_over_two_chunks_as_one_passage(workspace, make_manager) -> None:
    lines = ["## 10:00 conversation notes", "- Q: which bakery sells the rye bread?", "- the one on Kastanienallee",
             "- A: Zeit für Brot, open from 7", "- bought two loaves there on Sunday"]
    write(workspace, "alice", "memory/2026-09-14.md", "\n".join(lines) + "\n")
    hits = make_manager(embedder=None, chunk_max_chars=100, chunk_overlap_lines=1).search("rye bread bakery Zeit für Brot", "alice")
    assert [(h.path, h.start_line, h.end_line) for h in hits] == [("memory/2026-09-14.md", 1, 5)]
    assert hits[0].text == "\n".join(lines)
