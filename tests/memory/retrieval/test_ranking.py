"""Ranking as a user sees it: old answers are found, time words pick their window, updates win.

The synthetic embedder stands in where the test is about ranking rules; the cross-lingual tests
use the real local model (shipped inside its wheel), because only a real model maps a Chinese
question and an English note to the same place.
"""

from __future__ import annotations

import numpy as np
import pytest
from support.files import write

from memory import EmbeddingError, HashEmbedding, make_embedder
from memory.config import EmbeddingSettings


def test_a_400_day_old_answer_outranks_yesterdays_loose_match(workspace, make_manager) -> None:
    write(workspace, "alice", "memory/2025-10-28.md", "## 09:10 notes\n- my passport number ends in 4471 and it expires in 2031\n")
    write(workspace, "alice", "memory/2026-12-01.md", "## 18:00 notes\n- renewed the library card, number ends in 12\n")
    hits = make_manager().search("when does my passport expire", "alice")
    assert hits[0].path == "memory/2025-10-28.md"
    assert 0.9 <= hits[0].recency < 0.91  # 400 days: nearly the whole 10% off, never more


def test_a_time_window_question_finds_that_weeks_note(workspace, make_manager) -> None:
    # Today is Wednesday 2026-12-02: "last week" is Monday 2026-11-23 to Sunday 2026-11-29.
    write(workspace, "alice", "memory/2026-11-25.md", "## 20:00 notes\n- cook night: a mushroom risotto with Ana\n")
    write(workspace, "alice", "memory/2026-10-07.md", "## 20:00 notes\n- cook night: a pumpkin soup, then watched a film\n")
    write(workspace, "alice", "memory/2026-12-02.md", "## 08:00 notes\n- last week was busy, need to cook more\n")
    [first, *rest] = make_manager().search("what did I cook last week?", "alice")
    assert first.path == "memory/2026-11-25.md" and first.time_boost == 2.0
    assert all(hit.time_boost == 1.0 for hit in rest if hit.path != "memory/2026-12-02.md")


def test_dates_written_in_memory_md_count_for_the_window(workspace, make_manager) -> None:
    write(workspace, "alice", "MEMORY.md", "- 2026-05-14: started learning the cello\n- 2026-08-02: started learning Go\n")
    [hit] = make_manager(embedder=None, chunk_max_chars=64, chunk_overlap_lines=0).search("which instrument did I start learning in May", "alice", limit=1)
    assert "cello" in hit.text and hit.time_boost == 2.0


def test_time_words_do_not_count_as_keywords(workspace, make_manager) -> None:
    write(workspace, "alice", "memory/2026-11-24.md", "- dentist appointment went fine\n")
    write(workspace, "alice", "memory/2026-06-03.md", "- last week I said the dentist was fine, last week again\n")
    [hit, *_] = make_manager(embedder=None).search("dentist last week", "alice")
    assert hit.path == "memory/2026-11-24.md"


def test_the_newer_of_two_versions_of_a_fact_ranks_first(workspace, make_manager) -> None:
    write(workspace, "alice", "memory/2026-03-02.md", "- Alice lives in Munich, near the river\n")
    write(workspace, "alice", "memory/2026-10-19.md", "- Alice lives in Berlin, near the river\n")
    hits = make_manager().search("where does Alice live", "alice")
    assert [h.path for h in hits[:2]] == ["memory/2026-10-19.md", "memory/2026-03-02.md"]


def test_asked_about_now_the_newer_note_on_the_same_thing_takes_the_older_ones_place(workspace, make_manager) -> None:
    write(workspace, "alice", "memory/2026-02-02.md", "- where does Alice live: Munich, which river: the Isar\n")
    write(workspace, "alice", "memory/2026-10-19.md", "- moved: Alice in Berlin, flat near the river\n")
    write(workspace, "alice", "memory/2026-11-30.md", "lamp bought, office desk\n")
    manager = make_manager(embedder=HashEmbedding(dim=512, model_id="hash:512"))  # unrelated notes near 0
    older_first = manager.search("where does Alice live, which river", "alice")
    assert [h.path for h in older_first[:2]] == ["memory/2026-02-02.md", "memory/2026-10-19.md"]
    [newer, older, *_] = manager.search("where does Alice live now, which river", "alice")
    assert (newer.path, older.path) == ("memory/2026-10-19.md", "memory/2026-02-02.md")
    assert newer.update_boost > 1.0 and newer.score == pytest.approx(older.score * 1.001, rel=1e-4)
    assert older.update_boost == 1.0


