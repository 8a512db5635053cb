"""The bridge's translation between memory's turns and the chat API's messages."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from support.bot import dm, make_services

from bridge.messages import history, to_message, to_turn
from memory import Database, Turn
from memory.conversations.conversations import ConversationStore

CALLS = [{"id": "call_1", "type": "function",
          "function": {"name": "memory_search", "arguments": json.dumps({"query": "猫"})}}]
MESSAGES = [
    {"role": "user", "content": "我的猫叫什么？"},
    {"role": "assistant", "content": None, "tool_calls": CALLS},
    {"role": "tool", "tool_call_id": "call_1", "content": '{"results": []}'},
    {"role": "assistant", "content": "I don't know yet."},
]
ANN = "telegram-42|telegram::42:"


def test_every_kind_of_message_survives_the_turn_and_back() -> None:
    turns = [to_turn(message) for message in MESSAGES]
    assert turns[1] == Turn("assistant", "", {"tool_calls": json.dumps(CALLS, ensure_ascii=False)})
    assert turns[2] == Turn("tool", '{"results": []}', {"tool_call_id": "call_1"})
    assert [to_message(turn) for turn in turns] == MESSAGES


def test_history_drops_a_tool_result_whose_call_was_trimmed_and_starts_at_a_user() -> None:
    turns = [to_turn(message) for message in MESSAGES]
    assert history(turns[2:]) == []  # an orphan tool result, then a lone answer
    assert history([turns[3], *turns]) == MESSAGES


def test_rows_of_format_1_come_back_as_the_same_messages(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(
            "CREATE TABLE sessions (id TEXT PRIMARY KEY, scope TEXT NOT NULL, channel TEXT NOT NULL DEFAULT '',"
            " created_at REAL NOT NULL, updated_at REAL NOT NULL, context_start_seq INTEGER NOT NULL DEFAULT 0,"
            " summary TEXT, summarized_seq INTEGER NOT NULL DEFAULT 0, cleared_seq INTEGER NOT NULL DEFAULT 0);"
            "CREATE TABLE messages (session_id TEXT NOT NULL, seq INTEGER NOT NULL, role TEXT NOT NULL,"
            " body TEXT NOT NULL, visible INTEGER NOT NULL, created_at REAL NOT NULL, PRIMARY KEY (session_id, seq))"
            " WITHOUT ROWID;"
            "INSERT INTO sessions (id, scope, created_at, updated_at) VALUES ('s', 'a', 1, 1);")
        conn.executemany("INSERT INTO messages VALUES ('s', ?, ?, ?, ?, 1)",
                         [(seq, m["role"], json.dumps(m), int(m["role"] == "user")) for seq, m in enumerate(MESSAGES, 1)])
    assert history(ConversationStore(Database(path)).load_messages("s", 5)) == MESSAGES


async def test_a_turn_with_a_tool_call_is_stored_as_turns_and_sent_back_as_it_was(tmp_path, fake_llm) -> None:
    services = make_services(tmp_path / "ws", fake_llm.base_url)
    fake_llm.tool_call("memory_search", {"query": "cat"}, call_id="call_9")
    fake_llm.reply("No cat on record.")
    await services.agent.handle(dm("what is my cat called?"))
    fake_llm.reply("ok")
    await services.agent.handle(dm("fine"))
    stored = services.conversations.load_messages(ANN, 5)
    assert [(turn.role, turn.text, sorted(turn.meta)) for turn in stored] == [
        ("user", "what is my cat called?", []), ("assistant", "", ["tool_calls"]), ("tool", stored[2].text, ["tool_call_id"]),
        ("assistant", "No cat on record.", []), ("user", "fine", []), ("assistant", "ok", [])]
    sent = fake_llm.requests[-1]["messages"][1:]
    assert sent[1]["tool_calls"][0]["id"] == "call_9" and sent[1]["content"] is None
    assert sent[2] == {"role": "tool", "tool_call_id": "call_9", "content": stored[2].text}
    assert sent[:4] == history(stored[:4])
    await services.aclose()
