"""A shard's workspace: the turn journal that makes a redelivery harmless, and the shared knowledge."""

from __future__ import annotations

import asyncio

from support.bot import dm, make_services

from bridge.cluster.ledger import TurnLedger, TurnState
from bridge.cluster.shard import share_knowledge
from memory import Turn


async def test_a_redelivered_message_is_stored_once_and_its_answer_is_recorded_with_it(tmp_path, fake_llm) -> None:
    services = make_services(tmp_path / "shard", fake_llm.base_url)
    ledger = TurnLedger(services.memory.db)
    services.agent.journal = ledger
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
    services.agent.journal = TurnLedger(services.memory.db)
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


async def test_every_shard_reads_and_writes_one_knowledge_base(tmp_path, fake_llm) -> None:
    root = tmp_path / "cluster"
    shards = [make_services(root / "shards" / str(n), fake_llm.base_url) for n in (0, 1)]
    for n in (0, 1):
        share_knowledge(root / "shards" / str(n), root)
    await asyncio.to_thread(shards[0].knowledge.write, "ops/deploy", "# Deploy\nWe deploy on Tuesdays with blue-green.",
                            actor="telegram:1")
    assert (root / "knowledge" / "ops" / "deploy.md").is_file()
    hits = await asyncio.to_thread(shards[1].memory.search, "when do we deploy", "telegram-2")
    assert hits and "Tuesdays" in hits[0].text
    (root / "shards" / "2" / "knowledge").mkdir(parents=True)  # empty: replaced by the link
    share_knowledge(root / "shards" / "2", root)
    assert (root / "shards" / "2" / "knowledge").resolve() == (root / "knowledge").resolve()
    (root / "shards" / "3" / "knowledge" / "ops").mkdir(parents=True)  # pages of its own: refused
    try:
        share_knowledge(root / "shards" / "3", root)
    except ValueError as exc:
        assert "knowledge folder of the shard's own" in str(exc)
    else:
        raise AssertionError("a shard's own knowledge folder must not be hidden by the shared one")
    for services in shards:
        await services.aclose()


async def test_a_journal_from_before_seqs_were_recorded_is_upgraded_and_still_resumes_by_text(
        tmp_path, fake_llm) -> None:
    services = make_services(tmp_path / "shard", fake_llm.base_url)
    services.memory.db.execute_script(
        "CREATE TABLE cluster_turns (message_key TEXT PRIMARY KEY, state TEXT NOT NULL, reply TEXT,"
        " markdown INTEGER NOT NULL DEFAULT 1, updated_at REAL NOT NULL) WITHOUT ROWID;")
    message = dm("the old worker stored me")
    who = services.agent.identify(message)
    await services.agent.sessions.open(who.scope, message.chat_key, message.channel)
    [seq] = services.conversations.append_messages(who.session_id, [Turn("user", message.text)])
    with services.memory.db.transaction() as conn:
        conn.execute("INSERT INTO cluster_turns (message_key, state, updated_at) VALUES (?, 'started', 0)",
                     (message.dedupe_key,))
    ledger = TurnLedger(services.memory.db)
    services.agent.journal = ledger
    assert ledger.get(message.dedupe_key).user_seq is None
    fake_llm.reply("Resumed.")
    assert (await services.agent.handle(message)).text == "Resumed."
    assert [m.text for m in services.conversations.load_messages(who.session_id, 10)] == [message.text, "Resumed."]
    fresh = dm("a new message")
    fake_llm.reply("Hi.")
    await services.agent.handle(fresh)
    assert ledger.get(fresh.dedupe_key).user_seq == seq + 2
    await services.aclose()
