"""The context budget: offline token estimates and where to trim.

No tokenizer is downloaded: English-like text counts about four characters a token, CJK text
about one character a token, which is close enough to keep requests under a model's window.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from memory import StoredMessage, count_cjk

_MESSAGE_OVERHEAD = 4


def estimate_tokens(text: str) -> int:
    cjk = count_cjk(text)
    return cjk + math.ceil((len(text) - cjk) / 4)


def message_tokens(message: dict[str, Any]) -> int:
    content = message.get("content")
    total = _MESSAGE_OVERHEAD + (estimate_tokens(content) if isinstance(content, str) else 0)
    if message.get("tool_calls"):
        total += estimate_tokens(json.dumps(message["tool_calls"], ensure_ascii=False))
    return total


def messages_tokens(messages: Sequence[dict[str, Any]]) -> int:
    return sum(message_tokens(m) for m in messages)


def trim_point(stored: Sequence[StoredMessage], max_turns: int, max_tokens: int) -> int | None:
    """The seq where the context should start now, or None when it is within budget.

    Over budget, it trims down to half the turn budget (and within the token budget), so that a
    flush job covers several turns instead of one per message.
    """
    starts = [i for i, item in enumerate(stored) if item.visible]
    tokens = messages_tokens([item.message for item in stored])
    if len(starts) <= max_turns and tokens <= max_tokens:
        return None
    keep_turns = max(1, max_turns // 2)
    first = starts[-keep_turns] if len(starts) >= keep_turns else 0
    while first < len(stored) and messages_tokens([i.message for i in stored[first:]]) > max_tokens // 2:
        later = [i for i in starts if i > first]
        if not later:
            break
        first = later[0]
    if first == 0:
        return None
    return stored[first].seq
