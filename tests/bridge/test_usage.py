"""`membridge usage` and `/usage`: what each scope spent, read back from the usage book in index.db."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta

import pytest

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
    db.close()
    assert main(["--config", str(config), "usage", "--days", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    yesterday = (TODAY - timedelta(days=1)).isoformat()
    assert lines == [
        "day         scope         turns refused     prompt completion       total",
        f"{TODAY.isoformat()}  telegram-1        1       1        100         20         120",
        f"{yesterday}  slack-T1-U2       1       0         40          5         ~45",
        "total                         2       1        140         25         165",
    ]
    assert main(["--config", str(config), "usage", "--days", "30", "--scope", "telegram-1", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["day"], r["tokens"], r["turns"], r["refused"], r["estimated"]) for r in rows] == [
        (TODAY.isoformat(), 120, 1, 1, False), ((TODAY - timedelta(days=9)).isoformat(), 1000, 1, 0, False)]


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
