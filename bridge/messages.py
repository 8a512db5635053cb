"""The translation between memory's turns and the chat API's messages, in one place.

Memory keeps a turn as a role, its text and string ``meta``; the OpenAI chat format is the bridge's
business. An assistant step that calls tools keeps the calls (JSON text) under ``tool_calls``, a
tool result the id of the call it answers under ``tool_call_id``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from memory import Turn

from .llm import Message

_CALLS = "tool_calls"
_CALL_ID = "tool_call_id"


def to_turn(message: Message) -> Turn:
    """A chat message as memory stores it."""
    meta: dict[str, str] = {}
    if message.get(_CALLS):
        meta[_CALLS] = json.dumps(message[_CALLS], ensure_ascii=False)
    if message.get(_CALL_ID):
        meta[_CALL_ID] = str(message[_CALL_ID])
    content = message.get("content")
    return Turn(str(message.get("role", "")), content if isinstance(content, str) else "", meta)


def to_message(turn: Turn) -> Message:
    """A stored turn as the chat API wants it (an assistant step without text has ``content: null``)."""
    message: Message = {"role": turn.role, "content": (turn.text or None) if turn.role == "assistant" else turn.text}
    if _CALLS in turn.meta:
        message[_CALLS] = json.loads(turn.meta[_CALLS])
    if _CALL_ID in turn.meta:
        message[_CALL_ID] = turn.meta[_CALL_ID]
    return message


def history(turns: Sequence[Turn]) -> list[Message]:
    """The context's turns as messages the API accepts: a tool result whose call was trimmed away
    is dropped, and the history starts at a user (or system) message."""
    known: set[str] = set()
    kept: list[Message] = []
    for message in map(to_message, turns):
        if message["role"] == "assistant":
            known.update(call["id"] for call in message.get(_CALLS) or [])
        if message["role"] == "tool" and message.get(_CALL_ID) not in known:
            continue
        kept.append(message)
    while kept and kept[0]["role"] not in ("user", "system"):
        kept.pop(0)
    return kept
