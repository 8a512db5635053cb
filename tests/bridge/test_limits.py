"""limits: a person over the day's budget gets one refusal, their message kept and no model asked."""

from __future__ import annotations

from datetime import date, datetime

import pytest
from support.scrape import delta, scrape

DAY = datetime(2026, 12, 7, 21, 30)
NEXT_DAY = datetime(2026, 12, 8, 0, 5)


@pytest.mark.parametrize("bot_settings", [{"limits": {"daily_turns": 1}, "admins": ["telegram:900"]}])
async def test_over_the_turn_limit_one_refusal_nothing_lost_no_model_request_and_tomorrow_answered(metered_bot) -> None:
    telegram, llm, services, base = metered_bot
    now = [DAY]
    services.agent.meter.clock = lambda: now[0]
    llm.reply("Hi Ann.")
    telegram.push_text(501, 501, "hello")
    await telegram.wait_sent(1)
    before = await scrape(base)
    telegram.push_text(501, 501, "tell me about the moon")
    [_, refusal] = await telegram.wait_sent(2)
    assert refusal["text"] == ("You have reached today's limit of 1 message a day with me. It resets at midnight "
                               "(2026-12-08 00:00, in 2 h 30 min); your message is saved, and I'll answer again after that.")
    assert len(llm.requests) == 1
    after = await scrape(base)
    assert delta(before, after, "membridge_turns_total", channel="telegram", outcome="refused") == 1
    assert delta(before, after, "membridge_model_requests_total", model="fake-model", outcome="ok") == 0
    assert [text for _kind, _where, text in services.conversations.find_text("telegram-501", lambda t: "moon" in t)] == [
        "tell me about the moon"]
    [row] = services.usage.report(DAY.date(), DAY.date())
    assert (row.turns, row.refused) == (1, 1)
    logged = services.memory.recalls.db.query("SELECT state FROM recalls WHERE scope = ?", ("telegram-501",))
    assert [state for (state,) in logged] == ["on"]  # the refused turn's recall search was dropped, not logged

    llm.reply("An admin is never refused")  # admins are exempt
    telegram.push_text(900, 900, "status?")
    await telegram.wait_sent(3)
    now[0] = NEXT_DAY
    llm.reply("The moon is far away")
    telegram.push_text(501, 501, "tell me about the moon")
    sent = await telegram.wait_sent(4)
    assert [message["text"] for message in sent[2:]] == ["An admin is never refused", "The moon is far away"]
    assert len(llm.requests) == 3
    assert len(telegram.sent) == 4


@pytest.mark.parametrize("bot_settings", [{"limits": {"daily_tokens": 50}}])
async def test_a_groups_tokens_count_against_the_group_not_its_members(metered_bot) -> None:
    telegram, llm, services, _base = metered_bot
    llm.reply("A long answer for the whole group, which spends the group's day.")
    telegram.push_text(-100200, 501, "@membridge_bot what's up?", chat_type="supergroup")
    await telegram.wait_sent(1)
    [row] = services.usage.report(date.today(), date.today())
    assert row.scope == "telegram-chat--100200" and row.tokens > 50
    telegram.push_text(-100200, 502, "@membridge_bot and now?", chat_type="supergroup")
    [_, refusal] = await telegram.wait_sent(2)
    assert refusal["text"].startswith("You have reached today's limit of 50 tokens a day with me.")
    llm.reply("Your own budget is untouched")
    telegram.push_text(501, 501, "and in private?")
    [*_, private] = await telegram.wait_sent(3)
    assert private["text"] == "Your own budget is untouched"
