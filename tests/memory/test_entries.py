"""Entries: what one vector stands for, and how they follow a chunk's lines."""

from __future__ import annotations

from memory.index.chunker import chunk_text
from memory.index.entries import Entry, chunk_entries, entry_text, split_entries, turn_offsets


def test_a_daily_block_is_one_entry_per_note_with_its_continuation_lines() -> None:
    text = ("## 09:00 conversation notes <!-- flush:7 -->\n- 用户的生日是三月十二日。\n- likes tea\n  more than coffee\n"
            "- [D1:3] Caroline: hi\n\n# Wi-Fi\nThe password is on the fridge,\nunder the magnet.\n1. first step")
    assert split_entries(text, 10) == [
        Entry(11, 11, "- 用户的生日是三月十二日。"),
        Entry(12, 13, "- likes tea\n  more than coffee"),
        Entry(14, 14, "- [D1:3] Caroline: hi"),
        Entry(17, 18, "The password is on the fridge,\nunder the magnet."),  # a paragraph; headings are no entry
        Entry(19, 19, "1. first step"),
    ]


def test_what_is_embedded_leaves_out_flush_markers_and_equal_texts_share_a_hash() -> None:
    marked, plain = Entry(1, 1, "- moved to Hangzhou <!-- flush:3 -->"), Entry(9, 9, "- moved to Hangzhou")
    assert marked.embedded_text == "- moved to Hangzhou" and marked.text_hash == plain.text_hash


def test_a_chunk_of_markers_and_headings_alone_has_no_entry() -> None:
    assert split_entries("## 09:00 conversation notes\n<!-- flush:1 -->\n\n", 1) == []


def test_overlapping_chunks_hold_the_same_entry_on_their_shared_lines() -> None:
    notes = "".join(f"- note number {i} about something worth keeping for later\n" for i in range(40))
    chunks = chunk_text(notes, scope="s", path="memory/2026-01-01.md", max_chars=300, overlap_lines=2)
    first, second = chunks[0], chunks[1]
    shared = {(e.start_line, e.text) for e in chunk_entries(first)} & {(e.start_line, e.text) for e in chunk_entries(second)}
    assert len(shared) == 2  # the two overlap lines: one text each, embedded once by hash
    every = [e for c in chunks for e in chunk_entries(c)]
    assert {e.start_line for e in every} == set(range(1, 41))


def test_a_piece_of_a_long_line_is_one_entry_and_entry_text_reads_lines_back() -> None:
    [piece, *_] = chunk_text("- " + "word " * 400, scope="s", path="p.md", max_chars=200)
    assert chunk_entries(piece) == [Entry(1, 1, piece.text)]
    assert entry_text("a\nb\nc\nd", 5, 6, 7) == "b\nc"


def test_a_stretch_of_conversation_is_one_entry_and_notes_around_it_stay_their_own() -> None:
    text = ("## 10:00 conversation notes\n- [D1:1] Caroline: Hey Mel!\n- [D1:2] Melanie: Hi! How are you?\n"
            "- [D1:3] Caroline: I went to a support group yesterday.\n\n- likes tea\n- Caroline: one line is no talk")
    assert split_entries(text, 1) == [
        Entry(2, 4, "- [D1:1] Caroline: Hey Mel!\n- [D1:2] Melanie: Hi! How are you?\n"
                    "- [D1:3] Caroline: I went to a support group yesterday."),
        Entry(6, 6, "- likes tea"),
        Entry(7, 7, "- Caroline: one line is no talk"),
    ]
    assert turn_offsets(split_entries(text, 1)[0].text) == [0, 1, 2]


def test_labelled_notes_that_are_not_a_conversation_stay_one_entry_each() -> None:
    every_label_once = "- 备忘：明天交房租\n- 提醒：周五体检\n- Wi-Fi: on the fridge"
    one_speaker = "- user said: hi\n- user said: the flight is at 7:40\n- user said: thanks"
    two_turns_among_notes = "- likes tea\n- Tom: coming?\n- Ann: yes"
    for text in (every_label_once, one_speaker, two_turns_among_notes):
        entries = split_entries(text, 1)
        assert [e.text for e in entries] == text.split("\n")
        assert all(turn_offsets(e.text) == [] for e in entries)  # shown whole


def test_two_turns_that_are_all_their_chunk_holds_are_one_entry() -> None:
    """A file's last chunk, or two long turns: each turn alone would be the blur a stretch avoids."""
    two_turns = "## 10:00 conversation notes\n- [D8:12] Tim: Things have been great.\n- [D8:13] John: Wow! Busy."
    [entry] = split_entries(two_turns, 6)
    assert (entry.start_line, entry.end_line) == (7, 8)
    assert turn_offsets(entry.text) == [0, 1]  # shown by its turn that matches
    assert [e.text for e in split_entries("- Tom: coming?\n- Tom: now?", 1)] == ["- Tom: coming?", "- Tom: now?"]
    # the price: a chunk of exactly two labelled notes reads as two turns
    assert [(e.start_line, e.end_line) for e in split_entries("- Wi-Fi: on the fridge\n- Router: admin / admin", 1)] == [(1, 2)]
