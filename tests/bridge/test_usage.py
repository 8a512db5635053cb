"""`membridge usage` and `/usage`: what each scope spent, read back from the usage book in index.db."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta

import pytest
from fakes.openai_server import _count_tokens
from support.bot import DREAM_ANSWER, FLUSH_SUMMARY, trim_a_turn
from support.scrape import eventually

from bridge.cli.main import main
from bridge.ops.usage import TurnRecord, UsageBook
from memory import Database

TODAY = date.today()
NOON = datetime.combine(TODAY, datetime.min.time()) + timedelta(hours=12)


def _book(workspace) -> tuple[Database, UsageBook]:
    db = Database(workspace / "index.db")
    return db, UsageBook(db)


def test_usage_prints_each_scope_and_day_with_totals_and_json(config_file, capsys) -> None:
    config = config_file()
    db, book = _book(config.parent / "ws")
    book.record(TurnRecord(NOON, "telegram-1", "telegram", "answered", 100, 20, request_ms=(350.0,)))
    book.record(TurnRecord(NOON, "telegram-1", "telegram", "refused"))
    book.record(TurnRecord(NOON - timedelta(days=1), "slack-T1-U2", "slack", "answered", 40, 5, estimated=True))
    book.record(TurnRecord(NOON - timedelta(days=9), "telegram-1", "telegram", "answered", 999, 1))
    book.record(TurnRecord(NOON, "telegram-1", "telegram", "deduplicated"))
    book.record(TurnRecord(NOON, "telegram-1", "", "answered", 30, 4, kind="daily_summary"))
    book.record(TurnRecord(NOON, "telegram-1", "", "answered", 50, 6, kind="dream"))
    db.close()
    assert main(["--config", str(config), "usage", "--days", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    yesterday = (TODAY - timedelta(days=1)).isoformat()
    assert lines == [
        "day         scope        kind            turns refused     prompt completion       total",
        f"{TODAY.isoformat()}  telegram-1   chat                1       1        100         20         120",
        f"{TODAY.isoformat()}  telegram-1   daily summary       1       0         30          4          34",
        f"{TODAY.isoformat()}  telegram-1   dream               1       0         50          6          56",
        f"{yesterday}  slack-T1-U2  chat                1       0         40          5         ~45",
        "total                                        2       1        220         35         255",
    ]
    assert main(["--config", str(config), "usage", "--days", "30", "--scope", "telegram-1", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["day"], r["kind"], r["tokens"], r["turns"], r["refused"], r["estimated"]) for r in rows] == [
        (TODAY.isoformat(), "chat", 120, 1, 1, False), (TODAY.isoformat(), "daily_summary", 34, 1, 0, False),
        (TODAY.isoformat(), "dream", 56, 1, 0, False), ((TODAY - timedelta(days=9)).isoformat(), "chat", 1000, 1, 0, False)]


def test_usage_refuses_bad_days_and_says_when_nothing_is_recorded(config_file, capsys) -> None:
    config = config_file()
    assert main(["--config", str(config), "usage"]) == 1
    assert "no index at" in capsys.readouterr().err
    db, _unused = _book(config.parent / "ws")
    db.close()
    assert main(["--config", str(config), "usage"]) == 0
    assert capsys.readouterr().out == "no model use recorded in the last 7 day(s)\n"
    with pytest.raises(SystemExit) as exit_:
        main(["--config", str(config), "usage", "--days", "400"])
    assert exit_.value.code == 2
    assert "400 days is more than 366" in capsys.readouterr().err


@pytest.mark.parametrize("bot_settings", [{"limits": {"daily_turns": 5}, "admins": ["telegram:900"]}])
async def test_usage_in_chat_shows_a_person_their_own_and_an_admin_the_top_spenders(metered_bot) -> None:
    telegram, llm, services, _base = metered_bot
    llm.reply("Hello")
    telegram.push_text(501, 501, "hi")
    await telegram.wait_sent(1)
    [row] = services.usage.report(TODAY, TODAY)
    telegram.push_text(501, 501, "/usage")
    [_, mine] = await telegram.wait_sent(2)  # sent as MarkdownV2: compared without its escapes
    spend = f"1 message, {row.tokens:,} tokens"
    assert mine["text"].replace("\\", "") == (f"Today: {spend} ({row.prompt_tokens:,} prompt + {row.completion_tokens:,} answer).\n"
                            f"Last 7 days: {spend}.\nDaily limit: 5 messages; it resets at midnight.")
    telegram.push_text(900, 900, "/usage")
    [*_, admin] = await telegram.wait_sent(3)
    assert admin["text"].replace("\\", "").endswith(f"Top today:\n\n1. telegram-501: {spend}")  # a Markdown list
    assert len(llm.requests) == 1


def test_erasing_a_scope_takes_its_usage_rows_and_a_forget_leaves_them(config_file, capsys) -> None:
    config = config_file()
    workspace = config.parent / "ws"
    db, book = _book(workspace)
    book.record(TurnRecord(NOON, "telegram-1", "telegram", "answered", 100, 20))
    book.record(TurnRecord(NOON, "telegram-2", "telegram", "answered", 7, 1))
    db.close()
    daily = workspace / "scopes" / "telegram-1" / "memory" / f"{TODAY.isoformat()}.md"
    daily.parent.mkdir(parents=True)
    daily.write_text("- the spare key is under the mat\n- likes green tea\n", encoding="utf-8")
    assert main(["--config", str(config), "memory", "forget", "spare key", "--scope", "telegram-1"]) == 0
    capsys.readouterr()
    assert main(["--config", str(config), "usage", "--json"]) == 0
    assert {row["scope"] for row in json.loads(capsys.readouterr().out)} == {"telegram-1", "telegram-2"}
    assert main(["--config", str(config), "memory", "erase", "--scope", "telegram-1", "--yes"]) == 0
    capsys.readouterr()
    assert main(["--config", str(config), "usage", "--json"]) == 0
    assert [row["scope"] for row in json.loads(capsys.readouterr().out)] == ["telegram-2"]


def _reported(request: dict, answer: str) -> tuple[int, int]:
    """(prompt, completion) tokens the fake OpenAI server reported for ``request`` answered with ``answer``."""
    return _count_tokens(json.dumps(request["messages"])), _count_tokens(answer)


def _kinds(services, scope: str) -> dict[str, tuple[int, int, int]]:
    """Today's usage of ``scope`` by kind: (prompt, completion, turns)."""
    return {row.kind: (row.prompt_tokens, row.completion_tokens, row.turns)
            for row in services.usage.report(TODAY, TODAY, scope=scope)}


