"""``membridge chat`` and ``membridge run`` as processes: stdin in, stdout out, signals."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import sys
from pathlib import Path

import pytest
import yaml
from fakes import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]


def write_config(tmp_path: Path, llm_url: str) -> Path:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "workspace": str(tmp_path / "ws"), "embedding": {"provider": "none"},
        "llm": {"base_url": llm_url, "api_key": "test-key", "max_retries": 0, "timeout_s": 10},
        "channels": {"terminal": {"user": "alice"}},
    }))
    return config


async def start(config: Path, command: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge", "--config", str(config), command, cwd=ROOT,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)


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
    from fakes.telegram_server import FakeTelegram

    fake_llm.responder = lambda body: "re: " + body["messages"][-1]["content"]
    held = fake_llm.hold_first(lambda body: body["messages"][-1].get("content") == "m1")
    async with FakeTelegram() as telegram:
        config = tmp_path / "config.yaml"
        config.write_text(yaml.safe_dump({
            "workspace": str(tmp_path / "ws"), "embedding": {"provider": "none"},
            "llm": {"base_url": fake_llm.base_url, "api_key": "test-key", "max_retries": 0, "timeout_s": 60},
            "channels": {"terminal": {"enabled": False},
                         "telegram": {"enabled": True, "token": telegram.token, "base_url": telegram.base_url}},
            "memory": {"dream": {"enabled": False}},
        }))
        first = await start(config, "run")
        telegram.push_text(7, 7, "m1")
        await asyncio.wait_for(held.wait(), HANG_GUARD_S)
        m2 = telegram.push_text(7, 7, "m2")
        await telegram.wait_fetched()
        first.kill()
        await first.communicate()
        assert max(offset or 0 for offset in telegram.offsets) <= m2["update_id"]

        second = await start(config, "run")
        try:
            await telegram.wait_until(lambda: bool(telegram.sent), what="an answer after the restart")
        finally:
            second.send_signal(signal.SIGTERM)
            await asyncio.wait_for(second.communicate(), 60)
    assert [message["visible"] for message in telegram.sent] == ["re: m2"]
    with sqlite3.connect(tmp_path / "ws" / "index.db") as db:
        users = [row[0] for row in db.execute("SELECT body FROM messages WHERE role = 'user' ORDER BY seq")]
    assert users == ["m1", "m2"]
