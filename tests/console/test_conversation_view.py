"""The console's conversation view over HTTP: a scope's turns, newest first, each with what auto-recall
put before the model for it and why, read back from the files; real turns through the agent and the
fake LLM, exact JSON, paging, a forget, an edit, recall off, an old recall log, bad input."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from fakes.openai_server import FakeOpenAI
from support.bot import dm, make_services, system_prompt
from support.console_data import TOKENS, write

from bridge.console import create_app
from bridge.wiring.app import Services

READ = {"Authorization": "Bearer read-tok"}
ANN = "telegram-42"
DAY = "2026-01-31"
NOTES = "## 09:00 conversation notes <!-- flush:7 -->\n- the cat is called Miso\n- booked flights to Porto\n"
CAT = "What is the cat called?"
CAT_NOTE = "- the cat is called Miso"


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


def _services(tmp_path: Path, fake_llm: FakeOpenAI, **memory: Any) -> Services:
    services = make_services(tmp_path / "ws", fake_llm.base_url, console=TOKENS, memory=memory)
    write(services.workspace.daily_dir(ANN) / f"{DAY}.md", NOTES)
    return services


async def _get(services: Services, path: str, status: int = 200) -> Any:
    async with TestClient(TestServer(create_app(services))) as client:
        response = await client.get(path, headers=READ)
        assert response.status == status, await response.text()
        return await response.json()


async def _turn(services: Services, fake_llm: FakeOpenAI, text: str, answer: str) -> None:
    fake_llm.reply(answer)
    await services.agent.handle(dm(text))


def _untimed(page: dict[str, Any], since: float) -> dict[str, Any]:
    """The page with each turn's time checked (ISO, UTC, after ``since``) and left out."""
    for turn in page["turns"]:
        assert turn.pop("at") >= time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(int(since)))
    return page


def _chat() -> str:
    return dm("").chat_key


