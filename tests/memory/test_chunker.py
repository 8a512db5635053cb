from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from memory.index.chunker import chunk_text, embedding_text


def test_lines_are_one_based_and_inclusive() -> None:
    chunks = chunk_text("a\nb\nc\n", scope="s", path="p.md", max_chars=100)
    assert [(c.start_line, c.end_line, c.text) for c in chunks] == [(1, 3, "a\nb\nc")]


def test_chunks_respect_the_bound_and_overlap() -> None:
    text = "\n".join(f"line {i:02d} " + "x" * 30 for i in range(20))
    chunks = chunk_text(text, scope="s", path="p.md", max_chars=120, overlap_lines=1)
    assert all(len(c.text) <= 120 for c in chunks)
    for previous, current in itertools.pairwise(chunks):
        assert current.start_line == previous.end_line  # one shared line
    assert chunks[0].start_line == 1 and chunks[-1].end_line == 20


def test_a_long_line_is_split_into_parts_with_unique_ids() -> None:
    line = " ".join(f"word{i}" for i in range(1000))  # ~6,900 characters
    chunks = chunk_text(f"intro\n{line}\noutro", scope="s", path="p.md", max_chars=800)
    parts = [c for c in chunks if c.start_line == 2]
    assert len(parts) >= 8
    assert all(c.end_line == 2 for c in parts)
    assert "".join(c.text for c in parts) == line
    assert len({c.id for c in chunks}) == len(chunks)


def test_blank_file_has_no_chunks() -> None:
    assert chunk_text("\n\n  \n", scope="s", path="p.md") == []


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=3000), st.integers(min_value=64, max_value=500), st.integers(min_value=0, max_value=4))
def test_every_line_is_covered_and_ids_are_unique(text: str, max_chars: int, overlap: int) -> None:
    chunks = chunk_text(text, scope="s", path="p.md", max_chars=max_chars, overlap_lines=overlap)
    assert len({c.id for c in chunks}) == len(chunks)
    lines = text.split("\n")
    covered = set()
    for chunk in chunks:
        assert 1 <= chunk.start_line <= chunk.end_line <= len(lines)
        assert len(chunk.text) <= max_chars
        covered.update(range(chunk.start_line, chunk.end_line + 1))
    for number, line in enumerate(lines, start=1):
        if line.strip():
            assert number in covered


def test_what_is_embedded_is_what_a_reader_sees_without_the_daily_files_own_headings() -> None:
    note = "## 20:00 conversation notes <!-- flush:64 -->\n- moved to Hangzhou\n## 23:50 daily summary\n- a long day"
    assert embedding_text(note) == "- moved to Hangzhou\n\n- a long day"
    assert embedding_text("# Deploy guide\nrun make") == "# Deploy guide\nrun make"  # a page's own title stays
    assert embedding_text("<!-- flush:1 -->") == "<!-- flush:1 -->"  # never an empty text
