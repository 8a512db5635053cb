"""The turn ledger (bridge/ledger.py) under the agent: a redelivered message is stored once, its
answer asked of the model once, and a ledger from before the rename or before seqs still works."""

from __future__ import annotations

import asyncio
from datetime import date

from support.bot import dm, make_services

from bridge.ledger import RETENTION_S, TABLE, TurnState
from memory import Turn


async def test_a_redelivered_message_is_stored_once_and_its_answer_is_recorded_with_it(tmp_path, fake_llm) -> None:
    services = make_services(tmp_path / "shard", fake_llm.base_url)
    ledger = services.ledger
    message = dm("my passport number ends in 42")
    fake_llm.fail(500, times=3)  # the first delivery (and its retries) dies before any answer (as a killed worker would)
    first = await services.agent.handle(message)
    assert "Your message is saved" in first.text
    assert ledger.get(message.dedupe_key).state is TurnState.STARTED
    fake_llm.reply("Noted.")
    second = await services.agent.handle(message)  # the redelivery
    assert second.text == "Noted."
    record = ledger.get(message.dedupe_key)
    assert (record.state, record.reply) == (TurnState.ANSWERED, "Noted.")
    session = services.agent.identify(message).session_id
    stored = [m.text for m in services.conversations.load_messages(session, 10)]
    assert stored == ["my passport number ends in 42", "Noted."]
    assert fake_llm.requests[-1]["messages"][-1]["content"] == "my passport number ends in 42"
    ledger.mark_sent(message.dedupe_key)
    record = ledger.get(message.dedupe_key)
    assert (record.state, record.reply) == (TurnState.SENT, None)  # no copy of the answer outlives a forget
    assert ledger.prune(now=10**12) == 1 and ledger.get(message.dedupe_key) is None
    await services.aclose()


async def test_a_redelivery_of_a_message_forgotten_meanwhile_is_not_answered(tmp_path, fake_llm) -> None:
    services = make_services(tmp_path / "shard", fake_llm.base_url)
    fake_llm.reply("Hello!")
    await services.agent.handle(dm("hello"))  # an earlier turn: its message must not be taken for this one's
    message = dm("my locker code is Zorblaxquint")
    fake_llm.fail(500, times=3)
    await services.agent.handle(message)  # stored, then the worker died before any answer
    who = services.agent.identify(message)
    await asyncio.to_thread(services.forgetter.forget, who.scope, "zorblaxquint")
    asked = len(fake_llm.requests)
    fake_llm.reply("Noted: Zorblaxquint")
    reply = await services.agent.handle(message)  # the redelivery
    assert reply.text == "That message was forgotten while I was answering it, so I've dropped my answer."
    assert len(fake_llm.requests) == asked
    assert [m.text for m in services.conversations.load_messages(who.session_id, 10)] == ["hello", "Hello!"]
    await services.aclose()


async def test_a_shards_ledger_from_before_the_rename_and_before_seqs_is_upgraded_and_still_resumes_by_text(
        tmp_path, fake_llm) -> None:
    """A shard's ``cluster_turns`` table, as a worker of two versions ago left it (no ``user_seq``),
    becomes the workspace's turn ledger with its rows: the half-done turn resumes by its text."""
    services = make_services(tmp_path / "shard", fake_llm.base_url)
    message = dm("the old worker stored me")
    services.memory.db.execute_script(
        "CREATE TABLE cluster_turns (message_key TEXT PRIMARY KEY, state TEXT NOT NULL, reply TEXT,"
        " markdown INTEGER NOT NULL DEFAULT 1, updated_at REAL NOT NULL) WITHOUT ROWID;"
        " CREATE INDEX cluster_turns_updated ON cluster_turns (updated_at);")
    with services.memory.db.transaction() as conn:
        conn.execute("INSERT INTO cluster_turns (message_key, state, updated_at) VALUES (?, 'started', 0)",
                     (message.dedupe_key,))
    who = services.agent.identify(message)  # the agent opens the ledger: the old table is renamed
    tables = {row[0] for row in services.memory.db.query("SELECT name FROM sqlite_master")}
    assert TABLE in tables and not {name for name in tables if name.startswith("cluster_turns")}
    await services.agent.sessions.open(who.scope, message.chat_key, message.channel)
    [seq] = services.conversations.append_messages(who.session_id, [Turn("user", message.text)])
    ledger = services.ledger
    assert ledger.get(message.dedupe_key).user_seq is None
    fake_llm.reply("Resumed.")
    assert (await services.agent.handle(message)).text == "Resumed."
    assert [m.text for m in services.conversations.load_messages(who.session_id, 10)] == [message.text, "Resumed."]
    fresh = dm("a new message")
    fake_llm.reply("Hi.")
    await services.agent.handle(fresh)
    assert ledger.get(fresh.dedupe_key).user_seq == seq + 2
    await services.aclose()


async def test_the_nightly_pass_drops_ledger_rows_a_week_after_their_last_change(tmp_path, fake_llm) -> None:
    """The ledger never grows without end, in one process as in a shard: a row goes RETENTION_S
    after its last change, sent or not (an answer never sent keeps no text past then); younger stay."""
    services = make_services(tmp_path / "ws", fake_llm.base_url, memory={"dream": {"enabled": False}})
    ledger = services.ledger
    for key in ("old", "young"):
        ledger.mark_sent(key)
    with services.memory.db.transaction() as conn:
        ledger.mark_answered(conn, "unsent", "an answer nobody received")
        ledger.mark_started(conn, "unfinished", 1)
        conn.execute(f"UPDATE {TABLE} SET updated_at = updated_at - ? WHERE message_key IN ('old', 'unsent')",
                     (RETENTION_S + 60,))
    await services.nightly(date.today(), 1)
    assert ledger.get("old") is None and ledger.get("unsent") is None
    assert ledger.get("young").state is TurnState.SENT and ledger.get("unfinished").state is TurnState.STARTED
    await services.aclose()
