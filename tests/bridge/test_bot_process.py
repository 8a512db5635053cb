"""``membridge chat`` and ``membridge run`` as processes: stdin in, stdout out, signals."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from fakes import HANG_GUARD_S
from fakes.openai_server import FakeOpenAI
from fakes.telegram_server import FakeTelegram

ROOT = Path(__file__).resolve().parents[2]


def write_config(tmp_path: Path, llm_url: str) -> Path:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "workspace": str(tmp_path / "ws"), "embedding": {"provider": "none"},
        "llm": {"base_url": llm_url, "api_key": "test-key", "max_retries": 0, "timeout_s": 10},
        "channels": {"terminal": {"user": "alice"}},
    }))
    return config


def polling_config(tmp_path: Path, llm_url: str, telegram: FakeTelegram) -> Path:
    """``membridge run`` polling the fake Telegram alone (no terminal chat, no Deep Dream)."""
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "workspace": str(tmp_path / "ws"), "embedding": {"provider": "none"},
        "llm": {"base_url": llm_url, "api_key": "test-key", "max_retries": 0, "timeout_s": 60},
        "channels": {"terminal": {"enabled": False},
                     "telegram": {"enabled": True, "token": telegram.token, "base_url": telegram.base_url}},
        "memory": {"dream": {"enabled": False}},
    }))
    return config


async def start(config: Path, command: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge", "--config", str(config), command, cwd=ROOT,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)


async def answering_held(tmp_path: Path, fake_llm: FakeOpenAI, telegram: FakeTelegram,
                         text: str) -> tuple[Path, asyncio.subprocess.Process]:
    """``membridge run`` polling ``telegram``, answering ``re: <message>``, once chat 7's ``text``
    is stored and its answer held by the model (for good: the process is to be killed)."""
    fake_llm.responder = lambda body: "re: " + body["messages"][-1]["content"]
    held = fake_llm.hold_first(lambda body: body["messages"][-1].get("content") == text)
    config = polling_config(tmp_path, fake_llm.base_url, telegram)
    first = await start(config, "run")
    telegram.push_text(7, 7, text)
    await asyncio.wait_for(held.wait(), HANG_GUARD_S)
    return config, first


async def killed_and_restarted(config: Path, telegram: FakeTelegram, first: asyncio.subprocess.Process,
                               oldest_unaccepted: dict[str, Any], *, answers: int) -> None:
    """SIGKILL ``first`` (Telegram must not have been told of ``oldest_unaccepted``: it comes back),
    start the bot again, wait until ``answers`` messages were sent in all, then stop it."""
    first.kill()
    await first.communicate()
    assert max(offset or 0 for offset in telegram.offsets) <= oldest_unaccepted["update_id"]
    second = await start(config, "run")
    try:
        await telegram.wait_until(lambda: len(telegram.sent) >= answers, what=f"{answers} answer(s) in all")
    finally:
        second.send_signal(signal.SIGTERM)
        await asyncio.wait_for(second.communicate(), 60)


def stored_user_messages(tmp_path: Path) -> list[str]:
    with sqlite3.connect(tmp_path / "ws" / "index.db") as db:
        return [row[0] for row in db.execute("SELECT body FROM messages WHERE role = 'user' ORDER BY seq")]


async def test_chat_without_an_llm_explains_and_memory_commands_work(tmp_path) -> None:
    process = await start(write_config(tmp_path, "http://127.0.0.1:9/v1"), "chat")
    out, err = await asyncio.wait_for(process.communicate(b"/memory show\nhello\n"), 60)
    text = out.decode()
    assert process.returncode == 0, err.decode()
    assert "chatting as alice (memory scope terminal-alice)" in text
    assert "I have no long-term memory for this chat yet." in text
    assert "can't reach my language model" in text
    assert "note: cannot reach the LLM" in text and "/memory commands work without one" in text


@pytest.mark.slow
async def test_sigterm_during_a_turn_finishes_the_turn_and_exits_0(tmp_path, fake_llm) -> None:
    fake_llm.hang(1.5)
    fake_llm.reply("finished after the signal")
    process = await start(write_config(tmp_path, fake_llm.base_url), "run")
    assert process.stdin is not None
    process.stdin.write(b"are you there?\n")
    await process.stdin.drain()
    await asyncio.wait_for(fake_llm.wait_for_chat(
        lambda body: body.get("messages", [{}])[-1].get("content") == "are you there?"), HANG_GUARD_S)
    process.send_signal(signal.SIGTERM)
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    assert "finished after the signal" in out.decode()


@pytest.mark.slow
async def test_a_telegram_update_not_yet_stored_when_the_bot_is_killed_is_answered_after_the_restart(
        tmp_path, fake_llm) -> None:
    """Polling in one process: m2 waits in its chat's lane behind m1 (whose answer the model holds),
    not stored yet, when the bot is SIGKILLed. Telegram was not told m2 arrived, so the restarted
    bot gets it again and answers it; m1, stored, stays stored once (its answer is lost with the
    process, as before)."""
    async with FakeTelegram() as telegram:
        config, first = await answering_held(tmp_path, fake_llm, telegram, "m1")
        m2 = telegram.push_text(7, 7, "m2")
        await telegram.wait_fetched()
        await killed_and_restarted(config, telegram, first, m2, answers=1)
    assert [message["visible"] for message in telegram.sent] == ["re: m2"]
    assert stored_user_messages(tmp_path) == ["m1", "m2"]


@pytest.mark.slow
async def test_after_a_sigkill_the_redelivered_updates_of_other_chats_are_answered_once(tmp_path, fake_llm) -> None:
    """Polling in one process, three chats' worth of progress when the bot is SIGKILLed: a2 waits
    unstored behind a1 (whose answer the model holds), b1 is stored and answered, b2 is stored and
    its answer held. Telegram redelivers everything from a2 on. After the restart the turn ledger in
    index.db decides: a2 is new (answered), b1 was answered (not again), b2 resumes from its stored
    message (answered, stored once)."""
    held_b2 = fake_llm.hold_first(lambda body: body["messages"][-1].get("content") == "b2")
    async with FakeTelegram() as telegram:
        config, first = await answering_held(tmp_path, fake_llm, telegram, "a1")
        a2 = telegram.push_text(7, 7, "a2")
        telegram.push_text(8, 8, "b1")
        await telegram.wait_sent(1)
        telegram.push_text(8, 8, "b2")  # taken up only once b1's turn is wholly done: chat B's lane
        await asyncio.wait_for(held_b2.wait(), HANG_GUARD_S)
        await killed_and_restarted(config, telegram, first, a2, answers=3)
    answers = sorted((message["chat_id"], message["visible"]) for message in telegram.sent)
    assert answers == [(7, "re: a2"), (8, "re: b1"), (8, "re: b2")]
    assert sorted(stored_user_messages(tmp_path)) == ["a1", "a2", "b1", "b2"]
