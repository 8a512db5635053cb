"""Telegram through the whole bot: the real python-telegram-bot, the agent, memory, the fake LLM."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import re
import zipfile
from datetime import datetime

import pytest
from fakes import HANG_GUARD_S
from fakes.openai_server import FakeOpenAI
from fakes.telegram_server import BOT_USERNAME, TOKEN, FakeTelegram
from support.bot import make_services
from support.media import echo_summary

from bridge.conversation import session_key
from bridge.media.photos import DESCRIBE
from bridge.wiring.assembly import build_plugins
from bridge.wiring.runtime import Bridge
from channels.telegram import TelegramChannel


@pytest.fixture
def media_settings() -> dict:
    """Config overrides of the bot under test; a test that needs others overrides this fixture."""
    return {}


@pytest.fixture
async def world(tmp_path, media_settings):
    async with FakeTelegram() as telegram, FakeOpenAI() as llm:
        speech = {"speech": {"model": "whisper-1", "base_url": llm.base_url}}
        services = make_services(tmp_path / "ws", llm.base_url, **speech, **media_settings)
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
    assert [command["command"] for command in telegram.commands] == ["memory", "knowledge", "clear", "usage", "help"]
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
    assert re.fullmatch(r"membridge-telegram-501-.*\.zip is \d{1,3}(,\d{3})* bytes, over the 100 bytes Telegram lets a bot send, so it "
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


async def test_an_update_is_confirmed_once_its_message_is_stored_not_before(world) -> None:
    """One process: Telegram is told the update arrived (the offset passes it) only once the
    person's message is in the conversation store, and then without waiting for the answer."""
    telegram, llm, services = world
    session = session_key("telegram-501", "telegram::501:")
    early: list[int] = []

    async def check(offset: int | None) -> None:
        if offset is not None and offset > update["update_id"] and \
                services.conversations.user_seq(session, "the door is blue") is None:
            early.append(offset)

    telegram.on_poll = check
    release = asyncio.Event()
    held = llm.hold_first(lambda body: True, release)
    update = telegram.push_text(501, 501, "the door is blue")
    await asyncio.wait_for(held.wait(), HANG_GUARD_S)
    await telegram.wait_confirmed()  # while the model still holds its answer
    release.set()
    await telegram.wait_sent(1)
    assert early == []


async def test_memory_forget_lists_then_forget_bang_removes_the_text_from_every_file(world) -> None:
    telegram, llm, services = world
    services.dreamer.memory_file.write("telegram-501", b"- Maya plays the oboe\n- Maya's PIN is 4411\n", "dream")
    daily = services.memory.append_daily("telegram-501", "- Maya said her PIN is 4411", when=datetime(2026, 12, 1, 9, 30))
    services.memory.indexer.sync("telegram-501")
    telegram.push_text(501, 501, "/memory forget pin is 4411")
    [listing] = await telegram.wait_sent(1)
    assert listing["visible"].splitlines() == [  # a code block: the listing's indent shows, as written
        "“pin is 4411” is in:", "", "memory files: 2; file versions: 1; index: 2",
        "  memory files  MEMORY.md:2  - Maya's PIN is 4411",
        "  memory files  memory/2026-12-01.md:1  - Maya said her PIN is 4411",
        "  file versions  MEMORY.md v1:2  - Maya's PIN is 4411",
        "  index  MEMORY.md:1-2  - Maya plays the oboe - Maya's PIN is 4411",
        "  index  memory/2026-12-01.md:1-1  - Maya said her PIN is 4411", "", "",
        "Send /memory forget! pin is 4411 to forget all of it for good (it cannot be undone)."]
    assert services.memory.search("4411", "telegram-501")  # a listing changes nothing
    telegram.push_text(501, 501, "/memory forget! pin is 4411")
    done = (await telegram.wait_sent(2))[1]
    assert done["visible"] == "Forgotten for good: 2 in memory files, 1 in file versions, 2 in index."
    assert services.workspace.memory_file("telegram-501").read_bytes() == b"- Maya plays the oboe\n"
    assert not daily.exists() and services.memory.search("4411", "telegram-501") == []
    assert b"4411" not in (services.workspace.root / "index.db").read_bytes() and not llm.requests


async def test_in_a_group_only_an_admin_may_forget_and_nobody_may_forget_me(world) -> None:
    telegram, _llm, services = world
    daily = services.memory.append_daily("telegram-chat--100200", "- the group's door code is 7788")
    telegram.push_text(-100200, 501, "/memory forget! door code", chat_type="supergroup")
    telegram.push_text(-100200, 501, "/memory forget-me!", chat_type="supergroup")
    first, second = await telegram.wait_sent(2)
    assert first["visible"] == "Sorry, in a group only an admin can make me forget things."
    assert second["visible"] == ("Send /memory forget-me! to me in a direct message: it erases your own memory, "
                                 "not this chat's.")
    assert b"7788" in daily.read_bytes()