@pytest.mark.parametrize("bot_settings", [{"context": {"max_turns": 1}}])
async def test_a_flush_and_a_dream_are_charged_to_the_scope_they_summarise_apart_from_its_turns(metered_bot) -> None:
    telegram, llm, services, _base = metered_bot
    await trim_a_turn(telegram, llm)

    async def flushed() -> bool:
        return services.conversations.job_backlog()[0].get("done", 0) == 1

    await eventually(flushed, "the flush job to be done")
    llm.reply(DREAM_ANSWER)
    telegram.push_text(501, 501, "/memory dream")
    await telegram.wait_sent(3)
    first, second, flush, dream = llm.requests
    chat = [a + b for a, b in zip(_reported(first, "Noted."), _reported(second, "Nice."), strict=True)]
    assert _kinds(services, "telegram-501") == {
        "chat": (*chat, 2), "flush": (*_reported(flush, FLUSH_SUMMARY), 1), "dream": (*_reported(dream, DREAM_ANSWER), 1)}
    upkeep = sum(_reported(flush, FLUSH_SUMMARY)) + sum(_reported(dream, DREAM_ANSWER))
    telegram.push_text(501, 501, "/usage")
    [*_, shown] = await telegram.wait_sent(4)
    assert f"Memory upkeep today: {upkeep:,} tokens (flush {sum(_reported(flush, FLUSH_SUMMARY)):,}, dream " \
           f"{sum(_reported(dream, DREAM_ANSWER)):,}); not counted against the daily limit." in shown["text"].replace("\\", "")
    services.config.limits.daily_tokens = sum(chat) + 1  # under what the day cost with its upkeep
    llm.reply("Still here.")
    telegram.push_text(501, 501, "are you there?")
    [*_, answer] = await telegram.wait_sent(5)
    assert answer["text"].replace("\\", "") == "Still here."  # the flush and the dream did not spend the person's limit


async def test_the_nightly_summary_and_dream_are_charged_as_such(metered_bot) -> None:
    telegram, llm, services, _base = metered_bot
    llm.reply("Noted.")
    telegram.push_text(501, 501, "I started learning the cello today")
    await telegram.wait_sent(1)
    llm.reply(FLUSH_SUMMARY)  # the nightly summary of the turn still in context
    llm.reply(DREAM_ANSWER)
    await services.nightly(TODAY, 1)
    turn, summary, dream = llm.requests
    assert _kinds(services, "telegram-501") == {
        "chat": (*_reported(turn, "Noted."), 1),
        "daily_summary": (*_reported(summary, FLUSH_SUMMARY), 1),
        "dream": (*_reported(dream, DREAM_ANSWER), 1)}


def test_a_book_written_before_upkeep_was_charged_keeps_its_rows_as_chat(tmp_path) -> None:
    db = Database(tmp_path / "index.db")
    db.execute_script(
        "CREATE TABLE usage_turns (id INTEGER PRIMARY KEY, at REAL NOT NULL, day TEXT NOT NULL, scope TEXT NOT NULL,"
        " channel TEXT NOT NULL, outcome TEXT NOT NULL, prompt_tokens INTEGER NOT NULL DEFAULT 0, completion_tokens"
        " INTEGER NOT NULL DEFAULT 0, estimated INTEGER NOT NULL DEFAULT 0, request_ms TEXT NOT NULL DEFAULT '');"
        "CREATE TABLE usage_daily (day TEXT NOT NULL, scope TEXT NOT NULL, prompt_tokens INTEGER NOT NULL,"
        " completion_tokens INTEGER NOT NULL, turns INTEGER NOT NULL, refused INTEGER NOT NULL, estimated INTEGER NOT NULL,"
        " PRIMARY KEY (day, scope)) WITHOUT ROWID;"
        f"INSERT INTO usage_turns (at, day, scope, channel, outcome, prompt_tokens, completion_tokens)"
        f" VALUES ({NOON.timestamp()}, '{TODAY.isoformat()}', 'telegram-1', 'telegram', 'answered', 100, 20);"
        f"INSERT INTO usage_daily VALUES ('{TODAY.isoformat()}', 'telegram-1', 100, 20, 1, 0, 0);")
    book = UsageBook(db)
    book.record(TurnRecord(NOON, "telegram-1", "", "answered", 7, 3, kind="flush"))
    assert [(row.kind, row.tokens, row.turns) for row in book.report(TODAY, TODAY)] == [("chat", 120, 1), ("flush", 10, 1)]
    assert book.spent("telegram-1", TODAY) == (120, 1)
    assert book.outcomes_since(NOON.timestamp() - 1)["answered"] == 1  # the flush is no turn
    assert UsageBook(db).report(TODAY, TODAY) == book.report(TODAY, TODAY)  # opened again: migrated once
    db.close()
