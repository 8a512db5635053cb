from __future__ import annotations

from datetime import datetime

from bridge.prompt import MEMORY_MAX_BYTES, PromptBuilder, PromptContext, bound_memory
from memory import Workspace


def test_small_memory_is_injected_whole() -> None:
    assert bound_memory("- a\n- b\n") == "- a\n- b"


def test_long_memory_keeps_the_newest_entries_and_says_where_the_rest_is() -> None:
    text = "\n".join(f"- fact {i}" for i in range(300))
    bounded = bound_memory(text)
    lines = bounded.splitlines()
    assert len(lines) <= 200
    assert lines[-1] == "- fact 299" and lines[1] == "- fact 101"
    assert lines[0].startswith("[MEMORY.md is longer than fits here: 101 older entries are not shown")


def test_a_huge_memory_is_cut_by_bytes_never_to_an_empty_notice() -> None:
    text = "- " + "长" * 20000  # one 60 kB entry
    bounded = bound_memory(text)
    assert len(bounded.encode("utf-8")) <= MEMORY_MAX_BYTES
    assert "长长长" in bounded


def test_prompt_names_date_channel_and_tools(tmp_path) -> None:
    ws = Workspace(tmp_path)
    builder = PromptBuilder(ws)
    prompt = builder.build(PromptContext("telegram-1", "telegram", "group", "Ann", datetime(2026, 12, 2, 9, 30)))
    assert "Today is Wednesday, 2026-12-02 09:30" in prompt
    assert 'memory_get("memory/2026-12-01.md")' in prompt and "group chat" in prompt
    (tmp_path / "PERSONA.md").write_text("You are Captain Memory.")
    assert builder.build(PromptContext("t-1", "terminal", "direct", "Ann", datetime.now())).startswith("You are Captain Memory.")