async def test_forget_me_lists_what_is_kept_then_forget_me_bang_erases_only_the_sender(world) -> None:
    telegram, llm, services = world
    for user in (501, 502):
        services.dreamer.memory_file.write(f"telegram-{user}", f"- user {user} likes chess\n".encode(), "dream")
        services.memory.append_daily(f"telegram-{user}", f"- user {user} lives in Lyon")
        services.memory.indexer.sync(f"telegram-{user}")
    other = services.workspace.scope_dir("telegram-502")
    before = {path: path.read_bytes() for path in other.rglob("*") if path.is_file()}
    telegram.push_text(501, 501, "/memory forget-me")
    [listing] = await telegram.wait_sent(1)
    assert listing["visible"] == (
        "I keep about you: 2 files, 2 chunks, 1 version. Send /memory forget-me! to erase all of it for good. "
        "What you said in groups stays in those groups' memory (an admin there can /memory forget it).")
    telegram.push_text(501, 501, "/memory forget-me!")
    done = (await telegram.wait_sent(2))[1]
    assert done["visible"] == "Done: everything I kept about you is erased. I start from nothing."
    assert not services.workspace.scope_dir("telegram-501").exists()
    assert services.forgetter.holdings("telegram-501") == dict.fromkeys(
        ("files", "chunks", "versions", "sessions", "messages"), 0)
    assert {path: path.read_bytes() for path in other.rglob("*") if path.is_file()} == before
    assert services.memory.search("Lyon", "telegram-502") and not llm.requests
    telegram.push_text(501, 501, "/memory forget-me")
    assert (await telegram.wait_sent(3))[2]["visible"] == "I keep nothing about you."


OGG = b"OggS\x00\x02" + bytes(range(256)) * 40


async def test_a_voice_note_is_answered_from_its_transcript_and_found_by_memory_search(world) -> None:
    telegram, llm, services = world
    llm.audio.transcript("Remember that the plumber comes on Thursday at nine")
    llm.responder = echo_summary
    llm.reply("Noted: the plumber comes Thursday at 9.")
    voice = {**telegram.host_file(OGG), "duration": 4, "mime_type": "audio/ogg"}
    telegram.push_message(501, 501, {"voice": voice})
    [answer] = await telegram.wait_sent(1)
    assert answer["visible"] == "Noted: the plumber comes Thursday at 9."
    [heard] = llm.audio.requests
    assert (heard.file_name, heard.content_type, heard.data) == (f"voice-{voice['file_unique_id']}.ogg",
                                                                 "audio/ogg", OGG)
    assert [d.status for d in telegram.files.downloads] == [200]
    telegram.push_text(501, 501, "/clear")
    await telegram.wait_sent(2)
    await services.flush_worker.drain()
    telegram.push_text(501, 501, "/memory search plumber Thursday")
    found = (await telegram.wait_sent(3))[2]["visible"]
    assert "[voice note] Remember that the plumber comes on Thursday at nine" in found


@pytest.mark.parametrize("media_settings", [{"media": {"max_bytes": 100_000_000}}])
async def test_a_file_over_what_telegram_hands_a_bot_is_refused_in_the_chat_without_a_download(world) -> None:
    telegram, llm, _services = world
    document = {**telegram.host_file(b"never sent", size=25_000_000), "file_name": "talk.pdf",
                "mime_type": "application/pdf"}
    telegram.push_message(501, 501, {"document": document, "caption": "keep this"})
    [refusal] = await telegram.wait_sent(1)
    assert refusal["visible"] == "talk.pdf is 25 MB, over the limit of 20 MB, so it was not read."
    assert telegram.files.downloads == [] and not any(m.lower() == "getfile" for m, _ in telegram.calls)
    assert llm.requests == []


@pytest.mark.parametrize("media_settings", [{"llm__vision": True}])
async def test_an_album_is_one_turn_the_model_sees_every_photo_of(world) -> None:
    telegram, llm, _services = world
    shots = [b"\xff\xd8\xff\xe0" + bytes([n]) * 300 + b"\xff\xd9" for n in (1, 2)]

    def answer(request: dict) -> str:
        system = request["messages"][0]["content"]
        if system == DESCRIBE:
            return f"A photo of balcony plant number {len(llm.requests)}"
        return "The second one gets more light."

    llm.responder = answer
    for n, data in enumerate(shots):
        size = {**telegram.host_file(data), "width": 640, "height": 480}
        fields = {"photo": [size], "media_group_id": "balcony"}
        telegram.push_message(501, 501, {**fields, **({"caption": "which plant is healthier?"} if n == 0 else {})})
    [sent] = await telegram.wait_sent(1)
    assert sent["visible"] == "The second one gets more light."
    describes = [r for r in llm.requests if r["messages"][0]["content"] == DESCRIBE]
    [turn] = [r for r in llm.requests if r["messages"][0]["content"] != DESCRIBE]
    urls = [part["image_url"]["url"] for part in turn["messages"][-1]["content"] if part["type"] == "image_url"]
    assert urls == ["data:image/jpeg;base64," + base64.b64encode(data).decode() for data in shots]
    assert len(describes) == 2
    said = turn["messages"][-1]["content"][0]["text"]
    assert said.endswith("\nwhich plant is healthier?") and said.count("[photo: A photo of balcony plant") == 2