async def test_each_turn_shows_what_was_recalled_and_why(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    services = _services(tmp_path, fake_llm)
    since = time.time()
    try:
        await _turn(services, fake_llm, CAT, "Miso.")
        assert f"[{DAY} · memory/{DAY}.md:2] {CAT_NOTE[2:]}" in system_prompt(fake_llm.requests[0])
        await _turn(services, fake_llm, "Good morning!", "Morning!")  # shares no word with any note
        [recalled] = services.memory.recall(CAT, ANN)
        page = _untimed(await _get(services, f"/api/scopes/{ANN}/conversation"), since)
        assert page == {"scope": ANN, "next": None, "turns": [
            {"chat": _chat(), "seq": 3, "message": "Good morning!", "answer": "Morning!", "recall": "nothing",
             "recalled": []},
            {"chat": _chat(), "seq": 1, "message": CAT, "answer": "Miso.", "recall": "recalled", "recalled": [
                {"path": f"memory/{DAY}.md", "start_line": 2, "end_line": 2, "date": DAY,
                 "relevance": round(recalled.relevance, 3), "why": "words", "text": CAT_NOTE, "state": "same"}]},
        ]}
        assert recalled.relevance >= 0.3

        # The note edited since: its lines are not shown as what was recalled; deleted: forgotten.
        daily = services.workspace.daily_file(ANN, DAY)
        daily.write_text(NOTES.replace("Miso", "Mochi"), encoding="utf-8")
        entry = (await _get(services, f"/api/scopes/{ANN}/conversation"))["turns"][1]["recalled"][0]
        assert (entry["text"], entry["state"]) == (None, "changed")
        daily.write_text("## 09:00 conversation notes\n", encoding="utf-8")
        entry = (await _get(services, f"/api/scopes/{ANN}/conversation"))["turns"][1]["recalled"][0]
        assert (entry["text"], entry["state"]) == (None, "forgotten")
        daily.unlink()
        entry = (await _get(services, f"/api/scopes/{ANN}/conversation"))["turns"][1]["recalled"][0]
        assert (entry["path"], entry["text"], entry["state"]) == (f"memory/{DAY}.md", None, "forgotten")
    finally:
        await services.aclose()


async def test_a_forgotten_message_is_not_shown(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    services = _services(tmp_path, fake_llm)
    since = time.time()
    try:
        await _turn(services, fake_llm, CAT, "Miso.")
        await _turn(services, fake_llm, "My PIN is 8812, keep it", "I will not keep PINs.")
        await _turn(services, fake_llm, "Good morning!", "Morning!")
        services.forgetter.forget(ANN, "8812")
        page = _untimed(await _get(services, f"/api/scopes/{ANN}/conversation"), since)
        assert [(turn["seq"], turn["message"], turn["answer"], turn["recall"]) for turn in page["turns"]] == [
            (5, "Good morning!", "Morning!", "unknown"),  # a forget clears the scope's recall log
            (1, CAT, "Miso.", "unknown"),
        ]
        assert "8812" not in str(page)
    finally:
        await services.aclose()


async def test_turns_come_a_page_at_a_time(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    services = _services(tmp_path, fake_llm)
    try:
        for number in range(5):
            await _turn(services, fake_llm, f"question {number}", f"answer {number}")
        seen, mark, pages = [], "", 0
        while True:
            page = await _get(services, f"/api/scopes/{ANN}/conversation?limit=2{mark}")
            seen += [turn["message"] for turn in page["turns"]]
            pages += 1
            if page["next"] is None:
                break
            mark = f"&before={page['next']}"
        assert seen == [f"question {number}" for number in (4, 3, 2, 1, 0)] and pages == 3
        await _turn(services, fake_llm, "question 5", "answer 5")  # a new turn does not shift a later page
        first = await _get(services, f"/api/scopes/{ANN}/conversation?limit=2")
        second = await _get(services, f"/api/scopes/{ANN}/conversation?limit=2&before={first['next']}")
        assert [turn["message"] for turn in second["turns"]] == ["question 3", "question 2"]
    finally:
        await services.aclose()


async def test_recall_off_and_a_failed_recall_say_so(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    services = _services(tmp_path, fake_llm, auto_recall={"enabled": False})
    try:
        await _turn(services, fake_llm, CAT, "I don't know.")
        assert "<recalled-notes>" not in system_prompt(fake_llm.requests[0])
        services.memory.settings.auto_recall.enabled = True
        services.memory.recall = _broken  # type: ignore[method-assign]
        await _turn(services, fake_llm, CAT, "Still no idea.")
        page = await _get(services, f"/api/scopes/{ANN}/conversation")
        assert [(turn["message"], turn["answer"], turn["recall"], turn["recalled"]) for turn in page["turns"]] == [
            (CAT, "Still no idea.", "failed", []), (CAT, "I don't know.", "off", [])]
        assert await _get(services, f"/api/scopes/{ANN}/recalls") == []  # turns that recalled notes only
    finally:
        await services.aclose()


def _broken(text: str, scope: str) -> list[Any]:
    raise OSError("the index is unreadable")


async def test_a_recall_log_that_cannot_be_written_costs_the_turn_nothing(
        tmp_path: Path, fake_llm: FakeOpenAI, caplog: pytest.LogCaptureFixture) -> None:
    services = _services(tmp_path, fake_llm)
    try:
        def locked(*_args: Any) -> None:
            raise sqlite3.OperationalError("database is locked")

        services.memory.recalls.record = locked  # type: ignore[method-assign]
        fake_llm.reply("Miso.")
        reply = await services.agent.handle(dm(CAT))
        assert reply.text == "Miso."
        assert CAT_NOTE[2:] in system_prompt(fake_llm.requests[0])  # the notes still reached the model
        assert "could not log session telegram-42|" in caplog.text and "database is locked" in caplog.text
        [turn] = (await _get(services, f"/api/scopes/{ANN}/conversation"))["turns"]
        assert (turn["message"], turn["answer"], turn["recall"]) == (CAT, "Miso.", "unknown")
    finally:
        await services.aclose()


async def test_an_old_recall_log_is_read_as_recall_that_ran(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    """The first recall log had no ``state``: its rows are turns that recalled notes."""
    services = _services(tmp_path, fake_llm)
    try:
        await _turn(services, fake_llm, CAT, "Miso.")
    finally:
        await services.aclose()
    with sqlite3.connect(tmp_path / "ws" / "index.db") as conn:
        conn.execute("CREATE TABLE old AS SELECT session_id, seq, scope, at, entries FROM recalls")
        conn.execute("DROP TABLE recalls")
        conn.execute("CREATE TABLE recalls (session_id TEXT NOT NULL, seq INTEGER NOT NULL, scope TEXT NOT NULL,"
                     " at REAL NOT NULL, entries TEXT NOT NULL, PRIMARY KEY (session_id, seq)) WITHOUT ROWID")
        conn.execute("INSERT INTO recalls SELECT * FROM old")
        conn.execute("DROP TABLE old")
    services = make_services(tmp_path / "ws", fake_llm.base_url, console=TOKENS)
    try:
        [turn] = (await _get(services, f"/api/scopes/{ANN}/conversation"))["turns"]
        assert (turn["recall"], turn["recalled"][0]["text"]) == ("recalled", CAT_NOTE)
    finally:
        await services.aclose()


@pytest.mark.parametrize(("query", "error"), [
    ("limit=0", "limit must be a whole number from 1 to 100, got '0'"),
    ("limit=ten", "limit must be a whole number from 1 to 100, got 'ten'"),
    ("before=yesterday", "before='yesterday' is not a page mark: use the 'next' value of the page before"),
    ("before=1.5~x~telegram-42|c", "before='1.5~x~telegram-42|c' is not a page mark"),
])
async def test_bad_paging_is_a_400_that_says_what_to_send(tmp_path: Path, fake_llm: FakeOpenAI, query: str,
                                                          error: str) -> None:
    services = _services(tmp_path, fake_llm)
    try:
        body = await _get(services, f"/api/scopes/{ANN}/conversation?{query}", 400)
        assert body["error"].startswith(error)
        assert (await _get(services, "/api/scopes/nobody/conversation", 404))["error"].startswith("unknown scope")
    finally:
        await services.aclose()
