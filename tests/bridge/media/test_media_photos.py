"""Photos with llm.vision: the image goes to the model as a content part, memory keeps text only
(the model's one-line description and the caption); media.keep keeps the bytes, erase removes them."""

from __future__ import annotations

import asyncio
import base64

from support.attachments import MemoryAttachment
from support.media import echo_summary, stored, with_files

from bridge.media.photos import DESCRIBE

JPEG = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 20 + b"\xff\xd9"
DATA_URL = "data:image/jpeg;base64," + base64.b64encode(JPEG).decode()
PLANT = "A monstera plant with split leaves in a white pot on a windowsill"


def is_describe(request: dict) -> bool:
    return request["messages"][0]["content"] == DESCRIBE


def seeing(request: dict) -> str | None:
    """The fake model: describes photos, keeps attachment lines in summaries, else the default."""
    return PLANT if is_describe(request) else echo_summary(request)


def photo(name: str = "photo.jpg") -> MemoryAttachment:
    return MemoryAttachment("photo", name, JPEG, "image/jpeg")


async def test_a_photo_is_seen_by_the_model_remembered_as_text_and_found_by_what_it_showed(
        running, fake_llm) -> None:
    bridge, channel = await running(llm={"base_url": fake_llm.base_url, "api_key": "test-key", "vision": True})
    fake_llm.responder = seeing
    await channel.push(with_files("what plant is this?", photo()))
    await channel.wait_sent(1)
    describe, turn = fake_llm.requests
    assert is_describe(describe)
    assert describe["messages"][1]["content"] == [
        {"type": "text", "text": "Caption: what plant is this?"},
        {"type": "image_url", "image_url": {"url": DATA_URL}}]
    said = f"[photo: {PLANT}]\nwhat plant is this?"
    assert turn["messages"][-1]["content"] == [{"type": "text", "text": said},
                                               {"type": "image_url", "image_url": {"url": DATA_URL}}]
    assert stored(bridge)[0] == {"role": "user", "content": said}
    fake_llm.reply("You're welcome")
    await channel.push(with_files("thanks"))
    await channel.wait_sent(2)
    later = fake_llm.requests[-1]["messages"]
    assert {"role": "user", "content": said} in later and fake_llm.images == [DATA_URL, DATA_URL]
    await channel.push(with_files("/clear"))
    await channel.wait_sent(3)
    await bridge.services.flush_worker.drain()
    await channel.push(with_files("/memory search monstera windowsill"))
    await channel.wait_sent(4)
    assert PLANT in channel.texts()[3]
    assert not bridge.services.workspace.media_dir("telegram-42").exists()  # media.keep is off


async def test_when_the_model_cannot_describe_the_photo_nothing_is_stored(running, fake_llm) -> None:
    bridge, channel = await running(llm={"base_url": fake_llm.base_url, "api_key": "test-key", "vision": True,
                                           "max_retries": 0})
    fake_llm.fail(500)
    await channel.push(with_files("look", photo()))
    await channel.wait_sent(1)
    assert channel.texts() == ["I couldn't look at that photo: my language model did not answer (server). "
                               "Nothing was saved; please send it again in a moment."]
    assert stored(bridge) == [] and len(fake_llm.requests) == 1


async def test_kept_photos_live_under_the_scope_by_a_generated_name_and_erase_removes_them(
        running, fake_llm, tmp_path) -> None:
    bridge, channel = await running(llm={"base_url": fake_llm.base_url, "api_key": "test-key", "vision": True},
                                      media={"keep": True})
    fake_llm.responder = seeing
    await channel.push(with_files("receipt", photo("../../x.jpg")))
    await channel.wait_sent(1)
    folder = bridge.services.workspace.media_dir("telegram-42")
    [kept] = list(folder.iterdir())
    assert kept.read_bytes() == JPEG and kept.suffix == ".jpg" and len(kept.stem) == 32
    assert folder == tmp_path / "ws" / "scopes" / "telegram-42" / "media"
    assert [path for path in tmp_path.rglob("x.jpg")] == []
    await asyncio.to_thread(bridge.services.forgetter.erase, "telegram-42")
    assert not folder.exists()


async def test_in_global_scope_mode_erase_removes_the_kept_media_too(running, fake_llm, tmp_path) -> None:
    bridge, channel = await running(llm={"base_url": fake_llm.base_url, "api_key": "test-key", "vision": True},
                                      media={"keep": True}, memory={"scope": "global"})
    fake_llm.responder = seeing
    await channel.push(with_files("", photo()))
    await channel.wait_sent(1)
    folder = bridge.services.workspace.media_dir("global")
    assert folder == tmp_path / "ws" / "media" and len(list(folder.iterdir())) == 1
    await asyncio.to_thread(bridge.services.forgetter.erase, "global")
    assert not folder.exists()
