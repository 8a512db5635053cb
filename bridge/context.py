"""The context budget: offline token estimates and where to trim.

No tokenizer is downloaded: English-like text counts about four characters a token, CJK text
about one character a token, which is close enough to keep requests under a model's window.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from memory import StoredMessage, Turn, count_cjk

_MESSAGE_OVERHEAD = 4


def estimate_tokens(text: str) -> int:
    cjk = count_cjk(text)
    return cjk + math.ceil((len(text) - cjk) / 4)


def turn_tokens(turn: Turn) -> int:
    """A turn's text and its meta (the tool calls' JSON goes to the model too)."""
    return _MESSAGE_OVERHEAD + estimate_tokens(turn.text) + sum(estimate_tokens(value) for value in turn.meta.values())


def turns_tokens(turns: Sequence[Turn]) -> int:
    return sum(turn_tokens(t) for t in turns)


def trim_point(stored: Sequence[StoredMessage], max_turns: int, max_tokens: int) -> int | None:
    """The seq where the context should start now, or None when it is within budget.

    Over budget, it trims down to half the turn budget (and within the token budget), so that a
    flush job covers several turns instead of one per message.
    """
    starts = [i for i, item in enumerate(stored) if item.visible]
    tokens = turns_tokens([item.turn for item in stored])
    if len(starts) <= max_turns and tokens <= max_tokens:
        return None
    keep_turns = max(1, max_turns // 2)
    first = starts[-keep_turns] if len(starts) >= keep_turns else 0
    while first < len(stored) and turns_tokens([i.turn for i in stored[first:]]) > max_tokens // 2:
        later = [i for i in starts if i > first]
        if not later:
            break
        first = later[0]
    if first == 0:
        return None
    return stored[first].seq
