from __future__ import annotations

import pytest

from memory.index.word_forms import forms


@pytest.mark.parametrize(
    ("word", "wanted", "unwanted"),
    [
        ("painted", {"paint", "paints", "painting"}, {"painter"}),
        ("hike", {"hikes", "hiked", "hiking"}, {"hiker"}),
        ("moved", {"move", "moves", "moving"}, {"movie", "movies"}),
        ("studies", {"study", "studied"}, {"student"}),
        ("submitted", {"submit", "submits", "submitting"}, set()),
        ("cities", {"city"}, {"cite", "citizen"}),
        ("running", {"run", "runs"}, {"runner"}),
    ],
)
def test_a_word_widens_to_its_regular_forms_only(word: str, wanted: set[str], unwanted: set[str]) -> None:
    widened = forms(word)
    assert widened[0] == word
    assert wanted <= set(widened)
    assert not unwanted & set(widened)


@pytest.mark.parametrize("word", ["art", "cat", "2031", "wi-fi", "café", "猫叫小白"])
def test_short_words_numbers_and_other_scripts_stand_for_themselves(word: str) -> None:
    assert forms(word) == (word,)