def test_no_result_scores_zero(workspace, make_manager) -> None:
    write(workspace, "alice", "MEMORY.md", "- zebra crossing on the corner\n")
    write(workspace, "alice", "memory/2026-11-30.md", "- totally unrelated words here\n")
    hits = make_manager().search("zebra", "alice", min_score=0.0, limit=20)
    assert hits and all(hit.score > 0 for hit in hits)


def test_window_notes_stay_in_their_scope(workspace, make_manager) -> None:
    write(workspace, "alice", "memory/2026-12-01.md", "- alice's secret bike plan\n")
    write(workspace, "bob", "memory/2026-12-01.md", "- bob fixed the bike\n")
    hits = make_manager().search("what happened to the bike yesterday", "bob", min_score=0.0, limit=20)
    assert [(hit.scope, hit.text, hit.time_boost) for hit in hits] == [("bob", "- bob fixed the bike", 2.0)]


def test_keyword_fallback_and_short_cjk_queries_still_hold(workspace, make_manager) -> None:
    write(workspace, "alice", "memory/2026-11-30.md", "- 猫叫小白\n- 部署教程写完了\n")
    embedder = HashEmbedding()
    manager = make_manager(embedder=embedder, chunk_max_chars=64, chunk_overlap_lines=0)
    manager.indexer.sync()
    embedder.fail_with = EmbeddingError("HTTP 500")
    assert "猫" in manager.search("猫", "alice")[0].text
    assert "部署" in manager.search("部署", "alice")[0].text


@pytest.fixture(scope="module")
def real_model():  # type: ignore[no-untyped-def]
    return make_embedder(EmbeddingSettings())


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("我的猫叫什么名字？", "cat"),
        ("我对什么过敏？", "allergic"),
        ("What did I order at the noodle shop?", "牛肉面"),
        ("Where is the spare key hidden?", "钥匙"),
    ],
)
def test_questions_find_notes_in_the_other_language(workspace, make_manager, real_model, question: str, answer: str) -> None:
    notes = ["- my cat is called Tom, a grey tabby", "- I am allergic to peanuts",
             "- the quarterly report is due on Friday", "- 在面馆点了一碗牛肉面", "- 备用钥匙藏在门口的花盆下面",
             "- 周末和朋友去爬山"]
    for day, note in enumerate(notes, start=10):
        write(workspace, "alice", f"memory/2026-09-{day}.md", note + "\n")
    manager = make_manager(embedder=real_model)
    [hit] = manager.search(question, "alice", limit=1)
    assert answer in hit.text


def test_e5_embeds_questions_and_passages_with_their_prefixes(workspace, make_manager) -> None:
    e5 = make_embedder(EmbeddingSettings(local_model="e5-small"))
    assert e5 is not None and e5.model_id == "local:multilingual-e5-small-q4/text4" and e5.similarity_floor == 0.7
    question = "what is my cat called"
    assert float(e5.embed_query(question) @ e5.embed([question])[0]) < 0.999  # "query: " vs "passage: "
    write(workspace, "alice", "memory/2026-09-10.md", "- my cat is called Tom, a grey tabby\n")
    write(workspace, "alice", "memory/2026-09-11.md", "- the quarterly report is due on Friday\n")
    [hit, *_] = make_manager(embedder=e5).search("what's the name of my kitten?", "alice")
    assert "Tom" in hit.text and 0 < (hit.vector_score or 0) < 1  # the cosine rescaled from its 0.7 floor



