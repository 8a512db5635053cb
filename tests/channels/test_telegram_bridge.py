"""Telegram through the whole bot: the real python-telegram-bot, the agent, memory, the fake LLM."""

from __future__ import annotations

import asyncio
import io
import json
import re
import zipfile
from datetime import datetime

import pytest
from fakes.openai_server import FakeOpenAI
from fakes.telegram_server import BOT_USERNAME, TOKEN, FakeTelegram
from support.bot import make_services

from bridge.runtime import Bridge, build_plugins
from channels.telegram import TelegramChannel


@pytest.fixture
async def world(tmp_path):
    async with FakeTelegram() as telegram, FakeOpenAI() as llm:
        services = make_services(tmp_path / "ws", llm.base_url)
        channel = TelegramChannel(token=TOKEN, base_url=telegram.base_url, poll_timeout=1)
        bridge = Bridge(services, [channel], build_plugins(services))
        await bridge.start(timer=False)
        yield telegram, llm, services
        await bridge.shutdown()


async def test_dm_round_trip_with_memory_and_typing(world) -> None:
    telegram, llm, services = world
    memory = services.workspace.memory_file("telegram-501")
    memory.parent.mkdir(parents=True)
    memory.write_text("- Maya's dog is called Pixel\n")
    llm.reply("Your dog is **Pixel**.")
    telegram.push_text(501, 501, "what's my dog called?")
    [sent] = await telegram.wait_sent(1)
    assert sent["chat_id"] in (501, "501")
    assert "Pixel" in sent["text"]
    assert "Pixel" in llm.requests[0]["messages"][0]["content"]
    assert any(action.get("action") == "typing" for action in telegram.actions)


async def test_memory_dream_from_a_dm_runs_for_that_users_scope_only(world) -> None:
    telegram, llm, services = world
    today = datetime.now().strftime("%Y-%m-%d")
    for user in (501, 502):
        daily = services.workspace.daily_file(f"telegram-{user}", today)
        daily.parent.mkdir(parents=True)
        daily.write_text(f"- user {user} started learning the cello\n")
    llm.reply("[MEMORY]\n- learning the cello since " + today + "\n[DREAM]\nmusic")
    telegram.push_text(501, 501, "/memory dream")
    [sent] = await telegram.wait_sent(1)
    assert "learning the cello" in sent["text"] and len(llm.requests) == 1
    assert "user 501" in llm.requests[0]["messages"][1]["content"]
    assert "user 502" not in llm.requests[0]["messages"][1]["content"]
    assert services.workspace.memory_file("telegram-501").exists()
    assert not services.workspace.memory_file("telegram-502").exists()


async def test_groups_answer_mentions_only_with_the_groups_scope(world) -> None:
    telegram, llm, services = world
    private = services.workspace.memory_file("telegram-501")
    private.parent.mkdir(parents=True)
    private.write_text("- Maya's diagnosis is private\n")
    llm.reply("hello group")
    telegram.push_text(-100200, 501, "just chatting among ourselves", chat_type="supergroup")
    telegram.push_text(-100200, 501, f"@{BOT_USERNAME} say hi", chat_type="supergroup")
    [sent] = await telegram.wait_sent(1)
    await asyncio.sleep(0.3)
    assert len(telegram.sent) == 1 and sent["text"] == "hello group"
    [request] = llm.requests
    assert request["messages"][-1]["content"] == "say hi"
    assert "diagnosis" not in request["messages"][0]["content"]
    assert [s.scope for s in services.conversations.sessions_active_since(0)] == ["telegram-chat--100200"]


async def test_starting_the_bot_publishes_the_commands_menu(world) -> None:
    telegram = world[0]
    assert [command["command"] for command in telegram.commands] == ["memory", "knowledge", "clear", "help"]
    assert all(command["description"] for command in telegram.commands)


def _zip_members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


async def test_memory_export_in_a_dm_sends_the_zip_as_a_document(world) -> None:
    telegram, llm, services = world
    services.memory.append_daily("telegram-501", "- Maya's locker is number 318")
    services.dreamer.memory_file.write("telegram-501", b"- Maya plays the oboe\n", "dream")
    services.memory.append_daily("telegram-502", "- someone else's secret")
    telegram.push_text(501, 501, "/memory export")
    [document] = await telegram.wait_documents(1)
    [sent] = await telegram.wait_sent(1)
    assert document["chat_id"] == 501 and document["content_type"] == "application/zip"
    assert re.fullmatch(r"membridge-telegram-501-\d{4}-\d{2}-\d{2}\.zip", document["filename"])
    members = _zip_members(document["data"])
    manifest = json.loads(members.pop("manifest.json"))
    assert manifest["scope"] == "telegram-501" and manifest["counts"]["versions"] == 1
    daily = services.workspace.daily_dir("telegram-501")
    [name] = [n for n in members if n.startswith("memory/")]
    assert members[name] == (daily / name.removeprefix("memory/")).read_bytes()
    assert members["MEMORY.md"] == b"- Maya plays the oboe\n"
    assert not any(b"someone else" in data for data in members.values())
    assert "everything I remember about you" in sent["visible"] and not llm.requests
    outbox = services.workspace.exports_dir  # the temporary zip goes once the upload is answered
    await telegram.wait_until(lambda: not any(outbox.iterdir()), what="the sent export's deletion")


async def test_memory_export_in_a_group_refuses_and_sends_nothing(world) -> None:
    telegram, _llm, services = world
    services.memory.append_daily("telegram-chat--100200", "- the group's plans")
    telegram.push_text(-100200, 501, "/memory export", chat_type="supergroup")
    [sent] = await telegram.wait_sent(1)
    assert "only send an export in a direct message" in sent["visible"]
    assert telegram.documents == [] and not services.workspace.exports_dir.exists()


async def test_an_export_over_telegrams_limit_is_explained_not_sent(world, monkeypatch) -> None:
    telegram, _llm, services = world
    monkeypatch.setattr("channels.telegram.MAX_UPLOAD_BYTES", 100)
    services.memory.append_daily("telegram-501", "- a note")
    telegram.push_text(501, 501, "/memory export")
    sent = await telegram.wait_sent(2)
    assert re.fullmatch(r"membridge-telegram-501-.*\.zip is 0\.0 MB, over the 0 MB Telegram lets a bot send, so it "
                        r"was not sent here\.", sent[1]["visible"])
    outbox = services.workspace.exports_dir
    await telegram.wait_until(lambda: not any(outbox.iterdir()), what="the unsent export's deletion")
    assert telegram.documents == []


async def test_a_redelivered_update_is_answered_once_and_chats_in_order(world) -> None:
    """The channel hands every update on; the bridge drops the redelivery by its key and answers
    each chat's messages in the order they came."""
    telegram, llm, _ = world
    llm.responder = lambda r: "echo " + r["messages"][-1]["content"]
    update = telegram.push_text(501, 501, "a0")
    telegram.push_update(update)  # Telegram delivers the same update again
    for i in range(1, 4):
        telegram.push_text(501, 501, f"a{i}")
        telegram.push_text(502, 502, f"b{i}")
    sent = await telegram.wait_sent(7)
    assert [s["text"] for s in sent if s["chat_id"] in (501, "501")] == [f"echo a{i}" for i in range(4)]
    assert [s["text"] for s in sent if s["chat_id"] in (502, "502")] == [f"echo b{i}" for i in range(1, 4)]
    assert len(llm.requests) == 7