class ChosenCosines(HashEmbedding):
    """The question points along axis 0; a note naming Ana has cosine 0.3 with it, one naming Bob 0.55."""

    def embed(self, texts):  # type: ignore[no-untyped-def]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row, :2] = (0.3, 0.954) if "Ana" in text else (0.55, 0.835) if "Bob" in text else (1.0, 0.0)
        self.calls += 1
        return out


def test_a_note_from_the_named_time_counts_double(workspace, make_manager) -> None:
    write(workspace, "alice", "memory/2026-05-20.md", "## 18:30 notes\n- an evening at the gallery with Ana\n")
    write(workspace, "alice", "memory/2026-07-19.md", "## 10:00 notes\n- an evening at the gallery with Bob\n")
    first, second = make_manager(embedder=ChosenCosines()).search("which show did I see in May?", "alice")
    # July's note matches 0.55 / 0.3 = 1.8 times as well (no keyword matches either); May's counts double.
    assert (first.path, first.time_boost, second.path) == ("memory/2026-05-20.md", 2.0, "memory/2026-07-19.md")
    # (similarities from the int8 scan: within 0.002 of the chosen cosines)
    assert first.relevance == pytest.approx(0.7 * 0.3, abs=2e-3) and second.relevance == pytest.approx(0.7 * 0.55, abs=2e-3)


def _hiking_notes(workspace) -> None:  # type: ignore[no-untyped-def]
    write(workspace, "alice", "memory/2026-11-20.md", "## 09:00 notes\n- went hiking on the ridge trail with Sam, the views were great\n")
    write(workspace, "alice", "memory/2026-11-29.md", "## 12:00 notes\n- booked a table at the noodle place for Friday\n")


@pytest.mark.parametrize("embedding", ["none", "failing"])
def test_with_keywords_alone_a_word_finds_its_other_forms(workspace, make_manager, embedding: str) -> None:
    _hiking_notes(workspace)
    embedder = HashEmbedding() if embedding == "failing" else None
    manager = make_manager(embedder=embedder)
    manager.indexer.sync()
    if embedder is not None:
        embedder.fail_with = EmbeddingError("HTTP 500")  # the silent fallback widens words too
    found = manager.search("Where did I hike?", "alice")
    assert [r.path for r in found] == ["memory/2026-11-20.md"]
    assert found[0].vector_score is None and found[0].keyword_score is not None


def test_with_vectors_the_keyword_side_keeps_words_as_written(workspace, make_manager) -> None:
    _hiking_notes(workspace)
    manager = make_manager()
    manager.indexer.sync()
    assert all(r.keyword_score is None for r in manager.search("hike", "alice", min_score=0.0))
    hiking = manager.search("hiking", "alice")[0]
    assert hiking.path == "memory/2026-11-20.md" and hiking.keyword_score is not None


def test_the_share_of_the_questions_words_counts_for_every_candidate(workspace, make_manager) -> None:
    # Both notes are as close in meaning (cosine 0.55); neither is a keyword hit, since with
    # vectors the keyword side looks for "study" as written. The note holding it in another form
    # covers the whole question and comes first, although the other note is a day newer.
    write(workspace, "alice", "memory/2026-11-20.md", "## 18:30 notes\n- Bob: we studied the adoption rules all week\n")
    write(workspace, "alice", "memory/2026-11-21.md", "## 18:30 notes\n- Bob: planning a trip to the coast all week\n")
    first, second = make_manager(embedder=ChosenCosines()).search("what did I study?", "alice")
    assert (first.path, second.path) == ("memory/2026-11-20.md", "memory/2026-11-21.md")
    assert first.keyword_score is None and second.keyword_score is None
    assert (first.coverage, second.coverage) == (1.0, 0.0)
    assert first.relevance == pytest.approx(0.7 * 0.55 + 0.05, abs=2e-3)  # int8 scan: within 0.002
    assert second.relevance == pytest.approx(0.7 * 0.55, abs=2e-3)
